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
//! replaces the caller's frame and returns to the caller's caller). Programs
//! bound to the XDP helpers call `bpfjet_jit_tail_call` instead, which reads
//! the PROG_ARRAY slot and enters the target through a [`TailTable`] of
//! native entries resolved when the object was compiled. Panics in helpers
//! are caught before they reach native frames and resumed once the run is
//! back in Rust.

use crate::lift::calls::{
    DEPTH_FAULT_SYMBOL, HELPER_SYMBOL, KIND_KFUNC, RESUME_SYMBOL, TAIL_CALL_SYMBOL,
};
use crate::program::JitInner;
use bpfjet_maps::{Map, MapType};
use bpfjet_runtime::{errno, CallbackRunner, Fault, HelperCtx, Program, RunState, MAX_CALL_DEPTH};
use std::any::Any;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// `RunCtx::status` values.
pub(crate) const RUNNING: u64 = 0;
pub(crate) const TAIL_CALL: u64 = 1;
pub(crate) const ABORTED: u64 = 2;

/// The native signature of `bpfjet_entry_<slot>`.
pub(crate) type EntryFn = unsafe extern "C" fn(*mut RunCtx, u64, *const u64) -> u64;

/// One native activation of a compiled program (a run, a callback, or the
/// target of a tail call granted through the helper trampoline; a native
/// tail call keeps its caller's). `#[repr(C)]` because generated code reads
/// `status`.
#[repr(C)]
pub(crate) struct RunCtx {
    status: u64,
    /// The CPU slot of the run (inlined `bpf_get_smp_processor_id` and
    /// per-CPU array lookups read it at `lift::RUNCTX_CPU_OFFSET`).
    cpu: u64,
    /// A tracing run's table of per-thread slots of the maps kept per
    /// thread (`TracingEnv::thread_slot_table`; null otherwise): inlined
    /// slot operations read it at `lift::RUNCTX_THREAD_SLOTS_OFFSET`.
    thread_slots: *const *const u8,
    /// The `bpf_spin_lock` the code holds (0: none), written by inlined
    /// lock and unlock at `lift::RUNCTX_HELD_LOCK_OFFSET`: a run that
    /// aborts while holding it releases it here, as the interpreter's
    /// `RunEnv::release_leftovers` does for its helpers' locks.
    held_lock: u64,
    code: *const JitInner,
    state: *mut RunState,
    user: *mut (dyn Any + 'static),
    /// Native tail-call targets of the run (null: resolve through the run
    /// state's program table).
    tails: *const TailTable,
    /// How an aborted run ended; boxed so that setting up and tearing
    /// down a run that does not abort touches one word. `ManuallyDrop`
    /// (both fields) keeps drop glue off the common path: `run_native`
    /// checks that they are empty and drops them only on the cold path.
    ended: ManuallyDrop<Option<Box<Ended>>>,
    tail_target: ManuallyDrop<Option<Program>>,
}

/// Why a run was aborted.
enum Ended {
    Fault(Fault),
    Panic(Box<dyn Any + Send>),
}

impl RunCtx {
    fn abort(&mut self, fault: Fault) {
        self.status = ABORTED;
        *self.ended = Some(Box::new(Ended::Fault(fault)));
    }

    /// The code running now (a tail-call target's while it runs).
    pub(crate) fn code(&self) -> &JitInner {
        // SAFETY: the program outlives every run of it.
        unsafe { &*self.code }
    }

    /// The status word (`RUNNING` while nothing aborted the run).
    pub(crate) fn status(&self) -> u64 {
        self.status
    }

    /// The run's CPU slot.
    pub(crate) fn cpu(&self) -> u32 {
        self.cpu as u32
    }

