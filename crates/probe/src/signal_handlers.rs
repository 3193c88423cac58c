//! Application signal handlers run dispatched.
//!
//! A thread's selector is ALLOW while bpfjet's own code performs a traced
//! call: inside the SIGSYS handler of a slow-path call and between entry and
//! return of a libc-wrapper fast-path call, which may block (a `read` on an
//! empty pipe). A signal handler of the application interrupting such a
//! call would run with ALLOW, its system calls untraced. So every handler
//! the application installs (its `rt_sigaction` traps through the SIGSYS
//! path, [`rt_sigaction`]; handlers in place when the agent starts are
//! wrapped by [`wrap_existing`]) is installed as [`bpfjet_signal_trampoline`]
//! with the application's flags, mask and restorer. The trampoline saves
//! the thread's selector, sets BLOCK (a dispatched thread), calls the
//! application's handler with the same `(sig, info, ucontext)`, and
//! restores the selector before the signal return:
//! * interrupted context BLOCK (application code): it returns to the
//!   application's restorer, whose `rt_sigreturn` traps and is performed by
//!   the SIGSYS handler (which sets BLOCK), as before;
//! * interrupted context ALLOW (bpfjet's code): the `rt_sigreturn` is traced
//!   here (its enter event, as the SIGSYS path reports it) and performed
//!   from the allowed range with the selector set back to ALLOW in the same
//!   instruction sequence, so it does not trap and the interrupted call
//!   resumes as it was.
//!
//! The kernel keeps the application's flags: `SA_RESETHAND` resets the
//! action to `SIG_DFL` at delivery, `SA_NODEFER`, `SA_ONSTACK` and the mask
//! apply to the trampoline as to the handler. Queries of the old action
//! report the application's handler. A handler that `longjmp`s out leaves
//! the trampoline's frame behind with the selector BLOCK (application code
//! runs dispatched after it; a wrapper's shadow-stack frame is abandoned,
//! see "longjmp" in docs/TRACING.md).

use crate::regs::PtRegs;
use crate::syscalls::{self, KernelSigaction, SIGSYS_BIT};
use crate::thread::{self, SELECTOR_ALLOW, SELECTOR_BLOCK};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const NSIG: usize = 64;
const SIG_DFL: usize = 0;
const SIG_IGN: usize = 1;

/// The application's handler of each signal (index = signal number), for
/// the signals whose kernel action is the trampoline. Only real handlers
/// are stored: a signal already delivered to the trampoline while the
/// application switches to `SIG_DFL` still finds a function to call.
static APP_HANDLERS: [AtomicUsize; NSIG + 1] = [const { AtomicUsize::new(0) }; NSIG + 1];
/// Whether the application's mask of each signal's handler holds SIGSYS,
/// which is never blocked in a handler (a dispatched call with SIGSYS
/// blocked kills the process): the mask read back still holds it.
static APP_MASKS_SIGSYS: [AtomicBool; NSIG + 1] = [const { AtomicBool::new(false) }; NSIG + 1];

fn trampoline() -> usize {
    bpfjet_signal_trampoline as *const () as usize
}

/// Whether signal `sig`'s handler may be wrapped (SIGSYS is bpfjet's,
/// SIGKILL and SIGSTOP have none).
fn wrappable(sig: u64) -> bool {
    (1..=NSIG as u64).contains(&sig)
        && sig != libc::SIGSYS as u64
        && sig != libc::SIGKILL as u64
        && sig != libc::SIGSTOP as u64
}

/// The application's `rt_sigaction(sig, act, oldact, size)`, trapped by the
/// SIGSYS handler (not SIGSYS itself): a handler is installed as the
/// trampoline, the old action reports the application's handler.
pub(crate) fn rt_sigaction(a: &[u64; 6]) -> i64 {
    let (sig, act, oldact, size) = (a[0], a[1], a[2], a[3]);
    if !wrappable(sig) || size != 8 {
        // The kernel's answer (EINVAL for a bad signal or size).
        // SAFETY: the application's call as it made it.
        return unsafe { syscalls::raw_syscall6(13, sig, act, oldact, size, 0, 0) };
    }
    let mut new = KernelSigaction::default();
    if act != 0 && !syscalls::copy_user(act, new.as_bytes_mut(), false) {
        return -(libc::EFAULT as i64);
    }
    let app = new.handler;
    let wrap = act != 0 && app != SIG_DFL && app != SIG_IGN;
    let masks_sigsys = new.mask & SIGSYS_BIT != 0;
    if wrap {
        new.handler = trampoline();
        new.mask &= !SIGSYS_BIT;
    }
    let prev = APP_HANDLERS[sig as usize].load(Ordering::Acquire);
    let prev_masks_sigsys = APP_MASKS_SIGSYS[sig as usize].load(Ordering::Acquire);
    if wrap {
        APP_HANDLERS[sig as usize].store(app, Ordering::Release);
        APP_MASKS_SIGSYS[sig as usize].store(masks_sigsys, Ordering::Release);
    }
    let mut old = KernelSigaction::default();
    // SAFETY: rt_sigaction with our own buffers.
    let r = unsafe {
        syscalls::raw_syscall6(
            13,
            sig,
            if act != 0 {
                &new as *const KernelSigaction as u64
            } else {
                0
            },
            &mut old as *mut KernelSigaction as u64,
            8,
            0,
            0,
        )
    };
    if r != 0 {
        if wrap {
            APP_HANDLERS[sig as usize].store(prev, Ordering::Release);
            APP_MASKS_SIGSYS[sig as usize].store(prev_masks_sigsys, Ordering::Release);
        }
        return r;
    }
    if old.handler == trampoline() {
        old.handler = prev;
        if prev_masks_sigsys {
            old.mask |= SIGSYS_BIT;
        }
    }
    if oldact != 0 && !syscalls::copy_user(oldact, old.as_bytes_mut(), true) {
        return -(libc::EFAULT as i64);
    }
    0
}

