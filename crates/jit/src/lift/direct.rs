//! Helpers called as direct natives that take the run context (no registry,
//! no `HelperCtx`), for programs bound to the XDP helpers:
//!
//! - `bpf_map_lookup_elem` / `_update_elem` / `_delete_elem` on a handle
//!   that is not a bound map of a kind `inline` compiles in: an inner map
//!   taken from a map-in-map (katran's per-CPU connection table), a
//!   map-in-map itself, device maps. The verifier proved the handle a map;
//!   the native checks its type as the helper does.
//! - `bpf_redirect_map`, `bpf_redirect`: direct calls that record the
//!   target in the run's `XdpEnv` (the data plane sends the frame there).
//! - `bpf_ringbuf_reserve` / `_submit` / `_discard` / `_output`: direct
//!   calls that track reservations in the run's `XdpEnv` as the helpers do.
//!
//! A native that can abort the run (a map type the kernel would have
//! refused) leaves the status word non-zero; the code then returns at once,
//! like after an aborted helper call.

use super::calls::basic_result;
use super::{Frame, LResult, Lifter};
use crate::analysis::Prov;
use crate::bindings::MapKind;
use crate::natives;
use inkwell::module::Linkage;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::BasicMetadataValueEnum;
use inkwell::IntPredicate;

/// A native parameter: the run context, a pointer from a register, or an
/// integer.
#[derive(Clone, Copy)]
pub(super) enum Arg {
    Ctx,
    Ptr(u8),
    Reg(u8),
    Const(u64),
    Pc,
}

/// When a direct native may stand for the helper call.
#[derive(Clone, Copy)]
enum Guard {
    Always,
    /// r1 is a map the native may dereference ([`Lifter::known_map`]).
    KnownMap,
    /// r1 is a map the inline paths leave alone ([`Lifter::dynamic_map`]).
    DynamicMap,
}

/// A helper compiled as a direct call to a native: which native, its
/// parameters, and when it applies.
pub(super) struct DirectCall {
    native: &'static str,
    guard: Guard,
    args: &'static [Arg],
}

const fn direct(native: &'static str, guard: Guard, args: &'static [Arg]) -> DirectCall {
    DirectCall {
        native,
        guard,
        args,
    }
}

use Arg::{Const, Ctx, Pc, Ptr, Reg};

/// `bpf_dynptr_read(dst, len, src, offset, flags)` of an XDP program.
pub(super) const DYNPTR_READ: DirectCall = direct(
    natives::DYNPTR_READ,
    Guard::Always,
    &[Ctx, Reg(1), Reg(2), Reg(3), Reg(4), Reg(5), Pc],
);
/// `bpf_xdp_get_buff_len(ctx)`.
pub(super) const XDP_BUFF_LEN: DirectCall =
    direct(natives::XDP_BUFF_LEN, Guard::Always, &[Ctx, Reg(1), Pc]);
/// `bpf_get_prandom_u32()`: the run environment's generator.
pub(super) const PRANDOM: DirectCall = direct(natives::PRANDOM, Guard::Always, &[Ctx, Pc]);
/// `bpf_map_lookup_elem(map, key)` on a dynamic map.
pub(super) const MAP_LOOKUP_ANY: DirectCall = direct(
    natives::MAP_LOOKUP_ANY,
    Guard::DynamicMap,
    &[Ctx, Ptr(1), Ptr(2), Pc],
);
/// `bpf_map_update_elem(map, key, value, flags)` on a dynamic map.
pub(super) const MAP_UPDATE_ANY: DirectCall = direct(
    natives::MAP_UPDATE_ANY,
    Guard::DynamicMap,
    &[Ctx, Ptr(1), Ptr(2), Ptr(3), Reg(4), Pc],
);
/// `bpf_map_delete_elem(map, key)` on a dynamic map.
pub(super) const MAP_DELETE_ANY: DirectCall = direct(
    natives::MAP_DELETE_ANY,
    Guard::DynamicMap,
    &[Ctx, Ptr(1), Ptr(2), Pc],
);
/// `bpf_redirect_map(map, key, flags)`.
pub(super) const REDIRECT_MAP: DirectCall = direct(
    natives::REDIRECT_MAP,
    Guard::KnownMap,
    &[Ctx, Ptr(1), Reg(2), Reg(3), Pc],
);
/// `bpf_redirect(ifindex, flags)` in XDP.
pub(super) const REDIRECT: DirectCall =
    direct(natives::REDIRECT, Guard::Always, &[Ctx, Reg(1), Reg(2), Pc]);
/// `bpf_ringbuf_reserve(map, size, flags)`.
pub(super) const RINGBUF_RESERVE: DirectCall = direct(
    natives::RINGBUF_RESERVE,
    Guard::KnownMap,
    &[Ctx, Ptr(1), Reg(2), Reg(3), Pc],
);
/// `bpf_ringbuf_submit(sample, flags)`.
pub(super) const RINGBUF_SUBMIT: DirectCall = direct(
    natives::RINGBUF_COMMIT,
    Guard::Always,
    &[Ctx, Reg(1), Reg(2), Const(0), Pc],
);
/// `bpf_ringbuf_discard(sample, flags)`.
pub(super) const RINGBUF_DISCARD: DirectCall = direct(
    natives::RINGBUF_COMMIT,
    Guard::Always,
    &[Ctx, Reg(1), Reg(2), Const(1), Pc],
);
/// `bpf_ringbuf_output(map, data, size, flags)`.
pub(super) const RINGBUF_OUTPUT: DirectCall = direct(
    natives::RINGBUF_OUTPUT,
    Guard::KnownMap,
    &[Ctx, Ptr(1), Ptr(2), Reg(3), Reg(4), Pc],
);

