//! Loads, stores and atomics (RFC 9669 §5).
//!
//! Frame-relative accesses (proven by the stack-pointer analysis) address the
//! frame's stack allocation through a GEP; accesses through an inlined array
//! lookup's result (or that result plus a register) a GEP on the map's value
//! symbol; everything else is an `inttoptr` of the computed address. Plain accesses use alignment 1 (eBPF
//! permits unaligned access); LLVM raises it where it can prove more, e.g.
//! on the 16-byte-aligned stack. Atomics are sequentially consistent like
//! the interpreter's and use natural alignment, which the verifier requires.

use super::{Frame, LResult, LiftError, Lifter, STACK_SIZE};
use crate::analysis::Prov;
use bpfjet_isa::{AluOp, AtomicOp, Insn, Operand, Reg, Size, Width};
use inkwell::types::IntType;
use inkwell::values::{BasicValue, GlobalValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp};

impl<'ctx> Lifter<'ctx, '_> {
    pub(super) fn sized(&self, size: Size) -> IntType<'ctx> {
        match size {
            Size::B => self.t.i8,
            Size::H => self.t.i16,
            Size::W => self.t.i32,
            Size::DW => self.t.i64,
        }
    }

    /// The address `base + off` of a `bytes`-wide access at slot `pc`.
    pub(super) fn address(
        &self,
        fr: &Frame<'ctx>,
        pc: usize,
        base: Reg,
        off: i16,
        bytes: u64,
    ) -> LResult<PointerValue<'ctx>> {
        if let Prov::Stack(o) = self.prov(fr, pc, base) {
            let start = o + i64::from(off);
            // Only accesses that stay inside the frame become GEPs; anything
            // else (which the verifier rejects) keeps raw-address semantics.
            if start >= -(STACK_SIZE as i64) && start + bytes as i64 <= 0 {
                let index = (STACK_SIZE as i64 + start) as u64;
                // SAFETY (for LLVM): the offset is inside the allocation.
                return Ok(unsafe {
                    self.b.build_in_bounds_gep(
                        self.t.i8,
                        fr.stack,
                        &[self.t.i64.const_int(index, false)],
                        "sp",
                    )?
                });
            }
        }
        if let Some(global) = self.value_base(fr, pc, base) {
            return self.value_address(fr, base, off, global);
        }
        // The offset is a GEP on the base pointer (not an integer add before
        // `inttoptr`): code generation then folds it into the addressing
        // mode at every access instead of hoisting one address per access
        // out of loops (thousands of spilled addresses in unrolled copies).
        let base = self.reg(fr, base)?;
        let base = self.b.build_int_to_ptr(base, self.t.ptr, "base")?;
        if off == 0 {
            return Ok(base);
        }
        // SAFETY (for LLVM): a plain (not inbounds) GEP is address
        // arithmetic with wrapping semantics, like the integer add it replaces.
        Ok(unsafe {
            self.b.build_gep(
                self.t.i8,
                base,
                &[self.t.i64.const_int(off as i64 as u64, true)],
                "p",
            )?
        })
    }

    /// The map value storage `base` points into at `pc`, when it is the
    /// result of an array lookup compiled in, or that result plus a
    /// register (`r3 = r0; r3 += r2`: a ring slot, a bucket's element).
    fn value_base(&self, fr: &Frame<'ctx>, pc: usize, base: Reg) -> Option<GlobalValue<'ctx>> {
        let Prov::Rel { root, .. } = self.prov(fr, pc, base) else {
            return None;
        };
        let root = root as usize;
        if let Some(g) = self.array_values.get(&root) {
            return Some(*g);
        }
        if !(fr.f.entry..fr.f.end).contains(&root) {
            return None;
        }
        let Some(Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst,
            src: Operand::Reg(src),
        }) = self.insns.get(root).copied()
        else {
            return None;
        };
        // The verifier allows no pointer + pointer: at most one of the two
        // is the lookup's result.
        [dst, src]
            .into_iter()
            .find_map(|r| match self.prov(fr, root, r) {
                Prov::Rel { root: def, .. } => self.array_values.get(&(def as usize)).copied(),
                _ => None,
            })
    }

    /// `base + off` as a GEP on the value storage's symbol (the offset
    /// being the distance from the symbol): the same address as the plain
    /// GEP, but LLVM's alias analysis sees which map it is in, so stores to
    /// one map's values no longer force reloads from another's. Every
    /// access the verifier lets through stays inside that storage.
    fn value_address(
        &self,
        fr: &Frame<'ctx>,
        base: Reg,
        off: i16,
        global: GlobalValue<'ctx>,
    ) -> LResult<PointerValue<'ctx>> {
        let t = self.t;
        let start = global.as_pointer_value();
        let addr = self.reg(fr, base)?;
        let from = self.b.build_ptr_to_int(start, t.i64, "vbase")?;
        let rel = self.b.build_int_sub(addr, from, "voff")?;
        let rel = self
            .b
            .build_int_add(rel, t.i64.const_int(off as i64 as u64, true), "voff")?;
        // SAFETY (for LLVM): a plain (wrapping) GEP, the same address
        // arithmetic as `address`'s; its provenance is the storage the
        // verifier proved the access to be in.
        Ok(unsafe { self.b.build_gep(t.i8, start, &[rel], "vp")? })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn load(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> LResult<()> {
        let ty = self.sized(size);
        if let Some(c) = self.ctx_constant(fr, pc, src, off, size) {
            // An attach-site constant (pairwise fusion's folding): the
            // field holds this value at every run of the program.
            let v = self.widened(ty.const_int(c, false), size, sign_extend)?;
            return self.set_reg(fr, dst, v);
        }
        let p = self.address(fr, pc, src, off, size.bytes() as u64)?;
        let v = self.b.build_load(ty, p, "ld")?;
        set_align(v.as_instruction_value(), 1)?;
        let v = self.widened(v.into_int_value(), size, sign_extend)?;
        self.set_reg(fr, dst, v)
    }

    /// A loaded `size` value as a 64-bit register.
    fn widened(&self, v: IntValue<'ctx>, size: Size, sign_extend: bool) -> LResult<IntValue<'ctx>> {
        Ok(if size == Size::DW {
            v
        } else if sign_extend {
            self.b.build_int_s_extend(v, self.t.i64, "sext")?
        } else {
            self.b.build_int_z_extend(v, self.t.i64, "zext")?
        })
    }

    /// A register's low `size` bytes, as a store writes them.
    fn narrowed(&self, v: IntValue<'ctx>, size: Size) -> LResult<IntValue<'ctx>> {
        Ok(if size == Size::DW {
            v
        } else {
            self.b.build_int_truncate(v, self.sized(size), "st")?
        })
    }

    /// The value of a context field the bindings fold
    /// ([`crate::Bindings::ctx_constants`]) when the load at `pc` reads
    /// exactly it: the base is the program's context (r1 at the main
    /// function's entry, plus a known offset).
    fn ctx_constant(
        &self,
        fr: &Frame<'ctx>,
        pc: usize,
        src: Reg,
        off: i16,
        size: Size,
    ) -> Option<u64> {
        if self.bind.ctx_constants.is_empty() || fr.f.entry != 0 {
            return None;
        }
        let Prov::Rel { root, off: base } = self.prov(fr, pc, src) else {
            return None;
        };
        if root != crate::analysis::arg_root(1) {
            return None;
        }
        let at = u64::try_from(base + i64::from(off)).ok()?;
        self.bind
            .ctx_constants
            .iter()
            .find(|c| c.offset == at && u64::from(c.size) == size.bytes() as u64)
            .map(|c| c.value)
    }

    pub(super) fn store(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        size: Size,
        dst: Reg,
        off: i16,
        src: Operand,
    ) -> LResult<()> {
        let v = self.operand(fr, src)?;
        let v = self.narrowed(v, size)?;
        let p = self.address(fr, pc, dst, off, size.bytes() as u64)?;
        let st = self.b.build_store(p, v)?;
        set_align(Some(st), 1)
    }

    /// `load_acquire`: an LLVM `load atomic ... acquire`, naturally aligned
    /// (the verifier proved the address is), zero-extended; on x86 a plain
    /// `mov` the optimiser may not move later accesses above.
    pub(super) fn load_acquire(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        size: Size,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> LResult<()> {
        let ty = self.sized(size);
        let bytes = size.bytes() as u32;
        let p = self.address(fr, pc, src, off, u64::from(bytes))?;
        let v = self.b.build_load(ty, p, "ldacq")?;
        if let Some(i) = v.as_instruction_value() {
            set_align(Some(i), bytes)?;
            i.set_atomic_ordering(AtomicOrdering::Acquire)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        let v = self.widened(v.into_int_value(), size, false)?;
        self.set_reg(fr, dst, v)
    }

    /// `store_release`: an LLVM `store atomic ... release`, naturally
    /// aligned.
    pub(super) fn store_release(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        size: Size,
        dst: Reg,
        off: i16,
        src: Reg,
    ) -> LResult<()> {
        let bytes = size.bytes() as u32;
        let v = self.reg(fr, src)?;
        let v = self.narrowed(v, size)?;
        let p = self.address(fr, pc, dst, off, u64::from(bytes))?;
        let st = self.b.build_store(p, v)?;
        set_align(Some(st), bytes)?;
        st.set_atomic_ordering(AtomicOrdering::Release)
            .map_err(|e| LiftError::Build(e.to_string()))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn atomic(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        width: Width,
        op: AtomicOp,
        fetch: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> LResult<()> {
        let (ty, bytes) = match width {
            Width::W32 => (self.t.i32, 4),
            Width::W64 => (self.t.i64, 8),
        };
        let p = self.address(fr, pc, dst, off, bytes)?;
        let narrow = |v: IntValue<'ctx>| -> LResult<IntValue<'ctx>> {
            Ok(if width == Width::W32 {
                self.b.build_int_truncate(v, ty, "a32")?
            } else {
                v
            })
        };
        let widen = |v: IntValue<'ctx>| -> LResult<IntValue<'ctx>> {
            Ok(if width == Width::W32 {
                self.b.build_int_z_extend(v, self.t.i64, "old")?
            } else {
                v
            })
        };
        let operand = narrow(self.reg(fr, src)?)?;
        let seq = AtomicOrdering::SequentiallyConsistent;
        if op == AtomicOp::CmpXchg {
            let expected = narrow(self.reg(fr, 0)?)?;
            let pair = self.b.build_cmpxchg(p, expected, operand, seq, seq)?;
            let old = self.b.build_extract_value(pair, 0, "old")?.into_int_value();
            return self.set_reg(fr, 0, widen(old)?);
        }
        let rmw = match op {
            AtomicOp::Add => AtomicRMWBinOp::Add,
            AtomicOp::Or => AtomicRMWBinOp::Or,
            AtomicOp::And => AtomicRMWBinOp::And,
            AtomicOp::Xor => AtomicRMWBinOp::Xor,
            _ => AtomicRMWBinOp::Xchg,
        };
        let old = self.b.build_atomicrmw(rmw, p, operand, seq)?;
        if fetch || op == AtomicOp::Xchg {
            self.set_reg(fr, src, widen(old)?)?;
        }
        Ok(())
    }
}

fn set_align(i: Option<inkwell::values::InstructionValue<'_>>, align: u32) -> LResult<()> {
    if let Some(i) = i {
        i.set_alignment(align)
            .map_err(|e| LiftError::Build(e.to_string()))?;
    }
    Ok(())
}
