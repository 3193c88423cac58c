//! Everything the probe machinery keeps per thread, in one block.
//!
//! The agent is a shared object (`libbpfjet_trace.so`): each Rust
//! thread-local access there is a call to `__tls_get_addr`, and a traced
//! system call used to make a dozen of them (selector, dispatch flag,
//! handler flag, wrapper stack, shadow stack, on entry and on return).
//! Keeping them in one block lets a probe hit look the block up once and
//! pass the pointer down.
//!
//! Access goes through a raw pointer, field by field, never through a
//! `&mut ProbeThread` held across a call: a signal handler on the same
//! thread (the SIGSYS handler, an application handler hitting a probe) may
//! touch the block in between.

use crate::fast_syscalls::FastStack;
use crate::shadow::Shadow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The selector byte's values (`PR_SYS_DISPATCH_*`'s).
pub(crate) const SELECTOR_ALLOW: u8 = 0;
pub(crate) const SELECTOR_BLOCK: u8 = 1;

#[repr(C)]
pub(crate) struct ProbeThread {
    /// The byte the kernel reads at each system call of this thread
    /// (Syscall User Dispatch's selector).
    pub(crate) selector: u8,
    /// This thread's system calls are dispatched.
    pub(crate) dispatched: bool,
    /// The application asked for SIGSYS to be blocked; it never really is
    /// (a blocked SIGSYS at a dispatched call kills the process).
    pub(crate) app_blocks_sigsys: bool,
    /// Set while this thread runs a handler: probes hit from inside a
    /// handler (a helper calling a probed libc function, a signal handler)
    /// are counted as missed instead of recursing.
    pub(crate) in_handler: bool,
    /// The thread's wrapper and shadow stacks ([`stacks`]): null until the
    /// thread's first hooked call, [`RETIRED`] once freed at its exit.
    pub(crate) stacks: *mut Stacks,
}

/// The per-thread stacks, ~27 KB: kept out of the thread-local block so
/// that block (and the agent's whole TLS segment) stays a few hundred
/// bytes, see below. In this order: the wrapper stack's counter and
/// length (at its end), the shadow stack's length and its first frame
/// share one cache line, which is all a wrapper hit touches of them at
/// the usual depth (checked below).
#[repr(C)]
pub(crate) struct Stacks {
    /// The next thread's stacks on the list of live stacks ([`LIVE`]).
    next: *mut Stacks,
    /// Wrapper calls in flight (the libc wrapper fast path) and the
    /// thread's fast-path count (`FastStack::calls`).
    pub(crate) fast: FastStack,
    /// Hooked return addresses.
    pub(crate) shadow: Shadow,
}

// The hot line: from the fast-path counter to the end of the first shadow
// frame (the mapping is page-aligned, so offsets are line positions).
const _: () = {
    let first = std::mem::offset_of!(Stacks, fast) + std::mem::offset_of!(FastStack, calls);
    let end = std::mem::offset_of!(Stacks, shadow)
        + std::mem::offset_of!(Shadow, frames)
        + std::mem::size_of::<crate::shadow::Frame>();
    assert!(first / 64 == (end - 1) / 64);
};

/// Every thread's mapped stacks, linked through `Stacks::next`, and the
/// fast-path calls of the threads whose stacks were unmapped: the exact
/// count of the process is their sum ([`fast_calls`]). Registering and
/// retiring (a thread's first hooked call, its exit) and summing (the
/// report) take the lock; counting a call does not (one plain add to the
/// thread's own counter, where a process-wide locked add was).
struct Live {
    head: *mut Stacks,
    retired_calls: u64,
}

/// [`Live`] behind a spin lock rather than a `Mutex`: taken in a probe hit
/// and at thread exit, where a contended futex would be a system call of
/// the traced thread; and a fork child must not find it held by a thread
/// that does not exist there (`pthread_atfork` handlers take it around
/// `fork`, [`locked`]).
struct LiveCell(std::cell::UnsafeCell<Live>);

