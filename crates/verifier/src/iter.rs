//! Open-coded number iterators: the kernel's `bpf_iter_num_new`,
//! `bpf_iter_num_next` and `bpf_iter_num_destroy` (6.4+), which libbpf's
//! `bpf_for(i, start, end)` and `bpf_repeat(n)` expand to.
//!
//! The iterator is an 8-byte `struct bpf_iter_num` on the stack. `new`
//! makes the slot an iterator (a reference the program must release with
//! `destroy`); only these kfuncs may touch its bytes afterwards. A loop
//! around `next` has no bound the verifier could count, so `next` is
//! verified as the kernel verifies it: the path forks into "drained" (the
//! call returned NULL; the iterator stays drained) and "active" (a
//! non-NULL pointer to the current number, read-only, 4 bytes), and the
//! call is a prune point where an active state still being explored (the
//! same loop one iteration earlier) covers the next iteration's when every
//! scalar is within its range — the loop has converged. The active state
//! widens the imprecise scalars that changed since that earlier iteration
//! (`Verifier::widen_queued`), so counters converge too.

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::{RefInfo, State};
use crate::helper_check::finish_call;
use crate::reg_state::{MemKind, RegState, RegType};

/// One of the number iterator's kfuncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterKfunc {
    New,
    Next,
    Destroy,
}

impl IterKfunc {
    pub fn from_name(name: &str) -> Option<IterKfunc> {
        Some(match name {
            "bpf_iter_num_new" => IterKfunc::New,
            "bpf_iter_num_next" => IterKfunc::Next,
            "bpf_iter_num_destroy" => IterKfunc::Destroy,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            IterKfunc::New => "bpf_iter_num_new",
            IterKfunc::Next => "bpf_iter_num_next",
            IterKfunc::Destroy => "bpf_iter_num_destroy",
        }
    }
}

impl Verifier<'_> {
    /// A call of an iterator kfunc. `Next` on an active iterator forks:
    /// the path goes on drained (r0 = NULL) and the other path, queued,
    /// active with r0 the current number's address.
    pub(crate) fn check_iter_kfunc(
        &mut self,
        st: &mut State,
        pc: usize,
        k: IterKfunc,
    ) -> VResult<Succ> {
        let (frame, off) = iter_slot(st, k)?;
        let slot = st.frames[frame].stack.iter_at(off);
        match k {
            IterKfunc::New => {
                if slot.is_some() {
                    return err(
                        "iter_state",
                        format!(
                            "expected uninitialized iter_num as arg #0 of {}: fp{off} already \
                             holds an iterator (destroy it first)",
                            k.name()
                        ),
                    );
                }
                crate::kfunc::scalar_kfunc_args(st, &[2, 3], k.name())?;
                let id = self.fresh_id();
                let mut it = RegState::pointer(RegType::IterNum { active: true }, 0);
                it.ref_id = id;
                st.refs.push(RefInfo { id, pc });
                st.frames[frame].stack.set_iter(off, it);
                self.note_stack(st, frame, -off);
                finish_call(st, RegState::unknown());
                Ok(Succ::Goto(pc + 1))
            }
            IterKfunc::Next => {
                let Some(it) = slot else {
                    return err("iter_state", uninit_iter(k, off));
                };
                let active = matches!(it.ty, RegType::IterNum { active: true });
                // Drained (whether it was active or not): NULL, and the
                // iterator stays drained.
                let mut drained = it;
                drained.ty = RegType::IterNum { active: false };
                if !active {
                    finish_call(st, RegState::constant(0));
                    return Ok(Succ::Goto(pc + 1));
                }
                let mut queued = st.clone();
                let mut more = it;
                more.range = it.range.saturating_add(1);
                queued.frames[frame].stack.set_iter(off, more);
                let mut value = RegState::pointer(
                    RegType::Mem {
                        size: 4,
                        kind: MemKind::IterValue,
                    },
                    0,
                );
                value.id = self.fresh_id();
                finish_call(&mut queued, value);
                st.frames[frame].stack.set_iter(off, drained);
                finish_call(st, RegState::constant(0));
                self.iter_queued = true;
                Ok(Succ::Fork(pc + 1, pc + 1, queued))
            }
            IterKfunc::Destroy => {
                let Some(it) = slot else {
                    return err("iter_state", uninit_iter(k, off));
                };
                st.refs.retain(|r| r.id != it.ref_id);
                st.frames[frame].stack.clear_iter(off);
                finish_call(st, RegState::NOT_INIT);
                Ok(Succ::Goto(pc + 1))
            }
        }
    }
}

/// The stack slot R1 points at: (frame, offset from that frame's r10),
/// a constant multiple of 8 inside the frame.
pub(crate) fn iter_slot(st: &State, k: IterKfunc) -> VResult<(usize, i64)> {
    let r1 = *st.reg(1);
    let RegType::Stack { frame } = r1.ty else {
        return err("bad_kfunc_arg", not_stack(&r1, k));
    };
    if r1.maybe_null {
        return err("bad_kfunc_arg", not_stack(&r1, k));
    }
    let frame = (frame as usize).min(st.frames.len() - 1);
    let Some(var) = r1.val.as_const() else {
        return err(
            "bad_kfunc_arg",
            format!(
                "arg #0 of {}: an iterator must be at a constant stack offset",
                k.name()
            ),
        );
    };
    let off = i64::from(r1.off) + var as i64;
    if !(-crate::stack::STACK_SIZE..=-8).contains(&off) || off % 8 != 0 {
        return err(
            "bad_kfunc_arg",
            format!(
                "cannot pass in iter_num at an offset={off}: arg #0 of {} must be an 8-byte \
                 aligned stack slot",
                k.name()
            ),
        );
    }
    Ok((frame, off))
}

fn uninit_iter(k: IterKfunc, off: i64) -> String {
    format!(
        "expected an initialized iter_num as arg #0 of {}: fp{off} holds none (bpf_iter_num_new \
         first)",
        k.name()
    )
}

fn not_stack(r1: &RegState, k: IterKfunc) -> String {
    format!(
        "R1 type={} expected=fp: arg #0 of {} is a struct bpf_iter_num on the stack",
        r1.ty.name(),
        k.name()
    )
}
