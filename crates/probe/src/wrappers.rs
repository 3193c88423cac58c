//! The libc wrappers the system-call fast path covers, and the check of
//! each one's code before it is patched.
//!
//! An entry probe on a wrapper stands in for the kernel's `sys_enter` of
//! the call the wrapper makes, and its return probe for `sys_exit`. That is
//! exact only if every call of the wrapper issues exactly one system call,
//! of the expected number, with arguments that follow from the wrapper's
//! own, and if the wrapper's result gives back the raw result. The table
//! says what is expected (read from Debian's glibc 2.36); [`check`] reads
//! the wrapper's code and refuses it (slow path, exact for every call)
//! when the code does not show it:
//! - every `syscall` instruction loads the expected number into eax, and
//!   none lies in the first bytes the patch moves (a thread blocked there
//!   would return into the moved copy; `--pid` keeps threads out of them);
//! - every path from the entry to a `ret` passes exactly one `syscall`
//!   (no return without a system call, as glibc's `fstat` does for a
//!   negative descriptor; no second call; no tail call to other code;
//!   no indirect jump). Direct calls are taken to return: in these
//!   wrappers they are glibc's cancellation and stack-protector helpers;
//! - the registers the mapping claims: the kernel's fourth argument
//!   (r10) from the C fourth (rcx), whole or zero-extended, or untouched
//!   for calls with up to three arguments; constants the wrapper adds
//!   (`send`'s null address, `pipe`'s zero flags);
//! - a `long` result is never set to a 32-bit -1.
//!
//! glibc's `syscall()` has no fixed number: its check is the exact
//! argument shift glibc's assembly does (number from rdi, arguments
//! shifted down one register, the sixth from the stack), then the same
//! one-call-per-path walk ([`Args::Indirect`]).
//!
//! The checks are a linear sweep and a path walk over the symbol's bytes:
//! they recognize glibc's wrapper shapes, not arbitrary code; anything
//! they do not recognize stays on the slow path.

use crate::regs::PtRegs;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register,
};
use std::collections::{BTreeMap, HashSet};

/// How a wrapper's C arguments become the system call's registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Args {
    /// One argument, unchanged (glibc may use the other registers, which
    /// are not the call's arguments).
    One,
    /// Up to three arguments, unchanged: the wrapper does not touch r10,
    /// so the kernel sees the caller's r10 as the (unused) fourth.
    Three,
    /// Unchanged; the C ABI's fourth argument, rcx, is the kernel's r10.
    Same,
    /// Unchanged, with the fourth a C `int` moved zero-extended
    /// (`mov r10d, ecx`).
    IntFourth,
    /// `open(path, flags, mode)` → `openat(AT_FDCWD, path, flags, mode)`,
    /// the mode read only for `O_CREAT`/`O_TMPFILE` (0 otherwise).
    AtFdcwd,
    /// `openat(dirfd, path, flags, mode)`, the mode as for [`Args::AtFdcwd`].
    OpenatMode,
    /// `send`/`recv(fd, buf, len, flags)` → `sendto`/`recvfrom(fd, buf,
    /// len, flags, NULL, 0)`.
    NoAddress,
    /// `epoll_pwait(..., timeout, sigmask)` with the kernel's sigset size
    /// (8) as the sixth argument.
    SigsetSize,
    /// `pipe(fds)` → `pipe2(fds, 0)`.
    NoFlags,
    /// `getdents64(fd, buf, count)`, the count capped at `INT_MAX`.
    CountCapped,
    /// `mmap(addr, len, prot, flags, fd, offset)`, as [`Args::IntFourth`];
    /// glibc fails EINVAL without a call for an offset that is not a
    /// multiple of 4096 ([`Args::admits`]).
    PageAlignedOffset,
    /// `syscall(number, a0, ..., a5)`: the number is the first C argument
    /// (rdi), the call's arguments the next five registers and the first
    /// stack slot. Only numbers the SIGSYS path performs as they are
    /// ([`Args::admits`]).
    Indirect,
}

/// The number of [`Args::Indirect`]'s wrapper, which has no fixed one.
pub(crate) const INDIRECT: u32 = u32::MAX;

/// `syscall()` with a number past the table, or one of
/// [`crate::syscalls::HANDLER_ONLY`], stays on the slow path.
const NUMBERS: u64 = 512;

