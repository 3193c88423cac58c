//! The traced process's own system calls, through Syscall User Dispatch.
//!
//! With `PR_SET_SYSCALL_USER_DISPATCH` on, a thread's system calls raise
//! SIGSYS whenever its selector byte says BLOCK, except those issued from one
//! allowed code range: the assembly at the end of this file. The SIGSYS
//! handler builds a `pt_regs` from the signal context, runs the enter hook,
//! performs the call from the allowed range, stores the result in the
//! context and runs the exit hook; the signal return restores the thread
//! with the result in rax. While a handler runs, the selector is ALLOW, so
//! bpfjet's own system calls (helpers, ring-buffer wake-ups) are not traced.
//!
//! Calls that cannot simply be performed from inside a signal handler:
//! * `rt_sigreturn` from an application signal handler: done from the
//!   allowed range on the application's signal frame (no exit event, like
//!   the kernel's, whose sys_exit for it reports the restored rax).
//! * `clone`/`clone3` with a new stack (threads, posix_spawn): performed by
//!   an assembly stub that gives the child the caller's registers and resumes
//!   it after the caller's `syscall` instruction on its new stack, with the
//!   application's signal mask; the child reports no exit event.
//! * `fork`-like clones: performed in the handler; the child re-enables the
//!   dispatch (the kernel does not keep it for new tasks).
//! * `vfork`: performed as `fork` (the child would otherwise run on, and
//!   overwrite, the handler's frames of the shared stack).
//! * `execve`/`execveat`: the application's signal mask is restored first
//!   (an exec keeps the blocked mask, and a new image with SIGSYS blocked
//!   would be killed by its first dispatched call). Dispatch ends with exec.
//! * `exit_group`: the `before_exit` hook runs (final map dump) first.
//! * `rt_sigprocmask`: applied to the application's mask in the signal
//!   context (performed in the handler it would change the handler's mask,
//!   which the signal return discards); SIGSYS itself is never really
//!   blocked (a dispatched call with SIGSYS blocked kills the process), the
//!   application still sees the mask it set.
//! * `rt_sigaction(SIGSYS, new)`: not installed (the old action is still
//!   reported): dispatch needs bpfjet's handler.
//! * `rt_sigaction` of another signal: a handler is installed as a
//!   trampoline that runs it with the selector BLOCK, also when it
//!   interrupts a call in flight here (crate::signal_handlers).
//!
//! New threads: dispatch is per thread and new threads start without it;
//! [`enable_current_thread`] is called at their start by the agent's
//! `pthread_create` wrapper. In a process the agent was loaded into while
//! it ran ([`install_for_tracer`]), the tracer enables each existing
//! thread ([`enable_thread_for_tracer`]), and the child of a clone with a
//! new stack enables itself in the clone stub, before it returns to the
//! application; [`end_dispatch`] ends it all at the detach.

use crate::regs::PtRegs;
use crate::thread::{self, ProbeThread, SELECTOR_ALLOW, SELECTOR_BLOCK};
use crate::ProbeError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

const PR_SET_SYSCALL_USER_DISPATCH: i32 = 59;
const PR_SYS_DISPATCH_OFF: u64 = 0;
const PR_SYS_DISPATCH_ON: u64 = 1;

const SYS_RT_SIGACTION: u64 = 13;
const SYS_RT_SIGPROCMASK: u64 = 14;
const SYS_RT_SIGRETURN: u64 = 15;
const SYS_CLONE: u64 = 56;
const SYS_FORK: u64 = 57;
const SYS_VFORK: u64 = 58;
const SYS_EXECVE: u64 = 59;
const SYS_EXIT: u64 = 60;
const SYS_EXIT_GROUP: u64 = 231;
const SYS_EXECVEAT: u64 = 322;
const SYS_CLONE3: u64 = 435;

/// System calls only the SIGSYS path may make for the application: those it
/// does more with than perform them (signal masks, returns and handlers,
/// new tasks, exec, exit_group) and `exit`, after which no hook returns.
/// A fast path that learns the number per call (glibc's `syscall()`) leaves
/// these to it.
pub(crate) const HANDLER_ONLY: [u64; 11] = [
    SYS_RT_SIGACTION,
    SYS_RT_SIGPROCMASK,
    SYS_RT_SIGRETURN,
    SYS_CLONE,
    SYS_FORK,
    SYS_VFORK,
    SYS_EXECVE,
    SYS_EXIT,
    SYS_EXIT_GROUP,
    SYS_EXECVEAT,
    SYS_CLONE3,
];
const CLONE_VM: u64 = 0x100;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_SETTLS: u64 = 0x80000;
const CLONE_THREAD: u64 = 0x10000;
const SA_RESTORER: i32 = 0x0400_0000;

/// Runs at a dispatched system call, on the calling thread.
pub type SyscallHook = Box<dyn Fn(&PtRegs) + Send + Sync>;

/// What runs at each system call of a dispatched thread.
pub struct SyscallHooks {
    /// Before the call: `orig_rax` = number, arguments in rdi rsi rdx r10
    /// r8 r9 (the kernel's syscall pt_regs), rax = -ENOSYS.
    pub on_enter: Option<SyscallHook>,
    /// After the call: rax = the result (-errno on failure).
    pub on_exit: Option<SyscallHook>,
    /// Once, before `exit_group` is performed, with its status.
    pub before_exit: Option<Box<dyn Fn(i32) + Send + Sync>>,
}

