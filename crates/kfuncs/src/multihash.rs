//! Multi-hash fused with what follows it: k (1..=8) CRC32C hashes of one
//! key, each with its own seed, applied at once to a count-min sketch
//! (increment k counters / read their minimum) or to a Bloom filter (set or
//! test k bits). The k hashes never leave the function, which is the point:
//! in plain eBPF each one round-trips through the stack and a map lookup.
//!
//! Layouts, so that a plain-eBPF program (and a control plane) can compute
//! the same thing:
//! - count-min: `rows` holds k rows of `width = rows.len() / 4 / k` u32
//!   counters (native endian); hash i selects column `crc32c(key, SEEDS[i])
//!   % width` of row i.
//! - Bloom: `bits` holds `nbits = bits.len() * 8` bits, bit j is bit `j % 8`
//!   of byte `j / 8`; hash i selects bit `crc32c(key, SEEDS[i]) % nbits`.

use crate::errno::{neg, EINVAL};
use crate::hash::crc32c_with;
use crate::CpuFeatures;

/// The seeds of the k hashes (the first k are used).
pub const SEEDS: [u32; 8] = [
    0x8422_2325,
    0xcbf2_9ce4,
    0x9e37_79b9,
    0x7f4a_7c15,
    0x85eb_ca6b,
    0xc2b2_ae35,
    0x27d4_eb2f,
    0x1656_67b1,
];

/// The most hashes one call computes.
pub const MAX_HASHES: u64 = 8;

fn check_k(k: u64) -> Option<usize> {
    (1..=MAX_HASHES).contains(&k).then_some(k as usize)
}

fn counter(rows: &mut [u8], index: usize) -> &mut [u8] {
    &mut rows[index * 4..index * 4 + 4]
}

fn read_u32(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// The k rows of `len` bytes of counters: `(k, width)`, or `None` for k
/// outside 1..=8 or a table too small for k rows.
fn cm_shape(len: usize, k: u64) -> Option<(usize, usize)> {
    let k = check_k(k)?;
    let width = len / 4 / k;
    (width > 0).then_some((k, width))
}

/// Count-min update: increment the key's k counters (wrapping); returns the
/// new estimate (their minimum), or -EINVAL for k outside 1..=8 or a table
/// too small for k rows.
pub fn cm_inc(f: CpuFeatures, key: &[u8], rows: &mut [u8], k: u64) -> u64 {
    let Some((k, width)) = cm_shape(rows.len(), k) else {
        return neg(EINVAL);
    };
    let mut estimate = u32::MAX;
    for (row, &seed) in SEEDS[..k].iter().enumerate() {
        let column = crc32c_with(f, key, seed) as usize % width;
        let c = counter(rows, row * width + column);
        let v = read_u32(c).wrapping_add(1);
        c.copy_from_slice(&v.to_ne_bytes());
        estimate = estimate.min(v);
    }
    u64::from(estimate)
}

/// Count-min query: the minimum of the key's k counters (or -EINVAL).
pub fn cm_min(f: CpuFeatures, key: &[u8], rows: &[u8], k: u64) -> u64 {
    let Some((k, width)) = cm_shape(rows.len(), k) else {
        return neg(EINVAL);
    };
    let estimate = SEEDS[..k]
        .iter()
        .enumerate()
        .map(|(row, &seed)| {
            let column = crc32c_with(f, key, seed) as usize % width;
            read_u32(&rows[(row * width + column) * 4..])
        })
        .min()
        .unwrap_or(u32::MAX);
    u64::from(estimate)
}

/// The key's k bit positions in a filter of `len` bytes, or `None` for k
/// outside 1..=8 or an empty filter.
fn bloom_bits(
    f: CpuFeatures,
    key: &[u8],
    len: usize,
    k: u64,
) -> Option<impl Iterator<Item = usize> + '_> {
    let k = check_k(k)?;
    let nbits = len * 8;
    (nbits > 0).then(move || {
        SEEDS[..k]
            .iter()
            .map(move |&seed| crc32c_with(f, key, seed) as usize % nbits)
    })
}

/// Bloom insert: set the key's k bits; returns 1 if all were already set
/// (the key was probably present), 0 otherwise, or -EINVAL.
pub fn bloom_set(f: CpuFeatures, key: &[u8], bits: &mut [u8], k: u64) -> u64 {
    let Some(positions) = bloom_bits(f, key, bits.len(), k) else {
        return neg(EINVAL);
    };
    let mut all = true;
    for bit in positions {
        let m = 1u8 << (bit % 8);
        all &= bits[bit / 8] & m != 0;
        bits[bit / 8] |= m;
    }
    u64::from(all)
}

/// Bloom query: 1 if all of the key's k bits are set, else 0 (or -EINVAL).
pub fn bloom_test(f: CpuFeatures, key: &[u8], bits: &[u8], k: u64) -> u64 {
    let Some(mut positions) = bloom_bits(f, key, bits.len(), k) else {
        return neg(EINVAL);
    };
    u64::from(positions.all(|bit| bits[bit / 8] & (1 << (bit % 8)) != 0))
}
