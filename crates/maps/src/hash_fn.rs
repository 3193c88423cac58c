//! The key hash shared by every process that opens a map.
//!
//! The seed is a compile-time constant: a control plane in another process
//! must find the same bucket as the data plane. (The kernel seeds jhash
//! randomly per map; bucket order is not observable except through
//! `get_next_key` order, which the kernel does not promise either.)

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
const P3: u64 = 0x5899_65cc_7537_4cc3;

/// The fixed seed. Changing it or the hash changes every table's bucket
/// layout: bump `header::VERSION` with it.
pub const HASH_SEED: u64 = 0x6270_666a_6574_2121;

/// 64×64→128 multiply folded to 64 bits: the mixing step.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Little-endian load of 8 bytes at `at`.
#[inline(always)]
fn r8(key: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&key[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Little-endian load of 4 bytes at `at`.
#[inline(always)]
fn r4(key: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&key[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// One multiply per 16 bytes of key, always inlined so that a caller with
/// a constant key length gets straight-line code. Keys of up to 16 bytes
/// are read as two possibly overlapping words (with the length mixed in,
/// the words determine the key), so a 4-byte key costs one multiply.
#[inline(always)]
fn mix(key: &[u8], seed: u64) -> u64 {
    let n = key.len();
    let (a, b) = if n <= 16 {
        if n >= 8 {
            (r8(key, 0), r8(key, n - 8))
        } else if n >= 4 {
            (r4(key, 0), r4(key, n - 4))
        } else if n > 0 {
            let a = u64::from(key[0]) << 16 | u64::from(key[n / 2]) << 8 | u64::from(key[n - 1]);
            (a, 0)
        } else {
            (0, 0)
        }
    } else {
        let mut acc = seed ^ P0;
        let mut at = 0;
        while n - at > 16 {
            acc = fold_mul(r8(key, at) ^ P1 ^ acc, r8(key, at + 8) ^ P2);
            at += 16;
        }
        // The last 16 bytes, overlapping the previous block if need be.
        (r8(key, n - 16) ^ acc, r8(key, n - 8))
    };
    fold_mul(a ^ seed ^ P1, b ^ P2 ^ n as u64)
}

/// Hash `key` with `seed`, with a final multiply so that every output bit
/// depends on every input bit (bloom filters take several bit positions
/// from one hash).
#[inline]
pub fn hash_bytes(key: &[u8], seed: u64) -> u64 {
    fold_mul(mix(key, seed) ^ P3, key.len() as u64 ^ P0)
}

#[inline(always)]
fn fold32(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

/// The 32-bit bucket hash of a map key. Common key sizes take the
/// fixed-size path (same value, no partial-word copies).
#[inline]
pub fn key_hash(key: &[u8]) -> u32 {
    macro_rules! fixed {
        ($($k:literal),*) => {
            match key.len() {
                $($k => {
                    if let Ok(k) = <&[u8; $k]>::try_from(key) {
                        return key_hash_fixed(k);
                    }
                })*
                _ => {}
            }
        };
    }
    fixed!(4, 8, 12, 16, 20, 36, 40);
    fold32(mix(key, HASH_SEED))
}

/// [`key_hash`] for a key whose size is known at compile time: the same
/// value, computed without length-dependent branches.
#[inline(always)]
pub(crate) fn key_hash_fixed<const K: usize>(key: &[u8; K]) -> u32 {
    fold32(mix(key, HASH_SEED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_spread() {
        let mut seen = std::collections::HashSet::new();
        for i in 0u32..10_000 {
            seen.insert(key_hash(&i.to_ne_bytes()) & 0xffff);
        }
        // 10k keys into 65k buckets: a decent hash leaves few collisions.
        assert!(seen.len() > 9_000, "{}", seen.len());
        assert_ne!(key_hash(&[0; 4]), key_hash(&[0; 5]));
        assert_eq!(key_hash(b"abc"), key_hash(b"abc"));
    }

    #[test]
    fn sequential_small_keys_fill_buckets_evenly() {
        // The packet path's typical table: a few hundred 4-byte keys with
        // as many buckets. A random-like hash leaves about 1/e of the
        // buckets empty and no long chains.
        for n in [256u32, 4096] {
            let mut chains = vec![0u32; n as usize];
            for i in 0..n {
                chains[(key_hash(&i.to_ne_bytes()) & (n - 1)) as usize] += 1;
            }
            let empty = chains.iter().filter(|&&c| c == 0).count() as f64 / n as f64;
            assert!((0.30..0.45).contains(&empty), "n {n}: {empty} empty");
            assert!(
                chains.iter().all(|&c| c <= 8),
                "n {n}: {:?}",
                chains.iter().max()
            );
        }
    }

    #[test]
    fn every_key_byte_matters() {
        // Overlapping reads must still see every byte, at every length.
        for len in 1..=64usize {
            let base: Vec<u8> = (0..len as u8).collect();
            let h = key_hash(&base);
            for i in 0..len {
                let mut k = base.clone();
                k[i] ^= 0x80;
                assert_ne!(key_hash(&k), h, "len {len} byte {i}");
            }
        }
    }

    #[test]
    fn fixed_size_hash_matches_generic() {
        // Control planes hash through the generic path, the data plane
        // through the fixed-size one: they must agree for every length.
        let bytes: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        macro_rules! check {
            ($($k:literal),*) => {$(
                let key: [u8; $k] = bytes[..$k].try_into().unwrap();
                let generic = fold32(mix(&key, HASH_SEED));
                assert_eq!(key_hash_fixed(&key), generic, "len {}", $k);
                assert_eq!(key_hash(&key), generic, "len {}", $k);
            )*};
        }
        check!(1, 3, 4, 7, 8, 9, 12, 16, 17, 20, 24, 32, 33, 36, 40, 48, 64);
    }
}
