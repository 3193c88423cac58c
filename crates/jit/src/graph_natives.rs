//! The kernel's object and graph kfuncs as natives generated code calls
//! directly (`lift::graph`): no helper trampoline, no `HelperCtx`, no
//! per-run context downcast. What a kfunc needs beyond its registers comes
//! as arguments: the node offset of a push/add (the verifier's, a constant
//! of the call site), the `less` callback of `bpf_rbtree_add` (the
//! callback's native function, called in place at the next call depth).
//! Only `bpf_obj_new` reads the run context, for the program's object
//! arena (bound to the kfunc registry the code was compiled with).
//!
//! Each computes what `bpfjet_runtime::graph_kfuncs` computes for a
//! verified program: both call the same `bpfjet_kfuncs::graph` functions.

use crate::trampoline::{RunCtx, RUNNING};
use bpfjet_kfuncs::graph::{self, list, rbtree};

pub(crate) const OBJ_NEW: &str = "bpfjet_jit_obj_new";
pub(crate) const OBJ_DROP: &str = "bpfjet_jit_obj_drop";
pub(crate) const REFCOUNT_ACQUIRE: &str = "bpfjet_jit_refcount_acquire";
pub(crate) const LIST_PUSH: &str = "bpfjet_jit_list_push";
pub(crate) const LIST_POP: &str = "bpfjet_jit_list_pop";
pub(crate) const RB_ADD: &str = "bpfjet_jit_rb_add";
pub(crate) const RB_REMOVE: &str = "bpfjet_jit_rb_remove";
/// The contended path of an inlined `bpf_spin_lock` (the uncontended
/// one is a compare-exchange in the program's code).
pub(crate) const SPIN_LOCK_SLOW: &str = "bpfjet_jit_spin_lock_slow";

/// A compiled function's native signature: `(ctx, depth, r1..r5) -> r0`.
type Subprog = unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, u64, u64) -> u64;

/// `bpf_obj_new_impl(type_id)`: an object from the arena of the running
/// program's kfunc registry (0 without one, as an exhausted arena).
unsafe extern "C" fn obj_new(ctx: *mut RunCtx, type_id: u64) -> u64 {
    // SAFETY: generated code passes its live run context.
    let ctx = unsafe { &*ctx };
    match ctx.code().kfuncs.graph() {
        Some(g) => g.arena.obj_new(type_id as u32),
        None => 0,
    }
}

/// `bpf_obj_drop_impl(obj)`.
unsafe extern "C" fn obj_drop(obj: u64) -> u64 {
    // SAFETY: the verifier proved `obj` an owned live object.
    unsafe { graph::obj_drop(obj) };
    0
}

/// `bpf_refcount_acquire_impl(obj)`.
unsafe extern "C" fn refcount_acquire(obj: u64) -> u64 {
    // SAFETY: the verifier proved `obj` a live refcounted object.
    unsafe { graph::refcount_acquire(obj) }
}

/// `bpf_list_push_{front,back}_impl(head, node)` with the call site's
/// node offset.
unsafe extern "C" fn list_push(head: u64, node: u64, node_off: u64, back: u64) -> u64 {
    // SAFETY: the verifier proved the head held under its lock and the
    // node owned, of the head's contained type.
    unsafe { graph::list_push_owned(head, node, node_off as u32, back != 0) }
}

/// `bpf_list_pop_{front,back}(head)`.
unsafe extern "C" fn list_pop(head: u64, back: u64) -> u64 {
    // SAFETY: a list head under its held lock (verifier).
    unsafe { list::pop(head, back != 0) }
}

/// `bpf_rbtree_remove(root, node)`.
unsafe extern "C" fn rb_remove(root: u64, node: u64) -> u64 {
    // SAFETY: a root under its held lock and a node of its type (verifier).
    unsafe { rbtree::remove(root, node) }
}

/// `bpf_rbtree_add_impl(root, node, less)`: `less` is the callback's
/// compiled function, called at `depth` (the caller checked the limit).
/// A callback that aborts the run stops the walk (the tree unchanged);
/// generated code sees the status word and returns.
unsafe extern "C" fn rb_add(
    ctx: *mut RunCtx,
    depth: u64,
    root: u64,
    node: u64,
    node_off: u64,
    less: Subprog,
) -> u64 {
    let added = unsafe {
        // SAFETY: as `list_push`; `less` is this program's function.
        graph::rb_add_owned(root, node, node_off as u32, |a, b| {
            let r = less(ctx, depth, a, b, 0, 0, 0);
            // SAFETY: the status word of the live run context.
            if (*ctx).status() == RUNNING {
                Ok(r as u32 != 0)
            } else {
                Err(())
            }
        })
    };
    added.unwrap_or(0)
}

/// `bpf_spin_lock` when the lock was taken: spin (and yield) until free.
unsafe extern "C" fn spin_lock_slow(lock: u64) -> u64 {
    // SAFETY: a `bpf_spin_lock` field of a map value (verifier).
    unsafe { bpfjet_maps::sync::bpf_spin_lock(lock as *mut u8) };
    0
}

/// Addresses of the natives above.
pub(crate) fn resolve(name: &str) -> Option<usize> {
    Some(match name {
        OBJ_NEW => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64) -> u64 = obj_new;
            f as *const () as usize
        }
        OBJ_DROP | REFCOUNT_ACQUIRE | SPIN_LOCK_SLOW => {
            let f: unsafe extern "C" fn(u64) -> u64 = match name {
                OBJ_DROP => obj_drop,
                REFCOUNT_ACQUIRE => refcount_acquire,
                _ => spin_lock_slow,
            };
            f as *const () as usize
        }
        LIST_PUSH => {
            let f: unsafe extern "C" fn(u64, u64, u64, u64) -> u64 = list_push;
            f as *const () as usize
        }
        LIST_POP | RB_REMOVE => {
            let f: unsafe extern "C" fn(u64, u64) -> u64 = if name == LIST_POP {
                list_pop
            } else {
                rb_remove
            };
            f as *const () as usize
        }
        RB_ADD => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, Subprog) -> u64 = rb_add;
            f as *const () as usize
        }
        _ => return None,
    })
}
