//! What a helper can do besides computing r0.

use crate::error::{Access, Fault, TailCallError};
use crate::helpers::Helper;
use crate::interp::memory::{BoundsChecked, MemMode};
use crate::interp::{execute_in_mode, Core};
use crate::program::{Program, ProgramInner};
use crate::region::Region;
use crate::state::{RunState, MAX_CALL_DEPTH, MAX_TAIL_CALLS};
use std::any::Any;
use std::sync::Arc;

/// How an engine other than the interpreter (the JIT) runs the callbacks that
/// helpers request through [`HelperCtx::call_subprog`]. The interpreter needs
/// no such object: it re-enters itself.
pub trait CallbackRunner {
    /// Run the subprogram that begins at `slot` in a fresh frame at call depth
    /// `depth` with `args` in r1–r5, and return its r0. [`HelperCtx`] has
    /// already checked that `slot` begins a subprogram and that `depth` is
    /// within the call-depth limit.
    fn call_subprog(
        &mut self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        slot: usize,
        depth: usize,
        args: [u64; 5],
    ) -> Result<u64, Fault>;
}

/// The engine's side of a helper call: handed to every helper and kfunc.
pub struct HelperCtx<'a> {
    state: &'a mut RunState,
    user: &'a mut (dyn Any + 'static),
    prog: &'a ProgramInner,
    pc: usize,
    depth: usize,
    bounds_checked: bool,
    helper: &'static str,
    tail_call: Option<Arc<ProgramInner>>,
    /// Set when another engine serves the call (see [`CallbackRunner`]).
    engine: Option<&'a mut dyn CallbackRunner>,
}

