//! The shared halves of every trampoline, in assembly: save every register
//! into a kernel-layout `pt_regs` on the stack (plus xmm0-7, which carry
//! floating-point arguments and return values), call into Rust, restore and
//! continue where Rust says.
//!
//! Entry (`bpfjet_probe_entry_common`) is reached from a probe's own stub
//! with `[rsp]` = the probe's address and `[rsp+8]` = the probed function's
//! return address; `entry_dispatch(probe, regs)` returns the address of the
//! probe's relocated first instructions, which the final `ret` jumps to.
//!
//! Return (`bpfjet_probe_return_trampoline`) is where a hooked call returns
//! to (its return address was replaced on entry); it pushes a slot where the
//! return address was, and `return_dispatch(regs)` fills it with the
//! original return address popped from the thread's shadow stack.
//!
//! Stack frame built (low → high): r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax
//! rcx rdx rsi rdi orig_rax rip cs eflags rsp ss, then the slot. `rsp` is the
//! value the probed code had (slot + 8). The red zone is not at risk: at a
//! call boundary the caller keeps nothing below its stack pointer.

use crate::regs::PtRegs;

/// Push a kernel-layout `pt_regs` (the module comment's frame) with its
/// `rsp` fixed to the probed code's, then: rdi = the word above the frame
/// (the probe, or the return slot), rsi = rbx = the frame, the stack
/// aligned for a call. One sequence for every trampoline that builds the
/// frame, so their layouts cannot drift apart.
macro_rules! push_pt_regs {
    () => {
        concat!(
            "push 0\n",    // ss
            "push rax\n",  // rsp, fixed below
            "pushfq\n",    // eflags
            "push 0x33\n", // cs: the user code segment
            "push rax\n",  // rip, set by the dispatcher
            "push -1\n",   // orig_rax
            "push rdi\n",
            "push rsi\n",
            "push rdx\n",
            "push rcx\n",
            "push rax\n",
            "push r8\n",
            "push r9\n",
            "push r10\n",
            "push r11\n",
            "push rbx\n",
            "push rbp\n",
            "push r12\n",
            "push r13\n",
            "push r14\n",
            "push r15\n",
            "lea rax, [rsp + 176]\n",
            "mov [rsp + 152], rax\n",
            "mov rdi, [rsp + 168]\n",
            "mov rsi, rsp\n",
            "mov rbx, rsp\n",
            "and rsp, -16\n",
        )
    };
}

macro_rules! save_call_restore {
    ($name:literal, $dispatch:ident, $flags:literal) => {
        std::arch::global_asm!(
            concat!(".pushsection .text.", $name, ",\"ax\",@progbits"),
            concat!(".globl ", $name),
            concat!(".type ", $name, ",@function"),
            concat!($name, ":"),
            push_pt_regs!(),
            "sub rsp, 128",
            "movups [rsp], xmm0",
            "movups [rsp + 16], xmm1",
            "movups [rsp + 32], xmm2",
            "movups [rsp + 48], xmm3",
            "movups [rsp + 64], xmm4",
            "movups [rsp + 80], xmm5",
            "movups [rsp + 96], xmm6",
            "movups [rsp + 112], xmm7",
            "cld",
            "call {dispatch}",
            "movups xmm0, [rsp]",
            "movups xmm1, [rsp + 16]",
            "movups xmm2, [rsp + 32]",
            "movups xmm3, [rsp + 48]",
            "movups xmm4, [rsp + 64]",
            "movups xmm5, [rsp + 80]",
            "movups xmm6, [rsp + 96]",
            "movups xmm7, [rsp + 112]",
            "mov rsp, rbx",
            "mov [rsp + 168], rax",
            "pop r15",
            "pop r14",
            "pop r13",
            "pop r12",
            "pop rbp",
            "pop rbx",
            "pop r11",
            "pop r10",
            "pop r9",
            "pop r8",
            "pop rax",
            "pop rcx",
            "pop rdx",
            "pop rsi",
            "pop rdi",
            "add rsp, 24",     // orig_rax, rip, cs
            $flags,            // eflags
            "add rsp, 16",     // rsp, ss
            "ret",
            concat!(".size ", $name, ", . - ", $name),
            ".popsection",
            dispatch = sym $dispatch,
        );
    };
}

