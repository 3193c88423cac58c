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
static OPENS: AtomicU64 = AtomicU64::new(0);
static WRITE_TRAPS: AtomicU64 = AtomicU64::new(0);
const MARK_PATH: &[u8] = b"/dev/null";

fn is_mark_path(addr: u64) -> bool {
    if addr == 0 {
        return false;
    }
    // SAFETY: the traced call's own path argument, a C string.
    let s = unsafe { std::ffi::CStr::from_ptr(addr as *const libc::c_char) };
    s.to_bytes() == MARK_PATH
}

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
            if r.orig_rax == libc::SYS_openat as u64
                && r.rdi as i64 as i32 == libc::AT_FDCWD
                && is_mark_path(r.rsi)
            {
                OPENS.fetch_add(1, Ordering::Relaxed);
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
                "enter={} exit={} bytes={} status={} signals={} opens={} write_traps={}\n",
                ENTERS.load(Ordering::Relaxed),
                EXITS.load(Ordering::Relaxed),
                BYTES.load(Ordering::Relaxed),
                status,
                SIGNALS.load(Ordering::Relaxed),
                OPENS.load(Ordering::Relaxed),
                WRITE_TRAPS.load(Ordering::Relaxed),
            );
            unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        })),
    })
    .unwrap();
    if std::env::var_os("BPFJET_SUD_FAST").is_some() {
        for f in bpfjet_probe::fast_syscalls::install() {
            if let Err(e) = &f.attachment {
                assert!(
                    !matches!(f.wrapper, "read" | "write" | "open" | "openat" | "close"),
                    "{}: {e}",
                    f.wrapper
                );
            }
        }
    }
    let devnull = std::ffi::CString::new("/dev/null").unwrap();
    let fd = unsafe { libc::open(devnull.as_ptr(), libc::O_WRONLY) };
    assert!(fd >= 0);
    let fd2 = unsafe { libc::openat(libc::AT_FDCWD, devnull.as_ptr(), libc::O_RDONLY) };
    assert!(fd2 >= 0);
    unsafe { libc::close(fd2) };
    assert_eq!(unsafe { libc::dup2(fd, MARK_FD) }, MARK_FD);
    let before = syscalls::trapped();
    for _ in 0..WRITES {
        assert_eq!(
            unsafe { libc::write(MARK_FD, b"1234567".as_ptr().cast(), 7) },
            7
        );
    }
    WRITE_TRAPS.store(syscalls::trapped() - before, Ordering::Relaxed);
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

fn run_child(fast: bool) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "dispatch_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("BPFJET_SUD_CHILD", "1");
    if fast {
        cmd.env("BPFJET_SUD_FAST", "1");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("enter=") && l.contains("status=3"))
        .unwrap_or_else(|| panic!("no report; status {:?}\n{stdout}\n{stderr}", out.status));
    assert_eq!(
        line,
        format!(
            "enter={WRITES} exit={WRITES} bytes={} status=3 signals=3 opens=2 write_traps={}",
            WRITES * 7,
            // Under the fast path no write traps; otherwise each traps once.
            if fast { 0 } else { WRITES }
        )
    );
    assert_eq!(out.status.code(), Some(3), "{stderr}");
}

#[test]
fn writes_counted_exactly_and_process_keeps_working() {
    run_child(false);
}

#[test]
fn libc_fast_path_counts_the_same_without_trapping() {
    run_child(true);
}
