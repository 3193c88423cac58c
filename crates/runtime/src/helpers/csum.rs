//! `bpf_csum_diff`, bit-exact with Linux 6.12+ on x86-64.
//!
//! Since Linux 6.12 the helper returns a 16-bit folded sum that no longer
//! depends on the architecture's `csum_partial`: it sums `to` (seeded),
//! subtracts the sum of `from`, and folds the 32-bit result to 16 bits
//! (`csum_from32to16`). The 32-bit intermediate values are reproduced exactly
//! (end-around-carry sums are 0 only when every input is 0), because the
//! final NOT of the from-only case depends on the representation of zero.
//! The sizes need not be multiples of 4 and are not capped at 512 bytes any
//! more (both checked against Linux 6.18 in `tests/xdp_helpers.rs`).

use super::ids;
use crate::helpers::{Helper, HelperRegistry};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::CSUM_DIFF, "csum_diff", |ctx, a| {
        let (from_size, to_size) = (a[1] as u32 as u64, a[3] as u32 as u64);
        let from = ctx.read_mem(a[0], from_size)?;
        let to = ctx.read_mem(a[2], to_size)?;
        Ok(u64::from(csum_diff(from, to, a[4] as u32)))
    }));
}

/// `csum_partial` of a 4-byte-multiple buffer: the seed plus the buffer's
/// native-endian 32-bit words, in ones'-complement arithmetic.
pub fn csum_partial(bytes: &[u8], seed: u32) -> u32 {
    let mut sum = u64::from(seed);
    for word in bytes.chunks(4) {
        let mut w = [0u8; 4];
        w[..word.len()].copy_from_slice(word);
        sum += u64::from(u32::from_ne_bytes(w));
    }
    fold64(sum)
}

fn fold64(mut sum: u64) -> u32 {
    while sum > 0xffff_ffff {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
}

/// `csum_add`: 32-bit add with end-around carry.
pub fn csum_add(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s.wrapping_add(u32::from(carry))
}

/// `csum_from32to16`.
pub fn csum_from32to16(sum: u32) -> u16 {
    (sum.wrapping_add(sum.rotate_right(16)) >> 16) as u16
}

/// The value `bpf_csum_diff(from, .., to, .., seed)` returns.
pub fn csum_diff(from: &[u8], to: &[u8], seed: u32) -> u16 {
    let sum = match (from.is_empty(), to.is_empty()) {
        (false, false) => csum_add(csum_partial(to, seed), !csum_partial(from, 0)),
        (_, false) => csum_partial(to, seed),
        (_, true) => !csum_partial(from, !seed),
    };
    csum_from32to16(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_equal_words_is_zero_class() {
        let w = [0x12, 0x34, 0x56, 0x78];
        assert_eq!(csum_diff(&w, &w, 0), 0xffff);
        assert_eq!(csum_diff(&[], &[], 0), 0);
        assert_eq!(csum_diff(&[0; 4], &[], 0), 0);
    }

    #[test]
    fn filled_in_checksum_makes_the_header_sum_ffff() {
        let mut hdr = [
            0x45, 0x00, 0x00, 0x54, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0x0a, 0x00,
            0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
        ];
        // Folded sums are in native byte order, as the kernel returns them.
        let sum = csum_diff(&[], &hdr, 0);
        hdr[10..12].copy_from_slice(&(!sum).to_ne_bytes());
        assert_eq!(csum_diff(&[], &hdr, 0), 0xffff);
    }
}