/// What the wrapper returns, for rebuilding the raw result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ret {
    /// `long`, `ssize_t`, `off_t`: the raw result, or -1 with errno.
    Long,
    /// C `int`: -1 in eax (glibc may leave rax's upper half zero).
    Int,
}

/// One covered wrapper: its name, the system call it issues, argument
/// mapping, result type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Covered {
    pub(crate) wrapper: &'static str,
    pub(crate) syscall: &'static str,
    pub(crate) args: Args,
    pub(crate) ret: Ret,
}

const fn w(wrapper: &'static str, syscall: &'static str, args: Args, ret: Ret) -> Covered {
    Covered {
        wrapper,
        syscall,
        args,
        ret,
    }
}

impl Covered {
    /// The number of the system call the wrapper issues ([`INDIRECT`] for
    /// `syscall()`).
    pub(crate) fn number(&self) -> u32 {
        if self.args == Indirect {
            return INDIRECT;
        }
        crate::syscall_table::number(self.syscall).expect("table has every wrapper's call")
    }
}

use Args::*;
use Ret::*;

/// The wrappers the fast path covers. Left out on purpose (slow path), from
/// their code in glibc 2.36: `fstat`/`stat`/`lstat` (tail calls into
/// `fstatat`, which is covered; `fstat` fails EBADF without a call),
/// `fcntl` (most commands go through a separate function), `ppoll` and
/// `select` (the timeout is copied to the stack: the kernel gets another
/// pointer), `nanosleep`/`clock_nanosleep` (result is the error number, and
/// CPU clocks are refused without a call), `statx` (falls back to `fstatat` on
/// ENOSYS: two calls), `utimensat` (a null path fails without a call),
/// `faccessat` (may call `fstatat` and `getuid`), `preadv`/`pwritev` (the
/// offset is split in two registers), `getcwd`, `getpriority`,
/// `sched_getaffinity` (results differ from the kernel's).
pub(crate) const WRAPPERS: &[Covered] = &[
    // I/O (the first fourteen: the original fast path).
    w("read", "read", Three, Long),
    w("write", "write", Three, Long),
    w("pread64", "pread64", Same, Long),
    w("pwrite64", "pwrite64", Same, Long),
    w("readv", "readv", Three, Long),
    w("writev", "writev", Three, Long),
    w("openat", "openat", OpenatMode, Int),
    w("open", "openat", AtFdcwd, Int),
    w("close", "close", One, Int),
    w("lseek", "lseek", Three, Long),
    w("fsync", "fsync", One, Int),
    w("fdatasync", "fdatasync", One, Int),
    w("sendto", "sendto", IntFourth, Long),
    w("recvfrom", "recvfrom", IntFourth, Long),
    // Files and directories.
    w("fstatat", "newfstatat", IntFourth, Int),
    w("getdents64", "getdents64", CountCapped, Long),
    w("dup", "dup", Three, Int),
    w("dup2", "dup2", Three, Int),
    w("dup3", "dup3", Three, Int),
    w("pipe", "pipe2", NoFlags, Int),
    w("pipe2", "pipe2", Three, Int),
    w("ioctl", "ioctl", Three, Int),
    w("unlink", "unlink", Three, Int),
    w("unlinkat", "unlinkat", Three, Int),
    w("mkdir", "mkdir", Three, Int),
    w("mkdirat", "mkdirat", Three, Int),
    w("rmdir", "rmdir", Three, Int),
    w("rename", "rename", Three, Int),
    w("renameat", "renameat", Same, Int),
    w("link", "link", Three, Int),
    w("linkat", "linkat", Same, Int),
    w("symlink", "symlink", Three, Int),
    w("symlinkat", "symlinkat", Three, Int),
    w("readlink", "readlink", Three, Long),
    w("readlinkat", "readlinkat", Same, Long),
    w("access", "access", Three, Int),
    w("chdir", "chdir", Three, Int),
    w("fchdir", "fchdir", Three, Int),
    w("chmod", "chmod", Three, Int),
    w("fchmod", "fchmod", Three, Int),
    w("chown", "chown", Three, Int),
    w("fchown", "fchown", Three, Int),
    w("lchown", "lchown", Three, Int),
    w("umask", "umask", Three, Int),
    w("truncate", "truncate", Three, Int),
    w("ftruncate", "ftruncate", Three, Int),
    w("fallocate", "fallocate", Same, Int),
    w("flock", "flock", Three, Int),
    w("syncfs", "syncfs", Three, Int),
    w("sendfile", "sendfile", Same, Long),
    w("splice", "splice", Same, Long),
    w("copy_file_range", "copy_file_range", Same, Long),
    // Memory.
    w("mmap", "mmap", PageAlignedOffset, Long),
    w("munmap", "munmap", Three, Int),
    w("mprotect", "mprotect", Three, Int),
    w("madvise", "madvise", Three, Int),
    w("msync", "msync", Three, Int),
    w("mlock", "mlock", Three, Int),
    w("munlock", "munlock", Three, Int),
    w("memfd_create", "memfd_create", Three, Int),
    // Waiting and events.
    w("poll", "poll", Three, Int),
    w("epoll_wait", "epoll_wait", IntFourth, Int),
    w("epoll_pwait", "epoll_pwait", SigsetSize, Int),
    w("epoll_ctl", "epoll_ctl", Same, Int),
    w("epoll_create1", "epoll_create1", Three, Int),
    w("eventfd", "eventfd2", Three, Int),
    w("timerfd_create", "timerfd_create", Three, Int),
    w("timerfd_settime", "timerfd_settime", Same, Int),
    w("timerfd_gettime", "timerfd_gettime", Three, Int),
    w("inotify_init1", "inotify_init1", Three, Int),
    w("inotify_add_watch", "inotify_add_watch", Three, Int),
    w("inotify_rm_watch", "inotify_rm_watch", Three, Int),
    // Sockets.
    w("socket", "socket", Three, Int),
    w("socketpair", "socketpair", Same, Int),
    w("bind", "bind", Three, Int),
    w("listen", "listen", Three, Int),
    w("accept", "accept", Three, Int),
    w("accept4", "accept4", IntFourth, Int),
    w("connect", "connect", Three, Int),
    w("shutdown", "shutdown", Three, Int),
    w("getsockname", "getsockname", Three, Int),
    w("getpeername", "getpeername", Three, Int),
    w("getsockopt", "getsockopt", Same, Int),
    w("setsockopt", "setsockopt", Same, Int),
    w("sendmsg", "sendmsg", Three, Long),
    w("recvmsg", "recvmsg", Three, Long),
    w("send", "sendto", NoAddress, Long),
    w("recv", "recvfrom", NoAddress, Long),
    // Processes.
    w("getpid", "getpid", Three, Int),
    w("getppid", "getppid", Three, Int),
    w("gettid", "gettid", Three, Int),
    w("getuid", "getuid", Three, Int),
    w("geteuid", "geteuid", Three, Int),
    w("getgid", "getgid", Three, Int),
    w("getegid", "getegid", Three, Int),
    w("getsid", "getsid", Three, Int),
    w("getpgid", "getpgid", Three, Int),
    w("setpgid", "setpgid", Three, Int),
    w("setsid", "setsid", Three, Int),
    w("kill", "kill", Three, Int),
    w("sched_yield", "sched_yield", Three, Int),
    w("wait4", "wait4", Same, Int),
    w("uname", "uname", Three, Int),
    w("sysinfo", "sysinfo", Three, Int),
    w("getrusage", "getrusage", Three, Int),
    w("getrandom", "getrandom", Three, Long),
    // Any number, from its first argument (not syscalls::HANDLER_ONLY).
    w("syscall", "(any)", Indirect, Long),
];

