//! The fast path for system calls made through common libc wrappers.
//!
//! Under Syscall User Dispatch every system call costs a signal. For the
//! wrappers that carry most I/O (read, write, openat, ...) an entry and a
//! return probe on the wrapper do the tracing instead: the entry runs the
//! enter hook with the system call's registers and sets the thread's
//! selector to ALLOW, so the wrapper's own `syscall` instruction goes
//! straight to the kernel; the return runs the exit hook with the raw result
//! (-errno, rebuilt from the wrapper's -1 and errno) and sets BLOCK again.
//!
//! Which system call a wrapper issues is read from its code, not assumed:
//! its `syscall` instructions are decoded with the constant loaded into eax
//! before each (glibc's `open` issues `openat`). A wrapper whose code does
//! not show exactly the expected number is left to the slow path, which is
//! correct for every call.

use crate::regs::PtRegs;
use crate::symbols::{self, loaded_objects, UprobeTarget};
use crate::syscalls::{self, hooks, set_selector_allow, set_selector_block};
use crate::thread::ProbeThread;
use crate::uprobe::{attach_with, Attachment, ReturnHook};
use crate::ProbeError;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::wrappers::{check, WRAPPERS};
pub(crate) use crate::wrappers::{Args, Ret};

/// The libc functions the fast path patches (`bpfjet trace --pid` keeps
/// stopped threads out of their first bytes).
pub fn wrapper_names() -> impl Iterator<Item = &'static str> {
    WRAPPERS.iter().map(|w| w.wrapper)
}

const FRAMES: usize = 16;

/// Fast-path calls counted process-wide: those of the call-through stubs
/// ([`crate::call_through`]); the entry and return probes count per
/// thread ([`crate::thread::count_fast_call`]).
pub(crate) static FAST_CALLS: AtomicU64 = AtomicU64::new(0);

/// System calls of the application traced through a wrapper's probes so
/// far (no signal), over every thread, exited ones included;
/// [`syscalls::trapped`] counts those that took SIGSYS.
pub fn fast_calls() -> u64 {
    FAST_CALLS.load(Ordering::Relaxed) + crate::thread::fast_calls()
}

#[derive(Clone, Copy)]
struct FastFrame {
    slot: u64,
    regs: PtRegs,
    /// The call runs in the wrapper's copy ([`crate::exempt_copy`]) with
    /// the selector at BLOCK: the return handler sets ALLOW for the exit
    /// hook. Otherwise the entry left the selector at ALLOW for the
    /// wrapper's own `syscall`. The return sets BLOCK again in both cases.
    in_copy: bool,
}

/// Wrapper calls in flight on a thread (nested only through signal
/// handlers), with the system call's registers built at entry; part of
/// the thread's probe block (`crate::thread`), and the thread's count of
/// fast-path calls. The frames first: the counter and the length end the
/// struct, on the cache line of the shadow stack's length and first frame
/// that follow it (`crate::thread::Stacks`), so a wrapper hit's stack
/// accesses touch one line.
#[repr(C)]
pub(crate) struct FastStack {
    frames: [FastFrame; FRAMES],
    /// System calls of this thread traced through a wrapper's probes
    /// ([`crate::thread::count_fast_call`]); written by this thread only,
    /// summed by [`fast_calls`].
    pub(crate) calls: AtomicU64,
    len: usize,
}

impl FastStack {
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What a wrapper probe does: the system call its code issues and how its
/// arguments map to the call's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wrapper {
    pub(crate) nr: u32,
    pub(crate) args: Args,
    pub(crate) ret: Ret,
    /// The wrapper's copy in the allowed range ([`crate::exempt_copy`]),
    /// where a traced call continues with the selector at BLOCK; 0 if it
    /// has none (the call continues in libc with the selector at ALLOW).
    pub(crate) copy: u64,
}

impl Wrapper {
    /// The number of the call made with `regs` at the wrapper's entry.
    #[inline(always)]
    pub(crate) fn number(&self, regs: &PtRegs) -> u32 {
        self.args.number(self.nr, regs)
    }
}

/// The thread's wrapper stack, if the thread has its stacks (a wrapper's
/// entry made them when it hooked the return).
///
/// # Safety
/// `t` is this thread's block; the wrapper handlers do not nest their use
/// (a signal handler interrupting them runs its own probes' handlers only
/// after they returned: they run with the thread's handler flag set).
#[inline(always)]
unsafe fn fast<'a>(t: *mut ProbeThread) -> Option<&'a mut crate::thread::Stacks> {
    // SAFETY: the caller's.
    unsafe { crate::thread::existing_stacks(t) }
}

