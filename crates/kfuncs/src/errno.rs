//! Error returns as the kernel's helpers give them: `-errno` in r0.

pub const EINVAL: u64 = 22;

/// `-e` as the 64-bit register value.
pub fn neg(e: u64) -> u64 {
    e.wrapping_neg()
}
