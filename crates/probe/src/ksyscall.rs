//! Kernel probes on system-call entry points, run at the traced process's
//! own system calls.
//!
//! A kprobe on `__x64_sys_NAME` (and libbpf's `ksyscall/NAME`, which
//! libbpf turns into that kprobe on a kernel with syscall wrappers, as
//! x86-64's since 4.17) fires exactly when a thread enters system call
//! NAME; its kretprobe (`kretsyscall/NAME`) when the call returns. Those
//! are events of the process, so bpfjet runs them at the same hooks as
//! the `sys_enter_NAME` / `sys_exit_NAME` tracepoints, with the context
//! the kernel gives:
//! - entry of `__x64_sys_NAME`: the kernel function's `pt_regs`, whose
//!   first argument (`di`) points to the thread's user `pt_regs`
//!   (`PT_REGS_SYSCALL_REGS`), read with `bpf_probe_read_kernel`
//!   (`PT_REGS_PARM1_CORE_SYSCALL`);
//! - entry of `ksyscall/NAME`: what `BPF_KSYSCALL` expects given the
//!   object's `LINUX_HAS_SYSCALL_WRAPPER`, which bpfjet computes as libbpf
//!   does (`bpfjet_obj::has_syscall_wrapper`): true, the wrapper's
//!   registers as above (libbpf attaches to `__x64_sys_NAME`); false (a
//!   kernel where libbpf cannot place a kprobe on the wrapper, and so
//!   attaches to the syscall's own function), the arguments in the
//!   registers themselves (`di si dx`, the fourth in both `cx` and `r10`,
//!   `r8 r9`);
//! - return: `ax` holds the call's result (`PT_REGS_RC`, `BPF_KRETPROBE`).
//!
//! The other registers are the kernel's at that point, which a process
//! does not have: they read as 0, but for `ip` (the probed address, as
//! the kernel's kprobe sets it) and the kernel segment selectors.
//! `bpf_get_func_ip` is the entry point's kernel address from
//! `/proc/kallsyms` (0 when the kernel hides it, as it shows 0 to an
//! unprivileged reader). Any other kernel function (`vfs_read`,
//! `do_sys_openat2`, ...) is refused: nothing in a process runs it.

use crate::{syscall_table, PtRegs};
use bpfjet_obj::ProbeSection;
use std::collections::BTreeMap;

/// The x86-64 prefix of a system call's entry point.
pub use bpfjet_obj::SYSCALL_ENTRY_PREFIX as ENTRY_PREFIX;

/// The kernel's code and stack segment selectors (`__KERNEL_CS`,
/// `__KERNEL_DS`): the registers of a kprobe are the kernel's.
const KERNEL_CS: u64 = 0x10;
const KERNEL_SS: u64 = 0x18;

/// A kernel probe on a system call: its number, whether it runs at the
/// return, and whether the call's entry is named as a syscall
/// (`ksyscall/NAME`, whose context follows `LINUX_HAS_SYSCALL_WRAPPER`)
/// rather than as the wrapper function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallProbe {
    pub nr: u32,
    pub ret: bool,
    pub by_syscall_name: bool,
}

/// The system call a kernel probe attaches to (its section's
/// [`ProbeSection::syscall_entry`] with the call's number), or why it
/// cannot be attached in a process.
pub fn syscall_probe(probe: &ProbeSection) -> Result<SyscallProbe, String> {
    let entry = probe.syscall_entry()?;
    let syscall = entry.syscall;
    let nr = syscall_table::tracepoint_number(syscall).ok_or_else(|| {
        let hint = syscall_table::tracepoint_alias(syscall)
            .map(|k| format!(" (the kernel's entry point for it is {ENTRY_PREFIX}{k})"))
            .unwrap_or_default();
        format!("the kernel has no {ENTRY_PREFIX}{syscall} on x86-64{hint}")
    })?;
    Ok(SyscallProbe {
        nr,
        ret: entry.ret,
        by_syscall_name: entry.by_syscall_name,
    })
}

/// The kernel addresses of the entry points of system calls `nrs`, from
/// `/proc/kallsyms` (0 where it has none or hides them). Read once, at
/// attach.
pub fn entry_addresses(nrs: impl Iterator<Item = u32>) -> BTreeMap<u32, u64> {
    let mut wanted: BTreeMap<String, u32> = nrs
        .filter_map(|nr| {
            Some((
                format!("{ENTRY_PREFIX}{}", syscall_table::tracepoint_name(nr)?),
                nr,
            ))
        })
        .collect();
    let mut out: BTreeMap<u32, u64> = wanted.values().map(|&nr| (nr, 0)).collect();
    if wanted.is_empty() {
        return out;
    }
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
        return out;
    };
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !matches!(kind, "T" | "t") {
            continue;
        }
        if let Some(nr) = wanted.remove(name) {
            out.insert(nr, u64::from_str_radix(addr, 16).unwrap_or(0));
            if wanted.is_empty() {
                break;
            }
        }
    }
    out
}

