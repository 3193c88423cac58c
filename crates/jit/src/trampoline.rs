//! The Rust side of generated code: the per-run context, the helper
//! trampoline, callbacks, tail calls and faults.
//!
//! Generated code sees the run context only as a pointer and reads one word
//! of it, `status` at offset 0, after every helper and bpf-to-bpf call.
//! Helpers are the interpreter's: the trampoline builds a
//! [`HelperCtx::for_engine`] whose [`CallbackRunner`] re-enters native code,
//! so `call_subprog` runs the callback's native entry at the next call depth.
//! A tail call granted by a helper is run by `bpfjet_jit_resume` in place of
//! the rest of the calling function (the kernel's semantics: the target
//! replaces the caller's frame and returns to the caller's caller). Panics in
//! helpers are caught before they reach native frames and resumed once the
//! run is back in Rust.

use crate::lift::calls::{DEPTH_FAULT_SYMBOL, HELPER_SYMBOL, KIND_KFUNC, RESUME_SYMBOL};
use crate::program::JitInner;
use bpfjet_runtime::{CallbackRunner, Fault, HelperCtx, Program, RunState, MAX_CALL_DEPTH};
use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// `RunCtx::status` values.
pub(crate) const RUNNING: u64 = 0;
pub(crate) const TAIL_CALL: u64 = 1;
pub(crate) const ABORTED: u64 = 2;

/// The native signature of `bpfjet_entry_<slot>`.
pub(crate) type EntryFn = unsafe extern "C" fn(*mut RunCtx, u64, *const u64) -> u64;

/// One native activation of a compiled program (a run, a callback or a
/// tail-call target). `#[repr(C)]` because generated code reads `status`.
#[repr(C)]
pub(crate) struct RunCtx {
    status: u64,
    /// The CPU slot of the run (inlined `bpf_get_smp_processor_id` and
    /// per-CPU array lookups read it at `lift::RUNCTX_CPU_OFFSET`).
    cpu: u64,
    code: *const JitInner,
    state: *mut RunState,
    user: *mut (dyn Any + 'static),
    fault: Option<Fault>,
    panic: Option<Box<dyn Any + Send>>,
    tail_target: Option<Program>,
}

impl RunCtx {
    fn abort(&mut self, fault: Fault) {
        self.status = ABORTED;
        self.fault = Some(fault);
    }

