//! New threads of a traced process get system-call dispatch, and a
//! sampling timer when `perf_event` programs run (sampling.rs).
//!
//! Dispatch is per thread and the kernel does not give it to new threads.
//! The agent interposes `pthread_create` (it is preloaded, so its symbol
//! wins): a thread created by the traced program (its creator's calls are
//! dispatched) starts with dispatch on before its start routine runs.
//! Threads bpfjet creates itself (the ring-buffer consumer) are created
//! before dispatch is installed, so they stay untraced. Threads made with a
//! raw `clone` are not seen (documented in docs/TRACING.md). Loaded into
//! a running process (`bpfjet trace --pid`) the interposition does not
//! work (the process bound libc's `pthread_create` first): there, a clone
//! with a new stack made by a dispatched thread enables the child itself
//! (`bpfjet_probe::syscalls`, the clone stub).

use std::sync::atomic::{AtomicBool, Ordering};

static HOOK: AtomicBool = AtomicBool::new(false);

pub fn enable_thread_hook() {
    HOOK.store(true, Ordering::Release);
}

type StartRoutine = extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;
type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut libc::c_void,
) -> libc::c_int;

struct Start {
    routine: StartRoutine,
    arg: *mut libc::c_void,
    /// The creator's calls are dispatched: so are the new thread's.
    dispatch: bool,
}

extern "C" fn dispatched_start(p: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: made by pthread_create below, owned by this thread.
    let start = unsafe { Box::from_raw(p as *mut Start) };
    // SIGSYS must be deliverable once calls are dispatched.
    // SAFETY: plain signal-mask change of this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGSYS);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    if start.dispatch {
        if let Err(e) = bpfjet_probe::syscalls::enable_current_thread() {
            eprintln!("bpfjet trace: a new thread's system calls are not traced: {e}");
        }
    }
    crate::sampling::arm_current_thread();
    (start.routine)(start.arg)
}

fn real_pthread_create() -> PthreadCreate {
    static REAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let f = *REAL.get_or_init(|| {
        // SAFETY: looking up the next definition of a libc symbol.
        unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) as usize }
    });
    assert!(f != 0, "bpfjet trace: pthread_create not found in libc");
    // SAFETY: libc's pthread_create has this signature.
    unsafe { std::mem::transmute::<usize, PthreadCreate>(f) }
}

/// # Safety
/// The C `pthread_create` contract.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut libc::c_void,
) -> libc::c_int {
    let real = real_pthread_create();
    let dispatch = bpfjet_probe::syscalls::dispatched();
    // The agent's own threads are neither dispatched nor sampled.
    let sample = crate::sampling::active() && !crate::alive::is_agent_work();
    if !HOOK.load(Ordering::Acquire) || !(dispatch || sample) {
        return real(thread, attr, routine, arg);
    }
    let start = Box::into_raw(Box::new(Start {
        routine,
        arg,
        dispatch,
    }));
    let r = real(thread, attr, dispatched_start, start as *mut libc::c_void);
    if r != 0 {
        drop(Box::from_raw(start));
    }
    r
}
