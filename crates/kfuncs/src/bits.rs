//! Bit scans and population counts on u32/u64. Defined for zero (where the
//! x86 `bsf`/`bsr` instructions are not): a scan of zero returns the width.

/// Find first set, 1-based as in C's `ffs`: 0 for 0, else 1 + the index of
/// the lowest set bit.
pub fn ffs64(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        u64::from(x.trailing_zeros()) + 1
    }
}

pub fn ffs32(x: u32) -> u64 {
    ffs64(u64::from(x))
}

/// Count trailing zeros; the width (32/64) for 0.
pub fn ctz32(x: u32) -> u64 {
    u64::from(x.trailing_zeros())
}

pub fn ctz64(x: u64) -> u64 {
    u64::from(x.trailing_zeros())
}

/// Count leading zeros; the width (32/64) for 0.
pub fn clz32(x: u32) -> u64 {
    u64::from(x.leading_zeros())
}

pub fn clz64(x: u64) -> u64 {
    u64::from(x.leading_zeros())
}

pub fn popcount32(x: u32) -> u64 {
    u64::from(x.count_ones())
}

pub fn popcount64(x: u64) -> u64 {
    u64::from(x.count_ones())
}
