//! System-call names and numbers (x86-64), for tracepoint sections.

include!(concat!(env!("OUT_DIR"), "/syscall_table.rs"));

/// One past the highest system-call number.
pub fn count() -> usize {
    SYSCALLS
        .iter()
        .map(|&(_, n)| n as usize + 1)
        .max()
        .unwrap_or(0)
}

/// `openat` → 257.
pub fn number(name: &str) -> Option<u32> {
    SYSCALLS
        .iter()
        .find(|&&(n, _)| n == name)
        .map(|&(_, nr)| nr)
}

/// 257 → `openat`.
pub fn name(nr: u32) -> Option<&'static str> {
    SYSCALLS
        .iter()
        .find(|&&(_, n)| n == nr)
        .map(|&(name, _)| name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn knows_common_calls() {
        assert_eq!(super::number("read"), Some(libc::SYS_read as u32));
        assert_eq!(super::number("openat"), Some(libc::SYS_openat as u32));
        assert_eq!(super::name(libc::SYS_exit_group as u32), Some("exit_group"));
        assert!(super::count() > 300);
    }
}