/// `O_CREAT`, and `O_TMPFILE` (which includes `O_DIRECTORY`): glibc reads
/// the variadic mode only for these (`__OPEN_NEEDS_MODE`).
fn needs_mode(flags: u32) -> bool {
    let tmpfile = libc::O_TMPFILE as u32;
    flags & libc::O_CREAT as u32 != 0 || flags & tmpfile == tmpfile
}

impl Args {
    /// Whether the wrapper called with `regs` makes its system call: false
    /// where its code returns an error without one (the call then is not
    /// traced: the kernel sees none).
    #[inline(always)]
    pub(crate) fn admits(self, regs: &PtRegs) -> bool {
        match self {
            PageAlignedOffset => regs.r9 & 0xfff == 0,
            Indirect => regs.rdi < NUMBERS && !crate::syscalls::HANDLER_ONLY.contains(&regs.rdi),
            _ => true,
        }
    }

    /// The number of the call a wrapper of this mapping makes with `regs`
    /// at its entry: `fixed`, or the first argument for `syscall()`.
    #[inline(always)]
    pub(crate) fn number(self, fixed: u32, regs: &PtRegs) -> u32 {
        if self == Indirect {
            regs.rdi as u32
        } else {
            fixed
        }
    }

    /// Writes the system call's argument registers into `s` from the
    /// wrapper's registers at entry, `regs` (`s` starts as a copy).
    #[inline(always)]
    pub(crate) fn apply(self, regs: &PtRegs, s: &mut PtRegs) {
        let int_fourth = regs.rcx as u32 as u64;
        match self {
            One | Three => {}
            Same => s.r10 = regs.rcx,
            IntFourth | PageAlignedOffset => s.r10 = int_fourth,
            AtFdcwd => {
                s.rdi = libc::AT_FDCWD as i64 as u64;
                s.rsi = regs.rdi;
                s.rdx = regs.rsi as u32 as u64;
                s.r10 = if needs_mode(regs.rsi as u32) {
                    regs.rdx as u32 as u64
                } else {
                    0
                };
            }
            OpenatMode => {
                s.r10 = if needs_mode(regs.rdx as u32) {
                    int_fourth
                } else {
                    0
                };
            }
            NoAddress => {
                s.r10 = int_fourth;
                s.r8 = 0;
                s.r9 = 0;
            }
            SigsetSize => {
                s.r10 = int_fourth;
                s.r9 = 8;
            }
            NoFlags => s.rsi = 0,
            CountCapped => s.rdx = regs.rdx.min(i32::MAX as u64),
            Indirect => {
                s.orig_rax = regs.rdi;
                s.rdi = regs.rsi;
                s.rsi = regs.rdx;
                s.rdx = regs.rcx;
                s.r10 = regs.r8;
                s.r8 = regs.r9;
                // SAFETY: at the wrapper's entry [rsp] is the return
                // address and [rsp + 8] the first stack argument's slot, in
                // the caller's frame (read by the wrapper itself too).
                s.r9 = unsafe { *((regs.rsp + 8) as *const u64) };
            }
        }
    }
}

