//! Global (non-static) subprograms, verified as the kernel verifies them:
//! once, on their own, from their BTF prototype alone
//! (`bpfjet_obj::GlobalSubprog`), not in each caller's context.
//!
//! At a call the caller's r1–r5 are checked against the prototype (a
//! scalar, the context, an initialised dynptr, or enough readable and
//! writable memory — or NULL where the argument may be NULL); the caller
//! then goes on with r0 an unknown scalar and r1–r5 clobbered, whatever
//! the body returns. The
//! first call reached spawns the body as a path of its own, its arguments
//! typed by the prototype: a pointer argument is memory of the pointee's
//! size that may be NULL until checked, a scalar argument has any value.
//! So a body that relies on what one caller passes is refused, as the
//! kernel refuses it, and a function called from many places is explored
//! once. The body's exit must return a scalar (`calls.rs`,
//! `check_program_exit`).

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult, VerifyError};
use crate::frame::{Frame, State};
use crate::helper_check::{finish_call, Meta};
use crate::reg_state::{MemKind, RegState, RegType};
use bpfjet_obj::{GlobalArg, GlobalSubprog};

impl Verifier<'_> {
    /// A call at `pc` to global subprogram `g`.
    pub(crate) fn call_global(
        &mut self,
        st: &mut State,
        pc: usize,
        g: &GlobalSubprog,
    ) -> VResult<Succ> {
        if st.lock.is_some() {
            return err(
                "spin_lock",
                "global function calls are not allowed while holding a lock, use static function instead",
            );
        }
        let args = match &g.args {
            Ok(args) => args,
            Err(why) => return err("global_func_args", why.clone()),
        };
        let func = self.cfg.subprog_of(g.slot);
        for (i, arg) in args.iter().enumerate() {
            self.check_global_arg(st, pc, i, *arg)
                .map_err(|mut e: VerifyError| {
                    e.message = format!(
                        "{}: caller passes invalid args into func#{func} ('{}')",
                        e.message, g.name
                    );
                    e
                })?;
        }
        finish_call(st, RegState::unknown());
        if !self.globals_spawned.insert(g.slot) {
            return Ok(Succ::Goto(pc + 1));
        }
        let body = self.global_body_state(g.slot, args);
        Ok(Succ::Spawn(pc + 1, g.slot, body))
    }

    /// Argument `i` (register `i + 1`) against its prototype type
    /// (`btf_check_func_arg_match`).
    fn check_global_arg(
        &mut self,
        st: &mut State,
        pc: usize,
        i: usize,
        arg: GlobalArg,
    ) -> VResult<()> {
        let regno = i as u8 + 1;
        let reg = *st.reg(regno);
        if !reg.is_init() {
            return err("uninit_reg", format!("R{regno} !read_ok"));
        }
        match arg {
            GlobalArg::Scalar if reg.is_scalar() => Ok(()),
            GlobalArg::Scalar => err(
                "global_func_args",
                format!("R{regno} is not a scalar ({})", reg.ty.name()),
            ),
            GlobalArg::Ctx => {
                if reg.ty != RegType::Ctx {
                    return err(
                        "global_func_args",
                        format!(
                            "arg#{i} expects pointer to ctx (R{regno} is {})",
                            reg.ty.name()
                        ),
                    );
                }
                crate::ctx_rules::check_ctx_unmoved(&reg, regno)
            }
            GlobalArg::Dynptr => {
                let func = format!("global function argument {i}");
                self.check_init_dynptr(st, regno, None, false, &func)
                    .map(|_| ())
            }
            GlobalArg::Mem { size, nullable } => {
                // NULL itself is always accepted (`check_mem_reg`).
                if reg.is_scalar() && reg.val.is_zero() {
                    return Ok(());
                }
                if reg.maybe_null && !nullable {
                    return err(
                        "global_func_args",
                        format!("arg#{i} is expected to be non-NULL (R{regno} may be NULL)"),
                    );
                }
                // The body may read and write all of it: checked as if not
                // NULL, the caller's register left as it is; stack bytes
                // the body may write are unknown after the call.
                let checked = RegState {
                    maybe_null: false,
                    ..reg
                };
                let what = format!("argument {i} of a global function");
                let mut meta = Meta::default();
                for write in [false, true] {
                    self.helper_mem(
                        st,
                        pc,
                        &checked,
                        regno,
                        0,
                        u64::from(size),
                        write,
                        &what,
                        &mut meta,
                    )?;
                }
                self.apply_write_and_release(st, &mut meta);
                Ok(())
            }
        }
    }

    /// The state a global subprogram's body starts in: frame 0 is its own,
    /// r1–r5 typed by its prototype (`do_check_common` for a subprogram).
    fn global_body_state(&mut self, entry: usize, args: &[GlobalArg]) -> State {
        let mut frame = Frame::new(0, entry, 0);
        for (i, arg) in args.iter().enumerate() {
            frame.regs[i + 1] = match *arg {
                GlobalArg::Scalar => RegState::unknown(),
                GlobalArg::Ctx => RegState::pointer(RegType::Ctx, 0),
                GlobalArg::Dynptr => {
                    let mut r = RegState::pointer(RegType::ConstDynptr, 0);
                    r.id = self.fresh_id();
                    r
                }
                GlobalArg::Mem { size, nullable } => {
                    let mut r = RegState::pointer(
                        RegType::Mem {
                            size,
                            kind: MemKind::Helper,
                        },
                        0,
                    );
                    if nullable {
                        r.maybe_null = true;
                        r.id = self.fresh_id();
                    }
                    r
                }
            };
        }
        State {
            global_body: true,
            ..State::of_frame(frame)
        }
    }
}