/// The per-thread map operations of tracing programs (pairwise fusion's
/// internalised hand-off maps, `crate::thread_maps`): always direct.
pub(super) fn thread_map_call(id: u32) -> Option<&'static DirectCall> {
    use bpfjet_runtime::tracing::{THREAD_MAP_DELETE, THREAD_MAP_LOOKUP, THREAD_MAP_UPDATE};
    const LOOKUP: DirectCall = direct(
        crate::thread_maps::LOOKUP,
        Guard::Always,
        &[Ctx, Reg(1), Ptr(2), Pc],
    );
    const UPDATE: DirectCall = direct(
        crate::thread_maps::UPDATE,
        Guard::Always,
        &[Ctx, Reg(1), Ptr(2), Ptr(3), Reg(4), Pc],
    );
    const DELETE: DirectCall = direct(
        crate::thread_maps::DELETE,
        Guard::Always,
        &[Ctx, Reg(1), Ptr(2), Pc],
    );
    match id {
        THREAD_MAP_LOOKUP => Some(&LOOKUP),
        THREAD_MAP_UPDATE => Some(&UPDATE),
        THREAD_MAP_DELETE => Some(&DELETE),
        _ => None,
    }
}

impl<'ctx> Lifter<'ctx, '_> {
    /// Whether the map in r1 at `pc` should take the `*_any` natives: a
    /// handle not resolved at compile time, or a bound map of a kind the
    /// inline paths leave alone.
    fn dynamic_map(&self, fr: &Frame<'ctx>, pc: usize) -> bool {
        match self.prov(fr, pc, 1) {
            Prov::Const(handle) => matches!(self.bind.maps.get(&handle), Some(MapKind::Other)),
            _ => true,
        }
    }

    /// The helper call at `pc` as the direct call `call`, when its guard
    /// holds; false leaves the call to the next strategy.
    pub(super) fn direct_call(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        call: &DirectCall,
    ) -> LResult<bool> {
        let applies = match call.guard {
            Guard::Always => true,
            Guard::KnownMap => self.known_map(fr, pc),
            Guard::DynamicMap => self.dynamic_map(fr, pc),
        };
        if applies {
            self.call_checked(fr, pc, call.native, call.args)?;
        }
        Ok(applies)
    }

    /// Call native `name` (returning i64) with `args`, set r0 to its result
    /// and return from the function if it aborted the run.
    pub(super) fn call_checked(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        name: &str,
        args: &[Arg],
    ) -> LResult<()> {
        let t = self.t;
        let f = match self.module.get_function(name) {
            Some(f) => f,
            None => {
                let params: Vec<BasicMetadataTypeEnum<'ctx>> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Ctx | Arg::Ptr(_) => t.ptr.into(),
                        Arg::Reg(_) | Arg::Const(_) | Arg::Pc => t.i64.into(),
                    })
                    .collect();
                let f = self.module.add_function(
                    name,
                    t.i64.fn_type(&params, false),
                    Some(Linkage::External),
                );
                self.nounwind(f);
                f
            }
        };
        let mut values: Vec<BasicMetadataValueEnum<'ctx>> = Vec::with_capacity(args.len());
        for a in args {
            values.push(match *a {
                Arg::Ctx => fr.ctx.into(),
                Arg::Ptr(r) => {
                    let v = self.reg(fr, r)?;
                    self.b.build_int_to_ptr(v, t.ptr, "argp")?.into()
                }
                Arg::Reg(r) => self.reg(fr, r)?.into(),
                Arg::Const(c) => t.i64.const_int(c, false).into(),
                Arg::Pc => t.i64.const_int(pc as u64, false).into(),
            });
        }
        let r0 = self.b.build_call(f, &values, "native")?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        let status = self.b.build_load(t.i64, fr.ctx, "status")?.into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, status, t.i64.const_zero(), "ok")?;
        let cont = self.cx.append_basic_block(fr.func, "after_native");
        let abort = self.cx.append_basic_block(fr.func, "native_aborted");
        self.b.build_conditional_branch(ok, cont, abort)?;
        self.b.position_at_end(abort);
        self.b.build_return(Some(&t.i64.const_zero()))?;
        self.b.position_at_end(cont);
        Ok(())
    }

    /// Whether r1 at `pc` is a map the natives may dereference: a bound map,
    /// or a handle the verifier proved to be a map without it being a
    /// compile-time constant.
    fn known_map(&self, fr: &Frame<'ctx>, pc: usize) -> bool {
        match self.prov(fr, pc, 1) {
            Prov::Const(handle) => self.bind.maps.contains_key(&handle),
            _ => true,
        }
    }
}
