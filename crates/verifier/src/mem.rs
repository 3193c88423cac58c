//! Memory instructions: loads, stores and atomics through every pointer type,
//! and the shared region checks helpers use for their memory arguments.

use crate::ctx_rules;
use crate::driver::{Verifier, MAX_VAR_OFF};
use crate::env::ProgType;
use crate::error::{err, VResult};
use crate::facts::{CtxAccess, MemBase, PktAccess, XdpMdField};
use crate::frame::State;
use crate::map_struct::{self, MapField};
use crate::precision::Note;
use crate::range::Scalar;
use crate::reg_state::{RegState, RegType};
use crate::stack::{self, StackFault, STACK_SIZE};
use bpfjet_isa::{AtomicOp, Operand, Width};
use bpfjet_maps::spec::flags;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    Read,
    Write,
}

/// The value a `size`-byte load produces when nothing is known.
fn loaded_unknown(size: usize, sign_extend: bool) -> RegState {
    if sign_extend && size < 8 {
        let half = 1i64 << (size * 8 - 1);
        RegState::scalar(Scalar::from_srange(-half, half - 1))
    } else {
        RegState::scalar(stack::truncate(&Scalar::UNKNOWN, size))
    }
}

fn sign_extend_reg(r: RegState, size: usize) -> RegState {
    if !r.is_scalar() || size >= 8 {
        return r;
    }
    if let Some(c) = r.val.as_const() {
        let shift = 64 - size * 8;
        return RegState::constant((((c << shift) as i64) >> shift) as u64);
    }
    loaded_unknown(size, true)
}

/// The bytes of an open-coded iterator touched by anything but its kfuncs.
pub(crate) fn iterator_bytes(off: i64) -> crate::error::VerifyError {
    crate::error::VerifyError::new(
        "iter_bytes",
        format!(
            "the stack at off {off} holds an open-coded iterator: only its kfuncs \
             (bpf_iter_num_next, bpf_iter_num_destroy) may use it"
        ),
    )
}

/// The bytes of a dynptr read by the program (the kernel's words: they are
/// neither spilled registers nor plain data to it).
pub(crate) fn dynptr_bytes(off: i64, size: usize) -> crate::error::VerifyError {
    crate::error::VerifyError::new(
        "dynptr_bytes",
        format!(
            "invalid read from stack off {off}+0 size {size}: the bytes belong to a \
             struct bpf_dynptr, which only the dynptr helpers and kfuncs may use"
        ),
    )
}

fn stack_fault_msg(f: StackFault, regno: u8, size: usize) -> crate::error::VerifyError {
    match f {
        StackFault::Uninit { off } => crate::error::VerifyError::new(
            "uninit_stack_read",
            format!("invalid read from stack R{regno} off {off} size {size}: the byte was never written"),
        ),
        StackFault::CorruptSpill { off } => crate::error::VerifyError::new(
            "corrupt_spill",
            format!("attempt to corrupt spilled pointer on stack at off {off}"),
        ),
        StackFault::PartialPointer { off } => crate::error::VerifyError::new(
            "partial_ptr_fill",
            format!("invalid size of register fill: partial read of a spilled pointer at off {off}"),
        ),
        StackFault::PointerSpillSize => crate::error::VerifyError::new(
            "ptr_spill_size",
            "invalid size of register spill: pointers are spilled as 8 bytes",
        ),
        StackFault::Iterator { off } => iterator_bytes(off),
        StackFault::Dynptr { off } => dynptr_bytes(off, size),
    }
}

