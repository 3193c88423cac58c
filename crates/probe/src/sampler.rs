//! CPU-time sampling of the process's own threads: what a `perf_event`
//! program on a `cpu-clock` event sees of one process.
//!
//! The kernel's sampling profiler (libbpf-tools' `profile`, bpftrace's
//! `profile:hz:N`) runs a `perf_event` program every 1/F seconds of CPU
//! time, in whatever task is on the CPU, with that task's registers. Inside
//! one process the same samples are that process's: each thread gets a
//! POSIX timer on its own CPU-time clock (`CLOCK_THREAD_CPUTIME_ID`), which
//! signals that very thread (`SIGEV_THREAD_ID`) every period of CPU time it
//! consumed; the handler hands the interrupted registers (the signal's
//! `ucontext`) to the sample handler, as an `int3` probe's handler gets
//! them. An interval timer reloads from its scheduled expiry, not from when
//! the tick noticed it, so the rate stays F per CPU second though expiries
//! are seen at scheduler ticks; the first expiry is at a random point of
//! the first period, so that threads shorter than a period are sampled as
//! often as their CPU time says.
//!
//! A sample is skipped (counted in [`missed`]) when it lands in a thread
//! already inside one of bpfjet's handlers (a probe's program, another
//! sample): the kernel skips a program that would recurse the same way.
//! The handler allocates nothing and takes no lock: threads are made ready
//! ([`arm_current_thread`]'s caller warms what the programs need) before
//! their timer starts.
//!
//! The signal is [`signal`] (`SIGRTMAX - 2`); a process that blocks it in a
//! thread gets no samples of that thread (they stay pending), and one that
//! installs its own handler for it replaces bpfjet's.

use crate::regs::PtRegs;
use crate::uprobe::{enter_handler, leave_handler, ProbeHandler};
use crate::ProbeError;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

static HANDLER: OnceLock<ProbeHandler> = OnceLock::new();
static PERIOD_NS: AtomicU64 = AtomicU64::new(0);
static SAMPLES: AtomicU64 = AtomicU64::new(0);
static MISSED: AtomicU64 = AtomicU64::new(0);
/// The timers made in this process (deleted by [`stop`]), behind a spin
/// lock a forked child can take back: a thread of the parent may have held
/// it at the fork, and that thread does not exist in the child.
static TIMERS_BUSY: AtomicBool = AtomicBool::new(false);
struct TimerList(UnsafeCell<Vec<usize>>);
// SAFETY: the list is only reached through `with_timers`, under the lock.
unsafe impl Sync for TimerList {}
static TIMERS: TimerList = TimerList(UnsafeCell::new(Vec::new()));

fn with_timers<R>(f: impl FnOnce(&mut Vec<usize>) -> R) -> R {
    while TIMERS_BUSY.swap(true, Ordering::Acquire) {
        std::hint::spin_loop();
    }
    // SAFETY: the lock is held: no other reference to the list exists.
    let r = f(unsafe { &mut *TIMERS.0.get() });
    TIMERS_BUSY.store(false, Ordering::Release);
    r
}

/// The sampling signal.
pub fn signal() -> i32 {
    libc::SIGRTMAX() - 2
}

/// Whether [`install`] was called: new threads are to be armed.
pub fn active() -> bool {
    PERIOD_NS.load(Ordering::Acquire) != 0
}

/// The sampling period in nanoseconds of CPU time (0: not sampling).
pub fn period_ns() -> u64 {
    PERIOD_NS.load(Ordering::Acquire)
}

/// Samples handled so far.
pub fn samples() -> u64 {
    SAMPLES.load(Ordering::Relaxed)
}

/// Samples skipped: their thread was inside another of bpfjet's handlers.
pub fn missed() -> u64 {
    MISSED.load(Ordering::Relaxed)
}

