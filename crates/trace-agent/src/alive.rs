//! Whether this thread can still run programs.
//!
//! The runtime keeps each thread's run state in a thread-local with a
//! destructor. Threads keep making system calls and calling probed
//! functions after their thread-locals are destroyed (the main thread's are
//! destroyed at the start of `exit()`, before stdio is flushed and
//! `exit_group` is called); a run then would panic inside the traced
//! process. A guard thread-local, first touched after the thread's first
//! run and so destroyed before the runtime's (destructors run last
//! registered, first run), marks the point after which runs are skipped and
//! counted.
//!
//! The agent's own work inside the process (attaching, its ring-buffer
//! consumer thread, writing the report) calls libc and makes system calls
//! too; the kernel's probes never see a tracer's calls (it is another
//! process), so runs on a thread doing agent work are skipped and not
//! counted ([`agent_work`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = DYING.try_with(|d| d.set(true));
    }
}

thread_local! {
    // No destructor: readable for the thread's whole life.
    static DYING: Cell<bool> = const { Cell::new(false) };
    static GUARD: Guard = const { Guard };
    // No destructor either.
    static AGENT_WORK: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` as the agent's own work: probes and system calls it hits on
/// this thread run no program.
pub fn agent_work<R>(f: impl FnOnce() -> R) -> R {
    let prev = AGENT_WORK.with(|w| w.replace(true));
    let r = f();
    AGENT_WORK.with(|w| w.set(prev));
    r
}

static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// False once this thread's thread-locals are being destroyed (the skip is
/// counted), and while the thread does the agent's own work (not counted).
pub fn can_run() -> bool {
    if AGENT_WORK.with(Cell::get) {
        return false;
    }
    let ok = !DYING.try_with(|d| d.get()).unwrap_or(true);
    if !ok {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// Call after a run: arms the guard (once per thread).
pub fn ran() {
    let _ = GUARD.try_with(|_| ());
}

/// Program runs skipped because their thread was exiting.
pub fn skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}
