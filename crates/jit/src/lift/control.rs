//! Jumps and exits (RFC 9669 §4.3).

use super::{Frame, LResult, Lifter};
use bpfjet_isa::{Insn, JmpOp, Operand, Reg, Width};
use inkwell::IntPredicate;

impl<'ctx> Lifter<'ctx, '_> {
    pub(super) fn ja(&mut self, fr: &mut Frame<'ctx>, pc: usize, insn: Insn) -> LResult<()> {
        let target = self.target_block(fr, pc, insn.jump_target(pc))?;
        self.b.build_unconditional_branch(target)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn jmp(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        insn: Insn,
        width: Width,
        op: JmpOp,
        dst: Reg,
        src: Operand,
    ) -> LResult<()> {
        let taken = self.target_block(fr, pc, insn.jump_target(pc))?;
        let fallthrough = self.target_block(fr, pc, Some(pc as i64 + 1))?;
        let mut a = self.reg(fr, dst)?;
        let mut b = self.operand(fr, src)?;
        if width == Width::W32 {
            a = self.b.build_int_truncate(a, self.t.i32, "a32")?;
            b = self.b.build_int_truncate(b, self.t.i32, "b32")?;
        }
        let cond = match op {
            JmpOp::Jset => {
                let both = self.b.build_and(a, b, "set")?;
                self.b.build_int_compare(
                    IntPredicate::NE,
                    both,
                    both.get_type().const_zero(),
                    "jset",
                )?
            }
            _ => {
                let pred = match op {
                    JmpOp::Jeq => IntPredicate::EQ,
                    JmpOp::Jne => IntPredicate::NE,
                    JmpOp::Jgt => IntPredicate::UGT,
                    JmpOp::Jge => IntPredicate::UGE,
                    JmpOp::Jlt => IntPredicate::ULT,
                    JmpOp::Jle => IntPredicate::ULE,
                    JmpOp::Jsgt => IntPredicate::SGT,
                    JmpOp::Jsge => IntPredicate::SGE,
                    JmpOp::Jslt => IntPredicate::SLT,
                    _ => IntPredicate::SLE,
                };
                self.b.build_int_compare(pred, a, b, "cond")?
            }
        };
        self.b.build_conditional_branch(cond, taken, fallthrough)?;
        Ok(())
    }

    pub(super) fn exit(&mut self, fr: &mut Frame<'ctx>) -> LResult<()> {
        let r0 = self.reg(fr, 0)?;
        self.b.build_return(Some(&r0))?;
        Ok(())
    }
}