/// Entry of a wrapper (called by the probe dispatcher with the thread's
/// block, the return already hooked); says what its return must do and
/// whether the call continues in the wrapper's copy (true) or in libc.
pub(crate) fn on_wrapper_entry(
    t: *mut ProbeThread,
    w: Wrapper,
    regs: &PtRegs,
) -> (ReturnHook, bool) {
    let Wrapper { args, .. } = w;
    const UNTRACED: (ReturnHook, bool) = (ReturnHook::None, false);
    // SAFETY (every block access below): `t` is this thread's block.
    if !unsafe { (*t).dispatched } || !args.admits(regs) {
        return UNTRACED;
    }
    let nr = w.number(regs);
    let slot = regs.rsp;
    let Some(stacks) = (unsafe { fast(t) }) else {
        return UNTRACED;
    };
    let st = &mut stacks.fast;
    while st.len > 0 && st.frames[st.len - 1].slot <= slot {
        st.len -= 1;
    }
    // The exit runs no program: the return only sets the selector back
    // (no frame, no registers kept).
    let quick = !syscalls::exit_traced(nr);
    if !quick && st.len == FRAMES {
        // Too deep: the slow path (SIGSYS) traces this call.
        return UNTRACED;
    }
    if !unsafe { set_selector_allow(t) } {
        // Called from bpfjet's own code (selector already ALLOW): not a
        // system call of the application.
        return UNTRACED;
    }
    crate::thread::count_fast_call(&st.calls);
    let in_copy = w.copy != 0;
    if quick {
        let s = syscall_regs(regs, nr, args);
        if let Some(h) = hooks().and_then(|h| h.on_enter.as_ref()) {
            h(&s);
        }
        if in_copy {
            // The copy's `syscall` needs no ALLOW, and its return nothing.
            unsafe { set_selector_block(t) };
            return (ReturnHook::None, true);
        }
        return (ReturnHook::Quick, false);
    }
    // The system call's registers, built in the frame (no copies): the
    // hooks run with the thread's handler flag set, so nothing on this
    // thread touches the wrapper stack until they return.
    let f = &mut st.frames[st.len];
    st.len += 1;
    f.slot = slot;
    f.in_copy = in_copy;
    f.regs = syscall_regs(regs, nr, args);
    if let Some(h) = hooks().and_then(|h| h.on_enter.as_ref()) {
        h(&f.regs);
    }
    if in_copy {
        unsafe { set_selector_block(t) };
    }
    (ReturnHook::Full, in_copy)
}

/// The kernel's `pt_regs` of the system call a wrapper called with `regs`
/// issues.
#[inline(always)]
pub(crate) fn syscall_regs(regs: &PtRegs, nr: u32, args: Args) -> PtRegs {
    let mut s = *regs;
    s.orig_rax = nr as u64;
    s.rax = (-(libc::ENOSYS as i64)) as u64;
    args.apply(regs, &mut s);
    s
}

/// The system call's raw result (the kernel's `sys_exit` record's `ret`)
/// from what wrapper `w` returned in rax and errno ([`Ret::raw`]).
pub(crate) fn raw_result(w: Wrapper, rax: u64, errno: i32) -> u64 {
    w.ret.raw(rax, errno)
}

/// Return of a wrapper, as [`on_wrapper_entry`].
pub(crate) fn on_wrapper_return(t: *mut ProbeThread, _w: Wrapper, regs: &PtRegs) {
    let slot = regs.rsp - 8;
    // SAFETY (every block access below): `t` is this thread's block.
    let Some(stacks) = (unsafe { fast(t) }) else {
        return;
    };
    let st = &mut stacks.fast;
    while st.len > 0 && st.frames[st.len - 1].slot < slot {
        st.len -= 1;
    }
    if st.len == 0 || st.frames[st.len - 1].slot != slot {
        return;
    }
    st.len -= 1;
    // Used in place, as at entry.
    let f = &mut st.frames[st.len];
    // SAFETY: this thread's errno.
    f.regs.rax = raw_result(_w, regs.rax, unsafe { *libc::__errno_location() });
    f.regs.rip = regs.rip;
    if f.in_copy {
        // bpfjet's own system calls in the hook are not the application's.
        unsafe { crate::thread::set_selector(t, crate::thread::SELECTOR_ALLOW) };
    }
    if let Some(h) = hooks().and_then(|h| h.on_exit.as_ref()) {
        h(&f.regs);
    }
    unsafe { set_selector_block(t) };
}

