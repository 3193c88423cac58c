//! The register snapshot handlers see: the x86-64 kernel's `struct pt_regs`,
//! so `PT_REGS_PARM1(ctx)`, `BPF_UPROBE` and `BPF_URETPROBE` read it unchanged.

/// x86-64 `struct pt_regs` (arch/x86/include/asm/ptrace.h), 168 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PtRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub orig_rax: u64,
    pub rip: u64,
    pub cs: u64,
    pub eflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

pub const PT_REGS_SIZE: usize = 168;
const _: () = assert!(std::mem::size_of::<PtRegs>() == PT_REGS_SIZE);

impl PtRegs {
    /// The user registers a signal interrupted (its `ucontext`'s general
    /// registers), with `rip` as given; `orig_rax` -1 (not in a system
    /// call), user-mode segments.
    pub fn from_signal_gregs(g: &[libc::greg_t; 23], rip: u64) -> PtRegs {
        use libc::*;
        let r = |i: c_int| g[i as usize] as u64;
        PtRegs {
            r15: r(REG_R15),
            r14: r(REG_R14),
            r13: r(REG_R13),
            r12: r(REG_R12),
            rbp: r(REG_RBP),
            rbx: r(REG_RBX),
            r11: r(REG_R11),
            r10: r(REG_R10),
            r9: r(REG_R9),
            r8: r(REG_R8),
            rax: r(REG_RAX),
            rcx: r(REG_RCX),
            rdx: r(REG_RDX),
            rsi: r(REG_RSI),
            rdi: r(REG_RDI),
            orig_rax: u64::MAX,
            rip,
            cs: 0x33,
            eflags: r(REG_EFL),
            rsp: r(REG_RSP),
            ss: 0x2b,
        }
    }

    /// The n-th integer argument of the System V calling convention (0-based).
    pub fn arg(&self, n: usize) -> u64 {
        match n {
            0 => self.rdi,
            1 => self.rsi,
            2 => self.rdx,
            3 => self.rcx,
            4 => self.r8,
            5 => self.r9,
            _ => 0,
        }
    }

    /// A function's integer return value (valid in a return handler).
    pub fn ret(&self) -> u64 {
        self.rax
    }

    pub fn as_bytes(&self) -> &[u8; PT_REGS_SIZE] {
        // SAFETY: repr(C), 21 u64 fields, no padding.
        unsafe { &*(self as *const PtRegs as *const [u8; PT_REGS_SIZE]) }
    }
}
