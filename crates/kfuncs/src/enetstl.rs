//! Semantics of the eNetSTL module's kfuncs that have no exact counterpart
//! among bpfjet's own (same names and signatures live in `catalog`).
//! Written from the published headers' documented behaviour, not their code.

use crate::bktlist;
use crate::hash::xxh32;
use std::cell::RefCell;

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

/// Buckets of eNetSTL's list-buckets (its module's fixed array).
pub const BKT_SLOTS: u64 = 320;
/// Nodes of one thread's eNetSTL list-buckets.
pub const BKT_NODES: usize = 65536;
/// eNetSTL's list-buckets hold u64 values.
const BKT_ELEM: u64 = 8;
/// The fd of the handle eNetSTL's module hands out
/// (`struct bpf_bkt_list { int fd; }`, `enetstl_ptr::bkt_handle`).
const BKT_FD: u32 = 1;
const ENOMEM: u64 = 12;

thread_local! {
    /// This thread's (CPU slot's) list-buckets, laid out by `bktlist::init`.
    static BKT: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

fn with_bktlist<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BKT.with(|b| {
        let mut b = b.borrow_mut();
        let m = b.get_or_insert_with(|| {
            let mut m = vec![0u8; 16 + BKT_SLOTS as usize * 12 + BKT_NODES * 12];
            bktlist::init(&mut m, BKT_SLOTS, BKT_ELEM);
            m
        });
        f(m)
    })
}

/// `bpf_bktlist_new`: the handle (`fd` 1, naming the calling thread's
/// queues); its queues persist across runs, as the module's per-CPU ones
/// do. The handle is read-only to programs (a library type,
/// `enetstl_ptr::BKT_LIST_TYPE`) and the same for every thread, so a map's
/// `__kptr` may keep it.
pub fn bktlist_handle() -> u64 {
    crate::enetstl_ptr::bkt_handle()
}

/// `bpf_bktlist_push_back(fd, val, size, slot)`: 0; -1 for a handle other
/// than 1; -EINVAL for a size other than 8 or a slot past 320; -ENOMEM
/// when the thread's 65536 nodes are in use.
pub fn bktlist_push_back(fd: u64, val: &[u8], slot: u64) -> u64 {
    if fd as u32 != BKT_FD {
        return crate::errno::neg(1);
    }
    if val.len() as u64 != BKT_ELEM || slot >= BKT_SLOTS {
        return crate::errno::neg(crate::errno::EINVAL);
    }
    let mut v = [0u8; 8];
    v.copy_from_slice(val);
    match with_bktlist(|m| bktlist::push(m, slot, &v)) {
        r if r == crate::errno::neg(bktlist::ENOSPC) => crate::errno::neg(ENOMEM),
        r => r,
    }
}

/// `bpf_bktlist_pop_front(fd, val, size, slot)`: 0 with the front value
/// in `val`, 1 when the slot is empty (the module's convention), errors as
/// for push.
pub fn bktlist_pop_front(fd: u64, val: &mut [u8], slot: u64) -> u64 {
    if fd as u32 != BKT_FD {
        return crate::errno::neg(1);
    }
    if val.len() as u64 != BKT_ELEM || slot >= BKT_SLOTS {
        return crate::errno::neg(crate::errno::EINVAL);
    }
    let mut v = [0u8; 8];
    match with_bktlist(|m| bktlist::pop(m, slot, &mut v)) {
        0 => {
            val.copy_from_slice(&v);
            0
        }
        r if r == crate::errno::neg(bktlist::ENOENT) => 1,
        r => r,
    }
}

/// Seeds of the module's later counter kfuncs (`bpf_fasthash32_cnt32`,
/// `bpf_xxh32_cnt32` and their `_pkt_` forms): row i uses `SEEDS[i % 8]`,
/// for at most this many rows (the length of the module's seed table).
pub const CNT_ROWS: usize = 64;