/// The registers a kprobe on the entry point (at kernel address `entry`)
/// of the call in `user` sees: with `wrapper`, its argument is the
/// thread's user registers; without, the call's arguments themselves.
pub fn entry_regs(user: &PtRegs, entry: u64, wrapper: bool) -> PtRegs {
    let kernel = PtRegs {
        // After the probe's breakpoint byte, as the kernel's kprobe leaves
        // `ip` for its handlers.
        rip: if entry == 0 { 0 } else { entry + 1 },
        cs: KERNEL_CS,
        ss: KERNEL_SS,
        ..PtRegs::default()
    };
    if wrapper {
        return PtRegs {
            rdi: user as *const PtRegs as u64,
            ..kernel
        };
    }
    PtRegs {
        rdi: user.rdi,
        rsi: user.rsi,
        rdx: user.rdx,
        // The C convention's fourth argument, and the system call's
        // register for it (`PT_REGS_PARM4_SYSCALL`).
        rcx: user.r10,
        r10: user.r10,
        r8: user.r8,
        r9: user.r9,
        ..kernel
    }
}

/// Whether system call `nr` makes a task (`clone`, `fork`, `vfork`,
/// `clone3`): its new task never returns through the entry point's
/// kernel function, so a kretprobe fires in the caller only.
pub fn is_clone(nr: u64) -> bool {
    [
        libc::SYS_clone,
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_clone3,
    ]
    .contains(&(nr as i64))
}

/// The registers a kretprobe on the entry point of the call in `user`
/// sees: the call's result in `ax`.
pub fn return_regs(user: &PtRegs) -> PtRegs {
    PtRegs {
        rax: user.rax,
        cs: KERNEL_CS,
        ss: KERNEL_SS,
        ..PtRegs::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfjet_obj::{ProbeFlavor, ProbeTarget};

    fn kernel(flavor: ProbeFlavor, function: &str, offset: u64) -> ProbeSection {
        ProbeSection {
            flavor,
            sleepable: false,
            target: ProbeTarget::Kernel {
                function: function.into(),
                offset,
            },
        }
    }

    #[test]
    fn system_call_entry_points_name_their_call() {
        let write = syscall_table::tracepoint_number("write").unwrap();
        assert_eq!(
            syscall_probe(&kernel(ProbeFlavor::Ksyscall, "write", 0)),
            Ok(SyscallProbe {
                nr: write,
                ret: false,
                by_syscall_name: true
            })
        );
        assert_eq!(
            syscall_probe(&kernel(ProbeFlavor::Kretprobe, "__x64_sys_write", 0)),
            Ok(SyscallProbe {
                nr: write,
                ret: true,
                by_syscall_name: false
            })
        );
        let stat = syscall_probe(&kernel(ProbeFlavor::Ksyscall, "stat", 0)).unwrap_err();
        assert!(stat.contains("__x64_sys_newstat"), "{stat}");
        let inner = syscall_probe(&kernel(ProbeFlavor::Kprobe, "vfs_read", 0)).unwrap_err();
        assert!(inner.contains("vfs_read"), "{inner}");
        let off = syscall_probe(&kernel(ProbeFlavor::Kprobe, "__x64_sys_write", 4)).unwrap_err();
        assert!(off.contains("inside"), "{off}");
        assert!(syscall_probe(&kernel(ProbeFlavor::KprobeMulti, "__x64_sys_*", 0)).is_err());
    }

    #[test]
    fn entry_registers_follow_the_calling_convention() {
        let user = PtRegs {
            rdi: 1,
            rsi: 2,
            rdx: 3,
            r10: 4,
            r8: 5,
            r9: 6,
            rcx: 0x401000,
            ..PtRegs::default()
        };
        let w = entry_regs(&user, 0xffff_ffff_8100_0000, true);
        assert_eq!(w.rdi, &user as *const PtRegs as u64);
        assert_eq!((w.rsi, w.rip, w.cs & 3), (0, 0xffff_ffff_8100_0001, 0));
        let d = entry_regs(&user, 0, false);
        assert_eq!(
            [d.rdi, d.rsi, d.rdx, d.rcx, d.r10, d.r8, d.r9, d.rip],
            [1, 2, 3, 4, 4, 5, 6, 0]
        );
    }
}
