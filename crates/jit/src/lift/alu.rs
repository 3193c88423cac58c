//! Arithmetic, logic, moves and byte swaps (RFC 9669 §4.1–4.2).
//!
//! 32-bit operations compute on truncated operands and zero-extend the
//! result. Shift amounts are masked to the width. Division and modulo follow
//! the RFC (x / 0 = 0, x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0)
//! without ever executing LLVM's undefined cases: the divisor is replaced by
//! 1 with a `select` before dividing, and the special results are selected
//! afterwards. With constant divisors all of it folds away.

use super::{Frame, LResult, Lifter};
use bpfjet_isa::{AluOp, ByteOrder, Operand, Reg, Width};
use inkwell::intrinsics::Intrinsic;
use inkwell::values::IntValue;
use inkwell::IntPredicate;

impl<'ctx> Lifter<'ctx, '_> {
    pub(super) fn alu(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        width: Width,
        op: AluOp,
        dst: Reg,
        src: Operand,
    ) -> LResult<()> {
        let _ = pc;
        let s64 = self.operand(fr, src)?;
        // Moves do not read the destination.
        let d64 = match op {
            AluOp::Mov | AluOp::MovSx(_) => self.t.i64.const_zero(),
            _ => self.reg(fr, dst)?,
        };
        let result = match width {
            Width::W64 => self.binop(op, d64, s64, 64)?,
            Width::W32 => {
                let d = self.b.build_int_truncate(d64, self.t.i32, "d32")?;
                let s = self.b.build_int_truncate(s64, self.t.i32, "s32")?;
                let r = self.binop(op, d, s, 32)?;
                self.b.build_int_z_extend(r, self.t.i64, "zext")?
            }
        };
        self.set_reg(fr, dst, result)
    }

    /// `d op s` at `bits` (32 or 64); both operands already have that width.
    fn binop(
        &self,
        op: AluOp,
        d: IntValue<'ctx>,
        s: IntValue<'ctx>,
        bits: u32,
    ) -> LResult<IntValue<'ctx>> {
        let b = &self.b;
        let ty = d.get_type();
        let zero = ty.const_zero();
        let one = ty.const_int(1, false);
        let minus_one = ty.const_all_ones();
        Ok(match op {
            AluOp::Add => b.build_int_add(d, s, "add")?,
            AluOp::Sub => b.build_int_sub(d, s, "sub")?,
            AluOp::Mul => b.build_int_mul(d, s, "mul")?,
            AluOp::Or => b.build_or(d, s, "or")?,
            AluOp::And => b.build_and(d, s, "and")?,
            AluOp::Xor => b.build_xor(d, s, "xor")?,
            AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => {
                let amount = b.build_and(s, ty.const_int(u64::from(bits - 1), false), "amt")?;
                match op {
                    AluOp::Lsh => b.build_left_shift(d, amount, "shl")?,
                    AluOp::Rsh => b.build_right_shift(d, amount, false, "lshr")?,
                    _ => b.build_right_shift(d, amount, true, "ashr")?,
                }
            }
            AluOp::Neg => b.build_int_neg(d, "neg")?,
            AluOp::Mov => s,
            AluOp::MovSx(from) => {
                let narrow = match from {
                    8 => self.t.i8,
                    16 => self.t.i16,
                    _ => self.t.i32,
                };
                if narrow.get_bit_width() >= bits {
                    s
                } else {
                    let n = b.build_int_truncate(s, narrow, "narrow")?;
                    b.build_int_s_extend(n, ty, "movsx")?
                }
            }
            AluOp::Div | AluOp::Mod => {
                let is_zero = b.build_int_compare(IntPredicate::EQ, s, zero, "divz")?;
                let safe = b.build_select(is_zero, one, s, "divisor")?.into_int_value();
                if op == AluOp::Div {
                    let q = b.build_int_unsigned_div(d, safe, "udiv")?;
                    b.build_select(is_zero, zero, q, "div")?.into_int_value()
                } else {
                    let r = b.build_int_unsigned_rem(d, safe, "urem")?;
                    b.build_select(is_zero, d, r, "mod")?.into_int_value()
                }
            }
            AluOp::SDiv | AluOp::SMod => {
                // Divisors 0 and -1 take the special path; -1 because
                // INT_MIN / -1 overflows (UB in LLVM).
                let is_zero = b.build_int_compare(IntPredicate::EQ, s, zero, "divz")?;
                let is_m1 = b.build_int_compare(IntPredicate::EQ, s, minus_one, "divm1")?;
                let special = b.build_or(is_zero, is_m1, "special")?;
                let safe = b.build_select(special, one, s, "divisor")?.into_int_value();
                if op == AluOp::SDiv {
                    let q = b.build_int_signed_div(d, safe, "sdiv")?;
                    // x / -1 = -x (wrapping), x / 0 = 0.
                    let neg = b.build_int_neg(d, "negd")?;
                    let m1 = b.build_select(is_m1, neg, q, "sdivm1")?.into_int_value();
                    b.build_select(is_zero, zero, m1, "sdivz")?.into_int_value()
                } else {
                    let r = b.build_int_signed_rem(d, safe, "srem")?;
                    // x % -1 = 0, x % 0 = x.
                    let m1 = b.build_select(is_m1, zero, r, "smodm1")?.into_int_value();
                    b.build_select(is_zero, d, m1, "smodz")?.into_int_value()
                }
            }
        })
    }

    pub(super) fn endian(
        &mut self,
        fr: &mut Frame<'ctx>,
        order: ByteOrder,
        bits: u8,
        dst: Reg,
    ) -> LResult<()> {
        let v = self.reg(fr, dst)?;
        let ty = match bits {
            16 => self.t.i16,
            32 => self.t.i32,
            _ => self.t.i64,
        };
        let narrow = if bits == 64 {
            v
        } else {
            self.b.build_int_truncate(v, ty, "narrow")?
        };
        // The host is little-endian (checked before lifting): `le` only
        // truncates, `be` and `bswap` swap.
        let swapped = match order {
            ByteOrder::ToLe => narrow,
            ByteOrder::ToBe | ByteOrder::Swap => self.bswap(narrow)?,
        };
        let result = if bits == 64 {
            swapped
        } else {
            self.b.build_int_z_extend(swapped, self.t.i64, "zext")?
        };
        self.set_reg(fr, dst, result)
    }

    fn bswap(&self, v: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let decl = Intrinsic::find("llvm.bswap")
            .and_then(|i| i.get_declaration(self.module, &[v.get_type().into()]))
            .ok_or_else(|| super::LiftError::Build("llvm.bswap is unavailable".into()))?;
        let call = self.b.build_call(decl, &[v.into()], "bswap")?;
        Ok(super::calls::basic_result(call)?.into_int_value())
    }
}
