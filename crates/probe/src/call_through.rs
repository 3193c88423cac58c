//! Call-through stubs for libc system-call wrappers: the entry hook, a call
//! of the wrapper, the exit hook, in one frame (pairwise fusion's "one
//! native path per attach point", docs/TRACING.md "Pairwise fusion").
//!
//! The fast path of [`crate::fast_syscalls`] traces a wrapper with an entry
//! probe and a return probe: the entry saves every register (and xmm0-7),
//! copies the registers into the thread's wrapper stack, replaces the
//! return address and pushes a shadow-stack frame; the return lands in the
//! return trampoline, which saves every register again, pops both stacks
//! and restores the return address. A call-through stub replaces all of
//! that for a wrapper whose system call has both an enter and an exit
//! program (a pair): the jump at the wrapper's entry leads to a stub that
//! saves the argument registers, runs the entry half with a per-activation
//! record in its own frame, calls the wrapper's relocated first
//! instructions (which continue into the wrapper; its `ret` comes back to
//! the stub), runs the exit half on the same record and returns the
//! wrapper's result to the caller.
//!
//! Why this is exact for these wrappers:
//! - Arguments: glibc's wrappers take at most six integer arguments, all
//!   in registers (`open`'s variadic `mode` is the third, `rdx`), none on
//!   the stack, so the extra frame between caller and wrapper is invisible
//!   to them. `al` (the vector-register count of a variadic call) is
//!   passed through unchanged; no wrapper takes floating-point arguments.
//!   Callee-saved registers are preserved by the stub, the halves (Rust)
//!   and the wrapper; caller-saved ones may be clobbered by any call.
//! - Result: the wrapper's own `rax` is returned; errno is whatever the
//!   wrapper left (the exit half saves and restores it around the hooks).
//!   The exit record gets the raw result as the fast path rebuilds it
//!   (-errno from -1 and errno, [`crate::fast_syscalls::raw_result`]).
//! - Signals: a handler interrupting the wrapper runs on this stack below
//!   the stub's frame and returns into the wrapper; a handler calling a
//!   wrapper itself gets its own frame and record (each activation has
//!   one), so nesting needs no stack of frames.
//! - Leaving the wrapper other than by `ret`: the wrappers never call back
//!   into the application, so only a signal handler can `longjmp` out of
//!   one, and thread cancellation can unwind out of one (they are
//!   cancellation points). The stub's code has unwind information (CFI),
//!   so the unwinder walks through it to the caller; in both cases the
//!   exit half does not run and the selector stays ALLOW, exactly as with
//!   the entry/return probes (whose return trampoline is then not reached
//!   either) — and as the kernel, whose `sys_exit` tracepoint did fire,
//!   differs from both.
//! - The return address the exit record shows (`rip`) is the caller's, as
//!   the return probe shows it; the stub's own frame is not in the
//!   caller's registers (`rsp` is the caller's at the wrapper's entry).
//!
//! Where this is not exact (functions with stack arguments, functions that
//! call back into the application, unknown ABIs) the entry/return probes
//! stay: only the wrappers [`crate::fast_syscalls`] verified are attached
//! so, and only when asked.

use crate::fast_syscalls::{raw_result, syscall_regs, Wrapper, FAST_CALLS};
use crate::regs::PtRegs;
use crate::syscalls::{hooks, set_selector_allow, set_selector_block};
use crate::thread::{self, ProbeThread};
use crate::uprobe::{enter_handler, leave_handler, Probe};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// One activation's state, in the stub's frame: the system call's
/// registers (filled by the stub, completed by the entry half), this
/// thread's block and whether the entry switched the selector. Values that
/// cannot change across the call (the thread, the arguments) are taken
/// once for both halves.
#[repr(C)]
struct Record {
    regs: PtRegs,
    thread: *mut ProbeThread,
    /// The entry switched the selector from BLOCK to ALLOW: the exit runs
    /// the exit hook and switches it back.
    flipped: u64,
    /// The call runs in the wrapper's copy ([`crate::exempt_copy`]) with
    /// the selector at BLOCK: the exit sets ALLOW for its hook.
    in_copy: u64,
}

