//! Dynptrs: a `struct bpf_dynptr` is 16 bytes at an 8-aligned stack offset
//! that only the dynptr helpers (197–203) and kfuncs touch. The verifier
//! keeps it as two special stack slots (`RegType::Dynptr`, the kernel's
//! `STACK_DYNPTR`): an `id` naming the dynptr, and for a ringbuf dynptr
//! the reference `bpf_ringbuf_reserve_dynptr` acquired — even when the
//! reservation fails — which `bpf_ringbuf_submit_dynptr`/`discard_dynptr`
//! release.
//!
//! The rules are the kernel's (`process_dynptr_func` and friends):
//! - a helper initialising a dynptr takes 16 bytes at a constant, 8-aligned
//!   offset at or below fp-16 holding no referenced dynptr (an
//!   unreferenced one there is destroyed first);
//! - a helper using one needs it initialised, of the kind it handles;
//! - the program may not read a dynptr's bytes, nor a helper write them;
//!   a store of the program over one destroys it, or is refused for a
//!   referenced one ("cannot overwrite referenced dynptr");
//! - slices (`bpf_dynptr_data`, `bpf_dynptr_slice`) carry the dynptr's id
//!   and reference, and die with it (destroyed, initialised again or
//!   released), and for an XDP dynptr also when a helper changes the packet.

use crate::driver::Verifier;
use crate::error::{err, VResult};
use crate::frame::{RefInfo, State};
use crate::reg_state::{DynptrKind, MemKind, RegState, RegType};

/// `BPF_DYNPTR_SIZE`.
pub const DYNPTR_SIZE: i64 = 16;

