//! The contexts tracing programs receive, laid out as the kernel's (x86-64).

/// x86-64 `struct pt_regs` (`arch/x86/include/asm/ptrace.h`): the context
/// of kprobe-type programs (uprobes, uretprobes, USDT). libbpf's
/// `PT_REGS_PARM1(ctx)` reads `di`, `PT_REGS_RC(ctx)` reads `ax`,
/// `PT_REGS_IP(ctx)` reads `ip`, `PT_REGS_SP(ctx)` reads `sp`, `PT_REGS_FP`
/// reads `bp`. An entry probe fills the argument registers (`di`, `si`,
/// `dx`, `cx`, `r8`, `r9`), `sp`, `bp` and `ip` (the probed address); a
/// return probe fills `ax` (and `dx`) with the return value. 168 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub bp: u64,
    pub bx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub ax: u64,
    pub cx: u64,
    pub dx: u64,
    pub si: u64,
    pub di: u64,
    pub orig_ax: u64,
    pub ip: u64,
    pub cs: u64,
    pub flags: u64,
    pub sp: u64,
    pub ss: u64,
}

const _: () = assert!(std::mem::size_of::<PtRegs>() == 168);
const _: () = assert!(std::mem::offset_of!(PtRegs, di) == 112);
const _: () = assert!(std::mem::offset_of!(PtRegs, ax) == 80);
const _: () = assert!(std::mem::offset_of!(PtRegs, ip) == 128);
const _: () = assert!(std::mem::offset_of!(PtRegs, sp) == 152);

impl PtRegs {
    /// Registers at a function's entry with the System V arguments
    /// `args` (up to six) in `di, si, dx, cx, r8, r9`.
    pub fn with_args(args: &[u64]) -> PtRegs {
        let mut regs = PtRegs::default();
        let slots = [
            &mut regs.di,
            &mut regs.si,
            &mut regs.dx,
            &mut regs.cx,
            &mut regs.r8,
            &mut regs.r9,
        ];
        for (slot, arg) in slots.into_iter().zip(args) {
            *slot = *arg;
        }
        regs
    }
}

/// The tracepoint record of `syscalls/sys_enter_*`
/// (`struct trace_event_raw_sys_enter`): an 8-byte common header the
/// program cannot read, the syscall number at 8 (`__syscall_nr`, an `int`
/// in the format file, a `long` in vmlinux.h: the same bytes on x86-64),
/// the six arguments at 16. 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysEnterCtx {
    /// `common_type`, `common_flags`, `common_preempt_count`,
    /// `common_pid` (hidden from programs).
    pub common: u64,
    pub id: i64,
    pub args: [u64; 6],
}

/// The tracepoint record of `syscalls/sys_exit_*`
/// (`struct trace_event_raw_sys_exit`): header, syscall number at 8,
/// return value at 16. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysExitCtx {
    pub common: u64,
    pub id: i64,
    pub ret: i64,
}

/// `struct bpf_perf_event_data` (include/uapi/linux/bpf_perf_event.h):
/// the interrupted registers, the event's sample period and the sampled
/// address (0 for a `cpu-clock` sample). 184 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfEventData {
    pub regs: PtRegs,
    pub sample_period: u64,
    pub addr: u64,
}

const _: () = assert!(std::mem::size_of::<PerfEventData>() == 184);
const _: () = assert!(std::mem::size_of::<SysEnterCtx>() == 64);
const _: () = assert!(std::mem::offset_of!(SysEnterCtx, args) == 16);
const _: () = assert!(std::mem::size_of::<SysExitCtx>() == 24);
const _: () = assert!(std::mem::offset_of!(SysExitCtx, ret) == 16);

/// The arguments of the raw `sys_enter` / `sys_exit` tracepoints
/// (`struct bpf_raw_tracepoint_args`): `sys_enter` gets
/// `args[0] = struct pt_regs *` (the syscall's registers) and
/// `args[1] = id`; `sys_exit` gets `args[0] = struct pt_regs *` and
/// `args[1] = ret`. 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawSyscallArgs {
    pub args: [u64; 2],
}

const _: () = assert!(std::mem::size_of::<RawSyscallArgs>() == 16);

impl SysEnterCtx {
    pub fn new(id: i64, args: [u64; 6]) -> SysEnterCtx {
        SysEnterCtx {
            common: 0,
            id,
            args,
        }
    }
}

impl SysExitCtx {
    pub fn new(id: i64, ret: i64) -> SysExitCtx {
        SysExitCtx { common: 0, id, ret }
    }
}