/// The hash a counter kfunc applies to its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CntHash {
    /// Zilong Tan's fasthash32 (the 64-bit fasthash folded to 32 bits).
    Fasthash32,
    /// XXH32.
    Xxh32,
}

const FH_M: u64 = 0x8803_55f2_1e6d_1965;
const FH_MIX: u64 = 0x2127_599b_f432_5c37;

fn fasthash_mix(mut h: u64) -> u64 {
    h ^= h >> 23;
    h = h.wrapping_mul(FH_MIX);
    h ^ (h >> 47)
}

/// The input's little-endian 64-bit words, the last one zero-padded (the
/// tail fasthash mixes in only when the length is not a multiple of 8).
fn fasthash_words(data: &[u8]) -> impl Iterator<Item = u64> + '_ {
    data.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    })
}

/// fasthash64 as its author defines it: `h = seed ^ (len * m)`, then per
/// word `h = (h ^ mix(w)) * m`, finally `mix(h)`.
pub fn fasthash64(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(FH_M);
    for w in fasthash_words(data) {
        h = (h ^ fasthash_mix(w)).wrapping_mul(FH_M);
    }
    fasthash_mix(h)
}

/// fasthash32: the 64-bit hash reduced as `h - (h >> 32)` (a Fermat
/// residue keeping both halves), truncated to 32 bits.
pub fn fasthash32(data: &[u8], seed: u32) -> u32 {
    let h = fasthash64(data, u64::from(seed));
    h.wrapping_sub(h >> 32) as u32
}