impl Verifier<'_> {
    /// Where the dynptr argument in `regno` lives: (frame, offset). `Err`
    /// with the kernel's words for anything but a stack pointer at a
    /// constant, 8-aligned offset with two slots below it.
    fn dynptr_location(&self, st: &State, regno: u8, func: &str) -> VResult<(usize, i64)> {
        let reg = *st.reg(regno);
        let RegType::Stack { frame } = reg.ty else {
            return err(
                "bad_helper_arg",
                format!(
                    "R{regno} type={} expected=fp, dynptr_ptr (argument {regno} of {func} is a \
                     struct bpf_dynptr on the stack)",
                    reg.ty.name()
                ),
            );
        };
        let frame = (frame as usize).min(st.frames.len() - 1);
        let Some(var) = reg.val.as_const() else {
            return err(
                "dynptr_offset",
                format!("dynptr has to be at a constant offset (argument {regno} of {func})"),
            );
        };
        let off = i64::from(reg.off) + var as i64;
        if off % 8 != 0 || !(-crate::stack::STACK_SIZE..=-DYNPTR_SIZE).contains(&off) {
            return err(
                "dynptr_offset",
                format!(
                    "cannot pass in dynptr at an offset={off} (argument {regno} of {func}: a \
                     struct bpf_dynptr is 16 bytes at an 8-aligned offset at or below fp-16)"
                ),
            );
        }
        Ok((frame, off))
    }

    /// A helper or kfunc argument that becomes a dynptr of `kind`: the
    /// slots are made one after the checks (the call's effect), returned
    /// as (frame, offset) to [`Verifier::init_dynptr`].
    pub(crate) fn check_uninit_dynptr(
        &mut self,
        st: &mut State,
        regno: u8,
        func: &str,
    ) -> VResult<(usize, i64)> {
        if st.reg(regno).ty == RegType::ConstDynptr {
            return err(
                "dynptr_uninit",
                format!(
                    "Dynptr has to be an uninitialized dynptr: R{regno} of {func} points to a \
                     const bpf_dynptr (a bpf_user_ringbuf_drain sample), which it would overwrite"
                ),
            );
        }
        let (frame, off) = self.dynptr_location(st, regno, func).map_err(|mut e| {
            if e.rule == "dynptr_offset" {
                e.message = format!("Dynptr has to be an uninitialized dynptr: {}", e.message);
            }
            e
        })?;
        self.destroy_dynptrs(st, frame, off, off + DYNPTR_SIZE)?;
        self.note_stack(st, frame, -off);
        Ok((frame, off))
    }

    /// Make `[off, off + 16)` of `frame` a new dynptr of `kind`; a ringbuf
    /// dynptr acquires a reference at `pc`.
    pub(crate) fn init_dynptr(
        &mut self,
        st: &mut State,
        pc: usize,
        (frame, off): (usize, i64),
        kind: DynptrKind,
    ) {
        let mut d = RegState::pointer(RegType::Dynptr { kind, first: true }, 0);
        d.id = self.fresh_id();
        if kind == DynptrKind::Ringbuf {
            d.ref_id = self.fresh_id();
            st.refs.push(RefInfo { id: d.ref_id, pc });
        }
        st.frames[frame].stack.set_dynptr(off, d);
    }

    /// An initialised dynptr argument (argument number `regno`), of `kind`
    /// when given; `release`: it must hold a reference. Returns its state.
    pub(crate) fn check_init_dynptr(
        &mut self,
        st: &mut State,
        regno: u8,
        kind: Option<DynptrKind>,
        release: bool,
        func: &str,
    ) -> VResult<RegState> {
        let reg = *st.reg(regno);
        if reg.ty == RegType::ConstDynptr {
            if release {
                return err(
                    "bad_release",
                    format!(
                        "cannot release unowned const bpf_dynptr (R{regno} of {func}: a \
                         bpf_user_ringbuf_drain sample)"
                    ),
                );
            }
            if reg.off != 0 || !reg.val.is_zero() {
                return err(
                    "dynptr_offset",
                    format!("R{regno} of {func}: a const bpf_dynptr pointer must not be moved"),
                );
            }
            if kind.is_some_and(|k| k != DynptrKind::Local) {
                return err(
                    "dynptr_kind",
                    format!(
                        "Expected a dynptr of type {} as arg #{} of {func}, R{regno} is a \
                         local one",
                        kind.map_or("", DynptrKind::name),
                        regno - 1
                    ),
                );
            }
            let mut d = RegState::pointer(
                RegType::Dynptr {
                    kind: DynptrKind::Local,
                    first: true,
                },
                0,
            );
            d.id = reg.id;
            return Ok(d);
        }
        let (frame, off) = self.dynptr_location(st, regno, func)?;
        let d = st.frames[frame].stack.dynptr_at(off);
        if release && d.is_none_or(|d| d.ref_id == 0) {
            return err(
                "bad_release",
                format!(
                    "arg {regno} is an unacquired reference: {func} releases a dynptr from \
                     bpf_ringbuf_reserve_dynptr, and fp{off} holds none"
                ),
            );
        }
        let Some(d) = d else {
            return err(
                "dynptr_uninit",
                format!(
                    "Expected an initialized dynptr as arg #{} of {func} (fp{off} holds none)",
                    regno - 1
                ),
            );
        };
        if let (Some(want), RegType::Dynptr { kind: have, .. }) = (kind, d.ty) {
            if want != have {
                return err(
                    "dynptr_kind",
                    format!(
                        "Expected a dynptr of type {} as arg #{} of {func}, fp{off} holds a {} \
                         dynptr",
                        want.name(),
                        regno - 1,
                        have.name()
                    ),
                );
            }
        }
        // The helper reads the slots (liveness already counts them).
        self.note_stack(st, frame, -off);
        Ok(d)
    }

    /// A store of the program (or a dynptr about to be initialised) over
    /// bytes `[lo, hi)` of `frame`: every dynptr there is destroyed, its
    /// slices with it; a referenced one may not be overwritten.
    pub(crate) fn destroy_dynptrs(
        &mut self,
        st: &mut State,
        frame: usize,
        lo: i64,
        hi: i64,
    ) -> VResult<()> {
        let found = st.frames[frame].stack.dynptrs_in(lo, hi);
        if let Some(d) = found.iter().find(|d| d.ref_id != 0) {
            return err(
                "dynptr_overwrite",
                format!(
                    "cannot overwrite referenced dynptr (id={}, reference {} from \
                     bpf_ringbuf_reserve_dynptr): submit or discard it first",
                    d.id, d.ref_id
                ),
            );
        }
        for d in found {
            st.frames[frame].stack.clear_dynptr(d.id);
            self.invalidate_slices(st, |r| r.dynptr_id == d.id);
        }
        Ok(())
    }

    /// Dynptrs released with reference `ref_id` lose their slots (their
    /// slices hold the reference and are invalidated with it).
    pub(crate) fn release_dynptr_slots(st: &mut State, ref_id: u32) {
        for f in &mut st.frames {
            let ids: Vec<u32> = f
                .stack
                .spills()
                .filter(|r| matches!(r.ty, RegType::Dynptr { .. }) && r.ref_id == ref_id)
                .map(|r| r.id)
                .collect();
            for id in ids {
                f.stack.clear_dynptr(id);
            }
        }
    }

    /// Slices matching `dead`: unknown scalars when privileged (the kernel's
    /// `mark_reg_invalid`), uninitialised otherwise.
    pub(crate) fn invalidate_slices(&self, st: &mut State, dead: impl Fn(&RegState) -> bool) {
        let privileged = self.env.privileged();
        st.for_each_reg(|r| {
            if matches!(
                r.ty,
                RegType::Mem {
                    kind: MemKind::DynptrSlice { .. },
                    ..
                }
            ) && dead(r)
            {
                *r = if privileged {
                    RegState::unknown()
                } else {
                    RegState::NOT_INIT
                };
            }
        });
    }

    /// A slice of `size` bytes of dynptr `d`, or NULL.
    pub(crate) fn dynptr_slice(&mut self, d: &RegState, size: u32, rdonly: bool) -> RegState {
        let pkt = matches!(d.ty, RegType::Dynptr { kind, .. } if kind.is_pkt());
        let mut r = RegState::pointer(
            RegType::Mem {
                size,
                kind: MemKind::DynptrSlice { rdonly, pkt },
            },
            0,
        );
        r.maybe_null = true;
        r.id = self.fresh_id();
        r.dynptr_id = d.id;
        r.ref_id = d.ref_id;
        r
    }
}

/// Whether `r` is a slice into the packet (an XDP dynptr's).
pub(crate) fn is_pkt_slice(r: &RegState) -> bool {
    matches!(
        r.ty,
        RegType::Mem {
            kind: MemKind::DynptrSlice { pkt: true, .. },
            ..
        }
    )
}