// At a function's entry and return the flags are dead (SysV x86-64: only
// DF has a role, clear at both, and the Rust code keeps it clear), so the
// probes placed there skip `popfq` (microcoded, tens of cycles); a probe
// inside a function or at an offset restores them.
save_call_restore!(
    "bpfjet_probe_entry_common",
    entry_dispatch_abi,
    "add rsp, 8"
);
save_call_restore!("bpfjet_probe_inside_common", entry_dispatch_abi, "popfq");

// The entry of a libc system-call wrapper of the fast path
// (`fast_syscalls`): the frame is the same full `pt_regs` (the programs see
// every register, as the kernel's at the wrapper's `syscall`, which the
// wrapper reaches without touching the callee-saved ones), but less is
// restored. The wrappers take integer arguments only (rdi, rsi, rdx, rcx,
// r8, r9, and al for the variadic `open`), so at their first instruction
// the other caller-saved registers (r10, r11, xmm0-15) and the flags are
// dead by the SysV ABI: xmm0-7 are not saved, r10 and r11 not restored.
// The callee-saved registers are preserved by the Rust code and the
// wrapper handlers do not write the frame's registers (only `rip`), so
// r12-r15 and rbp are not reloaded; rbx is (it holds the frame here).
std::arch::global_asm!(
    ".pushsection .text.bpfjet_probe_wrapper_entry,\"ax\",@progbits",
    ".globl bpfjet_probe_wrapper_entry",
    ".type bpfjet_probe_wrapper_entry,@function",
    "bpfjet_probe_wrapper_entry:",
    push_pt_regs!(),
    "cld",
    "call {dispatch}",
    "mov rsp, rbx",
    "mov [rsp + 168], rax",
    "add rsp, 40",     // r15 r14 r13 r12 rbp: preserved by the call
    "pop rbx",
    "add rsp, 16",     // r11 r10: dead
    "pop r9",
    "pop r8",
    "pop rax",
    "pop rcx",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "add rsp, 48",     // orig_rax rip cs eflags rsp ss
    "ret",
    ".size bpfjet_probe_wrapper_entry, . - bpfjet_probe_wrapper_entry",
    ".popsection",
    dispatch = sym entry_dispatch_abi,
);

// The return trampoline first pushes the slot (its content is overwritten),
// then shares the frame layout; `rdi` (the slot) is ignored by the dispatcher.
std::arch::global_asm!(
    ".pushsection .text.bpfjet_probe_return_trampoline,\"ax\",@progbits",
    ".globl bpfjet_probe_return_trampoline",
    ".type bpfjet_probe_return_trampoline,@function",
    "bpfjet_probe_return_trampoline:",
    "push rax",
    "jmp bpfjet_probe_return_common",
    ".size bpfjet_probe_return_trampoline, . - bpfjet_probe_return_trampoline",
    ".popsection",
);
save_call_restore!(
    "bpfjet_probe_return_common",
    return_dispatch_abi,
    "add rsp, 8"
);