static HOOKS: OnceLock<SyscallHooks> = OnceLock::new();
/// The system calls whose exit hook does something, by number; unset: all.
static EXITS_TRACED: OnceLock<Box<[AtomicBool]>> = OnceLock::new();

/// Says which system calls' exits the `on_exit` hook traces (indexed by
/// number; numbers beyond the table are not traced). A call whose exit is
/// not traced may skip the hook: the libc-wrapper fast path then hooks its
/// return only to set the selector back. Unset, every exit is traced. Once
/// per process, before [`install`].
pub fn set_exits_traced(calls: Vec<bool>) {
    let _ = EXITS_TRACED.set(calls.into_iter().map(AtomicBool::new).collect());
}

/// Adds system calls whose exit the hook traces from now on (programs of
/// links made while the process runs); sets the table when there is none.
pub fn add_exits_traced(calls: &[bool]) {
    match EXITS_TRACED.get() {
        Some(table) => {
            for (traced, &add) in table.iter().zip(calls) {
                if add {
                    traced.store(true, Ordering::Release);
                }
            }
        }
        None => set_exits_traced(calls.to_vec()),
    }
}

/// Whether the exit hook traces system call `nr` (see [`set_exits_traced`]).
#[inline]
pub(crate) fn exit_traced(nr: u32) -> bool {
    match EXITS_TRACED.get() {
        None => HOOKS.get().is_some_and(|h| h.on_exit.is_some()),
        Some(calls) => calls
            .get(nr as usize)
            .is_some_and(|c| c.load(Ordering::Acquire)),
    }
}
static TRAPPED: AtomicU64 = AtomicU64::new(0);

/// Set by [`install_for_tracer`]: the process was running before the agent
/// came (`bpfjet trace --pid`). Its existing threads are enabled one by one
/// by the tracer ([`enable_thread_for_tracer`], called in each thread
/// through ptrace), and children created by a dispatched thread with a new
/// stack enable themselves in the clone stub (the agent's `pthread_create`
/// interposition does not work in a process that bound libc's first).
static ENABLED_BY_TRACER: AtomicBool = AtomicBool::new(false);
/// Set by [`install_late`]: the hooks came while the process ran, its
/// existing threads are enabled by the tracer as for `--pid`, but the
/// process was started with the agent preloaded, so its new threads and
/// children are handled as at a start (unlike [`ENABLED_BY_TRACER`]).
static ENABLED_LATE: AtomicBool = AtomicBool::new(false);
/// Set by [`end_dispatch`]: no thread enables dispatch any more, and a
/// thread trapping a system call turns its dispatch off.
static DISPATCH_ENDED: AtomicBool = AtomicBool::new(false);

pub(crate) const SIGSYS_BIT: u64 = 1 << (libc::SIGSYS - 1);
const UNBLOCKABLE: u64 = (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));

/// Copies between this process's memory and a buffer without faulting on
/// a bad application pointer (the kernel's -EFAULT instead).
pub(crate) fn copy_user(addr: u64, buf: &mut [u8], write: bool) -> bool {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel checks `remote`; `local` is our buffer.
    let n = unsafe {
        if write {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    n == buf.len() as isize
}

/// `rt_sigprocmask` on the application's mask, which the signal return
/// restores (the handler's own mask is discarded there).
fn emulate_sigprocmask(t: *mut ProbeThread, uc: &mut libc::ucontext_t, a: &[u64; 6]) -> i64 {
    let (how, set, oldset, size) = (a[0], a[1], a[2], a[3]);
    if size != 8 {
        return -(libc::EINVAL as i64);
    }
    // SAFETY: the kernel's sigset is the first 8 bytes of glibc's.
    let mask = unsafe { &mut *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) };
    let app_view = *mask
        // SAFETY: this thread's block.
        | if unsafe { (*t).app_blocks_sigsys } {
            SIGSYS_BIT
        } else {
            0
        };
    let mut new = None;
    if set != 0 {
        let mut b = [0u8; 8];
        if !copy_user(set, &mut b, false) {
            return -(libc::EFAULT as i64);
        }
        let s = u64::from_le_bytes(b);
        new = Some(match how as i32 {
            libc::SIG_BLOCK => app_view | s,
            libc::SIG_UNBLOCK => app_view & !s,
            libc::SIG_SETMASK => s,
            _ => return -(libc::EINVAL as i64),
        });
    }
    if oldset != 0 && !copy_user(oldset, &mut app_view.to_le_bytes(), true) {
        return -(libc::EFAULT as i64);
    }
    if let Some(n) = new {
        let n = n & !UNBLOCKABLE;
        // SAFETY: this thread's block.
        unsafe { (*t).app_blocks_sigsys = n & SIGSYS_BIT != 0 };
        *mask = n & !SIGSYS_BIT;
    }
    0
}

pub(crate) fn hooks() -> Option<&'static SyscallHooks> {
    HOOKS.get()
}