/// A wrapper the fast path covers, or why not.
pub struct FastPath {
    pub wrapper: &'static str,
    pub syscall: &'static str,
    /// Attached with a call-through stub rather than entry and return
    /// probes.
    pub call_through: bool,
    /// The wrapper's copy in the allowed range ([`crate::exempt_copy`]),
    /// or why it has none (its traced calls then run in libc, ~40 ns
    /// dearer).
    pub copy: Result<u64, String>,
    pub attachment: Result<Attachment, ProbeError>,
}

/// Attaches the fast path to libc's wrappers; call after
/// [`syscalls::install`]. Wrappers whose code does not match are reported
/// and left to the slow path.
pub fn install() -> Vec<FastPath> {
    install_with(&|_| false)
}

/// [`install`], with a call-through stub ([`crate::call_through`]: entry
/// hook, the wrapper, exit hook in one frame, no return probe) on the
/// wrappers whose system call `call_through(nr)` selects.
pub fn install_with(call_through: &dyn Fn(u32) -> bool) -> Vec<FastPath> {
    // bpfjet's own system calls while attaching are not the application's.
    syscalls::allowed(|| install_wrappers(call_through))
}

/// Attached wrappers without a copy in the allowed range, and why
/// ([`copy_report`]).
static NOT_COPIED: std::sync::Mutex<Vec<(&'static str, String)>> =
    std::sync::Mutex::new(Vec::new());
static COPIED: AtomicU64 = AtomicU64::new(0);

/// How many attached wrappers run their traced calls in a copy in the
/// allowed range ([`crate::exempt_copy`]), and the others with the reason.
pub fn copy_report() -> (u64, Vec<(&'static str, String)>) {
    (
        COPIED.load(Ordering::Relaxed),
        NOT_COPIED.lock().unwrap().clone(),
    )
}

fn install_wrappers(call_through: &dyn Fn(u32) -> bool) -> Vec<FastPath> {
    let objects = loaded_objects();
    let mut out = Vec::new();
    for c in WRAPPERS {
        let (wrapper, syscall, args, ret) = (c.wrapper, c.syscall, c.args, c.ret);
        let mut through = false;
        let mut copy = Err("not attached".to_string());
        let attachment = (|| {
            let nr = c.number();
            let t = UprobeTarget {
                path: "libc.so.6".into(),
                symbol: wrapper.into(),
                offset: 0,
            };
            let r = symbols::resolve(&t, &objects)?;
            let unpatchable = |reason: String| ProbeError::Unpatchable {
                symbol: wrapper.into(),
                offset: 0,
                address: r.address,
                reason,
            };
            if r.remaining == 0 {
                return Err(unpatchable(
                    "the symbol has no size; its code cannot be checked".into(),
                ));
            }
            // SAFETY: the function's bytes, mapped code of libc.
            let code =
                unsafe { std::slice::from_raw_parts(r.address as *const u8, r.remaining as usize) };
            check(c, nr, code, r.address).map_err(unpatchable)?;
            // Copied before the patch changes its first bytes.
            copy = crate::exempt_copy::copy_function(r.address, code);
            let w = Wrapper {
                nr,
                args,
                ret,
                copy: *copy.as_ref().unwrap_or(&0),
            };
            // syscall()'s number is known only per call: entry and return
            // probes, never a pair's stub.
            if args != Args::Indirect && call_through(nr) {
                through = true;
                crate::uprobe::attach_call_through(&r, w)
            } else {
                attach_with(&r, None, None, Some(w))
            }
        })();
        if attachment.is_ok() {
            match &copy {
                Ok(_) => {
                    COPIED.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => NOT_COPIED.lock().unwrap().push((wrapper, e.clone())),
            }
        }
        out.push(FastPath {
            wrapper,
            syscall,
            call_through: through,
            copy,
            attachment,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_open_issues_openat() {
        let objects = loaded_objects();
        let t = UprobeTarget {
            path: "libc.so.6".into(),
            symbol: "open".into(),
            offset: 0,
        };
        let r = symbols::resolve(&t, &objects).unwrap();
        let code =
            unsafe { std::slice::from_raw_parts(r.address as *const u8, r.remaining as usize) };
        let issued = crate::wrappers::issued_numbers(code, r.address);
        assert!(!issued.is_empty());
        assert!(
            issued.iter().all(|n| *n == Some(libc::SYS_openat as u32)),
            "{issued:?}"
        );
    }
}