    /// Record the outcome of Rust code run on behalf of generated code.
    fn settle(&mut self, outcome: std::thread::Result<Result<u64, Fault>>) -> u64 {
        match outcome {
            Ok(Ok(r0)) => r0,
            Ok(Err(fault)) => {
                self.abort(fault);
                0
            }
            Err(panic) => {
                self.status = ABORTED;
                self.panic = Some(panic);
                0
            }
        }
    }
}

/// Run the function at `slot` of `code` natively at call depth `depth`.
pub(crate) fn run_native(
    code: &JitInner,
    state: &mut RunState,
    user: &mut (dyn Any + 'static),
    slot: usize,
    depth: usize,
    args: [u64; 5],
) -> Result<u64, Fault> {
    let Some(entry) = code.entry(slot) else {
        return Err(Fault::BadSubprogram {
            pc: slot,
            target: slot as u64,
        });
    };
    let cpu = (&*user as &dyn Any)
        .downcast_ref::<bpfjet_runtime::XdpEnv>()
        .map_or(0, |env| u64::from(env.cpu()));
    let mut ctx = RunCtx {
        status: RUNNING,
        cpu,
        code,
        state,
        user,
        fault: None,
        panic: None,
        tail_target: None,
    };
    // SAFETY: `entry` is this program's compiled entry with the `EntryFn`
    // signature; the context outlives the call and the argument array has
    // five elements.
    let r0 = unsafe { entry(&mut ctx, depth as u64, args.as_ptr()) };
    if let Some(panic) = ctx.panic.take() {
        std::panic::resume_unwind(panic);
    }
    if ctx.status == ABORTED {
        return Err(ctx.fault.take().unwrap_or(Fault::BadPc { pc: slot }));
    }
    Ok(r0)
}

/// Callbacks requested by helpers re-enter native code.
struct Reentry {
    code: *const JitInner,
}

impl CallbackRunner for Reentry {
    fn call_subprog(
        &mut self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        slot: usize,
        depth: usize,
        args: [u64; 5],
    ) -> Result<u64, Fault> {
        // SAFETY: the program outlives every run of it.
        run_native(unsafe { &*self.code }, state, user, slot, depth, args)
    }
}

fn call_helper(
    ctx: &mut RunCtx,
    kind: u64,
    pc: usize,
    id: u64,
    depth: usize,
    args: [u64; 5],
) -> Result<u64, Fault> {
    // SAFETY: the program outlives every run of it.
    let code = unsafe { &*ctx.code };
    let registry = if kind == KIND_KFUNC {
        &code.kfuncs
    } else {
        &code.helpers
    };
    let helper = registry.get(id).ok_or(Fault::UnknownHelper { pc, id })?;
    let mut runner = Reentry { code: ctx.code };
    // SAFETY: `state` and `user` were borrowed mutably for the whole run by
    // `run_native`; generated code does not touch them, so these are the
    // only live references while the helper runs.
    let (state, user) = unsafe { (&mut *ctx.state, &mut *ctx.user) };
    let mut hctx =
        HelperCtx::for_engine(state, user, &code.program, &mut runner, pc, depth, helper);
    let r0 = hctx.invoke(helper, args)?;
    if let Some(target) = hctx.take_tail_call_target() {
        ctx.tail_target = Some(target);
        ctx.status = TAIL_CALL;
    }
    Ok(r0)
}

/// `bpfjet_jit_helper(ctx, kind, pc, id, depth, args) -> r0`.
unsafe extern "C" fn jit_helper(
    ctx: *mut RunCtx,
    kind: u64,
    pc: u64,
    id: u64,
    depth: u64,
    args: *const u64,
) -> u64 {
    // SAFETY: generated code passes the context it was entered with and its
    // five-element argument array.
    let (ctx, args) = unsafe { (&mut *ctx, args.cast::<[u64; 5]>().read()) };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        call_helper(ctx, kind, pc as usize, id, depth as usize, args)
    }));
    ctx.settle(outcome)
}

/// `bpfjet_jit_resume(ctx, pc, depth, args) -> r0`: called when the status
/// word is non-zero after a helper. Runs a granted tail call (whose r0 the
/// calling function then returns) or returns 0 for an aborted run.
unsafe extern "C" fn jit_resume(ctx: *mut RunCtx, pc: u64, depth: u64, args: *const u64) -> u64 {
    // SAFETY: as in `jit_helper`.
    let (ctx, args) = unsafe { (&mut *ctx, args.cast::<[u64; 5]>().read()) };
    if ctx.status != TAIL_CALL {
        return 0;
    }
    ctx.status = RUNNING;
    let Some(target) = ctx.tail_target.take() else {
        return 0;
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let jit = find_compiled(&target).ok_or_else(|| Fault::Helper {
            pc: pc as usize,
            helper: "tail call",
            reason: "the target program has no JIT code (put JitProgram::program() \
                     of a compiled program in the program table)"
                .into(),
        })?;
        // SAFETY: as in `call_helper`.
        let (state, user) = unsafe { (&mut *ctx.state, &mut *ctx.user) };
        run_native(&jit, state, user, 0, depth as usize, args)
    }));
    ctx.settle(outcome)
}

/// `bpfjet_jit_depth_fault(ctx, pc)`: a bpf-to-bpf call would exceed the
/// call-depth limit.
unsafe extern "C" fn jit_depth_fault(ctx: *mut RunCtx, pc: u64) {
    // SAFETY: as in `jit_helper`.
    let ctx = unsafe { &mut *ctx };
    ctx.abort(Fault::CallDepthExceeded {
        pc: pc as usize,
        max: MAX_CALL_DEPTH,
    });
}