// SAFETY: every access goes through `locked`, which serialises them.
unsafe impl Sync for LiveCell {}

static LIVE: LiveCell = LiveCell(std::cell::UnsafeCell::new(Live {
    head: std::ptr::null_mut(),
    retired_calls: 0,
}));
/// The lock: the thread pointer of its holder, 0 when free. Holding the
/// owner in the lock word lets a `fork` made by a signal handler that
/// interrupted the holder see that it must not wait for itself.
static LIVE_OWNER: AtomicUsize = AtomicUsize::new(0);
/// Set by the `fork` prepare handler when its thread already held the
/// lock (the fork handlers then leave it to the interrupted holder).
static FORK_BY_OWNER: AtomicBool = AtomicBool::new(false);

/// The calling thread's thread pointer (`fs:0`): nonzero, unique among
/// live threads.
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the thread control block's self pointer; no side
    // effects.
    unsafe {
        std::arch::asm!(
            "mov {tp}, qword ptr fs:[0]",
            tp = out(reg) tp,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    tp
}

fn lock_live() {
    let me = thread_pointer();
    while LIVE_OWNER
        .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

fn unlock_live() {
    LIVE_OWNER.store(0, Ordering::Release);
}

extern "C" fn unlock_live_after_fork() {
    if !FORK_BY_OWNER.swap(false, Ordering::Relaxed) {
        unlock_live();
    }
}

extern "C" fn lock_live_before_fork() {
    // A signal handler forking while its own thread holds the lock: the
    // list is this thread's to finish (in the child too, where the handler
    // returns into the interrupted update), so it is not taken again.
    if LIVE_OWNER.load(Ordering::Relaxed) == thread_pointer() {
        FORK_BY_OWNER.store(true, Ordering::Relaxed);
        return;
    }
    lock_live();
}

/// Registers the `fork` handlers of the list of live stacks; called when
/// probes are attached (registering may allocate, which a probe hit
/// should not), and again, at no cost, by [`locked`].
pub(crate) fn prepare_for_fork() {
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registers plain functions; the lock is held across
        // `fork` so the child's copy of the list is consistent and free.
        unsafe {
            libc::pthread_atfork(
                Some(lock_live_before_fork),
                Some(unlock_live_after_fork),
                Some(unlock_live_after_fork),
            )
        };
    });
}

/// Runs `f` on the list of live stacks, holding its lock.
fn locked<R>(f: impl FnOnce(&mut Live) -> R) -> R {
    prepare_for_fork();
    lock_live();
    // SAFETY: the lock is held.
    let r = f(unsafe { &mut *LIVE.0.get() });
    unlock_live();
    r
}

