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
use std::cell::UnsafeCell;

/// The selector byte's values (`PR_SYS_DISPATCH_*`'s).
pub(crate) const SELECTOR_ALLOW: u8 = 0;
pub(crate) const SELECTOR_BLOCK: u8 = 1;

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
    /// Wrapper calls in flight (the libc wrapper fast path).
    pub(crate) fast: FastStack,
    /// Hooked return addresses.
    pub(crate) shadow: Shadow,
}

// The block is a const-initialised thread-local without Drop: a plain TLS
// block, usable from any point of a thread's life (also while its
// destructors run), no allocation. It stays a Rust thread-local of the
// general-dynamic model (a `__tls_get_addr` call per access in the agent)
// although initial-exec would be cheaper: an initial-exec access marks
// `libbpfjet_trace.so` `STATIC_TLS`, and its TLS segment (this block holds
// the shadow stack, ~27 KB) does not fit in the static TLS surplus glibc
// keeps for libraries loaded later, so `bpfjet trace --pid`, which loads
// the agent with `dlopen`, would fail.
thread_local! {
    static THREAD: UnsafeCell<ProbeThread> = const { UnsafeCell::new(EMPTY) };
}

/// A new thread's block.
const EMPTY: ProbeThread = ProbeThread {
    selector: SELECTOR_ALLOW,
    dispatched: false,
    app_blocks_sigsys: false,
    in_handler: false,
    fast: FastStack::EMPTY,
    shadow: Shadow::EMPTY,
};

/// This thread's block (one thread-local lookup).
#[inline(always)]
pub(crate) fn current() -> *mut ProbeThread {
    THREAD.with(|t| t.get())
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

    /// A new thread's block reads as [`EMPTY`].
    #[test]
    fn a_new_thread_starts_empty() {
        let t = std::thread::spawn(|| {
            let b = current();
            // SAFETY: this thread's block, untouched so far.
            let b = unsafe { &*b };
            (
                b.selector == EMPTY.selector,
                b.dispatched == EMPTY.dispatched,
                b.app_blocks_sigsys == EMPTY.app_blocks_sigsys,
                b.in_handler == EMPTY.in_handler,
                b.fast.is_empty() && EMPTY.fast.is_empty(),
                b.shadow.depth() == EMPTY.shadow.depth(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(t, (true, true, true, true, true, true));
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