// The assembly below hard-codes these.
const _: () = assert!(std::mem::size_of::<Record>() == 192);
const _: () = assert!(std::mem::offset_of!(PtRegs, rdi) == 112);
const _: () = assert!(std::mem::offset_of!(PtRegs, eflags) == 144);
const _: () = assert!(std::mem::offset_of!(PtRegs, rsp) == 152);

// Frame below the saved rbp (rsp-relative after `sub rsp, 264`):
//   [0, 56)    the caller's rdi rsi rdx rcx r8 r9 rax, restored for the call
//   [56]       the probe
//   [64, 256)  the Record
//   [256, 264) unused (alignment)
// Entered from the per-probe stub with [rsp] = the caller's rax and
// [rsp+8] = the return address; rax = the probe. Before the caller's
// `call` rsp was 0 mod 16: 8 after it, 0 after the stub's push, 8 after
// ours, and 0 again after `sub rsp, 264`, as the calls below need.
/// The stubs' common start: the frame, the caller's argument registers
/// saved at [rsp, rsp + 56), the probe at [rsp + 56], the record at
/// rsp + 64 (see the frame layout above).
macro_rules! call_through_prologue {
    () => {
        concat!(
            "push rbp\n",
            ".cfi_def_cfa_offset 24\n",
            ".cfi_offset rbp, -24\n",
            "mov rbp, rsp\n",
            ".cfi_def_cfa_register rbp\n",
            "sub rsp, 264\n",
            "mov [rsp + 56], rax\n",
            "mov rax, [rbp + 8]\n",
            "mov [rsp], rdi\n",
            "mov [rsp + 8], rsi\n",
            "mov [rsp + 16], rdx\n",
            "mov [rsp + 24], rcx\n",
            "mov [rsp + 32], r8\n",
            "mov [rsp + 40], r9\n",
            "mov [rsp + 48], rax\n",
            // The record's registers (pt_regs order, at rsp + 64)
            "mov [rsp + 64], r15\n",
            "mov [rsp + 72], r14\n",
            "mov [rsp + 80], r13\n",
            "mov [rsp + 88], r12\n",
            "mov [rsp + 104], rbx\n",
            "mov [rsp + 112], r11\n",
            "mov [rsp + 120], r10\n",
            "mov [rsp + 128], r9\n",
            "mov [rsp + 136], r8\n",
            "mov [rsp + 144], rax\n",
            "mov [rsp + 152], rcx\n",
            "mov [rsp + 160], rdx\n",
            "mov [rsp + 168], rsi\n",
            "mov [rsp + 176], rdi\n",
            "mov rax, [rbp]\n",
            "mov [rsp + 96], rax\n",
            "pushfq\n",
            "pop rax\n",
            "mov [rsp + 208], rax\n",
            "lea rax, [rbp + 16]\n",
            "mov [rsp + 216], rax\n",
            // The rest of the record, so it is fully initialised
            "mov qword ptr [rsp + 184], -1\n",
            "mov qword ptr [rsp + 192], 0\n",
            "mov qword ptr [rsp + 200], 0x33\n",
            "mov qword ptr [rsp + 224], 0\n",
            "mov qword ptr [rsp + 232], 0\n",
            "mov qword ptr [rsp + 240], 0\n",
            "mov qword ptr [rsp + 248], 0\n"
        )
    };
}

