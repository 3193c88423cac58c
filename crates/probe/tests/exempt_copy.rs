//! The fast path's wrapper copies in Syscall User Dispatch's allowed range
//! (`bpfjet_probe::exempt_copy`), in a child process (dispatch is process
//! state):
//! - a wrapper either has a copy in the pool or says why not (here, in a
//!   test executable mapped far from libc, most are out of reach: the
//!   CLI's tests/trace_wrappers.rs checks that the trace agent copies
//!   every one);
//! - traced calls, in the copy or in libc, are exact: enter and exit seen
//!   once per call, nothing traps, the result and errno reach the caller,
//!   and the selector is BLOCK again after the call (a raw `getppid`,
//!   which no wrapper covers, traps every time);
//! - glibc's `syscall()` takes the fast path for ordinary numbers (the
//!   number and all six arguments, the sixth from the stack, as the kernel
//!   would show them; -1 and errno) and leaves the numbers the SIGSYS path
//!   must perform itself (`rt_sigprocmask` here) to it;
//! - a thread cancelled while blocked in a traced `read` ends cancelled
//!   (whether the unwinder walked through the copy up to the thread's own
//!   frames is checked by the CLI's tests/trace_fusion_compile.rs, through
//!   the agent's copies, with a C cleanup handler: a Rust frame cannot
//!   hold a destructor across a forced unwind).

use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::PtRegs;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

mod raw_syscall;

const CALLS: u64 = 2000;
const MARK_FD: i32 = 79;

static ENTERS: AtomicU64 = AtomicU64::new(0);
static EXITS: AtomicU64 = AtomicU64::new(0);
static EXIT_BYTES: AtomicU64 = AtomicU64::new(0);
static PPID_ENTERS: AtomicU64 = AtomicU64::new(0);
static BLOCKED_IN_READ: AtomicBool = AtomicBool::new(false);
/// syscall(SYS_getppid, 0xb0b1, 2..6): what the hooks saw (enter: the six
/// arguments' sum and the last one; exit: the result).
static INDIRECT_ENTERS: AtomicU64 = AtomicU64::new(0);
static INDIRECT_ARGS: AtomicU64 = AtomicU64::new(0);
static INDIRECT_SIXTH: AtomicU64 = AtomicU64::new(0);
static INDIRECT_EXITS: AtomicU64 = AtomicU64::new(0);
static INDIRECT_RESULT: AtomicU64 = AtomicU64::new(0);

extern "C-unwind" fn reader(fd: *mut libc::c_void) -> *mut libc::c_void {
    syscalls::enable_current_thread().unwrap();
    let mut b = [0u8; 1];
    BLOCKED_IN_READ.store(true, Ordering::SeqCst);
    // Blocks: nothing is ever written to the pipe. Cancelled in here.
    unsafe { libc::read(fd as usize as i32, b.as_mut_ptr().cast(), 1) };
    std::ptr::null_mut()
}