/// Called in a forked child right after the fork returned there, before
/// any of the child's own code (glibc's child set-up makes system calls
/// before its atfork handlers run): the tracing runtime's cached thread
/// ids must be the child's for those calls' events and for the child's
/// `sys_exit` of the fork itself.
static FORK_CHILD_HOOK: OnceLock<fn()> = OnceLock::new();

/// Sets what runs in a forked child right after a fork this layer
/// performed (once; it must be async-signal-safe).
pub fn set_fork_child_hook(hook: fn()) {
    let _ = FORK_CHILD_HOOK.set(hook);
}

/// Gives, for an `exec`'s environment (`envp`), the environment to
/// execute with instead: `Some((envp, bytes))` of a fresh mapping the
/// handler unmaps if the call fails, `None` to leave it (async-signal-safe:
/// it runs in the SIGSYS handler).
pub type ExecEnvHook = fn(u64) -> Option<(u64, usize)>;

static EXEC_ENV_HOOK: OnceLock<ExecEnvHook> = OnceLock::new();

/// Sets [`ExecEnvHook`] (once): `bpfjet trace` carries its settings into
/// programs started with an environment that lacks them.
pub fn set_exec_env_hook(hook: ExecEnvHook) {
    let _ = EXEC_ENV_HOOK.set(hook);
}

/// Runs in a `posix_spawn`-style child (`CLONE_VM | CLONE_VFORK` on a new
/// stack) at its start, and in its parent when the call returns there:
/// the two share memory and the parent's thread pointer, so the
/// runtime's per-thread cached ids hold the child's while it runs and
/// must be read again on both sides.
static VM_CHILD_HOOK: OnceLock<fn()> = OnceLock::new();

/// Sets [`VM_CHILD_HOOK`] (once; it must be async-signal-safe).
pub fn set_vm_child_hook(hook: fn()) {
    let _ = VM_CHILD_HOOK.set(hook);
}

/// How a child of a clone on a new stack starts (`bpfjet_sud_clone`'s
/// flag below the child's stack pointer).
const CHILD_UNDISPATCHED: u64 = 0;
/// A thread of a process the tracer enabled: dispatched like its parent.
const CHILD_THREAD: u64 = 1;
/// A `posix_spawn`-style child: it runs on its parent's thread block and
/// selector while the parent waits for it (`CLONE_VFORK`) to `exec` or
/// exit, and dispatches itself with them, so that its system calls (its
/// `execve` first) are traced as the kernel traces them.
const CHILD_VFORK: u64 = 2;

/// Sets ALLOW; true if the thread was dispatching (BLOCK) before.
///
/// # Safety
/// `t` is this thread's block ([`thread::current`]).
#[inline]
pub(crate) unsafe fn set_selector_allow(t: *mut ProbeThread) -> bool {
    // SAFETY: the caller's.
    unsafe { thread::replace_selector(t, SELECTOR_ALLOW) == SELECTOR_BLOCK }
}

/// Sets BLOCK if the thread is dispatched.
///
/// # Safety
/// As [`set_selector_allow`].
#[inline]
pub(crate) unsafe fn set_selector_block(t: *mut ProbeThread) {
    // SAFETY: the caller's.
    unsafe {
        if (*t).dispatched {
            thread::set_selector(t, SELECTOR_BLOCK);
        }
    }
}

/// System calls that went through the SIGSYS handler so far.
pub fn trapped() -> u64 {
    TRAPPED.load(Ordering::Relaxed)
}

/// Whether this thread's system calls are dispatched.
pub fn dispatched() -> bool {
    // SAFETY: this thread's block.
    unsafe { (*thread::current()).dispatched }
}

/// Runs `f` with this thread's system calls not dispatched (bpfjet's own
/// work on a traced thread).
pub fn allowed<R>(f: impl FnOnce() -> R) -> R {
    allowed_in(thread::current(), f)
}

/// [`allowed`] with this thread's block already looked up.
#[inline]
pub(crate) fn allowed_in<R>(t: *mut ProbeThread, f: impl FnOnce() -> R) -> R {
    // SAFETY (both): `t` is this thread's block (the callers').
    let old = unsafe { thread::replace_selector(t, SELECTOR_ALLOW) };
    let r = f();
    unsafe { thread::set_selector(t, old) };
    r
}

/// The hooks and the SIGSYS handler (every install does this first).
fn set_hooks(hooks: SyscallHooks) -> Result<(), ProbeError> {
    if HOOKS.set(hooks).is_err() {
        return Err(ProbeError::Os {
            what: "system-call hooks installed twice".into(),
            err: std::io::Error::from_raw_os_error(libc::EBUSY),
        });
    }
    install_sigsys_handler()?;
    crate::signal_handlers::wrap_existing();
    Ok(())
}

/// Installs the hooks and the SIGSYS handler, and dispatches this thread's
/// system calls. Once per process.
pub fn install(hooks: SyscallHooks) -> Result<(), ProbeError> {
    set_hooks(hooks)?;
    enable_current_thread()
}

/// [`install`] for a process that was already running (`bpfjet trace
/// --pid`): the hooks and the SIGSYS handler, but no thread is dispatched
/// yet, not even the calling one (the agent's constructor, run by an
/// injected `dlopen`): the tracer enables every thread of the process with
/// [`enable_thread_for_tracer`] once the constructor returned. Once per
/// process.
pub fn install_for_tracer(hooks: SyscallHooks) -> Result<(), ProbeError> {
    set_hooks(hooks)?;
    ENABLED_BY_TRACER.store(true, Ordering::SeqCst);
    Ok(())
}

