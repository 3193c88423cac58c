//! Direct natives for the per-thread map operations of tracing programs
//! whose hand-off maps pairwise fusion keeps per thread
//! (`bpfjet_runtime::tracing::thread_maps`): the rewritten calls
//! (`THREAD_MAP_LOOKUP/UPDATE/DELETE`) are compiled as direct calls to
//! these, taking the run context, instead of going through the helper
//! trampoline (argument array, registry dispatch, `HelperCtx`), when the
//! map is not known at compile time or `TracingJit::inline_thread_maps` is
//! off; otherwise the lifter compiles them as loads and stores on the slot
//! (`lift::thread_slots`). The key and value pointers are valid by the
//! verifier's proof of the original map calls.

use crate::trampoline::RunCtx;
use bpfjet_runtime::tracing::{
    thread_map_delete, thread_map_lookup, thread_map_update, TracingEnv,
};
use bpfjet_runtime::Fault;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(crate) const LOOKUP: &str = "bpfjet_jit_thread_map_lookup";
pub(crate) const UPDATE: &str = "bpfjet_jit_thread_map_update";
pub(crate) const DELETE: &str = "bpfjet_jit_thread_map_delete";
/// Called by inlined slot operations when the run has no slot table.
pub(crate) const NO_SLOTS: &str = "bpfjet_jit_thread_map_no_slots";

/// Run `op` on the run's tracing context; a handle that is not a map kept
/// per thread (or a run that is not a tracing run) aborts the run, as the
/// helper would.
///
/// # Safety
/// `ctx` is the live run context of the calling generated code.
unsafe fn with_env(
    ctx: *mut RunCtx,
    pc: u64,
    helper: &'static str,
    op: impl FnOnce(&TracingEnv) -> Option<u64>,
) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let env = ctx.user_ctx::<TracingEnv>(pc, helper)?;
        op(env).ok_or_else(|| Fault::Helper {
            pc: pc as usize,
            helper,
            reason: "not a map kept per thread".into(),
        })
    }));
    ctx.settle(outcome)
}

/// # Safety
/// As [`with_env`]; `key` points to the map's key size in bytes.
unsafe extern "C" fn lookup(ctx: *mut RunCtx, map: u64, key: *const u8, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_env(ctx, pc, "thread_map_lookup", |env| {
            thread_map_lookup(env, map, key)
        })
    }
}

/// # Safety
/// As [`with_env`]; `key` and `value` point to the map's key and value
/// sizes in bytes.
unsafe extern "C" fn update(
    ctx: *mut RunCtx,
    map: u64,
    key: *const u8,
    value: *const u8,
    flags: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_env(ctx, pc, "thread_map_update", |env| {
            thread_map_update(env, map, key, value, flags)
        })
    }
}

/// # Safety
/// As [`lookup`].
unsafe extern "C" fn delete(ctx: *mut RunCtx, map: u64, key: *const u8, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_env(ctx, pc, "thread_map_delete", |env| {
            thread_map_delete(env, map, key)
        })
    }
}

/// The run has no per-thread slot table (it is not a run of the
/// `TracingObject` the code was compiled for): abort it.
///
/// # Safety
/// As [`with_env`].
#[cold]
unsafe extern "C" fn no_slots(ctx: *mut RunCtx, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    ctx.settle(Ok(Err(Fault::Helper {
        pc: pc as usize,
        helper: "thread_map",
        reason: "the run has no per-thread slots (not a run of the tracing object \
                 the program was compiled for)"
            .into(),
    })))
}

/// Addresses of the natives above, by symbol.
pub(crate) fn resolve(name: &str) -> Option<usize> {
    type KeyOp = unsafe extern "C" fn(*mut RunCtx, u64, *const u8, u64) -> u64;
    type Update = unsafe extern "C" fn(*mut RunCtx, u64, *const u8, *const u8, u64, u64) -> u64;
    Some(match name {
        LOOKUP => {
            let f: KeyOp = lookup;
            f as *const () as usize
        }
        UPDATE => {
            let f: Update = update;
            f as *const () as usize
        }
        DELETE => {
            let f: KeyOp = delete;
            f as *const () as usize
        }
        NO_SLOTS => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64) -> u64 = no_slots;
            f as *const () as usize
        }
        _ => return None,
    })
}
