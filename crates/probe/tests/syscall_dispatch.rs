//! System calls through Syscall User Dispatch, in a child process (the
//! dispatch and its SIGSYS handler are process state): a known workload of
//! writes is counted exactly at enter and exit with the right results, and
//! threads, fork and signal handlers keep working under dispatch.

use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::PtRegs;
use std::process::Command;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

const WRITES: u64 = 5000;
const MARK_FD: i32 = 77;

static ENTERS: AtomicU64 = AtomicU64::new(0);
static EXITS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);
static EXIT_STATUS: AtomicI64 = AtomicI64::new(-1);
static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: i32) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
    // A system call inside an application signal handler, and the handler's
    // return through libc's restorer (rt_sigreturn), both dispatched.
    unsafe { libc::getppid() };
}

/// The workload, run in the child process.
fn child() {
    syscalls::install(SyscallHooks {
        on_enter: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_write as u64 && r.rdi == MARK_FD as u64 {
                ENTERS.fetch_add(1, Ordering::Relaxed);
            }
        })),
        on_exit: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_write as u64 && r.rdi == MARK_FD as u64 {
                EXITS.fetch_add(1, Ordering::Relaxed);
                BYTES.fetch_add(r.rax as i64, Ordering::Relaxed);
            }
        })),
        before_exit: Some(Box::new(|status| {
            EXIT_STATUS.store(status as i64, Ordering::Relaxed);
            let line = format!(
                "enter={} exit={} bytes={} status={} signals={} trapped={}\n",
                ENTERS.load(Ordering::Relaxed),
                EXITS.load(Ordering::Relaxed),
                BYTES.load(Ordering::Relaxed),
                status,
                SIGNALS.load(Ordering::Relaxed),
                syscalls::trapped() > WRITES,
            );
            unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        })),
    })
    .unwrap();
    let devnull = std::ffi::CString::new("/dev/null").unwrap();
    let fd = unsafe { libc::open(devnull.as_ptr(), libc::O_WRONLY) };
    assert!(fd >= 0);
    assert_eq!(unsafe { libc::dup2(fd, MARK_FD) }, MARK_FD);
    for _ in 0..WRITES {
        assert_eq!(
            unsafe { libc::write(MARK_FD, b"1234567".as_ptr().cast(), 7) },
            7
        );
    }
    // A write that fails: its exit sees -EBADF... on another fd, not counted.
    assert_eq!(unsafe { libc::write(9999, b"x".as_ptr().cast(), 1) }, -1);
    // A thread: clone3 with a new stack, performed by the clone stub.
    let t = std::thread::spawn(|| (0..10u64).sum::<u64>());
    assert_eq!(t.join().unwrap(), 45);
    // fork: the child is dispatched too and exits on its own.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe { libc::_exit(7) };
    }
    let mut st = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert_eq!(libc::WEXITSTATUS(st), 7);
    // Application signal handlers and their rt_sigreturn.
    unsafe {
        libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
        for _ in 0..3 {
            libc::raise(libc::SIGUSR1);
        }
    }
    unsafe { libc::exit(3) };
}

#[test]
fn dispatch_child() {
    if std::env::var_os("BPFJET_SUD_CHILD").is_some() {
        child();
    }
}

#[test]
fn writes_counted_exactly_and_process_keeps_working() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "dispatch_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BPFJET_SUD_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("enter="))
        .unwrap_or_else(|| panic!("no report; status {:?}\n{stdout}\n{stderr}", out.status));
    assert_eq!(
        line,
        format!(
            "enter={WRITES} exit={WRITES} bytes={} status=3 signals=3 trapped=true",
            WRITES * 7
        )
    );
    assert_eq!(out.status.code(), Some(3), "{stderr}");
}