    /// The per-run context as an XDP environment, or a fault naming what it
    /// should have been (as `HelperCtx::user_ctx` reports it).
    pub(crate) fn xdp_env(
        &mut self,
        pc: u64,
        helper: &'static str,
    ) -> Result<&mut bpfjet_runtime::XdpEnv, Fault> {
        // SAFETY: the per-run context is borrowed mutably for the whole run
        // (see `call_helper`); generated code never touches it.
        let user = unsafe { &mut *self.user };
        user.downcast_mut().ok_or_else(|| Fault::Helper {
            pc: pc as usize,
            helper,
            reason: format!(
                "the per-run context is not a {}",
                std::any::type_name::<bpfjet_runtime::XdpEnv>()
            ),
        })
    }

    /// The run environment every helper uses, inside whichever per-run
    /// context the program runs with (`XdpEnv`, `TracingEnv`), or a fault
    /// naming what was missing.
    pub(crate) fn run_env(
        &mut self,
        pc: u64,
        helper: &'static str,
    ) -> Result<&mut bpfjet_runtime::RunEnv, Fault> {
        // SAFETY: as in `xdp_env`.
        let user = unsafe { &mut *self.user };
        bpfjet_runtime::run_env(user).ok_or_else(|| Fault::Helper {
            pc: pc as usize,
            helper,
            reason: "the per-run context has no run environment (RunEnv)".into(),
        })
    }

    /// The per-run context as a `T` (a tracing run's `TracingEnv`), or a
    /// fault naming what it should have been.
    pub(crate) fn user_ctx<T: Any>(&mut self, pc: u64, helper: &'static str) -> Result<&T, Fault> {
        // SAFETY: as in `xdp_env`.
        let user = unsafe { &*self.user };
        user.downcast_ref().ok_or_else(|| Fault::Helper {
            pc: pc as usize,
            helper,
            reason: format!(
                "the per-run context is not a {}",
                std::any::type_name::<T>()
            ),
        })
    }

