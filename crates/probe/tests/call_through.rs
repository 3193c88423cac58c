//! libc wrappers through call-through stubs (`fast_syscalls::install_with`),
//! in a child process (dispatch is process state): the enter hook sees the
//! system call's registers (`open`'s variadic mode in r10, the AT_FDCWD
//! mapping), the exit hook the raw result (-errno for `ssize_t` and `int`
//! wrappers), the caller gets the wrapper's result and errno untouched, a
//! signal handler interrupting a blocked wrapper (nesting its own system
//! calls) and a `siglongjmp` out of one leave the process working.

use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::PtRegs;
use std::process::Command;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

const MARK_FD: i32 = 77;
const BAD_FD: i32 = 9999;
const WRITES: u64 = 1000;

static WRITE_EXITS: AtomicU64 = AtomicU64::new(0);
static WRITE_BYTES: AtomicI64 = AtomicI64::new(0);
static BAD_WRITE_RET: AtomicI64 = AtomicI64::new(0);
static BAD_CLOSE_RET: AtomicI64 = AtomicI64::new(0);
static OPEN_MODE: AtomicI64 = AtomicI64::new(-1);
static OPEN_DIRFD: AtomicI64 = AtomicI64::new(0);
static PIPE_READ_RET: AtomicI64 = AtomicI64::new(0);
static PIPE_FD: AtomicI64 = AtomicI64::new(-1);
static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: i32) {
    HANDLED.fetch_add(1, Ordering::Relaxed);
    // A wrapper called while another is in flight on this thread.
    unsafe { libc::write(BAD_FD + 1, b"x".as_ptr().cast(), 1) };
}

/// `sigjmp_buf` is opaque to the libc crate: glibc's is 200 bytes.
#[repr(C, align(16))]
struct SigJmpBuf([u8; 256]);
static mut JUMP: SigJmpBuf = SigJmpBuf([0; 256]);
extern "C" {
    #[link_name = "__sigsetjmp"]
    fn sigsetjmp(env: *mut SigJmpBuf, savemask: i32) -> i32;
    fn siglongjmp(env: *mut SigJmpBuf, val: i32) -> !;
}
/// JUMP is set and its frame live: the next SIGUSR2 jumps, once.
static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
extern "C" fn on_usr2(_: i32) {
    if ARMED.swap(false, Ordering::SeqCst) {
        // SAFETY: JUMP was set by the interrupted thread before it blocked.
        unsafe { siglongjmp(&raw mut JUMP, 1) };
    }
}

