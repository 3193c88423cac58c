//! `may_goto` (`BPF_JMP | BPF_JCOND`, kernel 6.9+), what the kernel's
//! `can_loop` and `cond_break` macros expand to: a jump the program takes
//! only once its loop budget is spent. At run time the budget is a hidden
//! per-frame counter (the engines keep it outside the program's stack, see
//! `docs/VERIFIER.md`); the verifier does not know when it runs out, so
//! both ways are possible every time.
//!
//! As the kernel does (`check_cond_jmp_op`, `BPF_JCOND`): the path takes
//! the jump, and the fall-through path — one more iteration of the loop
//! the instruction bounds — is queued with `may_goto_depth + 1`, its
//! imprecise scalars that changed since the state recorded at the same
//! instruction one iteration earlier widened
//! (`Verifier::widen_queued`). The instruction is a prune point where a
//! state is always recorded, and a state there still being explored covers
//! one of a different depth when every scalar is within its range (the
//! kernel's `is_may_goto_insn_at` case of `is_state_visited`): the loop
//! has converged, whatever bound the program's own counters would give.

use crate::driver::{Succ, Verifier};
use crate::frame::State;

impl Verifier<'_> {
    /// The `may_goto` at `pc`, jumping to `target`: the path goes on at
    /// the target; the fall-through is explored as another path.
    pub(crate) fn check_may_goto(&mut self, st: &mut State, pc: usize, target: usize) -> Succ {
        let mut queued = st.clone();
        queued.may_goto_depth = queued.may_goto_depth.saturating_add(1);
        self.iter_queued = true;
        Succ::Fork(target, pc + 1, queued)
    }
}
