//! Zeroing the stack an injected call used, once it is done.
//!
//! Before `bpfjet trace` makes a thread of the traced process call into
//! the agent (`bpfjet_take_new_links`), it looks for a safe point: it
//! checks every word from each thread's stack pointer up for a return
//! address into libc's allocator (crates/probe/src/inject.rs). That scan is
//! conservative: it cannot tell a live frame from an old word. The call
//! loads programs and maps, which means many `malloc`s and `free`s, and
//! their return addresses stay in the dead stack below the thread's stack
//! pointer. A later frame at that depth does not overwrite every word it
//! covers (most likely a signal frame, whose vector-register save area
//! the kernel writes only in part, or a frame's padding; which one was not
//! pinned down). `free`'s return address (libc's `free` + 0x6f, after its
//! call of `_int_free`) then showed up above the stack pointer at every
//! later stop, and a second tracer's links were refused, with "no safe
//! point ... a frame in libc's allocator", for as long as the process ran
//! (`tests/preload/bpftrace.sh`'s "late system-call tracepoint (second)"
//! case: 2 runs out of 6 here before, 8 out of 8 after).
//!
//! So the call zeroes what its callees left below it before it returns.

/// How far below the caller's frame the stack is zeroed: deeper than the
/// loading of an object goes (verifier and JIT included), and small enough
/// to cost little (the pages were touched by the call already, or are
/// committed now: at most this much).
const SCRUB_BYTES: usize = 256 << 10;
/// The part just below the stack pointer that is left alone: the red zone.
const RED_ZONE: usize = 128;

/// Zero the dead stack below the current frame, at most [`SCRUB_BYTES`]
/// and never past the low end of this thread's stack. Called at the end of
/// an injected call, where allocating is safe (`pthread_getattr_np`
/// allocates for the main thread).
#[inline(never)]
pub(crate) fn scrub_below() {
    let sp: usize;
    // SAFETY: reads the stack pointer; no memory access.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack)) };
    let Some((low, high)) = stack_bounds() else {
        return;
    };
    // A thread running on a stack of its own making (a coroutine's, a
    // signal stack) is left alone: what lies below it may be another
    // stack in use.
    if !(low..high).contains(&sp) {
        return;
    }
    let top = sp.saturating_sub(RED_ZONE) & !7;
    // One page above the low end: the guard gap or the next mapping.
    let bottom = top.saturating_sub(SCRUB_BYTES).max(low + 4096);
    let mut at = top;
    while at > bottom {
        at -= 8;
        // SAFETY: [bottom, top) is this thread's own stack below its
        // stack pointer and red zone: no frame of this thread lives there
        // (a signal handler would run below `sp` and be gone when we
        // resume), and no other thread uses it.
        unsafe { std::ptr::write_volatile(at as *mut u64, 0) };
    }
}

/// This thread's stack, from glibc: its lowest usable address (above the
/// guard) and its end.
fn stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: plain libc calls on a zeroed attribute object this function
    // owns and destroys.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        let mut guard: libc::size_t = 0;
        let _ = libc::pthread_attr_getguardsize(&attr, &mut guard);
        libc::pthread_attr_destroy(&mut attr);
        ok.then_some((addr as usize + guard, addr as usize + size))
    }
}