/// Installs the signal handler: `handler` gets each sample's registers
/// (`rip` where the thread was interrupted). Threads are armed one by one
/// ([`arm_current_thread`]). Once per process.
pub fn install(period_ns: u64, handler: ProbeHandler) -> Result<(), ProbeError> {
    if period_ns == 0 {
        return Err(ProbeError::Os {
            what: "sampling period of 0 ns".into(),
            err: std::io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    if HANDLER.set(handler).is_err() {
        return Err(ProbeError::Os {
            what: "the sampler installed twice".into(),
            err: std::io::Error::from_raw_os_error(libc::EBUSY),
        });
    }
    crate::syscalls::install_own_handler(
        signal(),
        on_sample as *const () as usize,
        libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK,
    )?;
    PERIOD_NS.store(period_ns, Ordering::Release);
    Ok(())
}

/// Set by [`stop`]: threads made afterwards (while the report is being
/// written) get no timer.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Starts the calling thread's CPU-time timer (its signal unblocked).
pub fn arm_current_thread() -> Result<(), ProbeError> {
    let period = period_ns();
    if period == 0 || STOPPED.load(Ordering::Acquire) {
        return Ok(());
    }
    // SAFETY: timer_create/settime with fully initialised arguments; the
    // timer id is kept for `stop`.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal());
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = signal();
        sev.sigev_notify_thread_id = libc::gettid();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut timer) != 0 {
            return Err(ProbeError::os("timer_create(CLOCK_THREAD_CPUTIME_ID)"));
        }
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // The first expiry at a random point of the first period: a
        // CPU's clock has no phase relation to a thread's start, so a
        // thread that runs less than a period is sampled with the
        // probability its CPU time gives (with the full period first, a
        // short-lived thread would never be).
        let spec = libc::itimerspec {
            it_interval: ts(period),
            it_value: ts(1 + first_phase() % period),
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            let e = ProbeError::os("timer_settime");
            libc::timer_delete(timer);
            return Err(e);
        }
        with_timers(|t| t.push(timer as usize));
        THREAD_TIMER.with(|t| t.0.set(timer as usize));
    }
    Ok(())
}

/// The calling thread's timer, deleted when the thread exits: a process
/// that makes many short-lived threads does not pile up timers (each
/// holds a queued signal of the user's RLIMIT_SIGPENDING).
struct ThreadTimer(std::cell::Cell<usize>);

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        let t = self.0.get();
        if t == 0 {
            return;
        }
        // Not there: `stop` deleted it already (or a fork forgot it).
        let mine = with_timers(|timers| {
            let i = timers.iter().position(|&x| x == t)?;
            Some(timers.swap_remove(i))
        });
        if mine.is_some() {
            // SAFETY: a timer this thread created and nobody deleted.
            unsafe { libc::timer_delete(t as libc::timer_t) };
        }
    }
}

thread_local! {
    static THREAD_TIMER: ThreadTimer = const { ThreadTimer(std::cell::Cell::new(0)) };
}

/// A pseudo-random number for a thread's first expiry (the thread id and
/// the time-stamp counter, mixed).
fn first_phase() -> u64 {
    // SAFETY: gettid has no preconditions; rdtsc only reads the counter.
    let (tid, tsc) = unsafe { (libc::gettid() as u64, core::arch::x86_64::_rdtsc()) };
    let mut x = tid.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ tsc;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

/// In a forked child: the parent's timers are not the child's (the kernel
/// gives a child none), so forget them, and the counts start at zero (the
/// parent reports its own); the caller arms the child's thread.
pub fn forget_parent_timers() {
    // The child has one thread: whoever held the lock at the fork is gone,
    // and may have left the list half-changed: it is dropped unread.
    // SAFETY: single-threaded here; the old list is leaked, not read.
    unsafe { std::mem::forget(std::mem::take(&mut *TIMERS.0.get())) };
    TIMERS_BUSY.store(false, Ordering::Release);
    SAMPLES.store(0, Ordering::Relaxed);
    MISSED.store(0, Ordering::Relaxed);
}

/// Stops every timer of this process: no sample runs after this returns
/// but those already being delivered.
pub fn stop() {
    STOPPED.store(true, Ordering::Release);
    let timers = with_timers(std::mem::take);
    for t in timers {
        // SAFETY: a timer this process created and has not deleted.
        unsafe { libc::timer_delete(t as libc::timer_t) };
    }
}

extern "C" fn on_sample(_sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a siginfo and this thread's ucontext.
    let (info, uc) = unsafe { (&*info, &*(ctx as *const libc::ucontext_t)) };
    // Only a timer's expiry is a sample (someone's kill() is not).
    if info.si_code != libc::SI_TIMER {
        return;
    }
    let Some(handler) = HANDLER.get() else {
        return;
    };
    // Expiries the kernel saw late, at one tick (a thread running in short
    // bursts): each is a sample of this thread's CPU time, taken here, at a
    // point of its run as random as the tick's.
    // SAFETY: a timer's siginfo: `si_tid` then `si_overrun` after the
    // three ints and the padding of the 64-bit layout.
    let overrun = unsafe { *((info as *const libc::siginfo_t as *const u8).add(20) as *const i32) };
    let runs = 1 + overrun.clamp(0, 1000) as u64;
    let thread = crate::thread::current();
    if !enter_handler(thread) {
        MISSED.fetch_add(runs, Ordering::Relaxed);
        return;
    }
    SAMPLES.fetch_add(runs, Ordering::Relaxed);
    let g = &uc.uc_mcontext.gregs;
    for _ in 0..runs {
        let mut regs = PtRegs::from_signal_gregs(g, g[libc::REG_RIP as usize] as u64);
        crate::syscalls::allowed(|| handler(&mut regs));
    }
    leave_handler(thread);
}
