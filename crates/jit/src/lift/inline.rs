//! Helpers compiled into the program instead of called through the
//! trampoline (the uXDP optimizations). Only for programs bound to the XDP
//! helper set ([`crate::Bindings::xdp`]) or run as tracing programs
//! ([`crate::Bindings::tracing`]: all but the XDP and checksum ones), and
//! only where the call site's arguments are known well enough:
//!
//! - `bpf_map_lookup_elem` on ARRAY / PERCPU_ARRAY: bounds check and
//!   address arithmetic against the map's value storage (a key the verifier
//!   proved constant folds the check away); on hash, LRU and LPM maps a
//!   direct call to a lookup specialised for the key size.
//! - `bpf_get_smp_processor_id`: the run context's CPU slot.
//! - `bpf_ktime_get_ns` (and `_boot_ns`, `_coarse_ns`, `_tai_ns`),
//!   `bpf_csum_diff`, `bpf_strncmp`: direct calls;
//!   `bpf_get_prandom_u32` a direct call on the run's generator;
//!   `bpf_dynptr_read` and `bpf_xdp_get_buff_len` (XDP) direct calls on
//!   the run's frame.
//! - `bpf_get_current_pid_tgid` (tracing programs): a direct call to the
//!   runtime's per-thread cached ids.
//! - `bpf_xdp_load_bytes` / `bpf_xdp_store_bytes`: range checks against the
//!   context's packet pointers and a `memcpy`; a range past the linear part
//!   (a multi-buffer frame's fragments) calls the runtime's copy.
//! - `bpf_map_update_elem` / `bpf_map_delete_elem` on those maps and
//!   `bpf_xdp_adjust_head/tail/meta`: direct calls (no registry, no
//!   `HelperCtx`).
//! - `bpf_loop` with a known callback: a loop calling the callback's LLVM
//!   function, which LLVM may then inline.
//!
//! The map handle (r1) and the callback (r2) must be constants at the call
//! (`crate::analysis`); otherwise the call goes through the trampoline.