impl Ret {
    /// The raw result (the kernel's `sys_exit` `ret`) from the wrapper's
    /// rax and errno: -errno where the wrapper reports failure.
    #[inline(always)]
    pub(crate) fn raw(self, rax: u64, errno: i32) -> u64 {
        let ret = match self {
            Long => rax as i64,
            Int => i64::from(rax as u32 as i32),
        };
        if ret == -1 {
            -i64::from(errno) as u64
        } else {
            ret as u64
        }
    }
}

/// How a register was last written before a `syscall`, in a linear sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    Not,
    /// Moved from another register; `wide`: 64-bit (else 32-bit,
    /// zero-extending).
    Reg {
        from: Register,
        wide: bool,
    },
    /// Loaded from memory (a spilled argument reloaded after a call).
    Mem {
        wide: bool,
    },
    Const(u64),
    Other,
}

impl Written {
    /// The C argument in `from` (64-bit), unchanged or reloaded.
    fn whole(self, from: Register) -> bool {
        matches!(self, Written::Not | Written::Mem { wide: true })
            || self == Written::Reg { from, wide: true }
    }

    /// An argument left alone or reloaded from its spill slot.
    fn kept(self) -> bool {
        matches!(self, Written::Not | Written::Mem { .. })
    }

    /// The low half of the C argument in `from`, zero-extended.
    fn low32(self, from: Register) -> bool {
        matches!(self, Written::Mem { wide: false }) || self == Written::Reg { from, wide: false }
    }
}

/// The argument registers a `syscall` sees, in the sweep's order.
const ARG_REGS: [[Register; 4]; 6] = {
    use Register::*;
    [
        [RDI, EDI, DI, DIL],
        [RSI, ESI, SI, SIL],
        [RDX, EDX, DX, DL],
        [R10, R10D, R10W, R10L],
        [R8, R8D, R8W, R8L],
        [R9, R9D, R9W, R9L],
    ]
};

/// What a wrapper's `syscall` instruction sees: the number in eax and how
/// each argument register (rdi, rsi, rdx, r10, r8, r9) was last written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AtSyscall {
    nr: Option<u32>,
    args: [Written; 6],
}

