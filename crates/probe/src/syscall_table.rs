//! System-call names and numbers (x86-64), for tracepoint sections.

include!(concat!(env!("OUT_DIR"), "/syscall_table.rs"));

/// Where the kernel's tracepoint name (`syscalls/sys_enter_NAME`, the
/// name in the kernel's `SYSCALL_DEFINE`) is not the UAPI name: (tracepoint
/// name, UAPI name). The kernel has no tracepoint under the UAPI name.
const TRACEPOINT_ALIASES: &[(&str, &str)] = &[
    ("newstat", "stat"),
    ("newfstat", "fstat"),
    ("newlstat", "lstat"),
    ("newuname", "uname"),
    ("sendfile64", "sendfile"),
    ("umount", "umount2"),
];

/// System calls newer than some build hosts' UAPI header (x86-64 numbers,
/// fixed by the kernel's ABI; each checked against the kernel 6.18's
/// tracepoints), used when the header lacks them.
const NEWER: &[(&str, u32)] = &[
    // The uprobe trampolines' own calls (6.11, 6.17): traced as any call.
    ("uretprobe", 335),
    ("uprobe", 336),
    ("cachestat", 451),
    ("fchmodat2", 452),
    ("map_shadow_stack", 453),
    ("futex_wake", 454),
    ("futex_wait", 455),
    ("futex_requeue", 456),
    ("statmount", 457),
    ("listmount", 458),
    ("lsm_get_self_attr", 459),
    ("lsm_set_self_attr", 460),
    ("lsm_list_modules", 461),
    ("mseal", 462),
    ("setxattrat", 463),
    ("getxattrat", 464),
    ("listxattrat", 465),
    ("removexattrat", 466),
    ("open_tree_attr", 467),
    ("file_getattr", 468),
    ("file_setattr", 469),
];

/// The kernel's tracepoint name of the call whose UAPI name is `uapi`,
/// where they differ (`stat` → `newstat`).
pub fn tracepoint_alias(uapi: &str) -> Option<&'static str> {
    TRACEPOINT_ALIASES
        .iter()
        .find(|&&(_, u)| u == uapi)
        .map(|&(tp, _)| tp)
}

/// One past the highest system-call number.
pub fn count() -> usize {
    SYSCALLS
        .iter()
        .chain(NEWER)
        .map(|&(_, n)| n as usize + 1)
        .max()
        .unwrap_or(0)
}

/// The number of the system call whose tracepoints are
/// `syscalls/sys_enter_NAME` / `sys_exit_NAME` in the kernel: `newstat` →
/// 4, `openat` → 257; `None` for a name the kernel has no tracepoint under
/// (`stat`: it is `newstat`) or no such call.
pub fn tracepoint_number(name: &str) -> Option<u32> {
    if let Some(&(_, uapi)) = TRACEPOINT_ALIASES.iter().find(|&&(tp, _)| tp == name) {
        return number(uapi);
    }
    if TRACEPOINT_ALIASES.iter().any(|&(_, uapi)| uapi == name) {
        return None;
    }
    number(name)
}

/// `openat` → 257.
pub fn number(name: &str) -> Option<u32> {
    SYSCALLS
        .iter()
        .chain(NEWER)
        .find(|&&(n, _)| n == name)
        .map(|&(_, nr)| nr)
}

/// 257 → `openat`.
pub fn name(nr: u32) -> Option<&'static str> {
    SYSCALLS
        .iter()
        .chain(NEWER)
        .find(|&&(_, n)| n == nr)
        .map(|&(name, _)| name)
}

/// 4 → `newstat`: the name of the call's tracepoints and of its kernel
/// entry point (`__x64_sys_newstat`), where it differs from the UAPI name.
pub fn tracepoint_name(nr: u32) -> Option<&'static str> {
    let uapi = name(nr)?;
    Some(tracepoint_alias(uapi).unwrap_or(uapi))
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

    #[test]
    fn tracepoints_go_by_the_kernels_names() {
        use super::tracepoint_number as tp;
        assert_eq!(tp("openat"), Some(257));
        assert_eq!(tp("newstat"), Some(4));
        assert_eq!(super::tracepoint_name(4), Some("newstat"));
        assert_eq!(super::tracepoint_name(257), Some("openat"));
        assert_eq!(tp("newfstat"), Some(5));
        assert_eq!(tp("sendfile64"), Some(40));
        assert_eq!(tp("umount"), Some(166));
        assert_eq!(tp("stat"), None);
        assert_eq!(tp("umount2"), None);
        assert_eq!(tp("mseal"), Some(462));
        assert_eq!(tp("no_such_call"), None);
        assert!(super::count() >= 470);
    }

    /// The kernel is the oracle: every system-call tracepoint of the
    /// running kernel names a call bpfjet knows (a tool's wildcard over
    /// `syscalls:sys_enter_*` attaches them all).
    #[test]
    fn every_tracepoint_of_the_running_kernel_is_known() {
        let dirs = [
            "/sys/kernel/tracing/events/syscalls",
            "/sys/kernel/debug/tracing/events/syscalls",
        ];
        let Some(entries) = dirs.iter().find_map(|d| std::fs::read_dir(d).ok()) else {
            bpfjet_testsupport::report_skip(
                "syscall_table: no tracefs events/syscalls here (not root, or tracefs not \
                 mounted): the table is not checked against the kernel's tracepoints",
            );
            return;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| {
                n.strip_prefix("sys_enter_")
                    .or_else(|| n.strip_prefix("sys_exit_"))
                    .map(String::from)
            })
            .collect();
        names.sort();
        names.dedup();
        assert!(names.len() > 300, "only {} tracepoints", names.len());
        let unknown: Vec<&String> = names
            .iter()
            .filter(|n| super::tracepoint_number(n).is_none())
            .collect();
        assert!(
            unknown.is_empty(),
            "tracepoints bpfjet does not know: {unknown:?}"
        );
    }
}
