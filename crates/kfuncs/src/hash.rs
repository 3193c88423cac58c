//! Hash functions: CRC32C (the Castagnoli polynomial of the SSE4.2 `crc32`
//! instruction) and XXH32 (for eNetSTL's fused count-min).
//!
//! `crc32c(data, seed)` is the raw reflected CRC register after feeding
//! `data` starting from `seed` — no pre- or post-inversion — which is what
//! a chain of `crc32` instructions computes, so a program can continue a
//! hash over several ranges by passing the previous result as the seed.

use crate::cpu::{features, CpuFeatures};

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82f6_3b78;

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// The byte-at-a-time table (also what the plain-eBPF NFs carry in
/// `.rodata`, so both versions hash identically).
pub static CRC32C_TABLE: [u32; 256] = crc_table();

/// CRC32C, one byte at a time.
pub fn crc32c_scalar(data: &[u8], seed: u32) -> u32 {
    data.iter().fold(seed, |c, &b| {
        CRC32C_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(data: &[u8], seed: u32) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut c = u64::from(seed);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        c = _mm_crc32_u64(c, u64::from_le_bytes(b));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// CRC32C on the path `f` allows (hardware with SSE4.2).
pub fn crc32c_with(f: CpuFeatures, data: &[u8], seed: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if f.sse42 {
        // SAFETY: SSE4.2 is available per `f`, which callers take from
        // detection (or force to scalar).
        return unsafe { crc32c_sse42(data, seed) };
    }
    let _ = f;
    crc32c_scalar(data, seed)
}

/// CRC32C on this machine's fastest path.
pub fn crc32c(data: &[u8], seed: u32) -> u32 {
    crc32c_with(features(), data, seed)
}

const P1: u32 = 0x9e37_79b1;
const P2: u32 = 0x85eb_ca77;
const P3: u32 = 0xc2b2_ae3d;
const P4: u32 = 0x27d4_eb2f;
const P5: u32 = 0x1656_67b1;

fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn round(acc: u32, input: u32) -> u32 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(13)
        .wrapping_mul(P1)
}

/// XXH32 as its specification defines it (little-endian input words).
pub fn xxh32(data: &[u8], seed: u32) -> u32 {
    let mut rest = data;
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 16 {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, word(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u32);
    while rest.len() >= 4 {
        h = h
            .wrapping_add(word(rest).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
        rest = &rest[4..];
    }
    for &b in rest {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}