fn arg_index(r: Register) -> Option<usize> {
    ARG_REGS.iter().position(|names| names.contains(&r))
}

fn write_kind(ins: &Instruction) -> Written {
    let size = ins.op0_register().size();
    match ins.mnemonic() {
        Mnemonic::Mov if size == 8 || size == 4 => match ins.op1_kind() {
            OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64 => {
                let mask = if size == 4 { 0xffff_ffff } else { u64::MAX };
                Written::Const(ins.immediate(1) & mask)
            }
            OpKind::Register => Written::Reg {
                from: ins.op1_register().full_register(),
                wide: size == 8,
            },
            OpKind::Memory => Written::Mem { wide: size == 8 },
            _ => Written::Other,
        },
        Mnemonic::Xor
            if ins.op1_kind() == OpKind::Register && ins.op1_register() == ins.op0_register() =>
        {
            Written::Const(0)
        }
        _ => Written::Other,
    }
}

/// For each `syscall` instruction of a function, the number eax holds
/// (where loaded with a constant before it) and how the argument
/// registers were last written.
fn sweep(code: &[u8], ip: u64) -> Vec<AtSyscall> {
    let mut out = Vec::new();
    let mut eax: Option<u32> = None;
    let mut args = [Written::Not; 6];
    for ins in Decoder::with_ip(64, code, ip, DecoderOptions::NONE).iter() {
        match ins.mnemonic() {
            Mnemonic::Syscall => {
                out.push(AtSyscall { nr: eax, args });
                eax = None;
                continue;
            }
            Mnemonic::Mov
                if matches!(ins.op0_register(), Register::EAX | Register::RAX)
                    && matches!(
                        ins.op1_kind(),
                        OpKind::Immediate32 | OpKind::Immediate32to64
                    ) =>
            {
                eax = Some(ins.immediate32());
            }
            Mnemonic::Xor
                if ins.code() == Code::Xor_r32_rm32 || ins.code() == Code::Xor_rm32_r32 =>
            {
                if ins.op0_register() == Register::EAX && ins.op1_register() == Register::EAX {
                    eax = Some(0);
                } else if ins.op0_register() == Register::EAX {
                    eax = None;
                }
            }
            _ => {
                // Any other write to eax/rax makes it unknown.
                if matches!(ins.op0_kind(), OpKind::Register)
                    && matches!(
                        ins.op0_register(),
                        Register::EAX | Register::RAX | Register::AX | Register::AL
                    )
                {
                    eax = None;
                }
            }
        }
        let writes = ins.op0_kind() == OpKind::Register
            && !matches!(
                ins.mnemonic(),
                Mnemonic::Cmp | Mnemonic::Test | Mnemonic::Push
            );
        if writes {
            if let Some(i) = arg_index(ins.op0_register()) {
                args[i] = write_kind(&ins);
            }
        }
    }
    out
}

/// The system-call numbers a function's `syscall` instructions issue,
/// where eax was loaded with a constant before them (linear sweep).
#[cfg(test)]
pub(crate) fn issued_numbers(code: &[u8], ip: u64) -> Vec<Option<u32>> {
    sweep(code, ip).iter().map(|s| s.nr).collect()
}