// Where a hooked libc wrapper returns when its system call's exit runs no
// program (`fast_syscalls`): nothing needs the registers, only the selector
// goes back to BLOCK and the original return address comes off the shadow
// stack. All in assembly, no call: at a function's return only rax, rdx,
// xmm0 and xmm1 carry values (SysV x86-64), so the other caller-saved
// registers (rcx, rsi, rdi, r8-r11) and the flags are free, and nothing
// is saved. What it does: the thread's block (initial-exec TLS, `thread.rs`),
// its stacks (none, or retired: no frame), the shadow stack popped down
// to the frame of this return's slot (frames of calls abandoned below it
// dropped, `Shadow::pop`), BLOCK if the thread is dispatched, and a jump
// to the original return address; no frame is fatal (`no_frame`).
std::arch::global_asm!(
    ".pushsection .text.bpfjet_probe_quick_return,\"ax\",@progbits",
    ".globl bpfjet_probe_quick_return",
    ".type bpfjet_probe_quick_return,@function",
    "bpfjet_probe_quick_return:",
    "lea rdi, [rsp - 8]",        // the slot the return address was in
    "mov r11, qword ptr fs:[0]",
    "add r11, qword ptr [rip + bpfjet_probe_thread@GOTTPOFF]",
    "mov r10, [r11 + {stacks}]",
    "cmp r10, {retired}",
    "jbe 3f",                    // no stacks, or retired
    "mov rcx, [r10 + {len}]",
    "2:",
    "test rcx, rcx",
    "jz 3f",
    "lea r8, [rcx + 2 * rcx]",   // frames[len - 1] at frames + 24 * len - 24
    "lea r8, [r10 + 8 * r8 + {top}]",
    "cmp [r8 + {slot}], rdi",
    "jae 4f",
    "dec rcx",                   // abandoned below this return's slot
    "jmp 2b",
    "4:",
    "jne 3f",                    // the top frame is an outer call's
    "dec rcx",
    "mov [r10 + {len}], rcx",
    "mov r9, [r8 + {ret}]",
    "cmp byte ptr [r11 + {dispatched}], 0",
    "je 5f",
    "mov byte ptr [r11 + {selector}], {block}",
    "5:",
    "jmp r9",
    "3:",
    "and rsp, -16",
    "call {no_frame}",
    "ud2",
    ".size bpfjet_probe_quick_return, . - bpfjet_probe_quick_return",
    ".popsection",
    stacks = const std::mem::offset_of!(crate::thread::ProbeThread, stacks),
    dispatched = const std::mem::offset_of!(crate::thread::ProbeThread, dispatched),
    selector = const std::mem::offset_of!(crate::thread::ProbeThread, selector),
    block = const crate::thread::SELECTOR_BLOCK,
    retired = const crate::thread::RETIRED_ADDR,
    len = const std::mem::offset_of!(crate::thread::Stacks, shadow)
        + std::mem::offset_of!(crate::shadow::Shadow, len),
    top = const (std::mem::offset_of!(crate::thread::Stacks, shadow)
        + std::mem::offset_of!(crate::shadow::Shadow, frames)) as isize
        - std::mem::size_of::<crate::shadow::Frame>() as isize,
    slot = const std::mem::offset_of!(crate::shadow::Frame, slot),
    ret = const std::mem::offset_of!(crate::shadow::Frame, ret),
    no_frame = sym crate::uprobe::no_frame_abi,
);

const _: () = assert!(std::mem::size_of::<crate::shadow::Frame>() == 24);

extern "C" {
    fn bpfjet_probe_entry_common();
    fn bpfjet_probe_wrapper_entry();
    fn bpfjet_probe_inside_common();
    fn bpfjet_probe_return_trampoline();
    fn bpfjet_probe_quick_return();
}

/// The shared entry code: for a probe at a function's entry, or (`inside`)
/// at an offset into a function, where the flags may be live.
pub fn entry_common(inside: bool) -> u64 {
    if inside {
        bpfjet_probe_inside_common as *const () as u64
    } else {
        bpfjet_probe_entry_common as *const () as u64
    }
}

/// The entry code of a libc wrapper of the system-call fast path, at its
/// first instruction.
pub fn wrapper_entry() -> u64 {
    bpfjet_probe_wrapper_entry as *const () as u64
}

pub fn return_trampoline() -> u64 {
    bpfjet_probe_return_trampoline as *const () as u64
}

/// The return trampoline of a wrapper call whose exit runs nothing.
pub fn quick_return() -> u64 {
    bpfjet_probe_quick_return as *const () as u64
}

extern "C" fn entry_dispatch_abi(probe: u64, regs: *mut PtRegs) -> u64 {
    // SAFETY: the assembly passes the frame it built.
    crate::uprobe::on_entry(probe, unsafe { &mut *regs })
}

extern "C" fn return_dispatch_abi(_slot: u64, regs: *mut PtRegs) -> u64 {
    // SAFETY: as above.
    crate::uprobe::on_return(unsafe { &mut *regs })
}

/// A probe's own stub: put the probe's address under the return address and
/// jump to the shared entry code, clobbering no register.
///
/// ```text
/// lea  rsp, [rsp-8]
/// push rax
/// mov  rax, PROBE
/// mov  [rsp+8], rax
/// pop  rax
/// jmp  [rip+0] ; .quad entry_common
/// ```
pub fn entry_stub(probe: u64, inside: bool) -> Vec<u8> {
    stub_to(probe, entry_common(inside))
}

