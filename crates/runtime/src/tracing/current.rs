//! Who is running: the calling thread's ids and name, for
//! `bpf_get_current_pid_tgid` and `bpf_get_current_comm`. A tracing program
//! runs on the traced thread itself, so "current" is simply the caller.
//!
//! `gettid`/`getpid` are system calls; their results are cached per thread
//! and the cache is invalidated in a child after `fork` (a generation count
//! bumped in the child), so a forked child never reports its parent's ids.
//!
//! Two places bump it. A `pthread_atfork` child handler is enough for
//! uprobes, but glibc's child makes system calls of its own
//! (`set_robust_list`, ...) before the atfork handlers run, and the child's
//! return from the `clone` itself is a `sys_exit` event: when system calls
//! are traced, the fork is performed by bpfjet's SIGSYS handler, which
//! bumps the count in the child right after the call ([`forked_child`]),
//! before any of that. The atfork handler then does not count the same
//! fork twice.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();
/// Set in a child by [`forked_child`]: its fork is counted already. Only
/// ever true in that child's copy of memory (the parent never sets it).
static COUNTED_IN_CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn after_fork_in_child() {
    if !COUNTED_IN_CHILD.swap(false, Ordering::Relaxed) {
        FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Called in a forked child as soon as the fork returned there (the
/// system-call layer's fork, before glibc's child code runs): the cached
/// ids become the child's from its first traced event on.
/// Async-signal-safe (two atomics).
pub fn forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    COUNTED_IN_CHILD.store(true, Ordering::Relaxed);
}

/// The calling thread's ids may have changed without a fork of this
/// memory: a `posix_spawn`-style child runs on its parent's thread
/// pointer (its cached ids are the parent's when it starts, and the
/// parent finds the child's when it resumes). Every thread reads its ids
/// again. Async-signal-safe (one atomic).
pub fn ids_changed() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Install the fork hook that keeps cached ids right; idempotent.
pub(crate) fn install_fork_hook() {
    ATFORK.call_once(|| {
        // SAFETY: registers a handler with no preconditions; it only bumps
        // an atomic (async-signal-safe).
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
}

/// This thread's cached ids: (fork generation + 1, tgid, tid); generation
/// 0 means "not cached". An initial-exec thread-local (`initial_exec.rs`:
/// no `__tls_get_addr` per `bpf_get_current_pid_tgid` in the trace agent);
/// zero bytes are its initial value.
#[repr(C)]
struct CachedIds {
    generation: Cell<u64>,
    tgid: Cell<u32>,
    tid: Cell<u32>,
}

crate::initial_exec_thread_local! {
    /// This thread's id cache.
    unsafe fn cached_ids() -> &'static CachedIds = "bpfjet_current_ids";
}

/// `(tgid, tid)` of the calling thread: the kernel's `tgid` is the process
/// id, its `pid` the thread id.
#[inline]
pub fn tgid_tid() -> (u32, u32) {
    let generation = FORK_GENERATION.load(Ordering::Relaxed) + 1;
    let ids = cached_ids();
    if ids.generation.get() == generation {
        return (ids.tgid.get(), ids.tid.get());
    }
    refresh_ids(ids, generation)
}

/// The cache miss: the first call in a thread, or the first after a fork.
/// The fork hook is in place before any cached value is used.
#[cold]
fn refresh_ids(ids: &CachedIds, generation: u64) -> (u32, u32) {
    install_fork_hook();
    // SAFETY: getpid/gettid cannot fail.
    let (tgid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
    ids.tgid.set(tgid);
    ids.tid.set(tid);
    ids.generation.set(generation);
    (tgid, tid)
}

/// The calling thread's name (`/proc/self/task/TID/comm`): 16 bytes,
/// NUL-padded (at most 15 of them the name). No allocation: helpers call
/// it in signal handlers, possibly on top of a `malloc` holding its lock.
pub fn comm() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`.
    let ok = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr(), 0, 0, 0) } == 0;
    if !ok {
        return [0; 16];
    }
    name[15] = 0;
    name
}