/// Walks every path from the function's entry: each must pass exactly one
/// `syscall` before its `ret`.
///
/// With `page_guard`, the branch glibc's `mmap` takes for an unaligned
/// offset (`test r9d, 0xfff` then `jne`) is not followed: the entry probe
/// leaves those calls untraced ([`Args::admits`]).
fn one_call_per_path(code: &[u8], ip: u64, page_guard: bool) -> Result<(), String> {
    let end = ip + code.len() as u64;
    let by_ip: BTreeMap<u64, Instruction> = Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .iter()
        .map(|i| (i.ip(), i))
        .collect();
    let guard_test = |i: &Instruction| {
        i.mnemonic() == Mnemonic::Test
            && i.op0_kind() == OpKind::Register
            && i.op0_register() == Register::R9D
            && i.op1_kind() == OpKind::Immediate32
            && i.immediate32() == 0xfff
    };
    let mut seen = HashSet::new();
    let mut work = vec![(ip, false)];
    while let Some((at, called)) = work.pop() {
        if !seen.insert((at, called)) {
            continue;
        }
        let Some(ins) = by_ip.get(&at) else {
            return Err(format!(
                "a path reaches {at:#x}, not an instruction of the function"
            ));
        };
        if ins.code() == Code::INVALID {
            return Err(format!("undecodable bytes at {at:#x}"));
        }
        let next = ins.next_ip();
        match ins.mnemonic() {
            Mnemonic::Syscall => {
                if called {
                    return Err(format!("a path issues a second system call at {at:#x}"));
                }
                work.push((next, true));
                continue;
            }
            Mnemonic::Ret => {
                if !called {
                    return Err(format!("a path returns at {at:#x} without a system call"));
                }
                continue;
            }
            Mnemonic::Ud2 | Mnemonic::Hlt | Mnemonic::Int3 => continue,
            _ => {}
        }
        match ins.flow_control() {
            FlowControl::Next => work.push((next, called)),
            FlowControl::Call => {
                // A call at the function's end does not return
                // (`__stack_chk_fail`).
                if next < end {
                    work.push((next, called));
                }
            }
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
                if ins.op0_kind() != OpKind::NearBranch64 {
                    return Err(format!("unexpected branch at {at:#x}"));
                }
                let to = ins.near_branch_target();
                let guarded = page_guard
                    && ins.mnemonic() == Mnemonic::Jne
                    && by_ip
                        .range(..at)
                        .next_back()
                        .is_some_and(|(_, p)| guard_test(p));
                if guarded {
                    work.push((next, called));
                    continue;
                }
                if !(ip..end).contains(&to) {
                    return Err(format!("a path leaves the function at {at:#x} for {to:#x}"));
                }
                work.push((to, called));
                if ins.flow_control() == FlowControl::ConditionalBranch {
                    work.push((next, called));
                }
            }
            other => return Err(format!("{other:?} at {at:#x}")),
        }
    }
    Ok(())
}

/// Checks a wrapper's code against what `c` claims (the module's list);
/// `nr` is the number of `c.syscall`.
pub(crate) fn check(c: &Covered, nr: u32, code: &[u8], ip: u64) -> Result<(), String> {
    if c.args == Indirect {
        return check_indirect(code, ip);
    }
    let calls = sweep(code, ip);
    let numbers: Vec<_> = calls.iter().map(|s| s.nr).collect();
    if calls.is_empty() || numbers.iter().any(|n| *n != Some(nr)) {
        return Err(format!(
            "its syscall instructions issue {numbers:?}, not only {} ({nr})",
            c.syscall
        ));
    }
    one_call_per_path(code, ip, c.args == PageAlignedOffset)?;
    // The patch moves the first instructions (a jump's length) into a
    // trampoline; a `syscall` among them would leave a thread blocked in it
    // returning into that copy, and `--pid` waiting for it to leave the
    // patched bytes.
    let first = crate::relocate::JMP_REL32_LEN as u64;
    if let Some(i) = Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .iter()
        .take_while(|i| i.ip() < ip + first)
        .find(|i| i.mnemonic() == Mnemonic::Syscall)
    {
        return Err(format!(
            "its syscall at +{} is within the bytes the patch moves",
            i.ip() - ip
        ));
    }
    let expect = |what: &str, ok: &dyn Fn(&AtSyscall) -> bool| match calls.iter().find(|s| !ok(s)) {
        Some(s) => Err(format!("{what} does not hold at its syscall ({s:?})")),
        None => Ok(()),
    };
    use Register::RCX;
    let [rdi, rsi, rdx, r10, r8, r9] = [0, 1, 2, 3, 4, 5];
    let kept3 = |s: &AtSyscall| s.args[rdi].kept() && s.args[rsi].kept() && s.args[rdx].kept();
    match c.args {
        One => expect("rdi kept", &|s| s.args[rdi].kept())?,
        Three => expect("rdi, rsi, rdx kept, r10 untouched", &|s| {
            kept3(s) && s.args[r10] == Written::Not
        })?,
        Same => expect("rdi, rsi, rdx kept, r10 = rcx", &|s| {
            kept3(s) && s.args[r10].whole(RCX)
        })?,
        IntFourth | PageAlignedOffset => expect("rdi, rsi, rdx kept, r10 = ecx", &|s| {
            kept3(s) && s.args[r10].low32(RCX)
        })?,
        NoAddress => expect("rdi, rsi, rdx kept, r10 = ecx, r8 = r9 = 0", &|s| {
            kept3(s)
                && s.args[r10].low32(RCX)
                && s.args[r8] == Written::Const(0)
                && s.args[r9] == Written::Const(0)
        })?,
        SigsetSize => expect("rdi, rsi, rdx kept, r10 = ecx, r9 = 8", &|s| {
            kept3(s) && s.args[r10].low32(RCX) && s.args[r9] == Written::Const(8)
        })?,
        NoFlags => expect("rdi kept, esi = 0", &|s| {
            s.args[rdi].kept() && s.args[rsi] == Written::Const(0)
        })?,
        AtFdcwd => expect("edi = AT_FDCWD, rsi = rdi, edx = esi", &|s| {
            s.args[rdi] == Written::Const(libc::AT_FDCWD as u32 as u64)
                && matches!(
                    s.args[rsi],
                    Written::Reg { wide: true, .. } | Written::Mem { wide: true }
                )
                && matches!(
                    s.args[rdx],
                    Written::Reg { wide: false, .. } | Written::Mem { wide: false }
                )
        })?,
        // The mode and the cap are selected by branches the sweep does not
        // follow (read from the code: `__OPEN_NEEDS_MODE`, `cmova`).
        OpenatMode => expect("rdi, rsi, rdx kept", &kept3)?,
        // Checked by check_indirect, which returned above.
        Indirect => {}
        CountCapped => expect("rdi, rsi kept", &|s| {
            s.args[rdi].kept() && s.args[rsi].kept() && s.args[rdx] != Written::Not
        })?,
    }
    if c.ret == Long {
        let int_minus_one = Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
            .iter()
            .any(|i| {
                i.mnemonic() == Mnemonic::Mov
                    && i.op0_register() == Register::EAX
                    && i.op1_kind() == OpKind::Immediate32
                    && i.immediate32() == u32::MAX
            });
        if int_minus_one {
            return Err("it returns a 32-bit -1, not a long".into());
        }
    }
    Ok(())
}

