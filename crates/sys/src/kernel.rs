//! The running kernel as a backend: the raw `bpf()` system call.
//!
//! The call is issued with the `syscall` instruction directly, never through
//! libc's `syscall()`, so it reaches the kernel even inside a process whose
//! `syscall()` bpfjet's preload library interposes.

use crate::attr::{encode, read_back};
use crate::backend::Backend;
use crate::command::Command;
use crate::errno::Errno;

/// `__NR_bpf`.
#[cfg(target_arch = "x86_64")]
pub const NR_BPF: i64 = 321;
#[cfg(target_arch = "aarch64")]
pub const NR_BPF: i64 = 280;

/// Executes commands with the kernel's `bpf()`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelBackend;

impl KernelBackend {
    /// `bpf(cmd, attr, size)` without libc: the kernel's return value, or
    /// its errno.
    ///
    /// # Safety
    /// `attr` must hold a valid attr for `cmd`: its addresses are followed
    /// by the kernel.
    pub unsafe fn raw(cmd: u32, attr: &mut [u8]) -> Result<i64, Errno> {
        let ret = raw_syscall3(
            NR_BPF,
            i64::from(cmd),
            attr.as_mut_ptr() as i64,
            attr.len() as i64,
        );
        if (-4095..0).contains(&ret) {
            Err(Errno(-ret as i32))
        } else {
            Ok(ret)
        }
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn raw_syscall3(nr: i64, a1: i64, a2: i64, a3: i64) -> i64 {
    let ret: i64;
    // SAFETY: the caller vouches for the arguments; `syscall` clobbers rcx
    // and r11 only.
    std::arch::asm!(
        "syscall",
        inlateout("rax") nr => ret,
        in("rdi") a1,
        in("rsi") a2,
        in("rdx") a3,
        lateout("rcx") _,
        lateout("r11") _,
        options(nostack)
    );
    ret
}

#[cfg(target_arch = "aarch64")]
unsafe fn raw_syscall3(nr: i64, a1: i64, a2: i64, a3: i64) -> i64 {
    let ret: i64;
    std::arch::asm!(
        "svc 0",
        in("x8") nr,
        inlateout("x0") a1 => ret,
        in("x1") a2,
        in("x2") a3,
        options(nostack)
    );
    ret
}

impl Backend for KernelBackend {
    fn execute(&self, cmd: &Command) -> Result<i64, Errno> {
        let mut attr = encode(cmd);
        // SAFETY: the command came from a caller's attr (or was built with
        // valid addresses); its addresses go to the kernel unchanged.
        let r = unsafe { Self::raw(cmd.cmd() as u32, &mut attr) };
        read_back(cmd, &attr);
        r
    }
}
