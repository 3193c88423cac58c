//! Semantics of the eNetSTL module's kfuncs that have no exact counterpart
//! among bpfjet's own (same names and signatures live in `catalog`).
//! Written from the published headers' documented behaviour, not their code.

use crate::hash::xxh32;

/// Seeds of eNetSTL's fused count-min (`hash_alg_post.h`): the published
/// constants, which a program's control plane needs to find a key's columns.
pub const SEEDS: [u32; 8] = [
    0xec5853, 0xec5859, 0xec5861, 0xec587f, 0xec58a7, 0xec58b3, 0xec58c7, 0xec58d1,
];

/// Bytes of eNetSTL's `struct pkt_5tuple` (packed: two IPv4 addresses, two
/// ports, the protocol).
pub const PKT_5TUPLE_BYTES: usize = 13;

/// `bpf_hash_smid_cnt_u32(tuple, mem, size, column_shift)`: rows of
/// `1 << (column_shift & 31)` u32 counters, `size >> shift >> 2` rows (at
/// most 8, else nothing happens, as in the module); row i's column is
/// `xxh32(tuple, 13, SEEDS[i]) & (columns - 1)`.
pub fn hash_simd_cnt_u32(tuple: &[u8], table: &mut [u8], column_shift: u32) {
    let shift = column_shift & 0x1f;
    let columns = 1usize << shift;
    let rows = (table.len() >> shift) >> 2;
    if rows > SEEDS.len() {
        return;
    }
    for (row, &seed) in SEEDS[..rows].iter().enumerate() {
        let column = xxh32(&tuple[..PKT_5TUPLE_BYTES], seed) as usize & (columns - 1);
        let at = (row * columns + column) * 4;
        let c = &mut table[at..at + 4];
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]).wrapping_add(1);
        c.copy_from_slice(&v.to_ne_bytes());
    }
}

/// eNetSTL's 16-bit search result: a byte mask (two bits per equal u16,
/// `movemask` of a 16-bit compare) over 16 elements.
pub fn byte_mask_u16(element_mask: u64) -> u64 {
    (0..16).fold(0, |m, i| {
        if element_mask & (1 << i) != 0 {
            m | (0b11 << (2 * i))
        } else {
            m
        }
    })
}