impl<'a> HelperCtx<'a> {
    pub(crate) fn new(
        state: &'a mut RunState,
        user: &'a mut (dyn Any + 'static),
        prog: &'a ProgramInner,
        pc: usize,
        depth: usize,
        bounds_checked: bool,
        helper: &'static str,
    ) -> Self {
        HelperCtx {
            state,
            user,
            prog,
            pc,
            depth,
            bounds_checked,
            helper,
            tail_call: None,
            engine: None,
        }
    }

    /// A context for a helper call made by another engine (the JIT) running
    /// `program`: callbacks go through `engine`, everything else (per-run
    /// context, tail-call requests, memory checks) behaves as under the
    /// interpreter. `depth` is the calling frame's call depth, `pc` the slot
    /// of the call instruction.
    pub fn for_engine(
        state: &'a mut RunState,
        user: &'a mut (dyn Any + 'static),
        program: &'a Program,
        engine: &'a mut dyn CallbackRunner,
        pc: usize,
        depth: usize,
        helper: &Helper,
    ) -> Self {
        HelperCtx {
            state,
            user,
            prog: &program.inner,
            pc,
            depth,
            bounds_checked: program.inner.bounds_checked,
            helper: helper.name(),
            tail_call: None,
            engine: Some(engine),
        }
    }

    /// Call `helper` with this context and r1–r5 (for engines other than the
    /// interpreter, which build the context with [`HelperCtx::for_engine`]).
    pub fn invoke(&mut self, helper: &Helper, args: [u64; 5]) -> Result<u64, Fault> {
        helper.call(self, args)
    }

    /// The program a granted [`HelperCtx::tail_call`] asked to enter, if any;
    /// taking it clears the request. For engines other than the interpreter.
    pub fn take_tail_call_target(&mut self) -> Option<Program> {
        self.tail_call.take().map(|inner| Program { inner })
    }

    pub(crate) fn take_tail_call(&mut self) -> Option<Arc<ProgramInner>> {
        self.tail_call.take()
    }

    /// The opaque per-run context the runner passed to [`Program::run`] (for
    /// XDP: the frame, the maps, the CPU id).
    pub fn user(&mut self) -> &mut (dyn Any + 'static) {
        &mut *self.user
    }

    /// The per-run context as a concrete type, if it is one.
    pub fn user_as<T: Any>(&mut self) -> Option<&mut T> {
        self.user.downcast_mut::<T>()
    }

    /// The per-run context as a `T`, or a fault naming the expected type (a
    /// runner/helper mismatch, not something a program can cause).
    pub fn user_ctx<T: Any>(&mut self) -> Result<&mut T, Fault> {
        let (pc, helper) = (self.pc, self.helper);
        self.user.downcast_mut::<T>().ok_or_else(|| Fault::Helper {
            pc,
            helper,
            reason: format!(
                "the per-run context is not a {}",
                std::any::type_name::<T>()
            ),
        })
    }

    /// The running program (a tail call's target while it runs).
    pub(crate) fn program_inner(&self) -> &ProgramInner {
        self.prog
    }

    /// The helper being served (as faults name it).
    pub fn helper_name(&self) -> &'static str {
        self.helper
    }

    /// Slot of the call instruction being served.
    pub fn pc(&self) -> usize {
        self.pc
    }

    /// Call depth of the calling frame (0 = the program's entry frame).
    pub fn call_depth(&self) -> usize {
        self.depth
    }

    pub fn is_bounds_checked(&self) -> bool {
        self.bounds_checked
    }

    /// A fault that aborts the run, attributed to this call.
    pub fn fault(&self, reason: impl Into<String>) -> Fault {
        Fault::Helper {
            pc: self.pc,
            helper: self.helper,
            reason: reason.into(),
        }
    }

    /// Run a subprogram of the calling program as a callback (`bpf_loop`,
    /// `bpf_for_each_map_elem`, ...) and return its r0.
    ///
    /// `func` is a function-pointer value as `lddw` with `BPF_PSEUDO_FUNC`
    /// produced it (the subprogram's slot). It must begin a subprogram. The
    /// callback gets `args` in r1–r5 (at most five are used) and a fresh stack
    /// frame one level deeper than the caller, which counts against the
    /// call-depth limit like a bpf-to-bpf call. The instruction budget and the
    /// tail-call count are shared with the rest of the run, and a fault inside
    /// the callback aborts the whole run (propagate it with `?`).
    pub fn call_subprog(&mut self, func: u64, args: &[u64]) -> Result<u64, Fault> {
        let slot = usize::try_from(func)
            .ok()
            .filter(|&slot| self.prog.is_subprog_entry(slot))
            .ok_or(Fault::BadSubprogram {
                pc: self.pc,
                target: func,
            })?;
        let depth = self.depth + 1;
        if depth >= MAX_CALL_DEPTH {
            return Err(Fault::CallDepthExceeded {
                pc: self.pc,
                max: MAX_CALL_DEPTH,
            });
        }
        let mut regs = [0u64; 5];
        for (reg, arg) in regs.iter_mut().zip(args) {
            *reg = *arg;
        }
        if let Some(engine) = self.engine.as_deref_mut() {
            return engine.call_subprog(&mut *self.state, &mut *self.user, slot, depth, regs);
        }
        let mut core = Core {
            state: &mut *self.state,
            user: &mut *self.user,
        };
        execute_in_mode(&mut core, self.prog, slot, regs, depth, self.bounds_checked)
    }

    /// Request a tail call into `target`. On `Ok` the helper should return
    /// promptly: the interpreter then replaces the calling program with
    /// `target` in the same frame (r1 keeps the context) and execution never
    /// comes back to the caller. On `Err` nothing happens; the helper reports
    /// the failure to the program and execution continues after the call.
    pub fn tail_call(&mut self, target: &Program) -> Result<(), TailCallError> {
        if self.tail_call.is_some() {
            return Err(TailCallError::AlreadyRequested);
        }
        if self.state.tail_calls >= MAX_TAIL_CALLS {
            return Err(TailCallError::LimitReached(MAX_TAIL_CALLS));
        }
        // A bounds-checked caller may enter a verified target (it just runs
        // checked); the reverse would run an unproven program unchecked.
        if target.inner.bounds_checked && !self.bounds_checked {
            return Err(TailCallError::NeedsBoundsChecking);
        }
        self.state.tail_calls += 1;
        self.tail_call = Some(Arc::clone(&target.inner));
        Ok(())
    }

    /// [`HelperCtx::tail_call`] into entry `index` of the run state's program
    /// table ([`RunState::set_program_table`]).
    pub fn tail_call_index(&mut self, index: u32) -> Result<(), TailCallError> {
        let target = self
            .state
            .program_table
            .get(index as usize)
            .and_then(Option::as_ref)
            .cloned()
            .ok_or(TailCallError::NoSuchProgram(index))?;
        self.tail_call(&target)
    }

    /// Swap a region registered for this run (or persistently) for another,
    /// or drop it: the packet after `bpf_xdp_adjust_*`, a ring-buffer sample
    /// after submit. A no-op on the verified path.
    pub(crate) fn replace_region(&mut self, old: Region, new: Option<Region>) {
        if self.bounds_checked {
            self.state.replace_region(old, new);
        }
    }

    /// Tail calls taken so far in this run.
    pub fn tail_calls(&self) -> u32 {
        self.state.tail_calls
    }

    /// Make memory the helper hands to the program (a map value pointer, a
    /// ring-buffer reservation) accessible for the rest of this run in
    /// bounds-checked mode. A no-op on the verified path, which keeps no list.
    pub fn register_region(&mut self, region: Region) {
        if self.bounds_checked {
            self.state.add_run_region(region);
        }
    }

    /// Check a pointer-and-size argument. In bounds-checked mode it must lie
    /// inside one live stack frame or one known region; in verified mode the
    /// verifier already proved it. A zero-sized argument is always valid.
    pub fn check_mem(&self, addr: u64, len: u64, access: Access) -> Result<(), Fault> {
        if len == 0 || !self.bounds_checked {
            return Ok(());
        }
        BoundsChecked::check(
            self.state, self.prog, self.depth, self.pc, addr, len, access,
        )
    }

    fn checked_ptr(&self, addr: u64, len: u64, access: Access) -> Result<*mut u8, Fault> {
        self.check_mem(addr, len, access)?;
        // Even the verified path refuses a null pointer: building a slice
        // from it would be undefined behaviour, not just a wrong answer.
        if addr == 0 || usize::try_from(len).is_err() {
            return Err(Fault::OutOfBounds {
                pc: self.pc,
                addr,
                size: len,
                access,
            });
        }
        Ok(addr as *mut u8)
    }

    /// Program memory as a byte slice (checked like [`HelperCtx::check_mem`]).
    pub fn read_mem(&self, addr: u64, len: u64) -> Result<&[u8], Fault> {
        if len == 0 {
            return Ok(&[]);
        }
        let ptr = self.checked_ptr(addr, len, Access::Read)?;
        // SAFETY: the range is a live stack frame or registered region (or was
        // proven valid by the verifier); the interpreter does not touch program
        // memory while the helper holds this borrow of the context.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len as usize) })
    }

    /// Writable program memory as a byte slice (checked like
    /// [`HelperCtx::check_mem`]).
    pub fn write_mem(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        if len == 0 {
            return Ok(&mut []);
        }
        let ptr = self.checked_ptr(addr, len, Access::Write)?;
        // SAFETY: as in `read_mem`, and the region is writable.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len as usize) })
    }
}
