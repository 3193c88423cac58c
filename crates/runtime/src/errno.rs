//! Kernel errno values as helpers return them to programs: a helper reports a
//! failure the program may handle by returning `-errno` in r0, exactly like the
//! kernel, so programs written for the kernel take the same error paths.

pub const EPERM: u64 = 1;
pub const EACCES: u64 = 13;
pub const ENOENT: u64 = 2;
pub const E2BIG: u64 = 7;
pub const EBUSY: u64 = 16;
pub const EEXIST: u64 = 17;
pub const EINVAL: u64 = 22;
pub const ENOSPC: u64 = 28;
pub const EAGAIN: u64 = 11;
pub const ENODEV: u64 = 19;
pub const EOPNOTSUPP: u64 = 95;
pub const EAFNOSUPPORT: u64 = 97;
pub const EFAULT: u64 = 14;
pub const ENOTSUPP: u64 = 524;

/// The r0 value of a helper failing with `errno` (two's complement of it).
pub const fn neg(errno: u64) -> u64 {
    errno.wrapping_neg()
}