/// `hash` of `data` under each of `seeds` into `out` (same length): 8
/// XXH32 or 4 fasthash32 lanes at a time with AVX2, as the module's
/// vector bodies, one at a time otherwise; the results are the same.
pub fn hash_seeds_with(
    f: crate::CpuFeatures,
    hash: CntHash,
    data: &[u8],
    seeds: &[u32],
    out: &mut [u32],
) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if f.avx2 {
        match hash {
            CntHash::Xxh32 => {
                while done + 8 <= seeds.len() {
                    let s: [u32; 8] = seeds[done..done + 8].try_into().unwrap();
                    // SAFETY: AVX2 was detected.
                    let h = unsafe { lanes::xxh32_x8(data, s) };
                    out[done..done + 8].copy_from_slice(&h);
                    done += 8;
                }
            }
            CntHash::Fasthash32 => {
                while done + 4 <= seeds.len() {
                    let s: [u32; 4] = seeds[done..done + 4].try_into().unwrap();
                    // SAFETY: AVX2 was detected.
                    let h = unsafe { lanes::fasthash32_x4(data, s) };
                    out[done..done + 4].copy_from_slice(&h);
                    done += 4;
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = f;
    for (o, &s) in out[done..].iter_mut().zip(&seeds[done..]) {
        *o = match hash {
            CntHash::Xxh32 => xxh32(data, s),
            CntHash::Fasthash32 => fasthash32(data, s),
        };
    }
}

/// The counter kfuncs (`bpf_fasthash32_cnt32`, `bpf_xxh32_cnt32`, and the
/// `_pkt_` forms on a 13-byte 5-tuple): `table` holds
/// `table.len() >> (column_shift & 31) >> 2` rows of `1 << (column_shift &
/// 31)` u32 counters; row i's counter at column `hash(input, SEEDS[i % 8])
/// & (columns - 1)` is incremented. More than [`CNT_ROWS`] rows count
/// nothing (the module would read past its seed table).
pub fn cnt32_with(
    f: crate::CpuFeatures,
    hash: CntHash,
    input: &[u8],
    table: &mut [u8],
    column_shift: u32,
) {
    let mut hashes = [0u32; CNT_ROWS];
    let rows = cnt32_hashes(f, hash, input, table.len(), column_shift, &mut hashes);
    cnt32_apply(table, column_shift, &hashes[..rows]);
}

/// The rows' hashes of [`cnt32_with`] into `out`; returns the row count
/// (0 when there are more than [`CNT_ROWS`]). Separate from the update so
/// that a native can hash its input before it borrows the table, which
/// may be the same memory.
pub fn cnt32_hashes(
    f: crate::CpuFeatures,
    hash: CntHash,
    input: &[u8],
    table_len: usize,
    column_shift: u32,
    out: &mut [u32; CNT_ROWS],
) -> usize {
    let rows = (table_len >> (column_shift & 0x1f)) >> 2;
    if rows > CNT_ROWS {
        return 0;
    }
    let mut seeds = [0u32; CNT_ROWS];
    for (i, s) in seeds.iter_mut().enumerate() {
        *s = SEEDS[i % SEEDS.len()];
    }
    hash_seeds_with(f, hash, input, &seeds[..rows], &mut out[..rows]);
    rows
}

/// Increment row i's counter at column `hashes[i] & (columns - 1)`.
pub fn cnt32_apply(table: &mut [u8], column_shift: u32, hashes: &[u32]) {
    let columns = 1usize << (column_shift & 0x1f);
    for (row, &h) in hashes.iter().enumerate() {
        let at = (row * columns + (h as usize & (columns - 1))) * 4;
        let c = &mut table[at..at + 4];
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]).wrapping_add(1);
        c.copy_from_slice(&v.to_ne_bytes());
    }
}

/// [`cnt32_with`] on this CPU's features.
pub fn cnt32(hash: CntHash, input: &[u8], table: &mut [u8], column_shift: u32) {
    cnt32_with(crate::features(), hash, input, table, column_shift)
}

/// `bpf_htss_sig_cmp(sigs, sigs__sz, tmp_sig)`: the byte mask (two bits per
/// element, a 16-bit compare's `movemask`) of the first 16 u16 signatures
/// equal to `sig`. The module always loads 32 bytes; here only the
/// `sigs__sz` the verifier proved readable are compared, so a bucket of 32
/// bytes (the module's use) gives the module's mask and a shorter one
/// never reads past its end.
pub fn htss_sig_cmp_with(f: crate::CpuFeatures, sigs: &[u8], sig: u16) -> u64 {
    let n = sigs.len().min(32) & !1;
    byte_mask_u16(crate::search::Simd::with(f).mask_eq(&sigs[..n], sig))
}

/// The AVX2 bodies: one hash per 32- or 64-bit lane, each lane with its own
/// seed over the same input (the input words are broadcast).
#[cfg(target_arch = "x86_64")]
mod lanes {
    use std::arch::x86_64::*;

    const P1: i32 = 0x9e37_79b1_u32 as i32;
    const P2: i32 = 0x85eb_ca77_u32 as i32;
    const P3: i32 = 0xc2b2_ae3d_u32 as i32;
    const P4: i32 = 0x27d4_eb2f_u32 as i32;
    const P5: i32 = 0x1656_67b1_u32 as i32;

    macro_rules! rotl {
        ($x:expr, $r:literal) => {
            _mm256_or_si256(
                _mm256_slli_epi32::<$r>($x),
                _mm256_srli_epi32::<{ 32 - $r }>($x),
            )
        };
    }

    #[target_feature(enable = "avx2")]
    fn word(data: &[u8], at: usize) -> __m256i {
        let w = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        _mm256_set1_epi32(w as i32)
    }

    #[target_feature(enable = "avx2")]
    fn round(acc: __m256i, w: __m256i) -> __m256i {
        let acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(w, _mm256_set1_epi32(P2)));
        _mm256_mullo_epi32(rotl!(acc, 13), _mm256_set1_epi32(P1))
    }

    /// XXH32 of `data` under eight seeds.
    #[target_feature(enable = "avx2")]
    pub(super) fn xxh32_x8(data: &[u8], seeds: [u32; 8]) -> [u32; 8] {
        // SAFETY: reading eight u32 from an array of eight.
        let seed = unsafe { _mm256_loadu_si256(seeds.as_ptr().cast()) };
        let c = |x: i32| _mm256_set1_epi32(x);
        let mut at = 0;
        let mut h = if data.len() >= 16 {
            let mut v = [
                _mm256_add_epi32(seed, c(P1.wrapping_add(P2))),
                _mm256_add_epi32(seed, c(P2)),
                seed,
                _mm256_sub_epi32(seed, c(P1)),
            ];
            while data.len() - at >= 16 {
                for (i, acc) in v.iter_mut().enumerate() {
                    *acc = round(*acc, word(data, at + i * 4));
                }
                at += 16;
            }
            _mm256_add_epi32(
                _mm256_add_epi32(rotl!(v[0], 1), rotl!(v[1], 7)),
                _mm256_add_epi32(rotl!(v[2], 12), rotl!(v[3], 18)),
            )
        } else {
            _mm256_add_epi32(seed, c(P5))
        };
        h = _mm256_add_epi32(h, c(data.len() as i32));
        while data.len() - at >= 4 {
            h = _mm256_add_epi32(h, _mm256_mullo_epi32(word(data, at), c(P3)));
            h = _mm256_mullo_epi32(rotl!(h, 17), c(P4));
            at += 4;
        }
        for &b in &data[at..] {
            h = _mm256_add_epi32(h, c((u32::from(b).wrapping_mul(P5 as u32)) as i32));
            h = _mm256_mullo_epi32(rotl!(h, 11), c(P1));
        }
        h = _mm256_xor_si256(h, _mm256_srli_epi32::<15>(h));
        h = _mm256_mullo_epi32(h, c(P2));
        h = _mm256_xor_si256(h, _mm256_srli_epi32::<13>(h));
        h = _mm256_mullo_epi32(h, c(P3));
        h = _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h));
        let mut out = [0u32; 8];
        // SAFETY: writing eight u32 into an array of eight.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), h) };
        out
    }

    /// Lane-wise 64-bit product with a constant (AVX2 multiplies 32 x 32
    /// bits only: low x low plus the two cross products shifted up).
    #[target_feature(enable = "avx2")]
    fn mul64(a: __m256i, k: u64) -> __m256i {
        let b = _mm256_set1_epi64x(k as i64);
        let lo = _mm256_mul_epu32(a, b);
        let cross = _mm256_add_epi64(
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), b),
            _mm256_mul_epu32(a, _mm256_srli_epi64::<32>(b)),
        );
        _mm256_add_epi64(lo, _mm256_slli_epi64::<32>(cross))
    }

    #[target_feature(enable = "avx2")]
    fn mix(h: __m256i) -> __m256i {
        let h = _mm256_xor_si256(h, _mm256_srli_epi64::<23>(h));
        let h = mul64(h, super::FH_MIX);
        _mm256_xor_si256(h, _mm256_srli_epi64::<47>(h))
    }

    /// fasthash32 of `data` under four seeds.
    #[target_feature(enable = "avx2")]
    pub(super) fn fasthash32_x4(data: &[u8], seeds: [u32; 4]) -> [u32; 4] {
        let s = |i: usize| i64::from(seeds[i]);
        let mut h = _mm256_xor_si256(
            _mm256_set_epi64x(s(3), s(2), s(1), s(0)),
            _mm256_set1_epi64x((data.len() as u64).wrapping_mul(super::FH_M) as i64),
        );
        for w in super::fasthash_words(data) {
            // mix(w) does not depend on the seed: computed once.
            let m = _mm256_set1_epi64x(super::fasthash_mix(w) as i64);
            h = mul64(_mm256_xor_si256(h, m), super::FH_M);
        }
        h = mix(h);
        // h - (h >> 32), low 32 bits of each lane.
        let folded = _mm256_sub_epi64(h, _mm256_srli_epi64::<32>(h));
        let mut wide = [0u64; 4];
        // SAFETY: writing four u64 into an array of four.
        unsafe { _mm256_storeu_si256(wide.as_mut_ptr().cast(), folded) };
        wide.map(|x| x as u32)
    }
}
