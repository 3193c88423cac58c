//! getppid by a `syscall` instruction in the test itself, not through
//! libc (whose `syscall()` the fast path covers): it traps whenever the
//! thread's selector is BLOCK. Shared by the tests that check it is.

pub fn raw_getppid() -> i64 {
    let r: i64;
    // SAFETY: getppid takes no arguments and touches no memory.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_getppid => r,
            out("rcx") _,
            out("r11") _,
            options(nostack)
        )
    };
    r
}
