//! Whether this thread can still run programs.
//!
//! The runtime keeps each thread's run state in a thread-local with a
//! destructor; the main thread's are kept past it (see `Guard`), the
//! others' are not. Threads keep making system calls and calling probed
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        // The main thread's thread-locals go at the start of `exit()`,
        // which then flushes stdio, runs `atexit` handlers and calls
        // `exit_group`: its run states are kept for those (the runtime's
        // destructor runs after this one). (Its own ids are asked with
        // dispatch off: these calls are not the program's.)
        // SAFETY: gettid and getpid cannot fail.
        let main = bpfjet_probe::syscalls::allowed(|| unsafe { libc::gettid() == libc::getpid() });
        if main {
            bpfjet_runtime::tracing::keep_thread_runs_at_exit();
            return;
        }
        let f = flags();
        f.set(f.get() | DYING);
    }
}

/// The thread's thread-locals are being destroyed.
const DYING: u8 = 1;
/// The thread does the agent's own work.
const AGENT_WORK: u8 = 2;
/// The guard is armed (touched once).
const ARMED: u8 = 4;

thread_local! {
    static GUARD: Guard = const { Guard };
}

// One byte for every check of a run, an initial-exec thread-local
// (`bpfjet_runtime`'s `initial_exec_thread_local!`: no `__tls_get_addr`
// per access in this shared object). Initial-exec TLS marks the agent
// `STATIC_TLS`: a `dlopen` of it (`bpfjet trace --pid`) needs its whole TLS
// segment to fit glibc's static TLS surplus, which it does since the probe
// stacks left TLS (see `bpfjet_probe`'s per-thread block and the CLI test
// `trace_agent_tls`). Starts at 0.
bpfjet_runtime::initial_exec_thread_local! {
    /// This thread's flags byte.
    unsafe fn flags() -> &'static Cell<u8> = "bpfjet_agent_flags";
}

/// Runs `f` as the agent's own work: probes and system calls it hits on
/// this thread run no program.
pub fn agent_work<R>(f: impl FnOnce() -> R) -> R {
    let w = flags();
    let prev = w.replace(w.get() | AGENT_WORK) & AGENT_WORK;
    let r = f();
    w.set((w.get() & !AGENT_WORK) | prev);
    r
}

/// The agent's own threads ([`spawn`]), by `pthread_t`.
static AGENT_THREADS: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Spawns one of the agent's own threads: all its work is the agent's
/// ([`agent_work`]), and it is known as the agent's ([`is_agent_thread`])
/// from the moment this returns, so `bpfjet trace --pid`, which dispatches
/// every other thread of the process once the constructor returned, leaves
/// it alone even before it ran. (Known by its `pthread_t`, which the
/// spawner has: spawned from the constructor of a library being
/// `dlopen`ed, the thread cannot say anything itself before `dlopen`
/// returns — its first thread-local access waits for the loader.)
pub fn spawn<T: Send + 'static>(
    builder: std::thread::Builder,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    use std::os::unix::thread::JoinHandleExt;
    let handle = builder.spawn(move || agent_work(f))?;
    AGENT_THREADS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(handle.as_pthread_t() as usize);
    Ok(handle)
}

/// Whether the calling thread is one of the agent's own ([`spawn`]).
pub fn is_agent_thread() -> bool {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as usize;
    AGENT_THREADS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&me)
}

/// Whether this thread is doing the agent's own work now (its consumer
/// and control threads always are).
pub fn is_agent_work() -> bool {
    flags().get() & AGENT_WORK != 0
}

/// Whether [`detach`] was called.
pub fn is_detached() -> bool {
    DETACHED.load(Ordering::SeqCst)
}

/// `bpfjet trace --pid` detached: every probe is pass-through.
static DETACHED: AtomicBool = AtomicBool::new(false);

/// From now on no program runs (late_attach.rs): probes and return
/// trampolines only execute the original code.
pub fn detach() {
    DETACHED.store(true, Ordering::SeqCst);
}

static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// False once this thread's thread-locals are being destroyed (the skip is
/// counted), and while the thread does the agent's own work (not counted).
/// Call [`ran`] with the returned token after the run.
#[inline]
pub fn can_run() -> Option<Armed> {
    if DETACHED.load(Ordering::Relaxed) {
        return None;
    }
    let now = flags().get();
    if now & (AGENT_WORK | DYING) == 0 {
        return Some(Armed(now & ARMED != 0));
    }
    if now & AGENT_WORK == 0 {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
    }
    None
}

/// Whether the thread's guard was armed when [`can_run`] looked.
#[derive(Clone, Copy)]
pub struct Armed(bool);

impl Armed {
    /// Whether the guard was armed: a handler that must not allocate (a
    /// signal's) runs programs only then.
    pub fn is_armed(self) -> bool {
        self.0
    }
}

/// Arms this thread's guard now, outside any handler (the sampler's
/// threads, before their timer starts).
pub fn prepare_thread() {
    arm();
}

/// Call after a run: arms the guard (once per thread; later calls only
/// look at the token).
#[inline]
pub fn ran(armed: Armed) {
    if !armed.0 {
        arm();
    }
}

#[cold]
fn arm() {
    let _ = GUARD.try_with(|_| ());
    let f = flags();
    f.set(f.get() | ARMED);
}

/// Program runs skipped because their thread was exiting.
pub fn skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// Count afresh (a forked child, an image handing over at `exec`).
pub fn reset_skipped() {
    SKIPPED.store(0, Ordering::Relaxed);
}