    /// Record the outcome of Rust code run on behalf of generated code.
    pub(crate) fn settle(&mut self, outcome: std::thread::Result<Result<u64, Fault>>) -> u64 {
        match outcome {
            Ok(Ok(r0)) => r0,
            Ok(Err(fault)) => {
                self.abort(fault);
                0
            }
            Err(panic) => {
                self.status = ABORTED;
                *self.ended = Some(Box::new(Ended::Panic(panic)));
                0
            }
        }
    }
}

/// The CPU slot of a run whose per-run context is `user`.
pub(crate) fn cpu_of(user: &(dyn Any + 'static)) -> u64 {
    bpfjet_runtime::run_env_ref(user).map_or(0, |env| u64::from(env.cpu()))
}

/// The per-thread slot table of a tracing run's context (null for any
/// other per-run context).
pub(crate) fn thread_slots_of(user: &(dyn Any + 'static)) -> *const *const u8 {
    user.downcast_ref::<bpfjet_runtime::tracing::TracingEnv>()
        .map_or(std::ptr::null(), |env| env.thread_slot_table())
}

/// One activation's surroundings: the run's tail-call table, CPU slot and
/// per-thread slot table.
#[derive(Clone, Copy)]
pub(crate) struct Activation {
    pub tails: *const TailTable,
    pub cpu: u64,
    pub thread_slots: *const *const u8,
}

/// Run the function at `slot` of `code` natively at call depth `depth`.
#[inline]
pub(crate) fn run_native(
    code: &JitInner,
    act: Activation,
    state: &mut RunState,
    user: &mut (dyn Any + 'static),
    slot: usize,
    depth: usize,
    args: &[u64; 5],
) -> Result<u64, Fault> {
    let Some(entry) = code.entry(slot) else {
        return Err(Fault::BadSubprogram {
            pc: slot,
            target: slot as u64,
        });
    };
    let mut ctx = new_run_ctx(code, act, state, user);
    // SAFETY: `entry` is this program's compiled entry with the `EntryFn`
    // signature; the context outlives the call and the argument array has
    // five elements.
    let r0 = unsafe { entry(&mut ctx, depth as u64, args.as_ptr()) };
    if ctx.status == RUNNING
        && ctx.held_lock == 0
        && ctx.ended.is_none()
        && ctx.tail_target.is_none()
    {
        // Nothing to drop: the fields hold no values.
        return Ok(r0);
    }
    finish_slow(ctx, slot, r0)
}

/// A run context of `code` for a run that generated code other than
/// [`run_native`] enters (a fused pair's half, `crate::fused`); end it with
/// [`end_run_ctx`]. [`run_native`] begins its runs with it too.
#[inline(always)]
pub(crate) fn new_run_ctx(
    code: &JitInner,
    act: Activation,
    state: &mut RunState,
    user: &mut (dyn Any + 'static),
) -> RunCtx {
    RunCtx {
        status: RUNNING,
        cpu: act.cpu,
        thread_slots: act.thread_slots,
        held_lock: 0,
        code,
        state,
        user,
        tails: act.tails,
        ended: ManuallyDrop::new(None),
        tail_target: ManuallyDrop::new(None),
    }
}

/// The outcome of a run of `ctx` whose code returned `r0`, as
/// [`run_native`] reports it.
#[inline]
pub(crate) fn end_run_ctx(ctx: RunCtx, r0: u64) -> Result<u64, Fault> {
    if ctx.status == RUNNING
        && ctx.held_lock == 0
        && ctx.ended.is_none()
        && ctx.tail_target.is_none()
    {
        return Ok(r0);
    }
    finish_slow(ctx, 0, r0)
}

/// The end of a run that was aborted (or left anything behind): drops the
/// context's owned fields and reports the outcome.
#[cold]
#[inline(never)]
fn finish_slow(mut ctx: RunCtx, slot: usize, r0: u64) -> Result<u64, Fault> {
    // SAFETY: taken once; `ctx` is dropped without touching them again.
    let (ended, tail_target) = unsafe {
        (
            ManuallyDrop::take(&mut ctx.ended),
            ManuallyDrop::take(&mut ctx.tail_target),
        )
    };
    drop(tail_target);
    if ctx.held_lock != 0 {
        // SAFETY: inlined `bpf_spin_lock` took this lock (a verified
        // program's lock field) and no unlock released it.
        unsafe { bpfjet_maps::sync::bpf_spin_unlock(ctx.held_lock as *mut u8) };
    }
    match ended.map(|e| *e) {
        Some(Ended::Panic(panic)) => std::panic::resume_unwind(panic),
        Some(Ended::Fault(fault)) => Err(fault),
        None if ctx.status == ABORTED => Err(Fault::BadPc { pc: slot }),
        None => Ok(r0),
    }
}

/// Callbacks requested by helpers re-enter native code.
struct Reentry {
    code: *const JitInner,
    act: Activation,
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
        let code = unsafe { &*self.code };
        run_native(code, self.act, state, user, slot, depth, &args)
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
    let mut runner = Reentry {
        code: ctx.code,
        act: Activation {
            tails: ctx.tails,
            cpu: ctx.cpu,
            thread_slots: ctx.thread_slots,
        },
    };
    // SAFETY: `state` and `user` were borrowed mutably for the whole run by
    // `run_native`; generated code does not touch them, so these are the
    // only live references while the helper runs.
    let (state, user) = unsafe { (&mut *ctx.state, &mut *ctx.user) };
    let mut hctx =
        HelperCtx::for_engine(state, user, &code.program, &mut runner, pc, depth, helper);
    let r0 = hctx.invoke(helper, args)?;
    if let Some(target) = hctx.take_tail_call_target() {
        *ctx.tail_target = Some(target);
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
        let act = Activation {
            tails: ctx.tails,
            cpu: ctx.cpu,
            thread_slots: ctx.thread_slots,
        };
        run_native(&jit, act, state, user, 0, depth as usize, &args)
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
    std::mem::offset_of!(RunCtx, thread_slots) as u64 == crate::lift::RUNCTX_THREAD_SLOTS_OFFSET,
    "generated code reads the per-thread slot table at RUNCTX_THREAD_SLOTS_OFFSET"
);

const _: () = assert!(
    std::mem::offset_of!(RunCtx, held_lock) as u64 == crate::lift::RUNCTX_HELD_LOCK_OFFSET,
    "generated code records the held spin lock at RUNCTX_HELD_LOCK_OFFSET"
);
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

/// `bpfjet_jit_xdp_copy(ctx, offset, buf, len, store) -> r0`:
/// `bpf_xdp_load_bytes` (store 0) or `bpf_xdp_store_bytes` (store 1) on the
/// run's frame, for the ranges the inlined copy does not serve (past the
/// linear part: fragments of a multi-buffer frame, or past the frame).
/// `buf` is `len` bytes of program memory by proof (the verifier checked
/// the helper's memory argument), `offset` and `len` are 32-bit values.
unsafe extern "C" fn jit_xdp_copy(
    ctx: *mut RunCtx,
    offset: u64,
    buf: *mut u8,
    len: u64,
    store: u64,
) -> u64 {
    // SAFETY: as in `jit_xdp_adjust`.
    let user = unsafe { &mut *(*ctx).user };
    let Some(env) = user.downcast_mut::<bpfjet_runtime::XdpEnv>() else {
        return crate::natives::errno_neg(bpfjet_runtime::errno::EINVAL);
    };
    let (offset, len) = (offset as u32, len as u32);
    if len > 0xffff {
        return crate::natives::errno_neg(bpfjet_runtime::errno::EFAULT);
    }
    // SAFETY: `buf` holds `len` bytes (see above); the frame's buffers are
    // the runtime's own allocations and never overlap program memory.
    let bytes = unsafe { std::slice::from_raw_parts_mut(buf, len as usize) };
    let frame = env.frame_mut();
    let result = if store != 0 {
        frame.store_bytes(offset, bytes)
    } else {
        frame.load_bytes(offset, bytes)
    };
    match result {
        Ok(()) => 0,
        Err(e) => crate::natives::errno_neg(e),
    }
}

/// A native tail-call target: its entry and its compiled code.
#[derive(Clone, Copy)]
struct Native {
    entry: EntryFn,
    code: *const JitInner,
}

/// The native tail-call targets of an object's programs, by program id
/// (position in `LoadedObject::program_names`, the value PROG_ARRAY slots
/// hold), resolved once when the object is compiled.
pub(crate) struct TailTable {
    /// The hot part: read on every tail call.
    native: Vec<Option<Native>>,
    /// Why a program id has no native entry: `None` when the object has no
    /// such program (the interpreter's table holds none there either, and
    /// the tail call falls through), else the reason, which aborts the run.
    missing: Vec<Option<String>>,
    /// Owns the code `native` points into.
    _owners: Vec<Arc<JitInner>>,
}

// SAFETY: the raw pointers point into `_owners`, which the table owns;
// `JitInner` is `Send + Sync`, and the table is never mutated after
// construction.
unsafe impl Send for TailTable {}
// SAFETY: as above.
unsafe impl Sync for TailTable {}

/// What one program id of an object holds, for [`TailTable::new`].
pub(crate) enum TailEntry {
    Compiled(Arc<JitInner>),
    Absent,
    NoCode(String),
}

impl TailTable {
    pub(crate) fn new(entries: Vec<TailEntry>) -> TailTable {
        let mut native = Vec::with_capacity(entries.len());
        let mut missing = Vec::with_capacity(entries.len());
        let mut owners = Vec::new();
        for e in entries {
            let (target, reason) = match e {
                TailEntry::Compiled(code) => match code.entry(0) {
                    Some(entry) => {
                        let target = Native {
                            entry,
                            code: Arc::as_ptr(&code),
                        };
                        owners.push(code);
                        (Some(target), None)
                    }
                    None => (None, Some("the compiled program has no entry".to_string())),
                },
                TailEntry::Absent => (None, None),
                TailEntry::NoCode(reason) => (None, Some(reason)),
            };
            native.push(target);
            missing.push(reason);
        }
        TailTable {
            native,
            missing,
            _owners: owners,
        }
    }
}

/// `bpfjet_jit_tail_call`'s result, returned in two registers: whether the
/// tail call was taken (the caller then returns `r0`, the target's result)
/// or not (`r0` is the helper's error and the caller continues).
#[repr(C)]
pub(crate) struct TailOutcome {
    r0: u64,
    taken: u64,
}

impl TailOutcome {
    fn fell_through(e: u64) -> TailOutcome {
        TailOutcome {
            r0: errno::neg(e),
            taken: 0,
        }
    }

    /// The run was aborted: the caller returns at once, as after any abort.
    #[cold]
    fn aborted(ctx: &mut RunCtx, pc: u64, reason: String) -> TailOutcome {
        ctx.abort(Fault::Helper {
            pc: pc as usize,
            helper: "tail_call",
            reason,
        });
        TailOutcome { r0: 0, taken: 1 }
    }
}

/// Enter `target` in place of the caller: same context, same depth, the
/// target's code for helper dispatch while it runs. The caller's code comes
/// back for whatever runs after the caller returns (a tail call from a
/// subprogram returns into the same program).
///
/// # Safety
/// `target` is live for the call; `args` points to five argument slots.
#[inline]
unsafe fn enter(ctx: &mut RunCtx, target: Native, depth: u64, args: *const u64) -> TailOutcome {
    // SAFETY: as in `call_helper`.
    if !unsafe { &mut *ctx.state }.try_count_tail_call() {
        return TailOutcome::fell_through(errno::E2BIG);
    }
    let caller = std::mem::replace(&mut ctx.code, target.code);
    // SAFETY: `entry` has the `EntryFn` signature; per the contract above.
    let r0 = unsafe { (target.entry)(ctx, depth, args) };
    ctx.code = caller;
    TailOutcome { r0, taken: 1 }
}

/// A program id the object's table has no native entry for, or a run
/// without such a table (a program compiled on its own): the run state's
/// program table, mapped to native code through the registry of compiled
/// programs.
#[cold]
#[inline(never)]
fn tail_call_slow(
    ctx: &mut RunCtx,
    prog: u32,
    depth: u64,
    args: *const u64,
    pc: u64,
) -> TailOutcome {
    if !ctx.tails.is_null() {
        // SAFETY: the table outlives the run (the running `JitProgram`
        // holds it).
        let table = unsafe { &*ctx.tails };
        return match table.missing.get(prog as usize) {
            Some(Some(reason)) => TailOutcome::aborted(ctx, pc, reason.clone()),
            _ => TailOutcome::fell_through(errno::ENOENT),
        };
    }
    // SAFETY: `state` is borrowed for the whole run (see `call_helper`).
    let state = unsafe { &*ctx.state };
    let Some(Some(program)) = state.program_table().get(prog as usize) else {
        return TailOutcome::fell_through(errno::ENOENT);
    };
    let Some(jit) = find_compiled(program) else {
        let reason = "the target program has no JIT code (put JitProgram::program() \
                      of a compiled program in the program table)";
        return TailOutcome::aborted(ctx, pc, reason.into());
    };
    let Some(entry) = jit.entry(0) else {
        return TailOutcome::aborted(ctx, pc, "the compiled program has no entry".into());
    };
    let target = Native {
        entry,
        code: Arc::as_ptr(&jit),
    };
    // SAFETY: `jit` keeps the code alive for the call.
    unsafe { enter(ctx, target, depth, args) }
}

/// Why [`Map::prog_array_slot`] found no program: the wrong kind of map
/// (an abort), an index out of range (E2BIG) or an empty slot (ENOENT).
#[cold]
#[inline(never)]
fn tail_call_missed(ctx: &mut RunCtx, map: &Map, index: u32, pc: u64) -> TailOutcome {
    if map.map_type() != MapType::ProgArray {
        return not_a_prog_array(ctx, map, pc);
    }
    if index >= map.max_entries() {
        return TailOutcome::fell_through(errno::E2BIG);
    }
    TailOutcome::fell_through(errno::ENOENT)
}

#[cold]
#[inline(never)]
fn not_a_prog_array(ctx: &mut RunCtx, map: &Map, pc: u64) -> TailOutcome {
    let reason = format!(
        "bpf_tail_call cannot be used with a {} map (the kernel verifier rejects it)",
        map.map_type()
    );
    TailOutcome::aborted(ctx, pc, reason)
}

/// `bpfjet_jit_tail_call(ctx, map, index, depth, args, pc)`: `bpf_tail_call`
/// through a PROG_ARRAY for programs bound to the XDP helpers. The slot is
/// read on every call (the control plane may change it); a taken tail call
/// runs the target at the caller's depth with the caller's r1–r5 and counts
/// against `MAX_TAIL_CALLS` for the run, like the runtime's helper.
unsafe extern "C" fn jit_tail_call(
    ctx: *mut RunCtx,
    map: *const Map,
    index: u64,
    depth: u64,
    args: *const u64,
    pc: u64,
) -> TailOutcome {
    // SAFETY: generated code passes the context it was entered with; the
    // map handle is a map the compiled program holds alive (the lifter
    // emits this call only for handles of the program's bound maps).
    let (ctx, map) = unsafe { (&mut *ctx, Map::from_handle(map)) };
    let index = index as u32;
    let Some(prog) = map.prog_array_slot(index) else {
        return tail_call_missed(ctx, map, index, pc);
    };
    // SAFETY: the table outlives the run (the running `JitProgram` holds it).
    let target =
        unsafe { ctx.tails.as_ref() }.and_then(|t| t.native.get(prog as usize).copied().flatten());
    match target {
        // SAFETY: the table owns the target's code.
        Some(target) => unsafe { enter(ctx, target, depth, args) },
        None => tail_call_slow(ctx, prog, depth, args, pc),
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
        TAIL_CALL_SYMBOL => {
            let f: unsafe extern "C" fn(
                *mut RunCtx,
                *const Map,
                u64,
                u64,
                *const u64,
                u64,
            ) -> TailOutcome = jit_tail_call;
            f as *const () as usize
        }
        "memcpy" => libc::memcpy as *const () as usize,
        "memmove" => libc::memmove as *const () as usize,
        "memset" => libc::memset as *const () as usize,
        "memcmp" => libc::memcmp as *const () as usize,
        crate::natives::XDP_ADJUST => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64) -> u64 = jit_xdp_adjust;
            f as *const () as usize
        }
        crate::natives::XDP_COPY => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, *mut u8, u64, u64) -> u64 = jit_xdp_copy;
            f as *const () as usize
        }
        _ => {
            return crate::natives::resolve(name)
                .or_else(|| crate::thread_maps::resolve(name))
                .or_else(|| crate::graph_natives::resolve(name))
                .or_else(|| bpfjet_kfuncs::by_symbol(name).map(|k| k.native as usize))
                .or_else(|| bpfjet_kfuncs::enetstl_ptr::resolve(name))
        }
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
    bpfjet_runtime::set_async_runner(run_async);
}

/// The runtime's timer callbacks of a compiled program, natively (at call
/// depth 0, tail calls resolved through the run, no thread maps: tracing
/// program types cannot use timers).
fn run_async(
    program: &Program,
    state: &mut RunState,
    user: &mut (dyn Any + 'static),
    entry: usize,
    cpu: u32,
    args: [u64; 5],
) -> Option<Result<u64, Fault>> {
    let code = find_compiled(program)?;
    let act = Activation {
        tails: std::ptr::null(),
        cpu: u64::from(cpu),
        thread_slots: std::ptr::null(),
    };
    Some(run_native(&code, act, state, user, entry, 0, &args))
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