/// [`entry_stub`] of a libc wrapper of the fast path, jumping to
/// [`wrapper_entry`].
pub fn wrapper_entry_stub(probe: u64) -> Vec<u8> {
    stub_to(probe, wrapper_entry())
}

fn stub_to(probe: u64, common: u64) -> Vec<u8> {
    let mut c = vec![0x48, 0x8d, 0x64, 0x24, 0xf8, 0x50, 0x48, 0xb8];
    c.extend_from_slice(&probe.to_le_bytes());
    c.extend_from_slice(&[0x48, 0x89, 0x44, 0x24, 0x08, 0x58, 0xff, 0x25, 0, 0, 0, 0]);
    c.extend_from_slice(&common.to_le_bytes());
    c
}

#[cfg(test)]
mod tests {
    use crate::shadow::Frame;
    use crate::thread::{self, SELECTOR_ALLOW, SELECTOR_BLOCK};

    // A call whose return address the quick return trampoline replaced:
    // reserves the return-address slot, lets `setup(slot, ret)` record the
    // hooked call on the shadow stack, then returns into the trampoline
    // with 42 in rax, as a wrapper would; the trampoline must come back to
    // `ret` (label 1) with rax intact and the stack as the call left it.
    std::arch::global_asm!(
        ".pushsection .text.bpfjet_probe_test_hooked_call,\"ax\",@progbits",
        ".globl bpfjet_probe_test_hooked_call",
        ".hidden bpfjet_probe_test_hooked_call",
        ".type bpfjet_probe_test_hooked_call,@function",
        "bpfjet_probe_test_hooked_call:",
        "push rbx",
        "mov rbx, rdi",
        "lea rsi, [rip + 1f]",
        "sub rsp, 8", // the slot
        "mov rdi, rsp",
        "sub rsp, 8",
        "call rbx",
        "add rsp, 8",
        "lea rax, [rip + bpfjet_probe_quick_return]",
        "mov [rsp], rax",
        "mov eax, 42",
        "ret",
        "1:",
        "pop rbx",
        "ret",
        ".size bpfjet_probe_test_hooked_call, . - bpfjet_probe_test_hooked_call",
        ".popsection",
    );

    extern "C" {
        fn bpfjet_probe_test_hooked_call(setup: extern "C" fn(u64, u64)) -> u64;
    }

    /// An outer call's frame above this return's, and two frames of calls
    /// abandoned below it (a longjmp out of them).
    extern "C" fn setup(slot: u64, ret: u64) {
        // SAFETY: this thread's block and stacks, no other use live.
        let s = unsafe { thread::stacks(thread::current()) }.expect("mapped");
        for (slot, ret) in [
            (slot + 0x1000, 1),
            (slot, ret),
            (slot - 0x100, 2),
            (slot - 0x200, 3),
        ] {
            assert!(s.shadow.push(Frame {
                slot,
                ret,
                probe: 0
            }));
        }
    }

    /// The assembly quick return pops this return's frame (dropping the
    /// abandoned ones below, keeping the outer one), sets BLOCK only on a
    /// dispatched thread, and returns to the caller with rax intact.
    #[test]
    fn quick_return_pops_its_frame_and_sets_block() {
        std::thread::spawn(|| {
            let t = thread::current();
            for dispatched in [true, false] {
                // SAFETY: this thread's block (SUD is not on for it: the
                // selector is only read here).
                unsafe {
                    (*t).dispatched = dispatched;
                    thread::set_selector(t, SELECTOR_ALLOW);
                }
                // SAFETY: the assembly above, with a valid setup.
                let r0 = unsafe { bpfjet_probe_test_hooked_call(setup) };
                assert_eq!(r0, 42);
                // SAFETY: as above.
                let (selector, depth) = unsafe {
                    (
                        thread::selector(t),
                        thread::existing_stacks(t).map(|s| s.shadow.depth()),
                    )
                };
                let want = if dispatched {
                    SELECTOR_BLOCK
                } else {
                    SELECTOR_ALLOW
                };
                assert_eq!(selector, want);
                // Only the outer call's frame is left (the next round's
                // outer frame replaces it: same slot).
                assert_eq!(depth, Some(1));
            }
            // SAFETY: as above.
            unsafe { (*t).dispatched = false };
        })
        .join()
        .unwrap();
    }
}