/// Refuses a process that handles or ignores SIGSYS itself (seccomp
/// `SECCOMP_RET_TRAP` users, its own dispatch): bpfjet's handler would
/// replace its action for good.
pub fn sigsys_unclaimed() -> Result<(), ProbeError> {
    // SAFETY: reads the current action only.
    let old = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSYS, std::ptr::null(), &mut old) != 0 {
            return Err(ProbeError::os("sigaction(SIGSYS)"));
        }
        old.sa_sigaction
    };
    if old != libc::SIG_DFL {
        return Err(ProbeError::Os {
            what: format!(
                "the process {} SIGSYS itself: system-call tracing needs bpfjet's own SIGSYS \
                 handler",
                if old == libc::SIG_IGN {
                    "ignores"
                } else {
                    "handles"
                }
            ),
            err: std::io::Error::from_raw_os_error(libc::EBUSY),
        });
    }
    Ok(())
}

/// [`install`] in a process the agent was preloaded into, which ran
/// without system-call tracing until now (a control plane linked a
/// system-call tracepoint while it runs): the hooks and the SIGSYS
/// handler; the tracer then enables every existing thread with
/// [`enable_thread_for_tracer`], and threads and children created from
/// then on are dispatched as in a process traced from its start (check
/// [`sigsys_unclaimed`] first). Once per process.
pub fn install_late(hooks: SyscallHooks) -> Result<(), ProbeError> {
    set_hooks(hooks)?;
    ENABLED_LATE.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether the system-call hooks are installed in this process.
pub fn installed() -> bool {
    HOOKS.get().is_some()
}

/// Dispatches the calling thread, which a tracer made call this (a thread
/// of a process that was running before the agent came): SIGSYS is
/// unblocked (a dispatched call with SIGSYS blocked kills the process; the
/// application keeps seeing its own mask), the thread's probe block is
/// allocated (its first access in this library: glibc allocates it, which
/// the tracer made safe by stopping the thread outside the allocator) and
/// dispatch is turned on with the block's selector.
///
/// Returns 0, or -EAGAIN when the thread is inside one of bpfjet's
/// handlers (it would restore an ALLOW selector on leaving it: the tracer
/// retries at another stop), -ENOENT when no system call is traced or
/// dispatch has ended, or -errno of the failed system call.
pub fn enable_thread_for_tracer() -> i64 {
    if HOOKS.get().is_none()
        || !(ENABLED_BY_TRACER.load(Ordering::SeqCst) || ENABLED_LATE.load(Ordering::SeqCst))
    {
        return -(libc::ENOENT as i64);
    }
    if DISPATCH_ENDED.load(Ordering::SeqCst) {
        return -(libc::ENOENT as i64);
    }
    let t = thread::current();
    // SAFETY: this thread's block.
    unsafe {
        if (*t).in_handler {
            return -(libc::EAGAIN as i64);
        }
        if (*t).dispatched {
            return 0;
        }
    }
    let mut unblock = SIGSYS_BIT;
    let mut old: u64 = 0;
    // SAFETY: raw rt_sigprocmask on this thread's own mask (not dispatched
    // yet: not traced).
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK,
            &mut unblock as *mut u64,
            &mut old as *mut u64,
            8usize,
        )
    };
    if r != 0 {
        return -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL) as i64);
    }
    // SAFETY: this thread's block.
    unsafe { (*t).app_blocks_sigsys = old & SIGSYS_BIT != 0 };
    match enable_current_thread() {
        Ok(()) => 0,
        Err(e) => {
            let errno = match &e {
                ProbeError::Os { err, .. } => err.raw_os_error().unwrap_or(libc::EINVAL),
                _ => libc::EINVAL,
            };
            // Back as it was.
            // SAFETY: as above.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigprocmask,
                    libc::SIG_SETMASK,
                    &old as *const u64,
                    std::ptr::null_mut::<u64>(),
                    8usize,
                );
                (*t).app_blocks_sigsys = false;
            }
            -(errno as i64)
        }
    }
}

/// Ends dispatch in a process the tracer enabled ([`install_for_tracer`];
/// `bpfjet trace --pid` detaching): no thread enables it any more (a
/// clone child half-way through the stub turns it off again), and each
/// thread still dispatched turns it off at its next trapped system call
/// (the tracer normally turns it off in every thread first, through
/// ptrace; this covers a tracer that went away).
pub fn end_dispatch() {
    DISPATCH_ENDED.store(true, Ordering::SeqCst);
    crate::signal_handlers::unwrap_all();
}

/// Turns the calling thread's dispatch off (from the allowed range: its
/// selector may say BLOCK).
fn disable_current_thread(t: *mut ProbeThread) {
    // SAFETY: prctl(PR_SET_SYSCALL_USER_DISPATCH, OFF, 0, 0, 0) from the
    // allowed range; `t` is this thread's block.
    unsafe {
        bpfjet_sud_syscall6(
            libc::SYS_prctl as u64,
            PR_SET_SYSCALL_USER_DISPATCH as u64,
            PR_SYS_DISPATCH_OFF,
            0,
            0,
            0,
            0,
        );
        (*t).dispatched = false;
    }
}

