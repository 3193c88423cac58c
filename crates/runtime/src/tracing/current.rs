//! Who is running: the calling thread's ids and name, for
//! `bpf_get_current_pid_tgid` and `bpf_get_current_comm`. A tracing program
//! runs on the traced thread itself, so "current" is simply the caller.
//!
//! `gettid`/`getpid` are system calls; their results are cached per thread
//! and the cache is invalidated in a child after `fork` (a generation count
//! bumped by a `pthread_atfork` child handler), so a forked child never
//! reports its parent's ids.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();

extern "C" fn after_fork_in_child() {
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

/// How many times this process is a forked child of a process that used
/// tracing (0 in the original process).
pub(crate) fn fork_generation() -> u64 {
    install_fork_hook();
    FORK_GENERATION.load(Ordering::Relaxed)
}

thread_local! {
    /// (fork generation + 1, tgid, tid); generation 0 means "not cached".
    static IDS: Cell<(u64, u32, u32)> = const { Cell::new((0, 0, 0)) };
}

/// `(tgid, tid)` of the calling thread: the kernel's `tgid` is the process
/// id, its `pid` the thread id.
#[inline]
pub fn tgid_tid() -> (u32, u32) {
    install_fork_hook();
    let generation = FORK_GENERATION.load(Ordering::Relaxed) + 1;
    IDS.with(|ids| {
        let (g, tgid, tid) = ids.get();
        if g == generation {
            return (tgid, tid);
        }
        // SAFETY: getpid/gettid cannot fail.
        let (tgid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
        ids.set((generation, tgid, tid));
        (tgid, tid)
    })
}

/// The calling thread's name (`/proc/self/task/TID/comm`, at most 15
/// bytes), without the NUL.
pub fn comm() -> Vec<u8> {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`.
    let ok = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr(), 0, 0, 0) } == 0;
    if !ok {
        return Vec::new();
    }
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    name[..len].to_vec()
}