fn child() {
    syscalls::install(SyscallHooks {
        on_enter: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_openat as u64 && r.r10 == 0o640 {
                OPEN_MODE.store(r.r10 as i64, Ordering::Relaxed);
                OPEN_DIRFD.store(r.rdi as i64, Ordering::Relaxed);
            }
        })),
        on_exit: Some(Box::new(|r: &PtRegs| {
            let fd = r.rdi as i64;
            let ret = r.rax as i64;
            match r.orig_rax as i64 {
                libc::SYS_write if fd == i64::from(MARK_FD) => {
                    WRITE_EXITS.fetch_add(1, Ordering::Relaxed);
                    WRITE_BYTES.fetch_add(ret, Ordering::Relaxed);
                }
                libc::SYS_write if fd == i64::from(BAD_FD) => {
                    BAD_WRITE_RET.store(ret, Ordering::Relaxed)
                }
                libc::SYS_close if fd == i64::from(BAD_FD) => {
                    BAD_CLOSE_RET.store(ret, Ordering::Relaxed)
                }
                libc::SYS_read if fd == PIPE_FD.load(Ordering::Relaxed) => {
                    PIPE_READ_RET.store(ret, Ordering::Relaxed)
                }
                _ => {}
            }
            // The hooks may change errno; the caller must not see it.
            unsafe { *libc::__errno_location() = 12345 };
        })),
        before_exit: Some(Box::new(|status| {
            let line = format!(
                "writes={} bytes={} bad_write={} bad_close={} open_mode={:o} open_dirfd={} \
                 pipe_read={} handled={} status={status}\n",
                WRITE_EXITS.load(Ordering::Relaxed),
                WRITE_BYTES.load(Ordering::Relaxed),
                BAD_WRITE_RET.load(Ordering::Relaxed),
                BAD_CLOSE_RET.load(Ordering::Relaxed),
                OPEN_MODE.load(Ordering::Relaxed),
                OPEN_DIRFD.load(Ordering::Relaxed),
                PIPE_READ_RET.load(Ordering::Relaxed),
                (HANDLED.load(Ordering::Relaxed) > 0) as u8,
            );
            unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        })),
    })
    .unwrap();
    let through = |nr: u32| {
        [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_close,
            libc::SYS_openat,
        ]
        .contains(&i64::from(nr))
    };
    for f in bpfjet_probe::fast_syscalls::install_with(&through) {
        if matches!(f.wrapper, "read" | "write" | "open" | "close") {
            assert!(
                f.attachment.is_ok(),
                "{}: {:?}",
                f.wrapper,
                f.attachment.err()
            );
            assert!(f.call_through, "{}: not a call-through stub", f.wrapper);
        }
    }
    let errno = || unsafe { *libc::__errno_location() };
    // `open` is variadic: the mode is passed with al set by the caller.
    let path = std::env::temp_dir().join(format!("bpfjet-call-through-{}", std::process::id()));
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o640) };
    assert!(fd >= 0, "open: errno {}", errno());
    assert_eq!(unsafe { libc::dup2(fd, MARK_FD) }, MARK_FD);
    for _ in 0..WRITES {
        assert_eq!(
            unsafe { libc::write(MARK_FD, b"1234567".as_ptr().cast(), 7) },
            7
        );
    }
    unsafe { libc::close(fd) };
    let meta = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o600, 0o600);
    assert_eq!(meta.len(), WRITES * 7);
    std::fs::remove_file(&path).unwrap();
    // Failures: -1 and the wrapper's errno for the caller.
    unsafe { *libc::__errno_location() = 0 };
    assert_eq!(unsafe { libc::write(BAD_FD, b"x".as_ptr().cast(), 1) }, -1);
    assert_eq!(errno(), libc::EBADF);
    unsafe { *libc::__errno_location() = 0 };
    assert_eq!(unsafe { libc::close(BAD_FD) }, -1);
    assert_eq!(errno(), libc::EBADF);

    // A thread blocked in read(pipe), interrupted by handlers (without
    // SA_RESTART) until the read fails with EINTR.
    let mut p = [0i32; 2];
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    PIPE_FD.store(i64::from(p[0]), Ordering::Relaxed);
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr2 as *const () as usize;
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
    let rfd = p[0];
    // The main thread (dispatched; threads spawned here are not) blocks.
    let main = unsafe { libc::pthread_self() } as u64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let killer = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(5));
            unsafe { libc::pthread_kill(main as libc::pthread_t, libc::SIGUSR1) };
        }
    });
    let mut b = [0u8; 8];
    let r = unsafe { libc::read(rfd, b.as_mut_ptr().cast(), 8) };
    assert_eq!((r, errno()), (-1, libc::EINTR));
    stop.store(true, Ordering::Relaxed);
    killer.join().unwrap();
    use std::os::unix::thread::JoinHandleExt;

    // siglongjmp out of a blocked read: the stub's frame is abandoned (on
    // a thread that is not dispatched: on a dispatched one the selector
    // would stay ALLOW, as with the entry/return probes, and the exit
    // below would not be seen).
    let jumper = std::thread::spawn(move || {
        let mut b = [0u8; 8];
        // SAFETY: JUMP is used by this thread only, until it returns.
        if unsafe { sigsetjmp(&raw mut JUMP, 1) } == 0 {
            ARMED.store(true, Ordering::SeqCst);
            unsafe { libc::read(rfd, b.as_mut_ptr().cast(), 8) };
            return false;
        }
        // The thread goes on working after the jump.
        unsafe { libc::getpid() };
        true
    });
    let pt = jumper.as_pthread_t();
    while !jumper.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(5));
        unsafe { libc::pthread_kill(pt, libc::SIGUSR2) };
    }
    assert!(
        jumper.join().unwrap(),
        "the read returned instead of jumping"
    );
    unsafe { libc::exit(3) };
}

#[test]
fn call_through_child() {
    if std::env::var_os("BPFJET_CALL_THROUGH_CHILD").is_some() {
        child();
    }
}

#[test]
fn wrappers_through_call_through_stubs_report_and_return_exactly() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "call_through_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BPFJET_CALL_THROUGH_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find_map(|l| l.find("writes=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no report; status {:?}\n{stdout}\n{stderr}", out.status));
    assert_eq!(
        line,
        format!(
            "writes={WRITES} bytes={} bad_write=-9 bad_close=-9 open_mode=640 open_dirfd={} \
             pipe_read=-4 handled=1 status=3",
            WRITES * 7,
            libc::AT_FDCWD
        )
    );
    assert_eq!(out.status.code(), Some(3), "{stderr}");
}
