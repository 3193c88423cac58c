//! A seeded xorshift64 stream for random differential tests: the same seed
//! gives the same commands on every run, so a failure names a reproducible
//! case (no dependency, no global state).

/// The next numbers of the xorshift64 sequence from `seed` (0 is nudged
/// to 1: xorshift never leaves 0).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
