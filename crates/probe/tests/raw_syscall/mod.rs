//! getppid by a `syscall` instruction in the test itself, not through
//! libc (whose `syscall()` the fast path covers): it traps whenever the
//! thread's selector is BLOCK. Shared by the tests that check it is,
//! with the loop they check it in.

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

/// `/dev/zero` opened with `flags` as descriptor `mark`.
pub fn zero_as(mark: i32, flags: i32) -> i32 {
    let zero = std::ffi::CString::new("/dev/zero").unwrap();
    let fd = unsafe { libc::open(zero.as_ptr(), flags) };
    assert!(fd >= 0);
    assert_eq!(unsafe { libc::dup2(fd, mark) }, mark);
    fd
}

/// `calls` rounds of a 16-byte `read` of `mark` (a wrapper of the fast
/// path) then a raw getppid, which traps only if the selector is BLOCK
/// again after the read; the reads must fill the buffer with zeros.
pub fn reads_then_raw_getppid(mark: i32, calls: u64) {
    let mut buf = [0xffu8; 16];
    for _ in 0..calls {
        assert_eq!(
            unsafe { libc::read(mark, buf.as_mut_ptr().cast(), buf.len()) },
            16
        );
        raw_getppid();
    }
    assert_eq!(buf, [0u8; 16]);
}