std::arch::global_asm!(
    ".pushsection .text.bpfjet_call_through_common,\"ax\",@progbits",
    ".globl bpfjet_call_through_common",
    ".type bpfjet_call_through_common,@function",
    "bpfjet_call_through_common:",
    ".cfi_startproc",
    ".cfi_def_cfa_offset 16",
    call_through_prologue!(),
    "mov rdi, [rsp + 56]",
    "lea rsi, [rsp + 64]",
    "call {enter}",
    "mov r11, rax",
    "mov rdi, [rsp]",
    "mov rsi, [rsp + 8]",
    "mov rdx, [rsp + 16]",
    "mov rcx, [rsp + 24]",
    "mov r8, [rsp + 32]",
    "mov r9, [rsp + 40]",
    "mov rax, [rsp + 48]",
    "call r11",
    "mov rdi, [rsp + 56]",
    "mov rsi, rax",
    "lea rdx, [rsp + 64]",
    "call {exit}",
    "leave",
    ".cfi_def_cfa rsp, 16",
    "lea rsp, [rsp + 8]",
    ".cfi_def_cfa_offset 8",
    "ret",
    ".cfi_endproc",
    ".size bpfjet_call_through_common, . - bpfjet_call_through_common",
    ".popsection",
    enter = sym enter_abi,
    exit = sym exit_abi,
);

// The stub of a pair compiled into one function (`set_pair_hooks`): the
// same frame and record; `pair_abi` runs both halves and calls the wrapper
// in between through `bpfjet_call_through_wrapper` on the saved registers.
std::arch::global_asm!(
    ".pushsection .text.bpfjet_call_through_pair,\"ax\",@progbits",
    ".globl bpfjet_call_through_pair",
    ".type bpfjet_call_through_pair,@function",
    "bpfjet_call_through_pair:",
    ".cfi_startproc",
    ".cfi_def_cfa_offset 16",
    call_through_prologue!(),
    "mov rdi, [rsp + 56]",
    "lea rsi, [rsp + 64]",
    "mov rdx, rsp",
    "call {pair}",
    "leave",
    ".cfi_def_cfa rsp, 16",
    "lea rsp, [rsp + 8]",
    ".cfi_def_cfa_offset 8",
    "ret",
    ".cfi_endproc",
    ".size bpfjet_call_through_pair, . - bpfjet_call_through_pair",
    ".popsection",
    pair = sym pair_abi,
);

// bpfjet_call_through_wrapper(saved, continuation): the wrapper called on
// the caller's registers the stub saved (rdi rsi rdx rcx r8 r9 rax), its
// rax returned. Entered with rsp 8 mod 16; the push realigns it for the
// call.
std::arch::global_asm!(
    ".pushsection .text.bpfjet_call_through_wrapper,\"ax\",@progbits",
    ".globl bpfjet_call_through_wrapper",
    ".type bpfjet_call_through_wrapper,@function",
    "bpfjet_call_through_wrapper:",
    ".cfi_startproc",
    "push rbp",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset rbp, -16",
    "mov rbp, rsp",
    ".cfi_def_cfa_register rbp",
    "mov r11, rsi",
    "mov rax, rdi",
    "mov rdi, [rax]",
    "mov rsi, [rax + 8]",
    "mov rdx, [rax + 16]",
    "mov rcx, [rax + 24]",
    "mov r8, [rax + 32]",
    "mov r9, [rax + 40]",
    "mov rax, [rax + 48]",
    "call r11",
    "pop rbp",
    ".cfi_def_cfa rsp, 8",
    "ret",
    ".cfi_endproc",
    ".size bpfjet_call_through_wrapper, . - bpfjet_call_through_wrapper",
    ".popsection",
);

extern "C" {
    fn bpfjet_call_through_common();
    fn bpfjet_call_through_pair();
}

extern "C-unwind" {
    // The wrapper may be left by unwinding (thread cancellation).
    fn bpfjet_call_through_wrapper(saved: *const u64, continuation: u64) -> u64;
}

/// A probe's own call-through stub: keep the caller's rax (a variadic
/// call's `al`) on the stack, pass the probe in rax, jump to the shared
/// code.
///
/// ```text
/// push rax
/// mov  rax, PROBE
/// jmp  [rip+0] ; .quad bpfjet_call_through_common
/// ```
///
/// A wrapper whose system call has a pair hook ([`set_pair_hooks`]) jumps
/// to the pair's shared code instead.
pub(crate) fn stub(probe: u64) -> Vec<u8> {
    // SAFETY: the caller passes a leaked, never-freed Probe.
    let nr = unsafe { &*(probe as *const Probe) }.wrapper.map(|w| w.nr);
    let common = if nr.is_some_and(|nr| pair_hook(nr).is_some()) {
        bpfjet_call_through_pair as *const () as u64
    } else {
        bpfjet_call_through_common as *const () as u64
    };
    let mut c = vec![0x50, 0x48, 0xb8];
    c.extend_from_slice(&probe.to_le_bytes());
    c.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    c.extend_from_slice(&common.to_le_bytes());
    c
}

