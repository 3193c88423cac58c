//! `bpf_timer_init` / `_set_callback` / `_start` / `_cancel` (helpers
//! 169–172) with the kernel's rules:
//!
//! - the timer argument points exactly at the value's `struct bpf_timer`
//!   (known from the map's BTF), at a constant offset, never NULL
//!   (`process_timer_func`);
//! - `bpf_timer_init`'s map is the timer's own map ("timer pointer in R1
//!   map_uid=... doesn't match map pointer in R2");
//! - the callback of `bpf_timer_set_callback` is verified on its own, as the
//!   kernel's `push_async_cb` does: a fresh state whose only frame is the
//!   callback's, with r1 the timer's map, r2 its key and r3 its value, that
//!   must return 0 ("At async callback"); the caller goes on at once;
//! - a map with a timer is refused to kprobe, tracepoint, raw tracepoint and
//!   perf_event programs ("tracing progs cannot use bpf_timer yet",
//!   `map_refs.rs`); loads and stores of the timer's bytes are refused like
//!   the other special fields' (`graph.rs`).

use crate::driver::Verifier;
use crate::error::{err, VResult};
use crate::frame::{Frame, State};
use crate::reg_state::{MemKind, RegState, RegType};
use bpfjet_obj::FieldKind;

impl Verifier<'_> {
    /// Offset of the `struct bpf_timer` in the values of map `map`, if its
    /// BTF has one.
    pub(crate) fn timer_off(&self, map: u32) -> Option<u32> {
        self.env
            .map_fields
            .get(map as usize)?
            .iter()
            .find(|f| f.kind == FieldKind::Timer)
            .map(|f| f.off)
    }

    /// A timer argument: a map value pointer at its timer. Returns the map.
    pub(crate) fn check_timer_arg(&self, reg: &RegState, regno: u8, name: &str) -> VResult<u32> {
        let (map, off) = special_field_ptr(reg, regno, name, "timer", "bpf_timer")?;
        let map_name = self.map(map).map_or(String::new(), |m| m.name.clone());
        let Some(timer_off) = self.timer_off(map) else {
            return err(
                "timer",
                format!("map '{map_name}' has no valid bpf_timer (no `struct bpf_timer` in its BTF value type)"),
            );
        };
        if off != i64::from(timer_off) {
            return err(
                "timer",
                format!("off {off} doesn't point to 'struct bpf_timer' that is at {timer_off}"),
            );
        }
        Ok(map)
    }

    /// A helper's access of `size` bytes at `reg` (a value of map `map`)
    /// must not touch the timer (the kernel's `check_map_access` for
    /// helpers: every special field but a kptr).
    pub(crate) fn check_timer_overlap(&self, map: u32, reg: &RegState, size: i64) -> VResult<()> {
        let Some(timer) = self.timer_off(map) else {
            return Ok(());
        };
        let timer = i64::from(timer);
        let lo = (reg.off as i64).saturating_add(reg.val.smin);
        let hi = (reg.off as i64)
            .saturating_add(reg.val.umax.min(i64::MAX as u64) as i64)
            .saturating_add(size);
        if lo < timer + 16 && timer < hi {
            return err(
                "timer",
                "bpf_timer cannot be accessed directly by load/store",
            );
        }
        Ok(())
    }

    /// `bpf_timer_set_callback`: the caller goes on after the call (r0 a
    /// scalar); the callback is verified as a path of its own.
    pub(crate) fn spawn_timer_callback(
        &mut self,
        pc: usize,
        entry: usize,
        map: u32,
    ) -> VResult<State> {
        if !self.cfg.is_entry(entry) {
            return err(
                "bad_callback",
                format!("callback at insn {entry} is not a subprogram"),
            );
        }
        let key_size = self.map(map).map_or(0, |s| s.key_size);
        let mut frame = Frame::new(0, entry, pc);
        frame.regs[1] = RegState::pointer(RegType::MapPtr { map }, 0);
        frame.regs[2] = RegState::pointer(
            RegType::Mem {
                size: key_size,
                kind: MemKind::MapKey,
            },
            0,
        );
        frame.regs[3] = RegState::pointer(RegType::MapValue { map }, 0);
        Ok(State {
            async_callback: true,
            ..State::of_frame(frame)
        })
    }

    /// The exit of a timer callback's own frame (`check_return_code` with
    /// `in_async_callback_fn`): r0 must be the constant 0.
    pub(crate) fn check_async_callback_exit(&mut self, st: &State) -> VResult<()> {
        let r0 = *st.reg(0);
        if !r0.is_init() {
            return err(
                "uninit_r0",
                "R0 !read_ok: the timer callback exits without setting a return value in R0",
            );
        }
        if !r0.is_scalar() {
            return err(
                "callback_ret",
                format!(
                    "At async callback the register R0 is not a known value ({})",
                    r0.ty.name()
                ),
            );
        }
        self.need_reg(st, 0);
        self.note = crate::precision::Note::CallbackExit;
        if r0.val.smin != 0 || r0.val.smax != 0 {
            return err(
                "callback_ret",
                format!(
                    "At async callback the register R0 has value ({:?}) should have been in [0, 0]",
                    r0.val
                ),
            );
        }
        Ok(())
    }
}

/// A pointer to a special field of a map value (a lock, a timer) as a
/// helper argument: a non-NULL map value pointer at a constant offset.
/// Returns the map and the offset; `kind` names the check in errors,
/// `what` the field's type in the kernel's messages.
pub(crate) fn special_field_ptr(
    reg: &RegState,
    regno: u8,
    helper: &str,
    kind: &'static str,
    what: &str,
) -> VResult<(u32, i64)> {
    let RegType::MapValue { map } = reg.ty else {
        return err(
            "bad_helper_arg",
            format!(
                "R{regno} type={}{} expected=map_value (argument {regno} of {helper})",
                reg.ty.name(),
                if reg.maybe_null { "_or_null" } else { "" }
            ),
        );
    };
    if reg.maybe_null {
        return err(
            "null_deref",
            format!(
                "R{regno} type=map_value_or_null expected=map_value: null-check it before {helper}"
            ),
        );
    }
    let Some(c) = reg.val.as_const() else {
        return err(
            kind,
            format!(
                "R{regno} doesn't have constant offset. {what} has to be at the constant offset"
            ),
        );
    };
    Ok((map, reg.off as i64 + c as i64))
}
