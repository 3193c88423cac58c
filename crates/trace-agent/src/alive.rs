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
}

static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// False once this thread's thread-locals are being destroyed (the skip is
/// counted).
pub fn can_run() -> bool {
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