/// Wraps the handlers in place when the agent starts (installed by the
/// program's libraries before `main`, or by a running process before
/// `bpfjet trace --pid` came). Handlers of bpfjet's own object (the agent,
/// or a test binary linking this crate) are left alone: they run with
/// whatever selector they find, as bpfjet's code does.
pub(crate) fn wrap_existing() {
    for sig in 1..=NSIG as u64 {
        if !wrappable(sig) {
            continue;
        }
        let mut old = KernelSigaction::default();
        // SAFETY: raw rt_sigaction query into our buffer.
        let r = unsafe {
            syscalls::raw_syscall6(13, sig, 0, &mut old as *mut KernelSigaction as u64, 8, 0, 0)
        };
        if r != 0
            || old.handler == SIG_DFL
            || old.handler == SIG_IGN
            || old.handler == trampoline()
            || same_object(old.handler, trampoline())
        {
            continue;
        }
        APP_HANDLERS[sig as usize].store(old.handler, Ordering::Release);
        APP_MASKS_SIGSYS[sig as usize].store(old.mask & SIGSYS_BIT != 0, Ordering::Release);
        let new = KernelSigaction {
            handler: trampoline(),
            mask: old.mask & !SIGSYS_BIT,
            ..old
        };
        // SAFETY: raw rt_sigaction from our buffer: the same action with
        // the trampoline as its handler.
        unsafe {
            syscalls::raw_syscall6(13, sig, &new as *const KernelSigaction as u64, 0, 8, 0, 0)
        };
    }
}

/// Puts the application's handlers back (dispatch ended: `bpfjet trace
/// --pid` detaching), so a query after the detach reads them from the
/// kernel. Signals being delivered meanwhile still run the trampoline,
/// which stays in the process and changes no selector of a thread that is
/// no longer dispatched.
pub(crate) fn unwrap_all() {
    for sig in 1..=NSIG as u64 {
        if !wrappable(sig) {
            continue;
        }
        let app = APP_HANDLERS[sig as usize].load(Ordering::Acquire);
        if app == 0 {
            continue;
        }
        let mut old = KernelSigaction::default();
        // SAFETY: raw rt_sigaction query into our buffer.
        let r = unsafe {
            syscalls::raw_syscall6(13, sig, 0, &mut old as *mut KernelSigaction as u64, 8, 0, 0)
        };
        if r != 0 || old.handler != trampoline() {
            continue;
        }
        let new = KernelSigaction {
            handler: app,
            mask: old.mask
                | if APP_MASKS_SIGSYS[sig as usize].load(Ordering::Acquire) {
                    SIGSYS_BIT
                } else {
                    0
                },
            ..old
        };
        // SAFETY: as in `wrap_existing`.
        unsafe {
            syscalls::raw_syscall6(13, sig, &new as *const KernelSigaction as u64, 0, 8, 0, 0)
        };
    }
}

/// Whether two code addresses lie in the same loaded object.
fn same_object(a: usize, b: usize) -> bool {
    // SAFETY: dladdr only reads the loader's tables.
    unsafe {
        let mut ia: libc::Dl_info = std::mem::zeroed();
        let mut ib: libc::Dl_info = std::mem::zeroed();
        libc::dladdr(a as *const libc::c_void, &mut ia) != 0
            && libc::dladdr(b as *const libc::c_void, &mut ib) != 0
            && ia.dli_fbase == ib.dli_fbase
    }
}