/// The child of a clone with a new stack and its own thread pointer made
/// by a dispatched thread, at its start in `bpfjet_sud_clone` (signal mask
/// still the handler's), when the tracer enabled the process's threads
/// ([`ENABLED_BY_TRACER`]): dispatched like its parent. Preloaded, the
/// agent's `pthread_create` wrapper does it.
extern "C" fn bpfjet_sud_child_started(how: u64) {
    if DISPATCH_ENDED.load(Ordering::SeqCst) {
        return;
    }
    if how == CHILD_VFORK {
        if let Some(hook) = VM_CHILD_HOOK.get() {
            hook();
        }
    }
    if enable_current_thread().is_ok() && DISPATCH_ENDED.load(Ordering::SeqCst) {
        // Ended meanwhile: the tracer's pass may have missed this thread.
        disable_current_thread(thread::current());
    }
}

/// The kernel's `struct sigaction` of `rt_sigaction` on x86-64.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct KernelSigaction {
    pub(crate) handler: usize,
    pub(crate) flags: u64,
    pub(crate) restorer: usize,
    pub(crate) mask: u64,
}

impl KernelSigaction {
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: plain integers, no padding.
        unsafe {
            std::slice::from_raw_parts_mut(
                (self as *mut Self).cast::<u8>(),
                std::mem::size_of::<Self>(),
            )
        }
    }
}

/// A system call from the allowed range (never trapped).
///
/// # Safety
/// As the system call.
pub(crate) unsafe fn raw_syscall6(
    nr: u64,
    a0: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
) -> i64 {
    // SAFETY: the caller's.
    unsafe { bpfjet_sud_syscall6(nr, a0, a1, a2, a3, a4, a5) }
}

/// `rt_sigreturn` on the signal frame at `frame_sp` (the stack pointer of
/// a restorer's `syscall`), storing `value` in the selector first; from the
/// allowed range, so an ALLOW selector does not trap it.
///
/// # Safety
/// `frame_sp` is a live signal frame of this thread; `selector` its
/// selector byte.
pub(crate) unsafe fn sigreturn_with(frame_sp: u64, selector: *mut u8, value: u8) -> ! {
    // SAFETY: the caller's.
    unsafe { bpfjet_sud_sigreturn_with(frame_sp, selector, value) };
    unreachable!("rt_sigreturn returned")
}

fn install_sigsys_handler() -> Result<(), ProbeError> {
    let act = KernelSigaction {
        handler: on_sigsys as *const () as usize,
        // SA_NODEFER: an application handler interrupting this one (a
        // blocked call) runs dispatched, and its calls trap here again;
        // with SIGSYS blocked the kernel would kill the process instead.
        // No SA_ONSTACK: on the thread's alternate stack (often small: 8
        // KB for Rust threads) this handler would push an application
        // handler interrupting it there too, where the kernel would not,
        // and the nested SIGSYS frames of its calls would overflow it.
        flags: (libc::SA_SIGINFO | SA_RESTORER | libc::SA_NODEFER) as u64,
        // Returning from the handler must happen from the allowed range.
        restorer: bpfjet_sud_restorer as *const () as usize,
        mask: 0,
    };
    // SAFETY: raw rt_sigaction: glibc's sigaction would substitute its own
    // restorer, whose rt_sigreturn lies outside the allowed range.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            libc::SIGSYS,
            &act as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        )
    };
    if r != 0 {
        return Err(ProbeError::os("rt_sigaction(SIGSYS)"));
    }
    Ok(())
}

/// Installs one of bpfjet's own signal handlers (an `int3` probe's, a
/// sample's) with `flags`: its signal return is made from the allowed
/// range, so it is never dispatched. The kernel's probes and samples
/// raise no signal, so the kernel traces no `rt_sigreturn` for them; a
/// return through libc's restorer would trap and be traced.
pub(crate) fn install_own_handler(sig: i32, handler: usize, flags: i32) -> Result<(), ProbeError> {
    let act = KernelSigaction {
        handler,
        flags: (flags | SA_RESTORER) as u64,
        restorer: bpfjet_sud_restorer as *const () as usize,
        mask: 0,
    };
    // SAFETY: raw rt_sigaction from a full kernel sigaction (glibc's
    // sigaction would substitute its own restorer), made from the allowed
    // range: on a dispatched thread, a trapped one would be taken for the
    // application's and its handler wrapped as an application handler.
    let r = unsafe {
        raw_syscall6(
            libc::SYS_rt_sigaction as u64,
            sig as u64,
            &act as *const KernelSigaction as u64,
            0,
            8,
            0,
            0,
        )
    };
    if r != 0 {
        return Err(ProbeError::Os {
            what: format!("rt_sigaction({sig})"),
            err: std::io::Error::from_raw_os_error(-r as i32),
        });
    }
    Ok(())
}

