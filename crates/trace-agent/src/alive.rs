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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
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

// One byte for every check of a run, a thread-local of the initial-exec
// model declared in assembly (a Rust thread-local in this shared object
// costs a `__tls_get_addr` call per access). Initial-exec TLS marks the
// agent `STATIC_TLS`: a `dlopen` of it (`bpfjet trace --pid`) needs its
// whole TLS segment to fit glibc's static TLS surplus, which it does since
// the probe stacks left TLS (see `bpfjet_probe`'s per-thread block and the
// CLI test `trace_agent_tls`). No destructor: readable for the thread's
// whole life. Starts at 0.
std::arch::global_asm!(
    ".pushsection .tbss.bpfjet_agent_flags,\"awT\",@nobits",
    ".globl bpfjet_agent_flags",
    ".hidden bpfjet_agent_flags",
    ".type bpfjet_agent_flags,@object",
    "bpfjet_agent_flags:",
    ".zero 1",
    ".size bpfjet_agent_flags, 1",
    ".popsection",
);

/// This thread's flags byte.
#[inline(always)]
fn flags() -> &'static Cell<u8> {
    let p: usize;
    // SAFETY: reads the thread pointer (`fs:0`) and the GOT entry of the
    // byte's offset; no side effects.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + bpfjet_agent_flags@GOTTPOFF]",
            p = out(reg) p,
            options(pure, readonly, nostack, preserves_flags),
        );
        // SAFETY: this thread's byte, alive as long as the thread; only
        // this thread uses it (a `Cell`, never shared).
        &*(p as *const Cell<u8>)
    }
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
