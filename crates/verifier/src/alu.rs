//! ALU instructions at the register level: scalar arithmetic (delegated to
//! [`crate::range_ops`]), pointer arithmetic and its restrictions, moves with
//! scalar id linking, endianness.

use crate::driver::{Verifier, MAX_VAR_OFF};
use crate::error::{err, VResult};
use crate::frame::State;
use crate::range::Scalar;
use crate::range_ops;
use crate::reg_state::{RegState, RegType};
use crate::stack::STACK_SIZE;
use bpfjet_isa::{AluOp, ByteOrder, Operand, Width};

fn op_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div | AluOp::SDiv => "/=",
        AluOp::Mod | AluOp::SMod => "%=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Arsh => "s>>=",
        AluOp::Neg => "neg",
        AluOp::Xor => "^=",
        AluOp::Mov => "=",
        AluOp::MovSx(_) => "s=",
    }
}

impl Verifier<'_> {
    pub(crate) fn read_reg(&self, st: &State, r: u8) -> VResult<RegState> {
        let reg = *st.reg(r);
        if !reg.is_init() {
            return err(
                "uninit_reg",
                format!("R{r} !read_ok: register read before it was written"),
            );
        }
        Ok(reg)
    }

    /// A pointer must not become a scalar the program can see (unprivileged).
    fn leak_check(&self, r: u8, reg: &RegState, what: &str) -> VResult<()> {
        if reg.is_pointer() && !self.env.privileged() {
            return err(
                "ptr_leak",
                format!("R{r} {what} (pointer leak, prohibited without CAP_PERFMON)"),
            );
        }
        Ok(())
    }

    pub(crate) fn check_alu(
        &mut self,
        st: &mut State,
        width: Width,
        op: AluOp,
        dst: u8,
        src: Operand,
    ) -> VResult<()> {
        let bits = if width == Width::W64 { 64 } else { 32 };
        if dst == 10 {
            return err("fp_write", "frame pointer R10 is read only");
        }
        let src_reg = match src {
            Operand::Reg(r) => Some((r, self.read_reg(st, r)?)),
            Operand::Imm(_) => None,
        };
        if let Operand::Imm(imm) = src {
            if matches!(op, AluOp::Lsh | AluOp::Rsh | AluOp::Arsh) && (imm < 0 || imm >= bits) {
                return err("bad_shift", format!("invalid shift {imm}"));
            }
            if matches!(op, AluOp::Div | AluOp::SDiv | AluOp::Mod | AluOp::SMod) && imm == 0 {
                return err("div_by_zero_imm", "div by zero (immediate divisor 0)");
            }
        }
        let src_val = |imm: i32| -> RegState {
            if width == Width::W64 {
                RegState::constant(imm as i64 as u64)
            } else {
                RegState::constant(imm as u32 as u64)
            }
        };
        match op {
            AluOp::Mov => {
                let new = match src_reg {
                    None => {
                        let Operand::Imm(imm) = src else {
                            unreachable!()
                        };
                        src_val(imm)
                    }
                    Some((r, s)) => {
                        if width == Width::W64 {
                            if s.is_scalar() && r != dst {
                                // Copies share an id: a bound learned on one applies to both.
                                let id = if s.id != 0 { s.id } else { self.fresh_id() };
                                st.reg_mut(r).id = id;
                                let mut c = s;
                                c.id = id;
                                c
                            } else {
                                s
                            }
                        } else if s.is_scalar() {
                            RegState::scalar(range_ops::alu(
                                AluOp::Mov,
                                Width::W32,
                                &Scalar::constant(0),
                                &s.val,
                            ))
                        } else {
                            self.leak_check(r, &s, "partial copy of pointer")?;
                            RegState::scalar(Scalar::unsigned_upto(u32::MAX as u64))
                        }
                    }
                };
                *st.reg_mut(dst) = new;
                Ok(())
            }
            AluOp::MovSx(_) => {
                let s = match src_reg {
                    Some((r, s)) => {
                        if !s.is_scalar() {
                            self.leak_check(r, &s, "sign-extension of a pointer")?;
                            *st.reg_mut(dst) = RegState::unknown();
                            return Ok(());
                        }
                        s.val
                    }
                    None => return err("bad_insn", "movsx needs a register source"),
                };
                *st.reg_mut(dst) =
                    RegState::scalar(range_ops::alu(op, width, &Scalar::constant(0), &s));
                Ok(())
            }
            _ => {
                let d = self.read_reg(st, dst)?;
                let s = match src_reg {
                    Some((_, s)) => s,
                    None => {
                        let Operand::Imm(imm) = src else {
                            unreachable!()
                        };
                        src_val(imm)
                    }
                };
                let src_no = match src {
                    Operand::Reg(r) => Some(r),
                    Operand::Imm(_) => None,
                };
                let result = self.alu_values(st, width, op, dst, &d, src_no, &s)?;
                *st.reg_mut(dst) = result;
                Ok(())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn alu_values(
        &mut self,
        st: &State,
        width: Width,
        op: AluOp,
        dst: u8,
        d: &RegState,
        src_no: Option<u8>,
        s: &RegState,
    ) -> VResult<RegState> {
        if op == AluOp::Neg {
            if d.is_scalar() {
                return Ok(RegState::scalar(range_ops::alu(
                    op,
                    width,
                    &d.val,
                    &Scalar::constant(0),
                )));
            }
            self.leak_check(dst, d, "pointer arithmetic prohibited (neg)")?;
            return Ok(RegState::unknown());
        }
        let any_ptr = d.is_pointer() || s.is_pointer();
        if any_ptr && width == Width::W32 && op == AluOp::Sub && self.env.privileged() {
            // 32-bit differences of pointers are (meaningless) scalars; the
            // kernel marks the whole register unknown, upper half included
            // (no zero extension), and so must bpfjet to give its verdicts.
            return Ok(RegState::unknown());
        }
        match (d.is_scalar(), s.is_scalar()) {
            (true, true) => Ok(RegState::scalar(range_ops::alu(op, width, &d.val, &s.val))),
            (false, false) => {
                if op == AluOp::Sub && width == Width::W64 && self.env.privileged() {
                    return Ok(RegState::unknown());
                }
                err(
                    "ptr_arith",
                    format!(
                        "R{dst} pointer {} pointer prohibited ({} {} {})",
                        op_name(op),
                        d.ty.name(),
                        op_name(op),
                        s.ty.name()
                    ),
                )
            }
            (false, true) => {
                self.unpriv_alu_sanitize(dst, d, src_no.is_some())?;
                // The pointer's new offset depends on the scalar's value.
                if let Some(r) = src_no {
                    self.need_reg(st, r);
                }
                self.ptr_arith(st, width, op, dst, d, s, false)
            }
            (true, false) => {
                if op == AluOp::Sub {
                    return err(
                        "ptr_arith",
                        format!("R{dst} tried to subtract pointer from scalar"),
                    );
                }
                self.unpriv_alu_sanitize(dst, s, true)?;
                self.need_reg(st, dst);
                self.ptr_arith(st, width, op, dst, s, d, true)
            }
        }
    }

    /// `ptr OP scalar` (or `scalar + ptr` when `swapped`).
    #[allow(clippy::too_many_arguments)]
    fn ptr_arith(
        &mut self,
        st: &State,
        width: Width,
        op: AluOp,
        dst: u8,
        ptr: &RegState,
        off: &RegState,
        swapped: bool,
    ) -> VResult<RegState> {
        let _ = swapped;
        if width == Width::W32 {
            return err(
                "ptr_arith",
                format!("R{dst} 32-bit pointer arithmetic prohibited"),
            );
        }
        match op {
            AluOp::Add | AluOp::Sub => {}
            AluOp::And | AluOp::Or | AluOp::Xor => {
                return err(
                    "ptr_arith",
                    format!(
                        "R{dst} bitwise operator {} on pointer prohibited",
                        op_name(op)
                    ),
                )
            }
            _ => {
                return err(
                    "ptr_arith",
                    format!(
                        "R{dst} pointer arithmetic with {} operator prohibited",
                        op_name(op)
                    ),
                )
            }
        }
        if ptr.maybe_null {
            return err(
                "ptr_arith_null",
                format!(
                    "R{dst} pointer arithmetic on {}_or_null prohibited, null-check it first",
                    ptr.ty.name()
                ),
            );
        }
        let known = off.val.as_const();
        match ptr.ty {
            RegType::PktEnd | RegType::Func { .. } => {
                return err(
                    "ptr_arith",
                    format!("R{dst} pointer arithmetic on {} prohibited", ptr.ty.name()),
                )
            }
            RegType::MapPtr { .. } if !(known == Some(0) && op == AluOp::Add) => {
                return err(
                    "ptr_arith",
                    format!("R{dst} pointer arithmetic on map_ptr prohibited"),
                )
            }
            _ => {}
        }
        // The kernel's `check_reg_sane_offset` on the scalar and on the
        // pointer: only the scalar's minimum is bounded here. A pointer whose
        // variable offset may grow past `BPF_MAX_VAR_OFF` is legal until it
        // is dereferenced or passed to a helper, where every memory check
        // refuses it (`umax >= 2^29` or a proven range that cannot cover it).
        sane_offset(ptr.ty, off)?;
        sane_offset(ptr.ty, ptr)?;
        let mut r = *ptr;
        match known {
            Some(c) => {
                let c = c as i64;
                // |c| and |ptr.off| are below 2^29: no overflow in i64.
                let new = if op == AluOp::Add {
                    ptr.off as i64 + c
                } else {
                    ptr.off as i64 - c
                };
                r.off = new as i32;
            }
            None => {
                if !self.env.privileged() && matches!(ptr.ty, RegType::Stack { .. }) {
                    return err(
                        "var_stack_unpriv",
                        format!("R{dst} variable stack access prohibited for !root"),
                    );
                }
                // `range_ops::alu` gives an unbounded result (smin = i64::MIN)
                // when the sum may wrap, which `sane_offset` below refuses.
                r.val = range_ops::alu(op, Width::W64, &ptr.val, &off.val);
                if ptr.ty.is_pkt() {
                    r.id = self.fresh_id();
                    r.range = 0;
                }
            }
        }
        sane_offset(ptr.ty, &r)?;
        if !self.env.privileged() {
            self.unpriv_ptr_bounds(st, dst, &r)?;
        }
        Ok(r)
    }

    /// Without CAP_PERFMON the kernel masks pointer arithmetic with a register
    /// operand against speculation, which it can only do for stack and map
    /// value pointers.
    fn unpriv_alu_sanitize(&self, dst: u8, ptr: &RegState, reg_operand: bool) -> VResult<()> {
        if self.env.privileged() || !reg_operand || ptr.maybe_null {
            return Ok(());
        }
        if matches!(ptr.ty, RegType::Stack { .. } | RegType::MapValue { .. }) {
            return Ok(());
        }
        err(
            "ptr_arith_unpriv",
            format!("R{dst} has pointer with unsupported alu operation, pointer arithmetic with it prohibited for !root"),
        )
    }

    /// Without CAP_PERFMON the kernel refuses pointer arithmetic that leaves
    /// the object (speculative out-of-bounds access).
    fn unpriv_ptr_bounds(&self, _st: &State, dst: u8, r: &RegState) -> VResult<()> {
        let (lo, hi) = r.offset_range();
        match r.ty {
            RegType::MapValue { map } => {
                let size = self.map(map).map_or(0, |m| m.value_size as i64);
                if lo < 0 || hi >= size {
                    return err(
                        "ptr_arith_unpriv",
                        format!("R{dst} pointer arithmetic of map value goes out of range, prohibited for !root"),
                    );
                }
            }
            RegType::Stack { .. } if lo < -STACK_SIZE || hi >= 0 => {
                return err(
                    "ptr_arith_unpriv",
                    format!("R{dst} stack pointer arithmetic goes out of range, prohibited for !root; off={lo}"),
                );
            }
            _ => {}
        }
        Ok(())
    }

    pub(crate) fn check_endian(
        &mut self,
        st: &mut State,
        order: ByteOrder,
        bits: u8,
        dst: u8,
    ) -> VResult<()> {
        let d = self.read_reg(st, dst)?;
        if !d.is_scalar() {
            self.leak_check(dst, &d, "pointer arithmetic prohibited (byte swap)")?;
            *st.reg_mut(dst) = RegState::unknown();
            return Ok(());
        }
        *st.reg_mut(dst) = RegState::scalar(range_ops::endian(order, bits, &d.val));
        Ok(())
    }
}

/// The kernel's `check_reg_sane_offset` for one operand (or the result) of
/// pointer arithmetic: a constant, the fixed offset and the minimum of the
/// variable part must stay within ±`BPF_MAX_VAR_OFF`.
fn sane_offset(ty: RegType, reg: &RegState) -> VResult<()> {
    let name = ty.name();
    if reg.is_scalar() {
        if let Some(c) = reg.val.as_const() {
            let c = c as i64;
            if c >= MAX_VAR_OFF || c <= -MAX_VAR_OFF {
                return err(
                    "ptr_arith_bounds",
                    format!("math between {name} pointer and {c} is not allowed"),
                );
            }
        }
    }
    let off = reg.off as i64;
    if off >= MAX_VAR_OFF || off <= -MAX_VAR_OFF {
        return err(
            "ptr_arith_bounds",
            format!("{name} pointer offset {off} is not allowed"),
        );
    }
    let smin = reg.val.smin;
    if smin == i64::MIN {
        return err(
            "ptr_arith_unbounded",
            format!(
                "math between {name} pointer and register with unbounded min value is not allowed \
                 (bound the offset first, e.g. `if (idx < N)` or `idx &= MASK`)"
            ),
        );
    }
    if smin >= MAX_VAR_OFF || smin <= -MAX_VAR_OFF {
        return err(
            "ptr_arith_bounds",
            format!("value {smin} makes {name} pointer be out of bounds"),
        );
    }
    Ok(())
}