/// Dispatches the calling thread's system calls to the installed hooks.
pub fn enable_current_thread() -> Result<(), ProbeError> {
    if HOOKS.get().is_none() {
        return Ok(());
    }
    let start = bpfjet_sud_region_start as *const () as u64;
    let end = bpfjet_sud_region_end as *const () as u64;
    let t = thread::current();
    // SAFETY: the selector is this thread's own TLS byte, alive as long as
    // the thread.
    let selector = unsafe { std::ptr::addr_of_mut!((*t).selector) };
    // SAFETY: the kernel keeps the selector's address (valid for the
    // thread's life, above) and reads nothing else through the arguments.
    let r = unsafe {
        libc::prctl(
            PR_SET_SYSCALL_USER_DISPATCH,
            PR_SYS_DISPATCH_ON,
            start,
            end - start,
            selector,
        )
    };
    if r != 0 {
        return Err(ProbeError::os("prctl(PR_SET_SYSCALL_USER_DISPATCH)"));
    }
    // SAFETY: this thread's block.
    unsafe {
        (*t).dispatched = true;
        thread::set_selector(t, SELECTOR_BLOCK);
    }
    Ok(())
}

/// The registers of a trapped system call: the user registers of the
/// signal, `orig_rax` the call's number and `rax` -ENOSYS, as the kernel's
/// `pt_regs` at syscall entry hold them.
pub(crate) fn regs_from(g: &[i64; 23], nr: u64) -> PtRegs {
    PtRegs {
        rax: (-(libc::ENOSYS as i64)) as u64,
        orig_rax: nr,
        ..PtRegs::from_signal_gregs(g, g[libc::REG_RIP as usize] as u64)
    }
}

