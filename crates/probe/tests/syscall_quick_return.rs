//! The libc-wrapper fast path when a system call's exit is not traced
//! (`syscalls::set_exits_traced`): the wrapper's return goes through the
//! quick return trampoline, which only sets the selector back to BLOCK.
//! In a child process (dispatch is process state): every `read` is seen at
//! enter without trapping, its exit hook is skipped, the selector really is
//! BLOCK again after each return (a following `getppid`, which has no
//! wrapper fast path, traps every time), the wrapper's result reaches the
//! caller intact, and `write`, whose exit is traced, keeps the full path.

use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::PtRegs;
use std::process::Command;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

mod raw_syscall;

const CALLS: u64 = 3000;
const MARK_FD: i32 = 78;

static READ_ENTERS: AtomicU64 = AtomicU64::new(0);
static READ_EXITS: AtomicU64 = AtomicU64::new(0);
static PPID_ENTERS: AtomicU64 = AtomicU64::new(0);
static WRITE_EXITS: AtomicU64 = AtomicU64::new(0);
static WRITE_BYTES: AtomicI64 = AtomicI64::new(0);

fn child() {
    // Only write's exit is traced.
    let mut exits = vec![false; 512];
    exits[libc::SYS_write as usize] = true;
    syscalls::set_exits_traced(exits);
    syscalls::install(SyscallHooks {
        on_enter: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_read as u64 && r.rdi == MARK_FD as u64 {
                READ_ENTERS.fetch_add(1, Ordering::Relaxed);
            }
            if r.orig_rax == libc::SYS_getppid as u64 {
                PPID_ENTERS.fetch_add(1, Ordering::Relaxed);
            }
        })),
        on_exit: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_read as u64 && r.rdi == MARK_FD as u64 {
                READ_EXITS.fetch_add(1, Ordering::Relaxed);
            }
            if r.orig_rax == libc::SYS_write as u64 && r.rdi == MARK_FD as u64 {
                WRITE_EXITS.fetch_add(1, Ordering::Relaxed);
                WRITE_BYTES.fetch_add(r.rax as i64, Ordering::Relaxed);
            }
        })),
        before_exit: None,
    })
    .unwrap();
    for f in bpfjet_probe::fast_syscalls::install() {
        if let Err(e) = &f.attachment {
            assert!(!matches!(f.wrapper, "read" | "write"), "{}: {e}", f.wrapper);
        }
    }
    raw_syscall::zero_as(MARK_FD, libc::O_RDWR);
    let before = syscalls::trapped();
    raw_syscall::reads_then_raw_getppid(MARK_FD, CALLS);
    let mut buf = [0xffu8; 16];
    // A failing read: the wrapper's -1 and errno reach the caller.
    assert_eq!(unsafe { libc::read(9999, buf.as_mut_ptr().cast(), 1) }, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EBADF)
    );
    let traps = syscalls::trapped() - before;
    for _ in 0..CALLS {
        assert_eq!(
            unsafe { libc::write(MARK_FD, b"12345".as_ptr().cast(), 5) },
            5
        );
    }
    let line = format!(
        "read_enters={} read_exits={} ppid_enters={} traps={} write_exits={} write_bytes={} depth={}\n",
        READ_ENTERS.load(Ordering::Relaxed),
        READ_EXITS.load(Ordering::Relaxed),
        PPID_ENTERS.load(Ordering::Relaxed),
        traps,
        WRITE_EXITS.load(Ordering::Relaxed),
        WRITE_BYTES.load(Ordering::Relaxed),
        bpfjet_probe::uprobe::shadow_depth(),
    );
    unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
    unsafe { libc::_exit(0) };
}

#[test]
fn quick_return_child() {
    if std::env::var_os("BPFJET_QUICK_CHILD").is_some() {
        child();
    }
}

#[test]
fn untraced_exits_return_quickly_and_block_again() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "quick_return_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BPFJET_QUICK_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        // The harness's "test quick_return_child ... " may precede it.
        .find_map(|l| l.find("read_enters=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no report; status {:?}\n{stdout}\n{stderr}", out.status));
    assert_eq!(
        line,
        format!(
            "read_enters={CALLS} read_exits=0 ppid_enters={CALLS} traps={CALLS} \
             write_exits={CALLS} write_bytes={} depth=0",
            CALLS * 5
        )
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