const _: () = assert!(
    std::mem::offset_of!(RunCtx, cpu) as u64 == crate::lift::RUNCTX_CPU_OFFSET,
    "generated code reads the CPU slot at RUNCTX_CPU_OFFSET"
);

/// `bpfjet_jit_xdp_adjust(ctx, which, offset) -> r0`: `bpf_xdp_adjust_head`
/// (0), `_tail` (1) or `_meta` (2) on the run's frame, called directly by
/// programs bound to the XDP helpers (their context argument is the frame's
/// by proof).
unsafe extern "C" fn jit_xdp_adjust(ctx: *mut RunCtx, which: u64, offset: u64) -> u64 {
    // SAFETY: generated code passes the context it was entered with; the
    // per-run context is borrowed for the whole run (see `call_helper`).
    let user = unsafe { &mut *(*ctx).user };
    let Some(env) = user.downcast_mut::<bpfjet_runtime::XdpEnv>() else {
        return crate::natives::errno_neg(bpfjet_runtime::errno::EINVAL);
    };
    let frame = env.frame_mut();
    let offset = offset as i32;
    let result = match which {
        0 => frame.adjust_head(offset),
        1 => frame.adjust_tail(offset),
        _ => frame.adjust_meta(offset),
    };
    match result {
        Ok(()) => 0,
        Err(e) => crate::natives::errno_neg(e),
    }
}

/// Addresses for the undefined symbols of generated objects.
pub(crate) fn resolve_symbol(name: &str) -> Option<usize> {
    let helper: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, *const u64) -> u64 =
        jit_helper;
    let resume: unsafe extern "C" fn(*mut RunCtx, u64, u64, *const u64) -> u64 = jit_resume;
    let depth_fault: unsafe extern "C" fn(*mut RunCtx, u64) = jit_depth_fault;
    Some(match name {
        HELPER_SYMBOL => helper as *const () as usize,
        RESUME_SYMBOL => resume as *const () as usize,
        DEPTH_FAULT_SYMBOL => depth_fault as *const () as usize,
        "memcpy" => libc::memcpy as *const () as usize,
        "memmove" => libc::memmove as *const () as usize,
        "memset" => libc::memset as *const () as usize,
        "memcmp" => libc::memcmp as *const () as usize,
        crate::natives::XDP_ADJUST => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64) -> u64 = jit_xdp_adjust;
            f as *const () as usize
        }
        _ => return crate::natives::resolve(name),
    })
}

/// Compiled programs by the identity of their loaded [`Program`], so that a
/// tail call requested with an interpreter-level `Program` (from a program
/// table or a PROG_ARRAY map) finds its native code.
fn compiled() -> &'static Mutex<HashMap<usize, Weak<JitInner>>> {
    static COMPILED: OnceLock<Mutex<HashMap<usize, Weak<JitInner>>>> = OnceLock::new();
    COMPILED.get_or_init(|| Mutex::new(HashMap::new()))
}

fn identity(program: &Program) -> usize {
    // Programs are never empty, and clones share their instruction buffer.
    program.insns().as_ptr() as usize
}

pub(crate) fn register_compiled(inner: &Arc<JitInner>) {
    if let Ok(mut map) = compiled().lock() {
        map.insert(identity(&inner.program), Arc::downgrade(inner));
    }
}

pub(crate) fn unregister_compiled(program: &Program) {
    if let Ok(mut map) = compiled().lock() {
        let key = identity(program);
        if map.get(&key).is_some_and(|w| w.upgrade().is_none()) {
            map.remove(&key);
        }
    }
}

fn find_compiled(program: &Program) -> Option<Arc<JitInner>> {
    compiled()
        .lock()
        .ok()
        .and_then(|map| map.get(&identity(program)).and_then(Weak::upgrade))
}