extern "C" fn on_sigsys(_sig: i32, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let t = thread::current();
    // SAFETY: this thread's block.
    unsafe { thread::set_selector(t, SELECTOR_ALLOW) };
    TRAPPED.fetch_add(1, Ordering::Relaxed);
    if DISPATCH_ENDED.load(Ordering::Relaxed) {
        // Detached: this thread's calls go straight to the kernel from now
        // on; this one is still performed below.
        disable_current_thread(t);
    }
    // SAFETY: the kernel passes this thread's ucontext.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let g = &mut uc.uc_mcontext.gregs;
    // The kernel rolls rax back to the system-call number before SIGSYS.
    let nr = g[libc::REG_RAX as usize] as u64;
    let mut regs = regs_from(g, nr);
    let hooks = HOOKS.get();
    // Probes hit by the hooks (a helper calling a probed libc function)
    // are skipped, as inside any handler.
    let outermost = crate::uprobe::enter_handler(t);
    if let Some(h) = hooks.and_then(|h| h.on_enter.as_ref()) {
        h(&regs);
    }
    let a = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
    // SAFETY (all arms): performing the application's own system call.
    let ret: i64 = match nr {
        SYS_RT_SIGPROCMASK => emulate_sigprocmask(t, uc, &a),
        // The SIGSYS handler stays bpfjet's: a new one is not installed
        // (the old one is still reported).
        SYS_RT_SIGACTION if a[0] == libc::SIGSYS as u64 && a[1] != 0 => unsafe {
            bpfjet_sud_syscall6(nr, a[0], 0, a[2], a[3], 0, 0)
        },
        // Application handlers run dispatched, through a trampoline.
        SYS_RT_SIGACTION if a[0] != libc::SIGSYS as u64 => crate::signal_handlers::rt_sigaction(&a),
        SYS_RT_SIGRETURN => unsafe {
            // The signal return does not come back here: the handler flag
            // goes back to the interrupted code's now (it was clear there
            // if this handler set it), or the thread's probes would all be
            // missed from here on.
            if outermost {
                crate::uprobe::leave_handler(t);
            }
            bpfjet_sud_sigreturn_to(regs.rsp, std::ptr::addr_of_mut!((*t).selector))
        },
        SYS_EXIT_GROUP => {
            if let Some(h) = hooks.and_then(|h| h.before_exit.as_ref()) {
                h(a[0] as i32);
            }
            unsafe { bpfjet_sud_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) }
        }
        SYS_EXECVE | SYS_EXECVEAT => unsafe {
            // The environment argument: execve's third, execveat's fourth.
            let env_arg = if nr == SYS_EXECVE { 2 } else { 3 };
            let mut a = a;
            let replaced = EXEC_ENV_HOOK.get().and_then(|hook| hook(a[env_arg]));
            if let Some((envp, _)) = replaced {
                a[env_arg] = envp;
            }
            let mut old: u64 = 0;
            let user_mask = &uc.uc_sigmask as *const libc::sigset_t as u64;
            bpfjet_sud_syscall6(
                14,
                libc::SIG_SETMASK as u64,
                user_mask,
                &mut old as *mut u64 as u64,
                8,
                0,
                0,
            );
            let r = bpfjet_sud_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
            bpfjet_sud_syscall6(
                14,
                libc::SIG_SETMASK as u64,
                &old as *const u64 as u64,
                0,
                8,
                0,
                0,
            );
            if let Some((envp, len)) = replaced {
                // The call failed: this image goes on without the copy.
                bpfjet_sud_syscall6(11, envp, len as u64, 0, 0, 0, 0);
            }
            r
        },
        SYS_CLONE | SYS_CLONE3 if new_stack(nr, &a).is_some() => {
            let sp = new_stack(nr, &a).unwrap();
            // Whether and how the child dispatches itself: a thread of
            // this process with its own thread pointer when the tracer
            // enabled the process (preloaded, the `pthread_create` wrapper
            // does it); a vfork-style child of a preloaded process on its
            // waiting parent's block. Any other child sharing its
            // creator's thread pointer would share its probe block and
            // selector while both run: not dispatched.
            let flags = clone_flags(nr, &a);
            let by_tracer = ENABLED_BY_TRACER.load(Ordering::Relaxed);
            let how = if by_tracer
                && flags & (CLONE_SETTLS | CLONE_THREAD) == CLONE_SETTLS | CLONE_THREAD
            {
                CHILD_THREAD
            } else if !by_tracer
                && flags & (CLONE_VM | CLONE_VFORK | CLONE_THREAD) == CLONE_VM | CLONE_VFORK
            {
                CHILD_VFORK
            } else {
                CHILD_UNDISPATCHED
            };
            // SAFETY: the child's stack, below its initial stack pointer:
            // the resume address, the application's signal mask, and how
            // the child starts.
            unsafe {
                *((sp - 8) as *mut u64) = regs.rip;
                *((sp - 16) as *mut u64) = *(&uc.uc_sigmask as *const libc::sigset_t as *const u64);
                *((sp - 24) as *mut u64) = how;
            }
            let saved = CloneRegs {
                nr,
                args: a,
                rbx: regs.rbx,
                rbp: regs.rbp,
                r12: regs.r12,
                r13: regs.r13,
                r14: regs.r14,
                r15: regs.r15,
            };
            let r = unsafe { bpfjet_sud_clone(&saved) };
            if how == CHILD_VFORK {
                // Back in the parent: the child ran on this thread's block.
                if let Some(hook) = VM_CHILD_HOOK.get() {
                    hook();
                }
            }
            r
        }
        SYS_FORK | SYS_VFORK | SYS_CLONE => {
            // `fork` and `vfork` take no flags: their rdi is whatever the
            // caller left there (glibc's `vfork` keeps its return address
            // in it), which must not be read as CLONE_VM.
            let (nr2, a0, flags) = if nr == SYS_VFORK {
                (SYS_FORK, a[0], 0)
            } else if nr == SYS_FORK {
                (nr, a[0], 0)
            } else if a[0] & (CLONE_VM | CLONE_VFORK) == (CLONE_VM | CLONE_VFORK) {
                // vfork through clone without a new stack: as fork.
                let flags = a[0] & !(CLONE_VM | CLONE_VFORK);
                (SYS_CLONE, flags, flags)
            } else {
                (nr, a[0], a[0])
            };
            let r = unsafe { bpfjet_sud_syscall6(nr2, a0, a[1], a[2], a[3], a[4], a[5]) };
            if r == 0 && flags & CLONE_VM == 0 {
                if let Some(hook) = FORK_CHILD_HOOK.get() {
                    hook();
                }
                if ENABLED_BY_TRACER.load(Ordering::Relaxed) {
                    // A child process of a process bpfjet attached to
                    // (`--pid`): not traced, as the kernel's tracepoints
                    // filtered on the process do not see it; nobody would
                    // turn its dispatch off at the detach.
                    // SAFETY: this thread's block (the child's copy).
                    unsafe { (*t).dispatched = false };
                } else {
                    let _ = enable_current_thread();
                }
                // SAFETY: this thread's block (the child's copy).
                unsafe { thread::set_selector(t, SELECTOR_ALLOW) };
            }
            r
        }
        // The call may block (read, pause, wait4): an application handler
        // interrupting it is application code, whose probes must run (the
        // handler flag is this handler's, not the call's).
        _ => {
            if outermost {
                crate::uprobe::leave_handler(t);
            }
            let r = unsafe { bpfjet_sud_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
            if outermost {
                crate::uprobe::enter_handler(t);
            }
            r
        }
    };
    let g = &mut uc.uc_mcontext.gregs;
    g[libc::REG_RAX as usize] = ret;
    regs.rax = ret as u64;
    if let Some(h) = hooks.and_then(|h| h.on_exit.as_ref()) {
        h(&regs);
    }
    if outermost {
        crate::uprobe::leave_handler(t);
    }
    // SAFETY: this thread's block.
    unsafe { thread::set_selector(t, SELECTOR_BLOCK) };
}

/// The flags of a `clone` or `clone3` call.
fn clone_flags(nr: u64, a: &[u64; 6]) -> u64 {
    match nr {
        SYS_CLONE => a[0],
        // struct clone_args: flags at 0.
        // SAFETY: the application passed this struct to clone3 (checked
        // non-null and large enough by `new_stack`).
        SYS_CLONE3 if a[0] != 0 && a[1] >= 64 => unsafe { *(a[0] as *const u64) },
        _ => 0,
    }
}

/// The child's initial stack pointer of a clone that gives it a new stack.
fn new_stack(nr: u64, a: &[u64; 6]) -> Option<u64> {
    match nr {
        SYS_CLONE if a[1] != 0 => Some(a[1]),
        SYS_CLONE3 if a[0] != 0 && a[1] >= 64 => {
            // struct clone_args: stack at 40, stack_size at 48.
            // SAFETY: the application passed this struct to clone3.
            let (stack, size) =
                unsafe { (*((a[0] + 40) as *const u64), *((a[0] + 48) as *const u64)) };
            (stack != 0).then_some(stack + size)
        }
        _ => None,
    }
}

