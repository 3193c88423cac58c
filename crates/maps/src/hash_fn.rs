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

/// The fixed seed; also part of the on-disk layout version.
pub const HASH_SEED: u64 = 0x6270_666a_6574_2121;

/// 64×64→128 multiply folded to 64 bits: the mixing step.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline(always)]
fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

/// Hash `key` with `seed`. Fast for the 4- to 16-byte keys of the packet
/// path: one multiply per 16 bytes plus a final one.
#[inline]
pub fn hash_bytes(key: &[u8], seed: u64) -> u64 {
    let len = key.len() as u64;
    let mut acc = seed ^ P0;
    let mut rest = key;
    while rest.len() > 16 {
        let (a, b) = (word(&rest[..8]), word(&rest[8..16]));
        acc = fold_mul(a ^ P1 ^ acc, b ^ P2);
        rest = &rest[16..];
    }
    let (a, b) = if rest.len() > 8 {
        (word(&rest[..8]), word(&rest[8..]))
    } else {
        (word(rest), 0)
    };
    acc = fold_mul(a ^ P1 ^ acc, b ^ P2 ^ len);
    fold_mul(acc ^ P3, len ^ P0)
}

/// The 32-bit bucket hash of a map key.
#[inline]
pub fn key_hash(key: &[u8]) -> u32 {
    let h = hash_bytes(key, HASH_SEED);
    (h ^ (h >> 32)) as u32
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
}