use super::calls::basic_result;
use super::direct;
use super::{function_name, Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use crate::bindings::MapKind;
use crate::natives;
use bpfjet_maps::ArrayLayout;
use bpfjet_runtime::helper_ids as ids;
use bpfjet_runtime::xdp::CtxField;
use inkwell::module::Linkage;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValue, FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

/// Byte offset of the CPU slot in the run context (`trampoline::RunCtx`).
pub(crate) const RUNCTX_CPU_OFFSET: u64 = 8;
/// `BPF_MAX_LOOPS`.
const MAX_LOOPS: u64 = 1 << 23;

fn neg_errno(e: u64) -> u64 {
    e.wrapping_neg()
}

impl<'ctx> Lifter<'ctx, '_> {
    /// Emit helper `id` at `pc` inline if possible; `false` leaves the call
    /// to the trampoline.
    pub(super) fn try_inline_helper(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        id: i32,
    ) -> LResult<bool> {
        if let Ok(uid) = u32::try_from(id) {
            if self.thread_map_op(fr, pc, uid)? {
                return Ok(true);
            }
        }
        if !self.bind.xdp && !self.bind.tracing {
            return Ok(false);
        }
        let Ok(id) = u32::try_from(id) else {
            return Ok(false);
        };
        let xdp_only = matches!(
            id,
            ids::DYNPTR_READ
                | ids::XDP_GET_BUFF_LEN
                | ids::REDIRECT_MAP
                | ids::REDIRECT
                | ids::XDP_ADJUST_HEAD
                | ids::XDP_ADJUST_TAIL
                | ids::XDP_ADJUST_META
                | ids::XDP_LOAD_BYTES
                | ids::XDP_STORE_BYTES
                | ids::CSUM_DIFF
        );
        if xdp_only && !self.bind.xdp {
            return Ok(false);
        }
        match id {
            ids::MAP_LOOKUP_ELEM => Ok(self.inline_map_lookup(fr, pc)?
                || self.direct_call(fr, pc, &direct::MAP_LOOKUP_ANY)?),
            ids::GET_SMP_PROCESSOR_ID => {
                let cpu = self.cpu(fr)?;
                self.set_reg(fr, 0, cpu)?;
                Ok(true)
            }
            ids::GET_CURRENT_PID_TGID if self.bind.tracing => {
                let f = self.native(natives::PID_TGID, 0)?;
                let r0 = self.b.build_call(f, &[], "pid_tgid")?;
                let r0 = basic_result(r0)?.into_int_value();
                self.set_reg(fr, 0, r0)?;
                Ok(true)
            }
            ids::KTIME_GET_NS
            | ids::KTIME_GET_BOOT_NS
            | ids::KTIME_GET_COARSE_NS
            | ids::KTIME_GET_TAI_NS => {
                let symbol = match id {
                    ids::KTIME_GET_BOOT_NS => natives::KTIME_BOOT_NS,
                    ids::KTIME_GET_COARSE_NS => natives::KTIME_COARSE_NS,
                    ids::KTIME_GET_TAI_NS => natives::KTIME_TAI_NS,
                    _ => natives::KTIME_NS,
                };
                let f = self.native(symbol, 0)?;
                let r0 = self.b.build_call(f, &[], "ktime")?;
                let r0 = basic_result(r0)?.into_int_value();
                self.set_reg(fr, 0, r0)?;
                Ok(true)
            }
            ids::CSUM_DIFF => {
                self.call_with_regs(fr, natives::CSUM_DIFF, &[true, false, true, false, false])?;
                Ok(true)
            }
            ids::STRNCMP => {
                self.call_with_regs(fr, natives::STRNCMP, &[true, false, true])?;
                Ok(true)
            }
            ids::MAP_UPDATE_ELEM => Ok(self.direct_map_update(fr, pc)?
                || self.direct_call(fr, pc, &direct::MAP_UPDATE_ANY)?),
            ids::MAP_DELETE_ELEM => Ok(self.direct_map_delete(fr, pc)?
                || self.direct_call(fr, pc, &direct::MAP_DELETE_ANY)?),
            ids::GET_PRANDOM_U32 => self.direct_call(fr, pc, &direct::PRANDOM),
            ids::DYNPTR_READ => self.direct_call(fr, pc, &direct::DYNPTR_READ),
            ids::XDP_GET_BUFF_LEN => self.direct_call(fr, pc, &direct::XDP_BUFF_LEN),
            ids::REDIRECT_MAP => self.direct_call(fr, pc, &direct::REDIRECT_MAP),
            ids::REDIRECT => self.direct_call(fr, pc, &direct::REDIRECT),
            ids::RINGBUF_RESERVE => self.direct_call(fr, pc, &direct::RINGBUF_RESERVE),
            ids::RINGBUF_SUBMIT => self.direct_call(fr, pc, &direct::RINGBUF_SUBMIT),
            ids::RINGBUF_DISCARD => self.direct_call(fr, pc, &direct::RINGBUF_DISCARD),
            ids::RINGBUF_OUTPUT => self.direct_call(fr, pc, &direct::RINGBUF_OUTPUT),
            ids::XDP_ADJUST_HEAD => self.direct_adjust(fr, 0),
            ids::XDP_ADJUST_TAIL => self.direct_adjust(fr, 1),
            ids::XDP_ADJUST_META => self.direct_adjust(fr, 2),
            ids::XDP_LOAD_BYTES => self.inline_packet_copy(fr, false),
            ids::XDP_STORE_BYTES => self.inline_packet_copy(fr, true),
            ids::LOOP => self.inline_loop(fr, pc),
            ids::SPIN_LOCK => self.inline_spin_lock(fr),
            ids::SPIN_UNLOCK => self.inline_spin_unlock(fr),
            super::graph::KPTR_XCHG => self.inline_kptr_xchg(fr),
            ids::TAIL_CALL => self.direct_tail_call(fr, pc),
            _ => Ok(false),
        }
    }

    /// An external `i64 (i64 or ptr ...)` function, declared once.
    fn native(&self, name: &str, arity: usize) -> LResult<FunctionValue<'ctx>> {
        self.native_typed(name, &vec![false; arity])
    }

    fn native_typed(&self, name: &str, pointers: &[bool]) -> LResult<FunctionValue<'ctx>> {
        if let Some(f) = self.module.get_function(name) {
            return Ok(f);
        }
        let t = self.t;
        let params: Vec<BasicMetadataTypeEnum<'ctx>> = pointers
            .iter()
            .map(|&p| if p { t.ptr.into() } else { t.i64.into() })
            .collect();
        let f =
            self.module
                .add_function(name, t.i64.fn_type(&params, false), Some(Linkage::External));
        self.nounwind(f);
        Ok(f)
    }

    /// Call native `name` with r1.. as arguments (pointers where `pointers`
    /// says so); r0 gets the result.
    fn call_with_regs(&mut self, fr: &Frame<'ctx>, name: &str, pointers: &[bool]) -> LResult<()> {
        let f = self.native_typed(name, pointers)?;
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = Vec::new();
        for (i, &p) in pointers.iter().enumerate() {
            let v = self.reg(fr, i as u8 + 1)?;
            args.push(if p {
                self.b.build_int_to_ptr(v, self.t.ptr, "argp")?.into()
            } else {
                v.into()
            });
        }
        let r0 = self.b.build_call(f, &args, "native")?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)
    }

    /// The run's CPU slot, from the run context.
    fn cpu(&self, fr: &Frame<'ctx>) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        // SAFETY (for LLVM): the run context is larger than 16 bytes.
        let p = unsafe {
            self.b.build_in_bounds_gep(
                t.i8,
                fr.ctx,
                &[t.i64.const_int(RUNCTX_CPU_OFFSET, false)],
                "cpup",
            )?
        };
        let cpu = self.b.build_load(t.i64, p, "cpu")?;
        // The CPU slot does not change during a run: loads of it are not
        // clobbered by the program's stores (LLVM cannot tell the run
        // context from map memory), so one load serves every lookup.
        if let Some(i) = cpu.as_instruction_value() {
            let kind = self.cx.get_kind_id("invariant.load");
            i.set_metadata(self.cx.metadata_node(&[]), kind)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        Ok(cpu.into_int_value())
    }

    fn inline_map_lookup(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<bool> {
        let Prov::Const(handle) = self.prov(fr, pc, 1) else {
            return Ok(false);
        };
        match self.bind.maps.get(&handle).cloned() {
            Some(MapKind::Array(layout)) => {
                let Some(&index) = self.bind.map_index.get(&handle) else {
                    return Ok(false);
                };
                self.inline_array_lookup(fr, pc, index, layout)?;
                Ok(true)
            }
            Some(MapKind::Keyed { key_size }) => {
                if let Some(name) = natives::map_lookup_by_value_symbol(key_size) {
                    return self.lookup_by_value(fr, pc, handle, key_size, name);
                }
                let name = natives::map_lookup_symbol(key_size);
                let f = self.native_typed(&name, &[true, true, false])?;
                let Some(map) = self.map_handle_ptr(handle)? else {
                    return Ok(false);
                };
                let key = self.address(fr, pc, 2, 0, u64::from(key_size))?;
                let cpu = self.cpu(fr)?;
                let r0 = self
                    .b
                    .build_call(f, &[map.into(), key.into(), cpu.into()], "lookup")?;
                let r0 = basic_result(r0)?.into_int_value();
                self.set_reg(fr, 0, r0)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// A keyed lookup whose key fits in a register: the key is loaded here
    /// and passed by value (see `natives::map_lookup_v`).
    fn lookup_by_value(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        handle: u64,
        key_size: u32,
        name: &str,
    ) -> LResult<bool> {
        let t = self.t;
        let f = self.native_typed(name, &[true, false, false])?;
        let Some(map) = self.map_handle_ptr(handle)? else {
            return Ok(false);
        };
        let key_ptr = self.address(fr, pc, 2, 0, u64::from(key_size))?;
        let width = if key_size == 4 { t.i32 } else { t.i64 };
        let key = self.b.build_load(width, key_ptr, "key")?;
        if let Some(i) = key.as_instruction_value() {
            // The key may sit at any byte offset of the stack or a value.
            i.set_alignment(1)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        let key = self
            .b
            .build_int_z_extend_or_bit_cast(key.into_int_value(), t.i64, "key64")?;
        let cpu = self.cpu(fr)?;
        let r0 = self
            .b
            .build_call(f, &[map.into(), key.into(), cpu.into()], "lookup")?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        Ok(true)
    }

    /// `bpf_map_update_elem` on an array or keyed map: a direct call.
    fn direct_map_update(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<bool> {
        let Prov::Const(handle) = self.prov(fr, pc, 1) else {
            return Ok(false);
        };
        let key_size = match self.bind.maps.get(&handle) {
            Some(MapKind::Array(_)) => 4,
            Some(MapKind::Keyed { key_size }) => *key_size,
            _ => return Ok(false),
        };
        let t = self.t;
        let f = self.native_typed(natives::MAP_UPDATE, &[true, true, true, false, false])?;
        let Some(map) = self.map_handle_ptr(handle)? else {
            return Ok(false);
        };
        let key = self.address(fr, pc, 2, 0, u64::from(key_size))?;
        let value = self.reg(fr, 3)?;
        let value = self.b.build_int_to_ptr(value, t.ptr, "value")?;
        let flags = self.reg(fr, 4)?;
        let cpu = self.cpu(fr)?;
        let r0 = self.b.build_call(
            f,
            &[
                map.into(),
                key.into(),
                value.into(),
                flags.into(),
                cpu.into(),
            ],
            "update",
        )?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        Ok(true)
    }

    /// `bpf_map_delete_elem`: a direct call on keyed maps, -EINVAL on
    /// arrays (their elements always exist).
    fn direct_map_delete(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<bool> {
        let Prov::Const(handle) = self.prov(fr, pc, 1) else {
            return Ok(false);
        };
        let t = self.t;
        match self.bind.maps.get(&handle).cloned() {
            Some(MapKind::Array(_)) => {
                let e = neg_errno(bpfjet_runtime::errno::EINVAL);
                self.set_reg(fr, 0, t.i64.const_int(e, false))?;
                Ok(true)
            }
            Some(MapKind::Keyed { key_size }) => {
                let f = self.native_typed(natives::MAP_DELETE, &[true, true])?;
                let Some(map) = self.map_handle_ptr(handle)? else {
                    return Ok(false);
                };
                let key = self.address(fr, pc, 2, 0, u64::from(key_size))?;
                let r0 = self.b.build_call(f, &[map.into(), key.into()], "delete")?;
                let r0 = basic_result(r0)?.into_int_value();
                self.set_reg(fr, 0, r0)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `bpf_xdp_adjust_head/tail/meta`: a direct call on the run's frame.
    fn direct_adjust(&mut self, fr: &mut Frame<'ctx>, which: u64) -> LResult<bool> {
        let t = self.t;
        let f = self.native_typed(natives::XDP_ADJUST, &[true, false, false])?;
        let offset = self.reg(fr, 2)?;
        let r0 = self.b.build_call(
            f,
            &[
                fr.ctx.into(),
                t.i64.const_int(which, false).into(),
                offset.into(),
            ],
            "adjust",
        )?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        Ok(true)
    }

    /// The handle of the map `handle` names, as a pointer to its symbol
    /// (never the address itself); `None` if the map is not in the
    /// program's map table.
    fn map_handle_ptr(&self, handle: u64) -> LResult<Option<PointerValue<'ctx>>> {
        let Some(&index) = self.bind.map_index.get(&handle) else {
            return Ok(None);
        };
        let addr = self.map_address(&crate::bindings::map_symbol(index), 0)?;
        Ok(Some(self.b.build_int_to_ptr(addr, self.t.ptr, "map")?))
    }

    /// `l.values` is the layout at compile time; the code uses the symbol of
    /// map `index`'s values instead.
    fn inline_array_lookup(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        index_of_map: usize,
        l: ArrayLayout,
    ) -> LResult<()> {
        let t = self.t;
        let index = match self.bind.const_keys.get(&pc) {
            Some(&k) => t.i64.const_int(u64::from(k), false),
            None => {
                let p = self.address(fr, pc, 2, 0, 4)?;
                let k = self.b.build_load(t.i32, p, "key")?;
                if let Some(i) = k.as_instruction_value() {
                    i.set_alignment(1)
                        .map_err(|e| LiftError::Build(e.to_string()))?;
                }
                self.b
                    .build_int_z_extend(k.into_int_value(), t.i64, "index")?
            }
        };
        let in_range = self.b.build_int_compare(
            IntPredicate::ULT,
            index,
            t.i64.const_int(u64::from(l.max_entries), false),
            "in_range",
        )?;
        let symbol = crate::bindings::map_values_symbol(index_of_map);
        let global = self
            .module
            .get_global(&symbol)
            .ok_or_else(|| LiftError::Build(format!("map symbol {symbol} is not declared")))?;
        self.array_values.insert(pc, global);
        // The address is two `inbounds` steps from the symbol — this CPU's
        // copy, then the element — rather than one step by their sum:
        // InstCombine splits a GEP on an `add` into two GEPs and drops
        // `inbounds` doing so, and without it LLVM no longer knows the
        // address is not null, so the program's null check after every
        // lookup stayed (a compare and a branch per lookup). The element
        // offset is an i32 index times the stride: no unsigned wrap.
        let mut base = global.as_pointer_value();
        if l.cpu_stride != 0 {
            let cpu = self.cpu(fr)?;
            let cpu_off = self.b.build_int_nuw_mul(
                cpu,
                t.i64.const_int(l.cpu_stride as u64, false),
                "cpuoff",
            )?;
            // SAFETY (for LLVM): every CPU slot's copy lies in the map's
            // value memory.
            base = unsafe {
                self.b
                    .build_in_bounds_gep(t.i8, base, &[cpu_off], "cpu_values")?
            };
        }
        let offset =
            self.b
                .build_int_nuw_mul(index, t.i64.const_int(l.stride as u64, false), "off")?;
        // SAFETY (for LLVM): in range when `in_range` holds; otherwise the
        // address (then poison) is discarded by the select below.
        let element = unsafe { self.b.build_in_bounds_gep(t.i8, base, &[offset], &symbol)? };
        let addr = self.b.build_ptr_to_int(element, t.i64, "map_addr")?;
        let r0 = self
            .b
            .build_select(in_range, addr, t.i64.const_zero(), "lookup")?
            .into_int_value();
        self.set_reg(fr, 0, r0)
    }

    /// A packet pointer field of the context in r1.
    fn md_field(&self, md: PointerValue<'ctx>, field: CtxField) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        // SAFETY (for LLVM): the field is inside the context structure.
        let p = unsafe {
            self.b.build_in_bounds_gep(
                t.i8,
                md,
                &[t.i64.const_int(field.offset() as u64, false)],
                "mdf",
            )?
        };
        Ok(self.b.build_load(t.i64, p, field.name())?.into_int_value())
    }

    /// `bpf_xdp_load_bytes(ctx, off, buf, len)` / `bpf_xdp_store_bytes(...)`
    /// on a linear frame: offsets or lengths over 0xffff are -EFAULT, a range
    /// past the packet's end -EINVAL, else the copy and 0.
    fn inline_packet_copy(&mut self, fr: &mut Frame<'ctx>, store: bool) -> LResult<bool> {
        let t = self.t;
        let md = self.reg(fr, 1)?;
        let md = self.b.build_int_to_ptr(md, t.ptr, "md")?;
        let off = self.reg(fr, 2)?;
        let off = self
            .b
            .build_and(off, t.i64.const_int(0xffff_ffff, false), "off")?;
        let buf = self.reg(fr, 3)?;
        let len = self.reg(fr, 4)?;
        let len = self
            .b
            .build_and(len, t.i64.const_int(0xffff_ffff, false), "len")?;
        let data = self.md_field(md, CtxField::Data)?;
        let data_end = self.md_field(md, CtxField::DataEnd)?;
        let limit = t.i64.const_int(0xffff, false);
        let off_big = self
            .b
            .build_int_compare(IntPredicate::UGT, off, limit, "off_big")?;
        let len_big = self
            .b
            .build_int_compare(IntPredicate::UGT, len, limit, "len_big")?;
        let fault = self.b.build_or(off_big, len_big, "efault")?;
        let end = self.b.build_int_add(off, len, "end")?;
        let pkt_len = self.b.build_int_sub(data_end, data, "pkt_len")?;
        let past = self
            .b
            .build_int_compare(IntPredicate::UGT, end, pkt_len, "einval")?;
        let copy_bb = self.cx.append_basic_block(fr.func, "pkt_copy");
        let check_bb = self.cx.append_basic_block(fr.func, "pkt_copy_linear");
        let frags_bb = self.cx.append_basic_block(fr.func, "pkt_copy_frags");
        let done_bb = self.cx.append_basic_block(fr.func, "pkt_copy_done");
        self.set_reg(
            fr,
            0,
            t.i64
                .const_int(neg_errno(bpfjet_runtime::errno::EFAULT), false),
        )?;
        self.b.build_conditional_branch(fault, done_bb, check_bb)?;
        // A range past the linear part: the fragments of a multi-buffer
        // frame (or past the frame, EINVAL) are the runtime's to walk.
        self.b.position_at_end(check_bb);
        self.b.build_conditional_branch(past, frags_bb, copy_bb)?;
        self.b.position_at_end(frags_bb);
        let slow = self.native_typed(natives::XDP_COPY, &[true, false, true, false, false])?;
        let buf_ptr = self.b.build_int_to_ptr(buf, t.ptr, "slow_bufp")?;
        let r0 = self.b.build_call(
            slow,
            &[
                fr.ctx.into(),
                off.into(),
                buf_ptr.into(),
                len.into(),
                t.i64.const_int(u64::from(store), false).into(),
            ],
            "pkt_copy_slow",
        )?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        self.b.build_unconditional_branch(done_bb)?;
        self.b.position_at_end(copy_bb);
        let pkt = self.b.build_int_add(data, off, "pkt")?;
        let pkt = self.b.build_int_to_ptr(pkt, t.ptr, "pktp")?;
        let buf = self.b.build_int_to_ptr(buf, t.ptr, "bufp")?;
        let (dst, src) = if store { (pkt, buf) } else { (buf, pkt) };
        self.b
            .build_memmove(dst, 1, src, 1, len)
            .map_err(|e| LiftError::Build(e.to_string()))?;
        self.set_reg(fr, 0, t.i64.const_zero())?;
        self.b.build_unconditional_branch(done_bb)?;
        self.b.position_at_end(done_bb);
        Ok(true)
    }

    /// `bpf_loop(nr_loops, callback, callback_ctx, flags)` with a constant
    /// callback: the loop in IR, the callback called directly one frame
    /// deeper, stopping when it returns non-zero; r0 = calls made.
    fn inline_loop(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<bool> {
        let Prov::Const(slot) = self.prov(fr, pc, 2) else {
            return Ok(false);
        };
        let Some(callee) = usize::try_from(slot)
            .ok()
            .and_then(|s| self.funcs.get(&s).copied())
        else {
            return Ok(false);
        };
        let t = self.t;
        let n = self.reg(fr, 1)?;
        let n = self
            .b
            .build_and(n, t.i64.const_int(0xffff_ffff, false), "n")?;
        let cb_ctx = self.reg(fr, 3)?;
        let flags = self.reg(fr, 4)?;
        let func = fr.func;
        let check_n = self.cx.append_basic_block(func, "loop_check_n");
        let check_depth = self.cx.append_basic_block(func, "loop_check_depth");
        let depth_fault = self.cx.append_basic_block(func, "loop_depth_fault");
        let head = self.cx.append_basic_block(func, "loop_head");
        let body = self.cx.append_basic_block(func, "loop_body");
        let after_call = self.cx.append_basic_block(func, "loop_after_call");
        let aborted = self.cx.append_basic_block(func, "loop_aborted");
        let stopped = self.cx.append_basic_block(func, "loop_stopped");
        let done = self.cx.append_basic_block(func, "loop_done");

        // flags != 0: -EINVAL.
        self.set_reg(
            fr,
            0,
            t.i64
                .const_int(neg_errno(bpfjet_runtime::errno::EINVAL), false),
        )?;
        let bad_flags =
            self.b
                .build_int_compare(IntPredicate::NE, flags, t.i64.const_zero(), "bad_flags")?;
        self.b.build_conditional_branch(bad_flags, done, check_n)?;

        // Too many loops: -E2BIG as the kernel's inlined loop loads it (32
        // bits); no loops at all: 0.
        self.b.position_at_end(check_n);
        let too_many = self.b.build_int_compare(
            IntPredicate::UGT,
            n,
            t.i64.const_int(MAX_LOOPS, false),
            "too_many",
        )?;
        let r0_e2big = t
            .i64
            .const_int(neg_errno(bpfjet_runtime::errno::E2BIG) & 0xffff_ffff, false);
        let pre = self
            .b
            .build_select(too_many, r0_e2big, t.i64.const_zero(), "pre")?
            .into_int_value();
        self.set_reg(fr, 0, pre)?;
        let nothing =
            self.b
                .build_int_compare(IntPredicate::EQ, n, t.i64.const_zero(), "nothing")?;
        let skip = self.b.build_or(too_many, nothing, "skip")?;
        self.b.build_conditional_branch(skip, done, check_depth)?;

        // The callback runs one frame deeper.
        self.b.position_at_end(check_depth);
        let depth = self.deeper(fr, pc, head, depth_fault)?;

        // for i in 0..n
        self.b.position_at_end(head);
        let i = self.b.build_phi(t.i64, "i")?;
        i.add_incoming(&[(&t.i64.const_zero(), check_depth)]);
        let iv = i.as_basic_value().into_int_value();
        self.b.build_unconditional_branch(body)?;
        self.b.position_at_end(body);
        let zero = t.i64.const_zero();
        let args: [BasicMetadataValueEnum<'ctx>; 7] = [
            fr.ctx.into(),
            depth.into(),
            iv.into(),
            cb_ctx.into(),
            zero.into(),
            zero.into(),
            zero.into(),
        ];
        let ret = self
            .b
            .build_call(callee, &args, &function_name(slot as usize))?;
        let ret = basic_result(ret)?.into_int_value();
        let status = self.b.build_load(t.i64, fr.ctx, "status")?.into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, status, zero, "ok")?;
        self.b.build_conditional_branch(ok, after_call, aborted)?;
        self.b.position_at_end(aborted);
        self.b.build_return(Some(&zero))?;

        self.b.position_at_end(after_call);
        let next = self
            .b
            .build_int_add(iv, t.i64.const_int(1, false), "next")?;
        let stop = self
            .b
            .build_int_compare(IntPredicate::NE, ret, zero, "stop")?;
        let more = self
            .b
            .build_int_compare(IntPredicate::ULT, next, n, "more")?;
        let cont = self.cx.append_basic_block(func, "loop_continue");
        i.add_incoming(&[(&next, cont)]);
        self.b.build_conditional_branch(stop, stopped, cont)?;
        self.b.position_at_end(cont);
        self.b.build_conditional_branch(more, head, stopped)?;
        // Whether stopped early or done: r0 = calls made = i + 1.
        self.b.position_at_end(stopped);
        self.set_reg(fr, 0, next)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(true)
    }
}