/// A pair's entry and exit halves run as one function: called with the
/// system call's entry registers (the kernel's syscall `pt_regs`, as the
/// `on_enter` hook gets them) and the [`PairCall`], whose
/// [`PairCall::call`] calls the wrapper, turns the registers into the
/// exit's (rax = the raw result, rip = the return address) and says
/// whether the exit half runs (false: the thread is in another handler;
/// the run is counted as missed). The hook calls it exactly once and runs
/// nothing on the thread's behalf across it.
pub type PairHook = Box<dyn Fn(&mut PtRegs, &mut PairCall) + Send + Sync>;

static PAIR_HOOKS: OnceLock<Box<[Option<PairHook>]>> = OnceLock::new();

/// The pair hook of each system call, by number: wrappers of these calls
/// attached with a call-through stub afterwards run their pair through
/// the hook instead of `on_enter`/`on_exit`. Set once, before the fast
/// path is installed; false if already set.
pub fn set_pair_hooks(hooks: Vec<Option<PairHook>>) -> bool {
    PAIR_HOOKS.set(hooks.into_boxed_slice()).is_ok()
}

fn pair_hook(nr: u32) -> Option<&'static PairHook> {
    PAIR_HOOKS.get()?.get(nr as usize)?.as_ref()
}

/// The wrapper's call between a pair's halves (a concrete type, not a
/// closure behind a pointer, so the hook's caller of [`PairCall::call`]
/// inlines it): what the stub's frame holds for it and what the call
/// leaves for the end of [`pair_abi`].
pub struct PairCall {
    thread: *mut ProbeThread,
    probe: *const Probe,
    saved: *const u64,
    wrapper: Wrapper,
    /// The wrapper's rax once called.
    ret: Option<u64>,
    /// errno as the wrapper left it.
    errno: i32,
    /// The exit half's handler guard taken (released at the end).
    exit_entered: bool,
}

impl PairCall {
    /// Call the wrapper on the caller's registers (the entry's handler
    /// guard released for the call, so a signal handler's call in it is
    /// traced), then fill the exit's registers into `regs`; true when the
    /// exit half runs. A second call does nothing and returns false.
    #[inline]
    pub fn call(&mut self, regs: &mut PtRegs) -> bool {
        if self.ret.is_some() {
            return false;
        }
        leave_handler(self.thread);
        let copy = self.wrapper.copy;
        let r = if copy != 0 {
            // In the copy, with the selector at BLOCK (application code
            // the wrapper calls is dispatched); ALLOW again for the exit.
            // SAFETY: this thread's block; `saved` holds the caller's
            // registers in the stub's frame and the copy is the whole
            // wrapper.
            unsafe {
                set_selector_block(self.thread);
                let r = bpfjet_call_through_wrapper(self.saved, copy);
                thread::set_selector(self.thread, thread::SELECTOR_ALLOW);
                r
            }
        } else {
            // SAFETY: `saved` holds the caller's registers in the stub's
            // frame and the probe's continuation continues into the
            // wrapper.
            unsafe { bpfjet_call_through_wrapper(self.saved, (*self.probe).continuation) }
        };
        self.ret = Some(r);
        // SAFETY: this thread's errno.
        self.errno = unsafe { *libc::__errno_location() };
        regs.rax = raw_result(self.wrapper, r, self.errno);
        // SAFETY: [rsp] at the wrapper's entry is the caller's return
        // address, in the caller's frame, still live.
        regs.rip = unsafe { *(regs.rsp as *const u64) };
        self.exit_entered = enter_handler(self.thread);
        if !self.exit_entered {
            // SAFETY: a leaked, never-freed Probe.
            unsafe { &*self.probe }
                .missed
                .fetch_add(1, Ordering::Relaxed);
        }
        self.exit_entered
    }
}