#[repr(C)]
struct CloneRegs {
    nr: u64,
    args: [u64; 6],
    rbx: u64,
    rbp: u64,
    r12: u64,
    r13: u64,
    r14: u64,
    r15: u64,
}

extern "C" {
    fn bpfjet_sud_region_start();
    fn bpfjet_sud_region_end();
    fn bpfjet_sud_restorer();
    fn bpfjet_sud_syscall6(nr: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64) -> i64;
    fn bpfjet_sud_sigreturn_to(frame_sp: u64, selector: *mut u8) -> i64;
    fn bpfjet_sud_sigreturn_with(frame_sp: u64, selector: *mut u8, value: u8) -> i64;
    fn bpfjet_sud_clone(regs: *const CloneRegs) -> i64;
}

// The allowed range: every system call bpfjet issues on behalf of a
// dispatched thread comes from here.
std::arch::global_asm!(
    ".pushsection .text.bpfjet_sud,\"ax\",@progbits",
    ".p2align 4",
    ".globl bpfjet_sud_region_start",
    "bpfjet_sud_region_start:",
    // i64 syscall6(nr, a0..a5): System V arguments to the kernel's.
    ".globl bpfjet_sud_syscall6",
    "bpfjet_sud_syscall6:",
    "mov rax, rdi",
    "mov rdi, rsi",
    "mov rsi, rdx",
    "mov rdx, rcx",
    "mov r10, r8",
    "mov r8, r9",
    "mov r9, [rsp + 8]",
    "syscall",
    "ret",
    // The SIGSYS handler's sa_restorer.
    ".globl bpfjet_sud_restorer",
    "bpfjet_sud_restorer:",
    "mov eax, 15",
    "syscall",
    "ud2",
    // rt_sigreturn on an application signal frame; selector back to BLOCK.
    ".globl bpfjet_sud_sigreturn_to",
    "bpfjet_sud_sigreturn_to:",
    "mov byte ptr [rsi], 1",
    "mov rsp, rdi",
    "mov eax, 15",
    "syscall",
    "ud2",
    // The same with the selector value given (dl).
    ".globl bpfjet_sud_sigreturn_with",
    "bpfjet_sud_sigreturn_with:",
    "mov byte ptr [rsi], dl",
    "mov rsp, rdi",
    "mov eax, 15",
    "syscall",
    "ud2",
    // i64 clone(&CloneRegs): the child gets the application's callee-saved
    // registers and arguments, restores the signal mask stored at
    // [sp-16], and resumes at [sp-8] on its new stack.
    ".globl bpfjet_sud_clone",
    "bpfjet_sud_clone:",
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov r11, rdi",
    "mov rbx, [r11 + 56]",
    "mov rbp, [r11 + 64]",
    "mov r12, [r11 + 72]",
    "mov r13, [r11 + 80]",
    "mov r14, [r11 + 88]",
    "mov r15, [r11 + 96]",
    "mov rax, [r11]",
    "mov rdi, [r11 + 8]",
    "mov rsi, [r11 + 16]",
    "mov rdx, [r11 + 24]",
    "mov r10, [r11 + 32]",
    "mov r8, [r11 + 40]",
    "mov r9, [r11 + 48]",
    "syscall",
    "test rax, rax",
    "jz 2f",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbp",
    "pop rbx",
    "ret",
    "2:",
    // The child turns dispatch on for itself when the tracer enabled the
    // process's threads and it has its own thread pointer (the flag at
    // [sp-24], bpfjet_sud_child_started): the application's registers the
    // child resumes with are kept around the call.
    "mov rax, [rsp - 24]",
    "test rax, rax",
    "jz 3f",
    "sub rsp, 16",
    "push rdi",
    "push rsi",
    "push rdx",
    "push r10",
    "push r8",
    "push r9",
    "push rbp",
    "mov rbp, rsp",
    "and rsp, -16",
    "mov rdi, rax",
    "call {child_started}",
    "mov rsp, rbp",
    "pop rbp",
    "pop r9",
    "pop r8",
    "pop r10",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "add rsp, 16",
    "3:",
    "sub rsp, 16",
    "push rdi",
    "push rsi",
    "push rdx",
    "push r10",
    "mov edi, 2",          // SIG_SETMASK
    "lea rsi, [rsp + 32]", // the mask at the initial sp - 16
    "xor edx, edx",
    "mov r10d, 8",
    "mov eax, 14", // rt_sigprocmask
    "syscall",
    "pop r10",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "add rsp, 16",
    "xor eax, eax",
    "jmp qword ptr [rsp - 8]",
    // The copies of libc's wrappers (crate::exempt_copy), page-aligned so
    // making them writable touches no other code.
    ".p2align 12",
    ".globl bpfjet_sud_pool",
    "bpfjet_sud_pool:",
    ".fill 65536, 1, 0xcc",
    ".globl bpfjet_sud_pool_end",
    "bpfjet_sud_pool_end:",
    ".globl bpfjet_sud_region_end",
    "bpfjet_sud_region_end:",
    ".popsection",
    child_started = sym bpfjet_sud_child_started,
);