fn child() {
    syscalls::install(SyscallHooks {
        on_enter: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_read as u64 && r.rdi == MARK_FD as u64 {
                ENTERS.fetch_add(1, Ordering::Relaxed);
            }
            if r.orig_rax == libc::SYS_getppid as u64 {
                PPID_ENTERS.fetch_add(1, Ordering::Relaxed);
                if r.rdi == 0xb0b1 {
                    INDIRECT_ENTERS.fetch_add(1, Ordering::Relaxed);
                    INDIRECT_ARGS.store(
                        r.rdi + r.rsi + r.rdx + r.r10 + r.r8 + r.r9,
                        Ordering::Relaxed,
                    );
                    INDIRECT_SIXTH.store(r.r9, Ordering::Relaxed);
                }
            }
        })),
        on_exit: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_read as u64 && r.rdi == MARK_FD as u64 {
                EXITS.fetch_add(1, Ordering::Relaxed);
                EXIT_BYTES.fetch_add(r.rax, Ordering::Relaxed);
            }
            if r.orig_rax == libc::SYS_getppid as u64 && r.rdi == 0xb0b1 {
                INDIRECT_EXITS.fetch_add(1, Ordering::Relaxed);
                INDIRECT_RESULT.store(r.rax, Ordering::Relaxed);
            }
        })),
        before_exit: None,
    })
    .unwrap();
    let paths = bpfjet_probe::fast_syscalls::install();
    // As the agent does: the unwinder puts hooked return addresses back.
    let _guard =
        bpfjet_probe::unwind::attach_guard(&bpfjet_probe::symbols::loaded_objects()).unwrap();
    // A copy must reach what the wrapper's code refers to with 32-bit
    // displacements: in the trace agent (a shared object mapped next to
    // libc) every wrapper is copied (tests/trace_wrappers.rs in the CLI
    // checks it); this test executable is mapped far from libc, where the
    // copies are refused as out of reach and the calls run in libc. Both
    // paths must be exact, which is what follows checks.
    let mut copied = 0;
    for f in paths.iter().filter(|f| f.attachment.is_ok()) {
        match &f.copy {
            Ok(at) => {
                assert!(bpfjet_probe::exempt_copy::in_pool(*at), "{}", f.wrapper);
                copied += 1;
            }
            Err(e) => assert!(!e.is_empty(), "{}: a refusal without a reason", f.wrapper),
        }
    }
    let read_copied = paths
        .iter()
        .any(|f| f.wrapper == "read" && f.attachment.is_ok() && f.copy.is_ok());
    eprintln!("{copied} wrappers copied; read runs in its copy: {read_copied}");
    let fd = raw_syscall::zero_as(MARK_FD, libc::O_RDONLY);
    let before = syscalls::trapped();
    raw_syscall::reads_then_raw_getppid(MARK_FD, CALLS);
    let mut buf = [0xffu8; 16];
    assert_eq!(
        syscalls::trapped() - before,
        CALLS,
        "only the raw getppid traps"
    );
    assert_eq!(PPID_ENTERS.load(Ordering::Relaxed), CALLS);
    assert_eq!(ENTERS.load(Ordering::Relaxed), CALLS);
    assert_eq!(EXITS.load(Ordering::Relaxed), CALLS);
    assert_eq!(EXIT_BYTES.load(Ordering::Relaxed), 16 * CALLS);
    // A failing read: the copy's -1 and errno reach the caller.
    let bad = unsafe { libc::dup2(fd, MARK_FD + 1) };
    unsafe { libc::close(bad) };
    assert_eq!(unsafe { libc::read(bad, buf.as_mut_ptr().cast(), 1) }, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EBADF)
    );

    // glibc's syscall(): the number from its first argument, the sixth
    // argument from the stack, no signal; the numbers the SIGSYS path
    // must perform itself still trap.
    // (getppid() first: its record's rdi is whatever the register holds.)
    let expected = unsafe { libc::getppid() } as i64;
    let before = syscalls::trapped();
    let ppid = unsafe { libc::syscall(libc::SYS_getppid, 0xb0b1u64, 2u64, 3u64, 4u64, 5u64, 6u64) };
    let trapped = syscalls::trapped() - before;
    assert_eq!(ppid, expected);
    assert_eq!(trapped, 0, "syscall(SYS_getppid) trapped");
    assert_eq!(INDIRECT_ENTERS.load(Ordering::Relaxed), 1);
    assert_eq!(INDIRECT_ARGS.load(Ordering::Relaxed), 0xb0b1 + 20);
    assert_eq!(INDIRECT_SIXTH.load(Ordering::Relaxed), 6);
    assert_eq!(INDIRECT_EXITS.load(Ordering::Relaxed), 1);
    assert_eq!(INDIRECT_RESULT.load(Ordering::Relaxed), ppid as u64);
    let bad = unsafe { libc::syscall(libc::SYS_close, -1i64) };
    assert_eq!(bad, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EBADF)
    );
    let before = syscalls::trapped();
    let mut old: u64 = 0;
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null::<u64>(),
            &mut old as *mut u64,
            8usize,
        )
    };
    assert_eq!(r, 0);
    assert_eq!(
        syscalls::trapped() - before,
        1,
        "rt_sigprocmask stays on the slow path"
    );

    // Cancellation inside the copy.
    let mut pipe = [0i32; 2];
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let mut th: libc::pthread_t = 0;
    let start: extern "C-unwind" fn(*mut libc::c_void) -> *mut libc::c_void = reader;
    // SAFETY: the start routine's ABI is pthread's; the C-unwind
    // declaration lets the forced unwind of cancellation through it.
    let r = unsafe {
        libc::pthread_create(
            &mut th,
            std::ptr::null(),
            std::mem::transmute::<
                extern "C-unwind" fn(*mut libc::c_void) -> *mut libc::c_void,
                extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
            >(start),
            pipe[0] as usize as *mut libc::c_void,
        )
    };
    assert_eq!(r, 0);
    while !BLOCKED_IN_READ.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(unsafe { libc::pthread_cancel(th) }, 0);
    let mut ret: *mut libc::c_void = std::ptr::null_mut();
    assert_eq!(unsafe { libc::pthread_join(th, &mut ret) }, 0);
    // PTHREAD_CANCELED is ((void *) -1).
    assert_eq!(ret as isize, -1);
    println!("exempt-copy-ok");
}

#[test]
fn traced_calls_run_in_the_copies() {
    if std::env::var_os("BPFJET_EXEMPT_CHILD").is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "traced_calls_run_in_the_copies", "--nocapture"])
        .env("BPFJET_EXEMPT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("exempt-copy-ok"),
        "child failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("{stderr}");
}