/// The pair stub's one call: both halves through the pair hook, the
/// wrapper in between; returns the wrapper's result. The probe's hits are
/// not counted here: a wrapper's are the fast path's system calls
/// ([`FAST_CALLS`], counted once per call), as [`crate::Attachment::hits`]
/// says.
extern "C-unwind" fn pair_abi(probe: u64, rec: *mut Record, saved: *const u64) -> u64 {
    // SAFETY: the stub passes a leaked, never-freed Probe, the record and
    // the saved registers in its own frame.
    let (p, rec) = unsafe { (&*(probe as *const Probe), &mut *rec) };
    let t = thread::current();
    // SAFETY (every call below): `saved` holds the caller's registers
    // and `continuation` continues into the wrapper.
    let call = || unsafe { bpfjet_call_through_wrapper(saved, p.continuation) };
    let (Some(w), Some(hook)) = (p.wrapper, p.wrapper.and_then(|w| pair_hook(w.nr))) else {
        return call();
    };
    if !enter_handler(t) {
        p.missed.fetch_add(1, Ordering::Relaxed);
        return call();
    }
    // SAFETY (both): `t` is this thread's block.
    if !(unsafe { (*t).dispatched } && w.args.admits(&rec.regs) && unsafe { set_selector_allow(t) })
    {
        leave_handler(t);
        return call();
    }
    as_system_call_in_place(&mut rec.regs, p.address, w);
    let mut through = PairCall {
        thread: t,
        probe: p,
        saved,
        wrapper: w,
        ret: None,
        errno: 0,
        exit_entered: false,
    };
    hook(&mut rec.regs, &mut through);
    let (ret, errno) = match through.ret {
        Some(r) => {
            if through.exit_entered {
                leave_handler(t);
            }
            (r, through.errno)
        }
        // A hook that did not call: the wrapper still runs, untraced.
        None => {
            leave_handler(t);
            let r = call();
            // SAFETY: this thread's errno.
            (r, unsafe { *libc::__errno_location() })
        }
    };
    // SAFETY: this thread's errno and block.
    unsafe {
        *libc::__errno_location() = errno;
        set_selector_block(t);
    }
    ret
}

/// The entry half; returns the wrapper's relocated first instructions.
extern "C-unwind" fn enter_abi(probe: u64, rec: *mut Record) -> u64 {
    // SAFETY: the stub passes a leaked, never-freed Probe and the record
    // in its own frame.
    let (p, rec) = unsafe { (&*(probe as *const Probe), &mut *rec) };
    // Hits not counted: a wrapper's are the fast path's system calls
    // (`FAST_CALLS`), as `Attachment::hits` says.
    let t = thread::current();
    rec.thread = t;
    rec.flipped = 0;
    rec.in_copy = 0;
    let Some(w) = p.wrapper else {
        return p.continuation;
    };
    if !enter_handler(t) {
        p.missed.fetch_add(1, Ordering::Relaxed);
        return p.continuation;
    }
    // SAFETY (both): `t` is this thread's block.
    if unsafe { (*t).dispatched } && w.args.admits(&rec.regs) && unsafe { set_selector_allow(t) } {
        rec.flipped = 1;
        let s = &mut rec.regs;
        as_system_call(s, p.address, w);
        if let Some(h) = hooks().and_then(|h| h.on_enter.as_ref()) {
            h(s);
        }
        if w.copy != 0 {
            // The copy's `syscall` needs no ALLOW.
            rec.in_copy = 1;
            // SAFETY: `t` is this thread's block.
            unsafe { set_selector_block(t) };
            leave_handler(t);
            return w.copy;
        }
    }
    leave_handler(t);
    p.continuation
}