/// What the trampoline keeps across the application's handler.
#[repr(C)]
struct Entered {
    handler: usize,
    /// The interrupted selector (bits 0-7) and whether the thread was
    /// dispatched (bit 8). The in-handler flag is left alone: set, the
    /// handler interrupted a probe's handler mid-way, whose state (a
    /// shadow-stack push) its own probe hits must not touch; they are
    /// missed, and its system calls trap (the selector is BLOCK) and are
    /// traced there. The SIGSYS handler clears the flag while it performs
    /// a call that may block.
    saved: u64,
}

/// The trampoline's first call: the application's handler to run, and the
/// interrupted state, with the selector now BLOCK if the thread is
/// dispatched.
extern "C" fn bpfjet_signal_enter(sig: i32) -> Entered {
    let t = thread::current();
    // SAFETY: this thread's block.
    let saved = unsafe {
        let selector = thread::selector(t);
        let dispatched = (*t).dispatched;
        if dispatched {
            thread::set_selector(t, SELECTOR_BLOCK);
        }
        u64::from(selector) | u64::from(dispatched) << 8
    };
    let handler = APP_HANDLERS
        .get(sig as usize)
        .map_or(0, |h| h.load(Ordering::Acquire));
    Entered { handler, saved }
}

/// The trampoline's last call, the application's handler returned: the
/// interrupted selector back. Returns when the signal
/// return goes through the application's restorer; does not return when
/// the interrupted selector was ALLOW (see the module's doc).
///
/// `frame_sp` is the stack pointer the restorer's `rt_sigreturn` would
/// have (the signal frame's `ucontext`).
extern "C" fn bpfjet_signal_leave(saved: u64, frame_sp: u64, restorer: u64) {
    let t = thread::current();
    let selector = saved as u8;
    let dispatched = saved & (1 << 8) != 0;
    // SAFETY: this thread's block.
    if !dispatched || !unsafe { (*t).dispatched } || selector == SELECTOR_BLOCK {
        if dispatched {
            // SAFETY: as above.
            unsafe { thread::set_selector(t, selector) };
        }
        return;
    }
    if let Some(h) = syscalls::hooks().and_then(|h| h.on_enter.as_ref()) {
        // The registers at the restorer's `syscall`, as the SIGSYS path
        // would see them: the frame's values do not matter to the call.
        // SAFETY: `frame_sp` is the kernel's ucontext of this delivery.
        let uc = unsafe { &*(frame_sp as *const libc::ucontext_t) };
        let mut regs = syscalls::regs_from(&uc.uc_mcontext.gregs, 15);
        regs.rip = restorer;
        regs.rsp = frame_sp;
        let regs: PtRegs = regs;
        let outer = crate::uprobe::enter_handler(t);
        h(&regs);
        if outer {
            crate::uprobe::leave_handler(t);
        }
    }
    // SAFETY: the signal frame of this delivery; the selector is this
    // thread's, set to ALLOW by the allowed range's code right before the
    // call, which therefore does not trap.
    unsafe {
        syscalls::sigreturn_with(
            frame_sp,
            std::ptr::addr_of_mut!((*t).selector),
            SELECTOR_ALLOW,
        )
    }
}

extern "C" {
    /// Every application handler's kernel action (see the module's doc).
    fn bpfjet_signal_trampoline();
}

// On entry (the kernel's rt frame): rdi = sig, rsi = info, rdx = ucontext,
// [rsp] = the restorer, rsp + 8 16-byte aligned. Callee-saved registers
// are used freely: the signal return restores every register from the
// frame, and the application's handler preserves them across its call.
std::arch::global_asm!(
    ".pushsection .text.bpfjet_signal,\"ax\",@progbits",
    ".p2align 4",
    ".globl bpfjet_signal_trampoline",
    ".hidden bpfjet_signal_trampoline",
    "bpfjet_signal_trampoline:",
    // CFI: the caller is the restorer (the return address on entry), whose
    // own CFI describes the signal frame: an unwinder (thread
    // cancellation from glibc's SIGCANCEL handler, a C++ exception thrown
    // from a handler) gets through to the interrupted code.
    ".cfi_startproc",
    "mov ebx, edi",
    "mov r12, rsi",
    "mov r13, rdx",
    "sub rsp, 8",
    ".cfi_adjust_cfa_offset 8",
    "call {enter}",
    "mov r14, rdx",
    "mov edi, ebx",
    "mov rsi, r12",
    "mov rdx, r13",
    "test rax, rax",
    "jz 2f",
    "call rax",
    "2:",
    "mov rdi, r14",
    "lea rsi, [rsp + 16]",
    "mov rdx, [rsp + 8]",
    "call {leave}",
    "add rsp, 8",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".popsection",
    enter = sym bpfjet_signal_enter,
    leave = sym bpfjet_signal_leave,
);