/// Counts a system call of this thread traced through a wrapper's probes.
/// A plain add: only this thread writes its counter, and the wrapper
/// handlers that call this do not nest on a thread (a signal handler's
/// wrapper call meanwhile finds the handler flag set and takes the slow
/// path).
#[inline(always)]
pub(crate) fn count_fast_call(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Fast-path calls counted per thread ([`count_fast_call`]) so far, over
/// every thread of the process, those that exited included.
pub(crate) fn fast_calls() -> u64 {
    locked(|live| {
        let mut n = live.retired_calls;
        let mut s = live.head;
        while !s.is_null() {
            // SAFETY: stacks on the list are mapped until they leave it
            // (under this lock).
            unsafe {
                n += (*s).fast.calls.load(Ordering::Relaxed);
                s = (*s).next;
            }
        }
        n
    })
}

/// `ProbeThread::stacks` of a thread whose stacks were freed (its
/// thread-local destructors ran): no more hooked returns on it.
pub(crate) const RETIRED: *mut Stacks = std::ptr::dangling_mut::<Stacks>();
/// [`RETIRED`]'s address (for the assembly of the quick return).
pub(crate) const RETIRED_ADDR: usize = std::mem::align_of::<Stacks>();

// The block is a thread-local of the initial-exec model, declared here in
// assembly (stable Rust cannot choose a model; its thread-locals in a
// shared object are general-dynamic: a `__tls_get_addr` call per access).
// Initial exec is a load of the block's offset from the GOT and an add of
// the thread pointer. It marks `libbpfjet_trace.so` `STATIC_TLS`: the
// loader must place its TLS segment in the static TLS block, which a
// preloaded library always gets, and which a library loaded later with
// `dlopen` (`bpfjet trace --pid`) gets only from glibc's surplus of a few
// hundred bytes to spare. So the block is small (the stacks are allocated
// per thread, [`stacks`]); the test `agent_tls_fits_dlopen` of the CLI
// checks the agent's segment. Zero bytes are the initial value: every
// field of the empty block is zero (`empty_is_zero`).
std::arch::global_asm!(
    ".pushsection .tbss.bpfjet_probe_thread,\"awT\",@nobits",
    ".p2align 3",
    ".globl bpfjet_probe_thread",
    ".hidden bpfjet_probe_thread",
    ".type bpfjet_probe_thread,@object",
    "bpfjet_probe_thread:",
    ".zero {size}",
    ".size bpfjet_probe_thread, {size}",
    ".popsection",
    size = const std::mem::size_of::<ProbeThread>(),
);

const _: () = assert!(std::mem::align_of::<ProbeThread>() <= 8);

/// The value the zero bytes of a new thread's block are.
#[cfg(test)]
const EMPTY: ProbeThread = ProbeThread {
    selector: SELECTOR_ALLOW,
    dispatched: false,
    app_blocks_sigsys: false,
    in_handler: false,
    stacks: std::ptr::null_mut(),
};

/// This thread's block (the thread pointer plus the block's offset).
#[inline(always)]
pub(crate) fn current() -> *mut ProbeThread {
    let p: usize;
    // SAFETY: reads the thread pointer (`fs:0` holds it on x86-64) and the
    // GOT entry of the block's offset; no side effects.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + bpfjet_probe_thread@GOTTPOFF]",
            p = out(reg) p,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    p as *mut ProbeThread
}

/// The thread's stacks, allocated at its first hooked call; `None` if they
/// cannot be (the allocation failed, or the thread's thread-local
/// destructors already ran): the caller then does not hook the return.
///
/// # Safety
/// `t` is this thread's block; no other reference to its stacks is live.
#[inline(always)]
pub(crate) unsafe fn stacks<'a>(t: *mut ProbeThread) -> Option<&'a mut Stacks> {
    // SAFETY: the caller's block.
    let s = unsafe { (*t).stacks };
    if s as usize > RETIRED as usize {
        // SAFETY: a live allocation of this thread (see `allocate`).
        return Some(unsafe { &mut *s });
    }
    if s == RETIRED {
        return None;
    }
    // SAFETY: as above.
    unsafe { allocate(t) }
}

/// The thread's stacks if they exist (a return to pop, a walk).
///
/// # Safety
/// As [`stacks`].
#[inline(always)]
pub(crate) unsafe fn existing_stacks<'a>(t: *mut ProbeThread) -> Option<&'a mut Stacks> {
    // SAFETY: the caller's block.
    let s = unsafe { (*t).stacks };
    // SAFETY: a live allocation of this thread.
    (s as usize > RETIRED as usize).then(|| unsafe { &mut *s })
}

/// Maps the thread's stacks (zero bytes are empty stacks) and arranges
/// for them to be unmapped when the thread exits. `mmap` rather than
/// `malloc`: the allocator may itself be probed, and this runs in a probe
/// hit; bpfjet's system calls here are not the application's.
#[cold]
unsafe fn allocate<'a>(t: *mut ProbeThread) -> Option<&'a mut Stacks> {
    let len = std::mem::size_of::<Stacks>();
    let p = crate::syscalls::allowed_in(t, || {
        // SAFETY: an anonymous private mapping; no preconditions.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        }
    });
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the caller's block.
    unsafe { (*t).stacks = p.cast() };
    let stacks: *mut Stacks = p.cast();
    locked(|live| {
        // SAFETY: mapped just now, this thread's; the list's lock is held.
        unsafe { (*stacks).next = live.head };
        live.head = stacks;
    });
    // Unmapped by the destructor of a Rust thread-local (other threads);
    // the main thread keeps them (the process is ending when its
    // thread-locals go, and its exit path still makes hooked calls).
    // SAFETY: plain system calls (not dispatched: bpfjet's own).
    let main = crate::syscalls::allowed_in(t, || unsafe { libc::gettid() == libc::getpid() });
    if !main {
        let _ = STACKS_OWNER.try_with(|_| ());
    }
    // SAFETY: mapped just now, zero bytes: empty stacks.
    Some(unsafe { &mut *p.cast::<Stacks>() })
}

/// Unmaps the thread's stacks when its thread-locals are destroyed, if no
/// hooked call is in flight (else they stay: a return still needs them).
/// Hooked calls made after this are not hooked at their return (return
/// probes count them as missed; wrapper calls take the slow path, which
/// traces them all the same).
struct StacksOwner;

impl Drop for StacksOwner {
    fn drop(&mut self) {
        let t = current();
        // SAFETY: this thread's block, no other use live (a destructor).
        unsafe {
            let Some(s) = existing_stacks(t) else { return };
            if s.shadow.depth() != 0 || !s.fast.is_empty() {
                return;
            }
            let p = (*t).stacks;
            (*t).stacks = RETIRED;
            // Off the list, its count kept, before it is unmapped.
            locked(|live| {
                live.retired_calls += (*p).fast.calls.load(Ordering::Relaxed);
                let mut at: *mut *mut Stacks = &mut live.head;
                while !(*at).is_null() && *at != p {
                    at = &mut (**at).next;
                }
                if *at == p {
                    *at = (*p).next;
                }
            });
            crate::syscalls::allowed_in(t, || {
                libc::munmap(p.cast(), std::mem::size_of::<Stacks>())
            });
        }
    }
}

thread_local! {
    static STACKS_OWNER: StacksOwner = const { StacksOwner };
}

/// Writes the selector (volatile: the kernel reads it at the next system
/// call, which the compiler does not see as a read).
///
/// # Safety
/// `t` is this thread's block.
#[inline(always)]
pub(crate) unsafe fn set_selector(t: *mut ProbeThread, v: u8) {
    // SAFETY: the caller's block, alive as long as the thread.
    unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!((*t).selector), v) }
}