/// The exit half; returns the wrapper's result.
extern "C-unwind" fn exit_abi(probe: u64, ret: u64, rec: *mut Record) -> u64 {
    // SAFETY: as in enter_abi; the record is the one the entry filled.
    let (p, rec) = unsafe { (&*(probe as *const Probe), &mut *rec) };
    if rec.flipped == 0 {
        return ret;
    }
    // The same thread: the record lives on its stack.
    let t = rec.thread;
    // SAFETY: this thread's errno.
    let errno = unsafe { *libc::__errno_location() };
    let Some(w) = p.wrapper else {
        return ret;
    };
    rec.regs.rax = raw_result(w, ret, errno);
    // SAFETY: [rsp] at the wrapper's entry is the caller's return address,
    // in the caller's frame, still live.
    rec.regs.rip = unsafe { *(rec.regs.rsp as *const u64) };
    if rec.in_copy != 0 {
        // bpfjet's own system calls in the hook are not the application's.
        // SAFETY: `t` is this thread's block.
        unsafe { thread::set_selector(t, thread::SELECTOR_ALLOW) };
    }
    if enter_handler(t) {
        if let Some(h) = hooks().and_then(|h| h.on_exit.as_ref()) {
            h(&rec.regs);
        }
        leave_handler(t);
    } else {
        p.missed.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: this thread's errno and block.
    unsafe {
        *libc::__errno_location() = errno;
        set_selector_block(t);
    }
    ret
}

/// The wrapper's registers as the kernel's record of its system call
/// shows them at `sys_enter` ([`crate::fast_syscalls::syscall_regs`]),
/// with `rip` the wrapper's entry and the user segments. Counted as a
/// fast-path call.
fn as_system_call(s: &mut PtRegs, wrapper_at: u64, w: Wrapper) {
    *s = syscall_regs(s, w.nr, w.args);
    s.rip = wrapper_at;
    s.cs = 0x33;
    s.ss = 0;
    FAST_CALLS.fetch_add(1, Ordering::Relaxed);
}

/// [`as_system_call`] without copying the record: the same fields
/// changed where they are (the test `in_place_matches_copy` checks the two
/// agree).
#[inline]
fn as_system_call_in_place(s: &mut PtRegs, wrapper_at: u64, w: Wrapper) {
    // The argument mapping reads only the C argument registers (rdi, rsi,
    // rdx, rcx) of the wrapper's entry: those are kept aside, not the
    // whole 168-byte record.
    let entry = PtRegs {
        rdi: s.rdi,
        rsi: s.rsi,
        rdx: s.rdx,
        rcx: s.rcx,
        ..PtRegs::default()
    };
    s.orig_rax = u64::from(w.nr);
    s.rax = (-(libc::ENOSYS as i64)) as u64;
    w.args.apply(&entry, s);
    s.rip = wrapper_at;
    s.cs = 0x33;
    s.ss = 0;
    FAST_CALLS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_matches_copy() {
        use crate::fast_syscalls::Args;
        let mut regs = PtRegs::default();
        for (i, r) in [
            &mut regs.rdi,
            &mut regs.rsi,
            &mut regs.rdx,
            &mut regs.rcx,
            &mut regs.r8,
            &mut regs.r9,
            &mut regs.rax,
        ]
        .into_iter()
        .enumerate()
        {
            *r = 0x1000 + i as u64;
        }
        for args in [
            Args::One,
            Args::Three,
            Args::Same,
            Args::IntFourth,
            Args::AtFdcwd,
            Args::OpenatMode,
            Args::NoAddress,
            Args::SigsetSize,
            Args::NoFlags,
            Args::CountCapped,
            Args::PageAlignedOffset,
        ] {
            let w = Wrapper {
                nr: 257,
                args,
                ret: crate::wrappers::Ret::Long,
                copy: 0,
            };
            let (mut a, mut b) = (regs, regs);
            as_system_call(&mut a, 0x4242, w);
            as_system_call_in_place(&mut b, 0x4242, w);
            assert_eq!(a, b);
        }
    }
}
