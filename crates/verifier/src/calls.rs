//! Calls and returns: bpf-to-bpf calls (a new frame with r1–r5 as
//! arguments, r6–r9 preserved in the caller), kfuncs, and `exit` from the
//! program, from a subprogram and from a callback (back to its call, which
//! runs again).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::{Frame, State, MAX_FRAMES};
use crate::helper_check::finish_call;
use crate::reg_state::RegType;
use bpfjet_isa::{CallTarget, Insn};

impl Verifier<'_> {
    pub(crate) fn check_call(
        &mut self,
        st: &mut State,
        pc: usize,
        target: CallTarget,
    ) -> VResult<Succ> {
        match target {
            CallTarget::Helper(id) => self.check_helper(st, pc, id),
            CallTarget::Local(off) => {
                let entry = (pc as i64 + 1 + off as i64) as usize;
                if st.frames.len() >= MAX_FRAMES {
                    return err(
                        "call_too_deep",
                        format!(
                            "the call stack of {} frames is too deep",
                            st.frames.len() + 1
                        ),
                    );
                }
                if let Some(g) = self.env.global_func(entry) {
                    return self.call_global(st, pc, g);
                }
                let mut frame = Frame::new(st.frames.len(), entry, pc);
                for r in 1..=5 {
                    frame.regs[r] = st.cur().regs[r];
                }
                st.frames.push(frame);
                Ok(Succ::Goto(entry))
            }
            CallTarget::Kfunc(idx) => self.check_kfunc(st, pc, idx),
        }
    }

    pub(crate) fn check_exit(&mut self, st: &mut State) -> VResult<Succ> {
        let depth = st.depth();
        if depth == 0 {
            return self.check_program_exit(st);
        }
        let frame = st.cur().clone();
        let r0 = frame.regs[0];
        if let Some(info) = frame.callback.clone() {
            if !r0.is_init() {
                return err(
                    "uninit_reg",
                    "R0 !read_ok: the callback must return a value",
                );
            }
            if !r0.is_scalar() {
                return err(
                    "callback_ret",
                    "R0 not a scalar value: the callback must return 0 or 1",
                );
            }
            let (lo, hi) = info.ret;
            self.need_reg(st, 0);
            self.note = crate::precision::Note::CallbackExit;
            if r0.val.smin < lo || r0.val.smax > hi {
                return err(
                    "callback_ret",
                    format!(
                        "At callback return the register R0 has value ({:?}) should have been in [{lo}, {hi}]",
                        r0.val
                    ),
                );
            }
            if st.refs.len() != frame.refs_at_entry {
                let r = st.refs[st.refs.len() - 1];
                return err(
                    "ref_leak",
                    format!(
                        "Unreleased reference id={} alloc_insn={} at callback exit",
                        r.id, r.pc
                    ),
                );
            }
            // Back to the call, as the kernel does: the caller's state is
            // compared there with the states before earlier iterations
            // (convergence), and the call runs again, entering the callback
            // once more or going on after it.
            st.frames.pop();
            self.callback_returned = true;
            return Ok(Succ::Goto(frame.callsite));
        }
        if matches!(r0.ty, RegType::Stack { .. }) {
            return err("ret_stack_ptr", "cannot return stack pointer to the caller");
        }
        st.frames.pop();
        finish_call(st, r0);
        Ok(Succ::Goto(frame.callsite + 1))
    }

    fn check_program_exit(&mut self, st: &mut State) -> VResult<Succ> {
        if st.async_callback {
            self.check_async_callback_exit(st)?;
        }
        let r0 = *st.reg(0);
        let what = if st.global_body {
            "the global function"
        } else {
            "the program"
        };
        if !r0.is_init() {
            return err(
                "uninit_r0",
                format!("R0 !read_ok: {what} exits without setting a return value in R0"),
            );
        }
        // A global function's caller takes its result as a scalar.
        if st.global_body && !r0.is_scalar() {
            return err(
                "ret_not_scalar",
                format!(
                    "At subprogram exit the register R0 is not a scalar value ({})",
                    r0.ty.name()
                ),
            );
        }
        if r0.is_pointer() && !self.env.privileged() {
            return err("ptr_leak", "R0 leaks addr as return value");
        }
        if !r0.is_scalar() && !r0.is_pointer() {
            return err(
                "ret_not_scalar",
                format!(
                    "At program exit the register R0 is not a known value ({})",
                    r0.ty.name()
                ),
            );
        }
        if st.lock.is_some() {
            return err(
                "spin_lock",
                "BPF_EXIT instruction in main prog cannot be used inside bpf_spin_lock-ed region",
            );
        }
        if let Some(r) = st.refs.first() {
            // Name the acquiring kfunc when it was one.
            let what = match self.insns.get(r.pc) {
                Some(Insn::Call(CallTarget::Kfunc(idx))) => usize::try_from(*idx)
                    .ok()
                    .and_then(|i| self.env.kfuncs.get(i))
                    .map(|name| format!("the object acquired by kfunc {name}")),
                _ => None,
            }
            .unwrap_or_else(|| "a ringbuf reservation (or a kfunc-acquired object)".into());
            return err(
                "ref_leak",
                format!(
                    "Unreleased reference id={} alloc_insn={}: {what} is not released on this path",
                    r.id, r.pc
                ),
            );
        }
        Ok(Succ::End)
    }
}