/// Reads the selector, see [`set_selector`].
///
/// # Safety
/// `t` is this thread's block.
#[inline(always)]
pub(crate) unsafe fn selector(t: *mut ProbeThread) -> u8 {
    // SAFETY: as in `set_selector`.
    unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*t).selector)) }
}

/// Sets ALLOW; returns the previous value.
///
/// # Safety
/// `t` is this thread's block.
#[inline(always)]
pub(crate) unsafe fn replace_selector(t: *mut ProbeThread, v: u8) -> u8 {
    // SAFETY: as in `set_selector`.
    unsafe {
        let old = selector(t);
        set_selector(t, v);
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new thread's block is zero bytes: it must read as [`EMPTY`].
    #[test]
    fn empty_is_zero() {
        let t = std::thread::spawn(|| {
            let b = current();
            // SAFETY: this thread's block, untouched so far.
            let b = unsafe { &*b };
            (
                b.selector == EMPTY.selector,
                b.dispatched == EMPTY.dispatched,
                b.app_blocks_sigsys == EMPTY.app_blocks_sigsys,
                b.in_handler == EMPTY.in_handler,
                b.stacks == EMPTY.stacks,
                current() as usize % std::mem::align_of::<ProbeThread>(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(t, (true, true, true, true, true, 0));
    }

    /// The block stays small: the agent's TLS segment must fit glibc's
    /// static TLS surplus for `dlopen`.
    #[test]
    fn the_block_is_small() {
        assert!(std::mem::size_of::<ProbeThread>() <= 16);
    }

    /// Stacks are made at first use, empty, per thread, and unmapped when
    /// a thread's thread-locals go.
    #[test]
    fn stacks_are_per_thread_and_retired_at_exit() {
        let (here, retired) = std::thread::spawn(|| {
            let t = current();
            // SAFETY: this thread's block.
            unsafe {
                assert!(existing_stacks(t).is_none());
                let s = stacks(t).expect("mapped");
                assert_eq!(s.shadow.depth(), 0);
                assert!(s.fast.is_empty());
                let here = s as *mut Stacks as usize;
                assert_eq!(stacks(t).map(|s| s as *mut Stacks as usize), Some(here));
                // Run this thread's destructors' effect by hand: the owner's
                // drop retires the stacks.
                drop(StacksOwner);
                (here, (*t).stacks == RETIRED && stacks(t).is_none())
            }
        })
        .join()
        .unwrap();
        assert_ne!(here, 0);
        assert!(retired);
    }

    /// Counts a thread's fast-path calls as the wrapper handler does.
    fn count(n: u64) {
        let t = current();
        // SAFETY: this thread's block.
        let s = unsafe { stacks(t) }.expect("mapped");
        for _ in 0..n {
            count_fast_call(&s.fast.calls);
        }
    }

    /// The per-thread counters sum exactly: threads that exited (their
    /// stacks unmapped), threads still running, and this one.
    /// The fork handlers around a `fork` made while this thread holds the
    /// list's lock (a signal handler interrupting the holder) neither wait
    /// for it nor release it; around any other `fork` they take and give
    /// it back.
    #[test]
    fn fork_handlers_do_not_wait_for_their_own_thread() {
        lock_live();
        lock_live_before_fork();
        unlock_live_after_fork();
        assert_eq!(LIVE_OWNER.load(Ordering::Relaxed), thread_pointer());
        unlock_live();
        lock_live_before_fork();
        assert_eq!(LIVE_OWNER.load(Ordering::Relaxed), thread_pointer());
        unlock_live_after_fork();
        assert_eq!(LIVE_OWNER.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn fast_calls_sum_over_live_and_exited_threads() {
        let before = fast_calls();
        let exited: Vec<_> = (1..=8u64)
            .map(|i| std::thread::spawn(move || count(1000 * i)))
            .collect();
        for t in exited {
            t.join().unwrap();
        }
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (counted, done) = std::sync::mpsc::channel::<()>();
        let live = std::thread::spawn(move || {
            count(777);
            counted.send(()).unwrap();
            wait.recv().unwrap();
            count(1);
        });
        done.recv().unwrap();
        count(5);
        assert_eq!(fast_calls() - before, 36_000 + 777 + 5);
        go.send(()).unwrap();
        live.join().unwrap();
        assert_eq!(fast_calls() - before, 36_000 + 777 + 5 + 1);
    }

    #[test]
    fn blocks_are_per_thread() {
        let here = current() as usize;
        let there = std::thread::spawn(|| current() as usize).join().unwrap();
        assert_ne!(here, there);
        // SAFETY: this thread's block.
        unsafe { set_selector(current(), SELECTOR_BLOCK) };
        let seen = std::thread::spawn(|| unsafe { selector(current()) })
            .join()
            .unwrap();
        assert_eq!(seen, SELECTOR_ALLOW);
        // SAFETY: as above.
        assert_eq!(
            unsafe { replace_selector(current(), SELECTOR_ALLOW) },
            SELECTOR_BLOCK
        );
    }
}
