//! The libc wrappers' lighter entry trampoline (`bpfjet_probe_wrapper_entry`,
//! which restores only the argument registers and rbx): in a child process
//! (dispatch is process state), `write` is called from assembly with
//! known values in r12-r15 and in the argument registers. The enter hook
//! sees those values in the system call's `pt_regs` (exact registers for
//! the programs), the call goes through the fast path (no trap), its result
//! is right, and after the return the callee-saved registers hold the
//! caller's values.

use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::PtRegs;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

const MARK_FD: i32 = 79;
const R12: u64 = 0x1212_1212_1212_0012;
const R13: u64 = 0x1313_1313_1313_0013;
const R14: u64 = 0x1414_1414_1414_0014;
const R15: u64 = 0x1515_1515_1515_0015;

static SEEN: AtomicU64 = AtomicU64::new(0);
static EXACT: AtomicU64 = AtomicU64::new(0);

/// `write(MARK_FD, buf, len)` called from assembly with r12-r15 set;
/// returns (result, r12, r13, r14, r15 after the call).
fn write_with_marked_registers(buf: &[u8]) -> (i64, [u64; 4]) {
    let ret: i64;
    let (mut r12, mut r13, mut r14, mut r15) = (R12, R13, R14, R15);
    // SAFETY: a plain C call of libc's write with its three arguments; the
    // C ABI's clobbers are declared, r12-r15 are in-out.
    unsafe {
        std::arch::asm!(
            "call {f}",
            f = in(reg) libc::write as *const () as usize,
            inout("rdi") MARK_FD as u64 => _,
            inout("rsi") buf.as_ptr() as u64 => _,
            inout("rdx") buf.len() as u64 => _,
            inout("r12") r12,
            inout("r13") r13,
            inout("r14") r14,
            inout("r15") r15,
            lateout("rax") ret,
            clobber_abi("C"),
        );
    }
    (ret, [r12, r13, r14, r15])
}

fn child() {
    syscalls::install(SyscallHooks {
        on_enter: Some(Box::new(|r: &PtRegs| {
            if r.orig_rax == libc::SYS_write as u64 && r.rdi == MARK_FD as u64 {
                SEEN.fetch_add(1, Ordering::Relaxed);
                if (r.r12, r.r13, r.r14, r.r15) == (R12, R13, R14, R15) && r.rdx == 5 {
                    EXACT.fetch_add(1, Ordering::Relaxed);
                }
            }
        })),
        on_exit: None,
        before_exit: None,
    })
    .unwrap();
    for f in bpfjet_probe::fast_syscalls::install() {
        if f.wrapper == "write" {
            assert!(f.attachment.is_ok(), "write's fast path");
        }
    }
    let null = std::ffi::CString::new("/dev/null").unwrap();
    let fd = unsafe { libc::open(null.as_ptr(), libc::O_WRONLY) };
    assert!(fd >= 0);
    assert_eq!(unsafe { libc::dup2(fd, MARK_FD) }, MARK_FD);
    let traps = syscalls::trapped();
    let fast = bpfjet_probe::fast_syscalls::fast_calls();
    const CALLS: u64 = 1000;
    let mut kept = 0;
    let mut results = 0;
    for _ in 0..CALLS {
        let (ret, regs) = write_with_marked_registers(b"12345");
        results += u64::from(ret == 5);
        kept += u64::from(regs == [R12, R13, R14, R15]);
    }
    let line = format!(
        "seen={} exact={} results={} kept={} traps={} fast={}\n",
        SEEN.load(Ordering::Relaxed),
        EXACT.load(Ordering::Relaxed),
        results,
        kept,
        syscalls::trapped() - traps,
        bpfjet_probe::fast_syscalls::fast_calls() - fast,
    );
    unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
    unsafe { libc::_exit(0) };
}

#[test]
fn wrapper_entry_child() {
    if std::env::var_os("BPFJET_WRAPPER_ENTRY_CHILD").is_some() {
        child();
    }
}

#[test]
fn wrapper_entry_keeps_registers_and_shows_them_exactly() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "wrapper_entry_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BPFJET_WRAPPER_ENTRY_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find_map(|l| l.find("seen=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("child said nothing\nstdout: {stdout}\nstderr: {stderr}"));
    assert_eq!(
        line, "seen=1000 exact=1000 results=1000 kept=1000 traps=0 fast=1000",
        "stderr: {stderr}"
    );
}