/// glibc's `syscall()`: the number moved from rdi to rax, the arguments
/// shifted down one register and the sixth loaded from the stack, then one
/// `syscall` on every path (its error path sets errno and returns -1).
fn check_indirect(code: &[u8], ip: u64) -> Result<(), String> {
    use Register::*;
    let expected: [(Register, Option<Register>); 7] = [
        (RAX, Some(RDI)),
        (RDI, Some(RSI)),
        (RSI, Some(RDX)),
        (RDX, Some(RCX)),
        (R10, Some(R8)),
        (R8, Some(R9)),
        (R9, Option::None), // [rsp + 8]
    ];
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    for (dst, src) in expected {
        let i = dec.decode();
        let ok = i.mnemonic() == Mnemonic::Mov
            && i.op0_kind() == OpKind::Register
            && i.op0_register() == dst
            && match src {
                Some(r) => i.op1_kind() == OpKind::Register && i.op1_register() == r,
                Option::None => {
                    i.op1_kind() == OpKind::Memory
                        && i.memory_base() == RSP
                        && i.memory_index() == Register::None
                        && i.memory_displacement64() == 8
                }
            };
        if !ok {
            return Err(format!(
                "unexpected code at {:#x} for syscall(): not the argument shift",
                i.ip()
            ));
        }
    }
    if dec.decode().mnemonic() != Mnemonic::Syscall {
        return Err("no syscall after the argument shift".into());
    }
    if sweep(code, ip).len() != 1 {
        return Err("more than one syscall instruction".into());
    }
    one_call_per_path(code, ip, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{self, loaded_objects, UprobeTarget};

    #[test]
    fn decodes_the_number_a_wrapper_issues() {
        // xor eax,eax; syscall; mov eax,1; syscall; ret
        let code = [0x31, 0xc0, 0x0f, 0x05, 0xb8, 1, 0, 0, 0, 0x0f, 0x05, 0xc3];
        assert_eq!(issued_numbers(&code, 0x1000), vec![Some(0), Some(1)]);
        // mov eax,edi; syscall: unknown
        assert_eq!(issued_numbers(&[0x89, 0xf8, 0x0f, 0x05], 0), vec![None]);
    }

    #[test]
    fn refuses_paths_without_or_with_two_calls() {
        // mov eax,39; syscall; ret
        let one = [0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3];
        assert_eq!(one_call_per_path(&one, 0x1000, false), Ok(()));
        // test edi,edi; js +8 (to ret); mov eax,39; syscall; ret; ret
        let early = [
            0x85, 0xff, 0x78, 0x08, 0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3, 0xc3,
        ];
        let e = one_call_per_path(&early, 0x1000, false).unwrap_err();
        assert!(e.contains("without a system call"), "{e}");
        // mov eax,39; syscall; syscall; ret
        let two = [0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0x0f, 0x05, 0xc3];
        let e = one_call_per_path(&two, 0x1000, false).unwrap_err();
        assert!(e.contains("second system call"), "{e}");
        // jmp rel32 out of the function (a tail call)
        let tail = [0xe9, 0x00, 0x10, 0x00, 0x00];
        let e = one_call_per_path(&tail, 0x1000, false).unwrap_err();
        assert!(e.contains("leaves the function"), "{e}");
    }

    #[test]
    fn raw_results() {
        assert_eq!(
            Int.raw(0xffff_ffff, libc::EBADF),
            -libc::EBADF as i64 as u64
        );
        assert_eq!(Int.raw(3, 0), 3);
        assert_eq!(
            Long.raw(u64::MAX, libc::EFAULT),
            -libc::EFAULT as i64 as u64
        );
        // A long result whose low half is -1 is not a failure.
        assert_eq!(Long.raw(0xffff_ffff, 0), 0xffff_ffff);
    }

    #[test]
    fn open_mode_only_with_o_creat() {
        let mut regs = PtRegs {
            rdi: 0x1234,
            rsi: libc::O_RDONLY as u64,
            rdx: 0xdead_0000_0777,
            ..Default::default()
        };
        let mut s = regs;
        AtFdcwd.apply(&regs, &mut s);
        assert_eq!(
            (s.rdi as i64, s.rsi, s.r10),
            (libc::AT_FDCWD as i64, 0x1234, 0)
        );
        regs.rsi = (libc::O_CREAT | libc::O_WRONLY) as u64;
        AtFdcwd.apply(&regs, &mut s);
        assert_eq!(
            (s.rdx, s.r10),
            ((libc::O_CREAT | libc::O_WRONLY) as u64, 0x777)
        );
    }

    /// Every wrapper of the table passes its check against this machine's
    /// libc (Debian's glibc 2.36, from which the table was read).
    #[test]
    fn libc_wrappers_match_the_table() {
        let objects = loaded_objects();
        let mut refused = Vec::new();
        for c in WRAPPERS {
            let t = UprobeTarget {
                path: "libc.so.6".into(),
                symbol: c.wrapper.into(),
                offset: 0,
            };
            let r = symbols::resolve(&t, &objects).unwrap();
            // SAFETY: the function's bytes, mapped code of libc.
            let code =
                unsafe { std::slice::from_raw_parts(r.address as *const u8, r.remaining as usize) };
            if let Err(e) = check(c, c.number(), code, r.address) {
                refused.push(format!("{}: {e}", c.wrapper));
            }
        }
        assert!(refused.is_empty(), "{}", refused.join("\n"));
        assert!(WRAPPERS.len() >= 50);
    }

    /// Wrappers the table leaves out are refused by the check too, for the
    /// reason the table gives (so the check would catch a table mistake).
    #[test]
    fn left_out_wrappers_fail_the_check() {
        let objects = loaded_objects();
        for (wrapper, syscall, args, why) in [
            ("fstat", "newfstatat", Same, "issue []"),
            // Without its guard, mmap's early EINVAL is a path without a call.
            ("mmap", "mmap", IntFourth, "without a system call"),
            ("statx", "statx", IntFourth, "leaves the function"),
            ("utimensat", "utimensat", IntFourth, "without a system call"),
            ("fcntl64", "fcntl", Three, "without a system call"),
            ("ppoll", "ppoll", Same, "rdx kept"),
        ] {
            let t = UprobeTarget {
                path: "libc.so.6".into(),
                symbol: wrapper.into(),
                offset: 0,
            };
            let r = symbols::resolve(&t, &objects).unwrap();
            let code =
                unsafe { std::slice::from_raw_parts(r.address as *const u8, r.remaining as usize) };
            let nr = crate::syscall_table::number(syscall).unwrap();
            let c = w(wrapper, syscall, args, Long);
            let e = check(&c, nr, code, r.address).unwrap_err();
            assert!(e.contains(why), "{wrapper}: {e}");
        }
    }
}