impl Verifier<'_> {
    /// Bounds of `[reg.off + off + var, +size)` inside `[0, limit)`, the
    /// kernel's checks for map values and helper memory.
    pub(crate) fn check_region(
        &self,
        reg: &RegState,
        regno: u8,
        off: i64,
        size: i64,
        limit: i64,
        what: &str,
    ) -> VResult<()> {
        let base = reg.off as i64 + off;
        if reg.val.smin < 0 && (reg.val.smin == i64::MIN || base.saturating_add(reg.val.smin) < 0) {
            return err(
                "negative_offset",
                format!(
                    "R{regno} min value is negative, either use unsigned index or do a if (index >=0) check \
                     ({what}, var_off {:?})",
                    reg.val
                ),
            );
        }
        let lo = base.saturating_add(reg.val.smin);
        if lo < 0 || lo.saturating_add(size) > limit {
            return err(
                "out_of_bounds",
                format!("invalid access to {what}, size={limit} off={lo} access_size={size}"),
            );
        }
        if reg.val.umax >= MAX_VAR_OFF as u64 {
            return err(
                "unbounded_access",
                format!(
                    "R{regno} unbounded memory access into {what}, make sure to bounds check any such access"
                ),
            );
        }
        let hi = base + reg.val.umax as i64;
        if hi + size > limit {
            return err(
                "out_of_bounds",
                format!(
                    "invalid access to {what}, size={limit} off={hi} access_size={size} \
                     (largest offset the variable part allows)"
                ),
            );
        }
        Ok(())
    }

    pub(crate) fn check_pkt_region(
        &mut self,
        pc: Option<usize>,
        reg: &RegState,
        regno: u8,
        off: i64,
        size: i64,
    ) -> VResult<()> {
        if reg.val.smin < 0 {
            return err(
                "negative_offset",
                format!(
                    "R{regno} min value is negative, either use unsigned index or do a if (index >=0) check"
                ),
            );
        }
        let start = reg.off as i64 + off;
        if start < 0 || start + size > reg.range as i64 {
            return err(
                "pkt_out_of_range",
                format!(
                    "invalid access to packet, off={start} size={size}, R{regno}({reg}): \
                     only {} bytes are proven to be before data_end; compare the pointer \
                     against data_end first",
                    reg.range
                ),
            );
        }
        // i128: the variable part of a packet pointer may be unbounded above.
        if reg.val.umax as i128 + start as i128 + size as i128 > 0xffff {
            return err(
                "pkt_out_of_range",
                format!("R{regno} offset is outside of the packet"),
            );
        }
        if let Some(pc) = pc {
            let e = self.facts.pkt_accesses.entry(pc).or_insert(PktAccess {
                min_off: start,
                max_end: start + size,
                proven_range: reg.range,
            });
            e.min_off = e.min_off.min(start);
            e.max_end = e.max_end.max(start + size);
            e.proven_range = e.proven_range.min(reg.range);
        }
        Ok(())
    }

    /// The byte range `[lo, hi)` a stack access through `reg` may touch,
    /// after bounds and alignment checks.
    pub(crate) fn stack_range(
        &self,
        reg: &RegState,
        regno: u8,
        off: i64,
        size: i64,
        access: Access,
        strict_align: bool,
    ) -> VResult<(i64, i64)> {
        let base = reg.off as i64 + off;
        let var = !reg.val.is_const();
        if var && !self.env.privileged() {
            return err(
                "var_stack_unpriv",
                format!("R{regno} variable stack access prohibited for !root"),
            );
        }
        let lo = base.saturating_add(reg.val.smin);
        let hi = base.saturating_add(reg.val.smax);
        if lo < -STACK_SIZE || hi.saturating_add(size) > 0 {
            let dir = if access == Access::Read {
                "read from"
            } else {
                "write to"
            };
            return err(
                "stack_out_of_range",
                format!(
                    "invalid {dir} stack R{regno} off={lo} size={size}: the stack is the 512 bytes below r10"
                ),
            );
        }
        if strict_align && size > 0 {
            let t = reg
                .val
                .var_off
                .add(crate::tnum::Tnum::constant(base as u64));
            if !t.is_aligned(size as u64) {
                return err(
                    "misaligned_stack",
                    format!("misaligned stack access off {base} size {size}"),
                );
            }
        }
        Ok((lo, hi + size))
    }

    fn frame_of(&self, st: &State, reg: &RegState) -> usize {
        match reg.ty {
            RegType::Stack { frame } => (frame as usize).min(st.frames.len() - 1),
            _ => st.frames.len() - 1,
        }
    }

    /// A scalar register `r` (value `v`) stored at fixed stack offset
    /// `off`: link the spilled copy to the register when the value fits
    /// (as the kernel does, so that a bound learned on one applies to the
    /// other), and when the store leaves zero bytes rather than a spill,
    /// (an unaligned store of zero), the register's value is what makes
    /// them zero: it must be precise.
    fn scalar_spill(&mut self, st: &mut State, r: u8, v: &mut RegState, off: i64, size: usize) {
        let aligned = stack::locate(off).1 == 0;
        let fits = size >= 8 || v.val.umax < 1u64 << (8 * size);
        if aligned && fits && v.id == 0 && !v.val.is_const() && self.env.privileged() {
            let id = self.fresh_id();
            v.id = id;
            st.reg_mut(r).id = id;
        }
        if v.is_null_const() && !aligned {
            self.need_reg(st, r);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_load(
        &mut self,
        st: &mut State,
        pc: usize,
        size: usize,
        sign_extend: bool,
        dst: u8,
        src: u8,
        off: i16,
    ) -> VResult<()> {
        let base = self.read_reg(st, src)?;
        if sign_extend
            && base.ty == RegType::Ctx
            && self.env.prog_type == ProgType::Xdp
            && XdpMdField::from_offset(base.off as i64 + off as i64).is_some_and(|f| f.is_pointer())
        {
            // Like the kernel: a pointer field has no sign-extending form
            // (scalar fields do; the loader's rewrite keeps it for them).
            return err(
                "ctx_bad_access",
                format!(
                    "invalid bpf_context access off={} size={size}: sign-extending load \
                     of a pointer field",
                    base.off as i64 + off as i64
                ),
            );
        }
        let value = self.mem_access(st, pc, src, &base, off, size, Access::Read, None)?;
        self.note_mem_base(pc, &base)?;
        let value = if sign_extend {
            sign_extend_reg(value, size)
        } else {
            value
        };
        *st.reg_mut(dst) = value;
        Ok(())
    }

    pub(crate) fn check_store(
        &mut self,
        st: &mut State,
        pc: usize,
        size: usize,
        dst: u8,
        off: i16,
        src: Operand,
    ) -> VResult<()> {
        let base = self.read_reg(st, dst)?;
        let value = match src {
            Operand::Reg(r) => StoreVal::Reg(r, self.read_reg(st, r)?),
            Operand::Imm(imm) => StoreVal::Imm(imm as i64),
        };
        self.mem_access(st, pc, dst, &base, off, size, Access::Write, Some(value))?;
        self.note_mem_base(pc, &base)?;
        Ok(())
    }

    /// One load/store instruction must reach the context on every path or
    /// on none (the kernel's `save_aux_ptr_type`): the loader rewrites
    /// context loads in place, and the rewritten form must never run on a
    /// packet, stack or map pointer. Other kinds may mix, as in the kernel;
    /// the fact then says `Mixed`.
    fn note_mem_base(&mut self, pc: usize, base: &RegState) -> VResult<()> {
        let kind = match base.ty {
            RegType::Ctx => MemBase::Ctx,
            RegType::Pkt => MemBase::Packet,
            RegType::PktMeta => MemBase::PacketMeta,
            RegType::MapValue { .. } => MemBase::MapValue,
            RegType::Stack { .. } => MemBase::Stack,
            _ => MemBase::Mem,
        };
        let slot = self.facts.mem_bases.entry(pc).or_insert(kind);
        if *slot == kind {
            return Ok(());
        }
        if *slot == MemBase::Ctx || kind == MemBase::Ctx {
            return err(
                "ptr_type_mismatch",
                format!(
                    "same insn cannot be used with different pointers \
                     (ctx on one path, {} on another)",
                    if kind == MemBase::Ctx { *slot } else { kind }.name()
                ),
            );
        }
        *slot = MemBase::Mixed;
        Ok(())
    }

    /// Check one access and perform its effect on the state; loads return
    /// the loaded value.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mem_access(
        &mut self,
        st: &mut State,
        pc: usize,
        regno: u8,
        base: &RegState,
        off: i16,
        size: usize,
        access: Access,
        value: Option<StoreVal>,
    ) -> VResult<RegState> {
        let off64 = off as i64;
        let write = access == Access::Write;
        if base.maybe_null {
            return err(
                "null_deref",
                format!(
                    "R{regno} invalid mem access '{}_or_null': check the pointer against NULL first",
                    base.ty.name()
                ),
            );
        }
        // Pointers stored anywhere but the stack leak (unprivileged).
        if let Some(StoreVal::Reg(r, v)) = &value {
            if v.is_pointer() && !self.env.privileged() && !matches!(base.ty, RegType::Stack { .. })
            {
                let into = match base.ty {
                    RegType::MapValue { .. } => "map",
                    RegType::Pkt | RegType::PktMeta => "packet",
                    _ => "mem",
                };
                return err("ptr_leak", format!("R{r} leaks addr into {into}"));
            }
        }
        match base.ty {
            RegType::Stack { .. } => {
                let frame = self.frame_of(st, base);
                let (lo, hi) = self.stack_range(base, regno, off64, size as i64, access, true)?;
                self.note_stack(st, frame, -lo);
                let allow = self.env.privileged();
                let fixed = base.val.is_const();
                if write {
                    let (mut reg, imm) = match value {
                        // Not a spillable register type to the kernel
                        // (`is_spillable_regtype`): stored as plain data,
                        // it reads back as an unknown scalar.
                        Some(StoreVal::Reg(_, v)) if v.ty == RegType::ConstDynptr => {
                            (Some(RegState::unknown()), 0)
                        }
                        Some(StoreVal::Reg(_, v)) => (Some(v), 0),
                        Some(StoreVal::Imm(i)) => (None, i),
                        None => (None, 1),
                    };
                    if let (Some(v), Some(StoreVal::Reg(r, _)), true) = (reg.as_mut(), value, fixed)
                    {
                        let is_store = matches!(
                            self.insns[pc],
                            bpfjet_isa::Insn::Store { .. } | bpfjet_isa::Insn::StoreRelease { .. }
                        );
                        if is_store && v.is_scalar() {
                            self.scalar_spill(st, r, v, lo, size);
                        }
                    }
                    if let Some(v) = &reg {
                        if stack::is_stack_pointer(v) && frame < st.frames.len() - 1 {
                            return err(
                                "stack_ptr_to_caller",
                                "cannot spill pointers to stack into stack frame of the caller",
                            );
                        }
                    }
                    // A store over a dynptr destroys it (or is refused
                    // for a referenced one).
                    let end = if fixed { lo + size as i64 } else { hi };
                    self.destroy_dynptrs(st, frame, lo, end)?;
                    let stack = &mut st.frames[frame].stack;
                    let res = if fixed {
                        let res = stack.write(lo, size, reg.as_ref(), imm, allow);
                        let (slot, byte) = stack::locate(lo);
                        if byte == 0 && stack.slot(slot).spill.is_some() {
                            self.note = Note::Spill {
                                frame: frame as u8,
                                slot: slot as u8,
                            };
                        }
                        res
                    } else {
                        if reg.is_some_and(|r| r.is_pointer()) {
                            return err(
                                "var_stack_ptr",
                                "variable-offset stack write of a pointer is not allowed",
                            );
                        }
                        stack.clobber(lo, hi, allow)
                    };
                    res.map_err(|f| stack_fault_msg(f, regno, size))?;
                    Ok(RegState::NOT_INIT)
                } else {
                    let stack = &st.frames[frame].stack;
                    if fixed {
                        if let Some(slot) = stack.fill_source(lo, size) {
                            self.note = Note::Fill {
                                frame: frame as u8,
                                slot: slot as u8,
                            };
                        }
                        stack
                            .read(lo, size, allow)
                            .map_err(|f| stack_fault_msg(f, regno, size))
                    } else {
                        stack
                            .check_readable(lo, hi, allow, allow)
                            .map_err(|f| stack_fault_msg(f, regno, size))?;
                        Ok(loaded_unknown(size, false))
                    }
                }
            }
            RegType::MapValue { map } => {
                let spec = match self.map(map) {
                    Some(s) => s.clone(),
                    None => return err("bad_map", format!("unknown map #{map}")),
                };
                if write && spec.flags & flags::RDONLY_PROG != 0 {
                    return err(
                        "map_write_rdonly",
                        format!(
                            "write into map forbidden, value_size={} off={} size={size}: map {} is read-only for programs",
                            spec.value_size,
                            base.off as i64 + off64,
                            spec.name
                        ),
                    );
                }
                // The kernel's check_map_access_type: a BPF_F_WRONLY_PROG
                // map's values are never read by a program (an atomic
                // reads too).
                if !write && spec.flags & flags::WRONLY_PROG != 0 {
                    return err(
                        "map_read_wronly",
                        format!(
                            "read from map forbidden, value_size={} off={} size={size}: map {} is write-only for programs",
                            spec.value_size,
                            base.off as i64 + off64,
                            spec.name
                        ),
                    );
                }
                self.check_lock_overlap(map, base, off64, size as i64)?;
                self.check_region(
                    base,
                    regno,
                    off64,
                    size as i64,
                    spec.value_size as i64,
                    &format!(
                        "map value of {} (value_size={})",
                        spec.name, spec.value_size
                    ),
                )?;
                // Every offset the access may reach (a variable offset
                // must not reach a graph root or a kptr either).
                let at = base.off as i64 + off64;
                let lo = at.saturating_add(base.val.smin);
                let hi = at
                    .saturating_add(base.val.umax.min(i64::MAX as u64) as i64)
                    .saturating_add(size as i64);
                self.check_map_special_fields(map, lo, hi)?;
                if write {
                    return Ok(RegState::NOT_INIT);
                }
                // Frozen read-only data reads as constants.
                if spec.frozen && spec.flags & flags::RDONLY_PROG != 0 && base.val.is_const() {
                    if let Some(data) = &spec.initial_data {
                        let start = (base.off as i64 + off64) as usize;
                        let mut buf = [0u8; 8];
                        for (i, b) in buf.iter_mut().take(size).enumerate() {
                            *b = data.get(start + i).copied().unwrap_or(0);
                        }
                        return Ok(RegState::constant(u64::from_le_bytes(buf)));
                    }
                }
                Ok(loaded_unknown(size, false))
            }
            RegType::Pkt | RegType::PktMeta => {
                self.check_pkt_region(Some(pc), base, regno, off64, size as i64)?;
                Ok(loaded_unknown(size, false))
            }
            RegType::Ctx if self.env.prog_type == ProgType::Tracing => {
                let (r, end) = self.tp_btf_ctx_load(base, regno, off, size, write)?;
                self.facts.max_ctx_end = self.facts.max_ctx_end.max(end);
                Ok(r)
            }
            RegType::KernelObj { ty } => {
                self.kernel_obj_load(base, regno, ty, off64, size as i64, write)
            }
            RegType::Ctx if self.env.prog_type.is_tracing() => {
                let end = ctx_rules::check_tracing_access(
                    self.env.prog_type,
                    base,
                    regno,
                    off,
                    size,
                    write,
                )?;
                self.facts.max_ctx_end = self.facts.max_ctx_end.max(end);
                Ok(loaded_unknown(size, false))
            }
            RegType::Ctx => {
                let field = ctx_rules::check_xdp_access(
                    base,
                    regno,
                    off,
                    size,
                    write,
                    self.env.xdp_devmap,
                )?;
                let prev = self.facts.ctx_accesses.insert(
                    pc,
                    CtxAccess {
                        field,
                        size: size as u8,
                    },
                );
                if prev.is_some_and(|p| p.field != field) {
                    return err(
                        "ctx_bad_access",
                        "context load reads different fields on different paths",
                    );
                }
                Ok(ctx_rules::xdp_field_value(field))
            }
            RegType::Mem { size: limit, kind } => {
                if write && kind.is_rdonly() {
                    return err(
                        "mem_rdonly",
                        format!("R{regno} cannot write into {}", kind.rdonly_what()),
                    );
                }
                self.check_region(base, regno, off64, size as i64, limit as i64, "mem")?;
                Ok(if write {
                    RegState::NOT_INIT
                } else {
                    loaded_unknown(size, false)
                })
            }
            RegType::MapPtr { map } => {
                self.facts.reads_map_struct = true;
                self.map_struct_read(base, regno, map, off64, size, write)
            }
            RegType::Alloc { type_id, .. } => {
                self.check_alloc_access(base, regno, type_id, off64, size as i64)?;
                Ok(if write {
                    RegState::NOT_INIT
                } else {
                    loaded_unknown(size, false)
                })
            }
            RegType::Module { ty } => {
                self.check_module_access(base, regno, ty, off64, size as i64, write)?;
                Ok(loaded_unknown(size, false))
            }
            RegType::NotInit => err("uninit_reg", format!("R{regno} !read_ok")),
            other => err(
                "bad_mem_access",
                format!("R{regno} invalid mem access '{}'", other.name()),
            ),
        }
    }

    /// A read of the kernel's map struct through a map pointer
    /// (`check_ptr_to_map_access`): CAP_PERFMON only, reads only, at
    /// offsets `btf_struct_access` allows; scalar members only (a pointer
    /// member would be a `PTR_TO_BTF_ID`, which bpfjet does not model).
    fn map_struct_read(
        &self,
        base: &RegState,
        regno: u8,
        map: u32,
        off: i64,
        size: usize,
        write: bool,
    ) -> VResult<RegState> {
        let Some(spec) = self.map(map) else {
            return err("bad_map", format!("R{regno} names no map"));
        };
        let tname = map_struct::struct_name(spec.map_type);
        if !self.env.privileged() {
            return err(
                "map_ptr_unpriv",
                format!("'struct {tname}' access is allowed only to CAP_PERFMON and CAP_SYS_ADMIN"),
            );
        }
        let off = base.off as i64 + off;
        if off < 0 {
            return err(
                "map_ptr_access",
                format!("R{regno} is {tname} invalid negative access: off={off}"),
            );
        }
        if write {
            return err(
                "map_ptr_access",
                format!("only read from {tname} is supported"),
            );
        }
        match map_struct::check_read(spec.map_type, off, size as u32) {
            Ok(MapField::Scalar) => Ok(loaded_unknown(size, false)),
            Ok(MapField::Pointer { member }) => err(
                "map_ptr_btf_ptr",
                format!(
                    "R{regno} reads pointer member {member} of struct {tname}: the kernel gives a \
                     PTR_TO_BTF_ID, which bpfjet does not model (its map structs hold no kernel pointers)"
                ),
            ),
            Err(why) => err("map_ptr_access", why),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_atomic(
        &mut self,
        st: &mut State,
        pc: usize,
        width: Width,
        op: AtomicOp,
        fetch: bool,
        dst: u8,
        src: u8,
        off: i16,
    ) -> VResult<()> {
        let size = if width == Width::W64 { 8 } else { 4 };
        let base = self.read_reg(st, dst)?;
        let val = self.read_reg(st, src)?;
        // The kernel's `is_pointer_value`: a pointer operand leaks only
        // without CAP_PERFMON; a privileged loader may add or exchange a
        // pointer's bits into memory (what comes back is a scalar).
        if op == AtomicOp::CmpXchg {
            let r0 = self.read_reg(st, 0)?;
            if r0.is_pointer() && !self.env.privileged() {
                return err("ptr_leak", "R0 leaks addr into mem");
            }
        }
        if val.is_pointer() && !self.env.privileged() {
            return err("ptr_leak", format!("R{src} leaks addr into mem"));
        }
        self.check_atomic_alignment(&base, off, size)?;
        match base.ty {
            RegType::Stack { .. } | RegType::MapValue { .. } | RegType::Mem { .. } => {}
            other => {
                return err(
                    "atomic_bad_mem",
                    format!(
                        "BPF_ATOMIC stores into R{dst} {} is not allowed",
                        other.name()
                    ),
                )
            }
        }
        self.mem_access(st, pc, dst, &base, off, size, Access::Read, None)?;
        self.mem_access(
            st,
            pc,
            dst,
            &base,
            off,
            size,
            Access::Write,
            Some(StoreVal::Reg(src, RegState::unknown())),
        )?;
        let out = RegState::scalar(stack::truncate(&Scalar::UNKNOWN, size));
        if op == AtomicOp::CmpXchg {
            *st.reg_mut(0) = out;
        } else if fetch {
            *st.reg_mut(src) = out;
        }
        Ok(())
    }
}

impl Verifier<'_> {
    /// `load_acquire`: checked as the plain load it is (the kernel's
    /// `check_atomic_load` runs its load check first), then aligned and
    /// not from the context or a packet (`atomic_ptr_type_ok`).
    pub(crate) fn check_load_acquire(
        &mut self,
        st: &mut State,
        pc: usize,
        size: usize,
        dst: u8,
        src: u8,
        off: i16,
    ) -> VResult<()> {
        let base = self.read_reg(st, src)?;
        self.check_atomic_alignment(&base, off, size)?;
        self.check_load(st, pc, size, false, dst, src, off)?;
        ordered_base_ok(&base, src, "loads from")
    }

    /// `store_release`: the plain register store (`check_store_reg`), then
    /// as [`Self::check_load_acquire`] for the address.
    pub(crate) fn check_store_release(
        &mut self,
        st: &mut State,
        pc: usize,
        size: usize,
        dst: u8,
        off: i16,
        src: u8,
    ) -> VResult<()> {
        let base = self.read_reg(st, dst)?;
        self.check_atomic_alignment(&base, off, size)?;
        self.check_store(st, pc, size, dst, off, Operand::Reg(src))?;
        ordered_base_ok(&base, dst, "stores into")
    }

    /// Atomic accesses (read-modify-writes, load-acquire, store-release)
    /// are checked with strict alignment whatever the CPU allows (the
    /// kernel's `strict_alignment_once`): the address, with the pointer's
    /// known and variable offset, must be a multiple of the size. The stack
    /// is always checked so; packets and the context are refused for
    /// atomics after their own checks.
    fn check_atomic_alignment(&self, base: &RegState, off: i16, size: usize) -> VResult<()> {
        if matches!(
            base.ty,
            RegType::Stack { .. } | RegType::Ctx | RegType::Pkt | RegType::PktMeta
        ) || !base.is_pointer()
        {
            return Ok(());
        }
        let var = base.val.var_off;
        let at = var.add(crate::tnum::Tnum::constant(
            (base.off as i64 + off as i64) as u64,
        ));
        if !at.is_aligned(size as u64) {
            let var = if var.is_const() {
                format!("{}", var.value as i64)
            } else {
                format!("(0x{:x}; 0x{:x})", var.value, var.mask)
            };
            return err(
                "misaligned",
                format!(
                    "misaligned {}access off {var}+{}+{off} size {size}",
                    match base.ty {
                        RegType::MapValue { .. } => "value ",
                        _ => "",
                    },
                    base.off
                ),
            );
        }
        Ok(())
    }
}

/// The kernel's `atomic_ptr_type_ok` for load-acquire and store-release:
/// never the context or a packet.
fn ordered_base_ok(base: &RegState, regno: u8, verb: &str) -> VResult<()> {
    if matches!(base.ty, RegType::Ctx | RegType::Pkt | RegType::PktMeta) {
        return err(
            "atomic_bad_mem",
            format!(
                "BPF_ATOMIC {verb} R{regno} {} is not allowed",
                base.ty.name()
            ),
        );
    }
    Ok(())
}

/// What a store writes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StoreVal {
    Reg(u8, RegState),
    Imm(i64),
}
