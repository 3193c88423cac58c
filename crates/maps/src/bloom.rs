//! BLOOM_FILTER: `map_extra` hash functions (default 5) over a bitset sized
//! like the kernel's (about max_entries × hashes / ln 2 bits, a power of
//! two). Push sets bits with atomic ORs, so pushes need no lock; peek
//! answers "maybe present" (0) or "definitely absent" (ENOENT). There are no
//! false negatives.

use crate::error::MapError;
use crate::hash_fn::{hash_bytes, HASH_SEED};
use crate::header::{Geometry, LAYOUT_WORDS};
use crate::spec::update;
use std::sync::atomic::{AtomicU64, Ordering};

const DEFAULT_HASHES: u32 = 5;

pub(crate) struct BloomFilter {
    bits: *const AtomicU64,
    mask: u64,
    nr_hashes: u32,
    value_size: usize,
}

impl BloomFilter {
    fn nr_hashes(g: &Geometry) -> u32 {
        match (g.map_extra & 0xf) as u32 {
            0 => DEFAULT_HASHES,
            n => n,
        }
    }

    fn nr_bits(g: &Geometry) -> u64 {
        // bits ≈ entries × hashes / ln 2 (7/5 ≈ 1/ln 2), capped at 2^31.
        let raw = g.max_entries as u64 * Self::nr_hashes(g) as u64 / 5 * 7;
        raw.clamp(64, 1 << 31).next_power_of_two()
    }

    pub(crate) fn layout(g: &Geometry, data_off: usize) -> (usize, [u64; LAYOUT_WORDS]) {
        let bits = Self::nr_bits(g);
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64;
        l[1] = bits;
        ((bits / 8) as usize, l)
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        BloomFilter {
            bits: base.add(l[0] as usize) as *const AtomicU64,
            mask: l[1] - 1,
            nr_hashes: Self::nr_hashes(g),
            value_size: g.value_size as usize,
        }
    }

    fn positions<'a>(&'a self, value: &'a [u8]) -> impl Iterator<Item = u64> + 'a {
        (0..self.nr_hashes)
            .map(move |i| hash_bytes(value, HASH_SEED.wrapping_add(i as u64)) & self.mask)
    }

    fn word(&self, bit: u64) -> &AtomicU64 {
        // SAFETY: bit <= mask, so the word is inside the bitset.
        unsafe { &*self.bits.add((bit / 64) as usize) }
    }

    pub(crate) fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags != update::ANY {
            return Err(MapError::Invalid("bloom filter push takes BPF_ANY"));
        }
        if value.len() != self.value_size {
            return Err(MapError::Invalid("value size mismatch"));
        }
        for b in self.positions(value) {
            self.word(b).fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
        Ok(())
    }

    pub(crate) fn peek(&self, value: &[u8]) -> Result<(), MapError> {
        if value.len() < self.value_size {
            return Err(MapError::Invalid("value size mismatch"));
        }
        let value = &value[..self.value_size];
        for b in self.positions(value) {
            if self.word(b).load(Ordering::Relaxed) & (1 << (b % 64)) == 0 {
                return Err(MapError::NotFound);
            }
        }
        Ok(())
    }
}
