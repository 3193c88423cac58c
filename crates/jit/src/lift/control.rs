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

    /// `may_goto`: jump once the frame's budget is spent, otherwise spend
    /// one and fall through (the kernel's count-based rewrite).
    pub(super) fn may_goto(&mut self, fr: &mut Frame<'ctx>, pc: usize, insn: Insn) -> LResult<()> {
        let taken = self.target_block(fr, pc, insn.jump_target(pc))?;
        let fallthrough = self.target_block(fr, pc, Some(pc as i64 + 1))?;
        let i64t = self.t.i64;
        let budget = fr
            .may_goto
            .ok_or_else(|| super::LiftError::Build("may_goto without a budget".into()))?;
        let left = self
            .b
            .build_load(i64t, budget, "may_goto_left")?
            .into_int_value();
        let spent = self.b.build_int_compare(
            IntPredicate::EQ,
            left,
            i64t.const_zero(),
            "may_goto_spent",
        )?;
        let dec = self
            .b
            .build_int_sub(left, i64t.const_int(1, false), "may_goto_dec")?;
        // Stays 0 once spent: the store is harmless on the taken side.
        let kept = self
            .b
            .build_select(spent, left, dec, "may_goto_next")?
            .into_int_value();
        self.b.build_store(budget, kept)?;
        self.b.build_conditional_branch(spent, taken, fallthrough)?;
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
