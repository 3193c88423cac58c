//! LPM_TRIE: longest-prefix match over `struct bpf_lpm_trie_key`
//! (host-endian u32 prefix length, then the data, most significant bit
//! first).
//!
//! Instead of a pointer trie, prefixes live in the shared hash table keyed
//! by (prefix length, data masked to that length), next to a count of
//! entries per prefix length and a bitmap of the lengths present. A lookup
//! probes the present lengths from longest to shortest, finding each with
//! one leading-zero count over the bitmap. This keeps the structure offset-only and lock-free
//! for readers; the observable semantics (matches, exact-prefix
//! update/delete, ENOSPC when full, `get_next_key` post-order) are the
//! kernel's.

use crate::array::Slots;
use crate::error::MapError;
use crate::hashtab::{HashTable, Updated};
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::spec::update;
use crate::sync::{read_shared, SpinGuard};
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Layout word holding the offset of the per-length counts.
const COUNTS_WORD: usize = 12;
/// Layout word holding the offset of the present-lengths bitmap, followed
/// by the lock word that orders its updates.
const PRESENT_WORD: usize = 13;
const MAX_KEY: usize = 4 + 256;

pub(crate) struct LpmTrie {
    table: HashTable,
    counts: *const AtomicU32,
    /// Bit `l` set iff some prefix of length `l` is present: kept equal to
    /// `count(l) != 0` by changing both under `present_lock`, so readers
    /// skip absent lengths without touching the counts.
    present: *const AtomicU64,
    present_lock: *const AtomicU32,
    data_size: usize,
    max_plen: u32,
    value_size: usize,
}

/// A prefix as stored: length, masked data (identity) and the data as
/// last written (what `get_next_key` returns, like the kernel's node data).
struct Prefix {
    plen: u32,
    masked: Vec<u8>,
    data: Vec<u8>,
    elem: u32,
}

fn bit(data: &[u8], i: u32) -> u8 {
    (data[(i / 8) as usize] >> (7 - i % 8)) & 1
}

/// Kernel trie post-order: a more specific prefix comes before the prefix
/// that contains it; disjoint prefixes go by their first differing bit,
/// 0 before 1.
fn postorder(a: (u32, &[u8]), b: (u32, &[u8])) -> CmpOrdering {
    let common = a.0.min(b.0);
    for i in 0..common {
        let (x, y) = (bit(a.1, i), bit(b.1, i));
        if x != y {
            return x.cmp(&y);
        }
    }
    b.0.cmp(&a.0)
}

/// The table key of an IPv4 trie key cut to `l` (<= 32) bits.
#[inline(always)]
fn masked_v4(key: &[u8; 8], l: u32) -> [u8; 8] {
    let data = u32::from_be_bytes([key[4], key[5], key[6], key[7]]);
    let data = data & u32::MAX.checked_shl(32 - l).unwrap_or(0);
    let (p, d) = (l.to_ne_bytes(), data.to_be_bytes());
    [p[0], p[1], p[2], p[3], d[0], d[1], d[2], d[3]]
}

/// The table key of an IPv6 trie key cut to `l` (<= 128) bits.
#[inline(always)]
fn masked_v6(key: &[u8; 20], l: u32) -> [u8; 20] {
    let mut data = [0u8; 16];
    data.copy_from_slice(&key[4..]);
    let data = u128::from_be_bytes(data) & u128::MAX.checked_shl(128 - l).unwrap_or(0);
    let mut out = [0u8; 20];
    out[..4].copy_from_slice(&l.to_ne_bytes());
    out[4..].copy_from_slice(&data.to_be_bytes());
    out
}

impl LpmTrie {
    pub(crate) fn layout(
        g: &Geometry,
        data_off: usize,
    ) -> Result<(usize, [u64; LAYOUT_WORDS]), MapError> {
        let data_size = g.key_size as usize - 4;
        let (len, mut words) = HashTable::layout(g, data_off, data_size)?;
        let counts = round_up(data_off + len, 64);
        words[COUNTS_WORD] = counts as u64;
        let lengths = data_size * 8 + 1;
        let present = round_up(counts + lengths * 4, 8);
        words[PRESENT_WORD] = present as u64;
        let end = present + lengths.div_ceil(64) * 8 + 4;
        Ok((end - data_off, words))
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        let data_size = g.key_size as usize - 4;
        let present = base.add(l[PRESENT_WORD] as usize);
        LpmTrie {
            table: HashTable::attach(base, g, l),
            counts: base.add(l[COUNTS_WORD] as usize) as *const AtomicU32,
            present: present as *const AtomicU64,
            present_lock: present.add((data_size * 8 + 1).div_ceil(64) * 8) as *const AtomicU32,
            data_size,
            max_plen: data_size as u32 * 8,
            value_size: g.value_size as usize,
        }
    }

    pub(crate) fn init(&self) {
        self.table.init();
    }

    fn count(&self, plen: u32) -> &AtomicU32 {
        // SAFETY: plen <= max_plen, within the counts array.
        unsafe { &*self.counts.add(plen as usize) }
    }

    /// Word `w` of the present-lengths bitmap.
    #[inline(always)]
    fn present_word(&self, w: u32) -> &AtomicU64 {
        // SAFETY: w <= max_plen / 64, within the bitmap.
        unsafe { &*self.present.add(w as usize) }
    }

    /// Add `delta` (+1 or -1) to the count of length `plen` and keep its
    /// bit in the bitmap in step. The lock orders concurrent inserts and
    /// deletes of the same length so the last bit written matches the
    /// final count.
    fn adjust_count(&self, plen: u32, delta: i32) {
        // SAFETY: the lock word follows the bitmap inside the mapping.
        let _g = SpinGuard::lock(unsafe { &*self.present_lock });
        let c = self.count(plen);
        let now = if delta > 0 {
            c.fetch_add(1, Ordering::AcqRel) + 1
        } else {
            c.fetch_sub(1, Ordering::AcqRel) - 1
        };
        let (w, bit) = (self.present_word(plen / 64), 1u64 << (plen % 64));
        if now == 0 {
            w.fetch_and(!bit, Ordering::Release);
        } else {
            w.fetch_or(bit, Ordering::Release);
        }
    }

    /// Call `probe` with every present prefix length `<= top`, longest
    /// first, until it returns Some.
    #[inline(always)]
    fn probe_lengths(&self, top: u32, mut probe: impl FnMut(u32) -> Option<u32>) -> Option<u32> {
        // A key longer than the trie's prefixes matches nothing, as the
        // kernel's trie_lookup_elem answers it.
        if top > self.max_plen {
            return None;
        }
        let mut w = top / 64;
        // Bits 0..=top%64 of the top word.
        let mut bits = self.present_word(w).load(Ordering::Acquire) & (u64::MAX >> (63 - top % 64));
        loop {
            while bits != 0 {
                let b = 63 - bits.leading_zeros();
                if let Some(e) = probe(w * 64 + b) {
                    return Some(e);
                }
                bits &= !(1u64 << b);
            }
            if w == 0 {
                return None;
            }
            w -= 1;
            bits = self.present_word(w).load(Ordering::Acquire);
        }
    }

    /// Build the table key for `data` cut to `plen` bits into `buf`.
    fn masked<'b>(&self, data: &[u8], plen: u32, buf: &'b mut [u8; MAX_KEY]) -> &'b [u8] {
        let n = 4 + self.data_size;
        buf[..4].copy_from_slice(&plen.to_ne_bytes());
        let full = (plen / 8) as usize;
        buf[4..4 + full].copy_from_slice(&data[..full]);
        let mut at = 4 + full;
        if !plen.is_multiple_of(8) {
            buf[at] = data[full] & (0xffu8 << (8 - plen % 8));
            at += 1;
        }
        buf[at..n].fill(0);
        &buf[..n]
    }

    fn split<'k>(&self, key: &'k [u8]) -> Result<(u32, &'k [u8]), MapError> {
        if key.len() != 4 + self.data_size {
            return Err(MapError::Invalid("key size mismatch"));
        }
        let plen = u32::from_ne_bytes(key[..4].try_into().unwrap_or([0; 4]));
        Ok((plen, &key[4..]))
    }

    /// The element of the longest prefix matching `key`. IPv4 and IPv6
    /// keys take a path specialised for their size.
    #[inline]
    fn longest_match(&self, key: &[u8]) -> Option<u32> {
        match key.len() {
            8 => return self.longest_match_fixed(<&[u8; 8]>::try_from(key).ok()?, masked_v4),
            20 => return self.longest_match_fixed(<&[u8; 20]>::try_from(key).ok()?, masked_v6),
            _ => {}
        }
        let (plen, data) = self.split(key).ok()?;
        let mut buf = [0u8; MAX_KEY];
        self.probe_lengths(plen, |l| {
            let k = self.masked(data, l, &mut buf);
            self.table.find_elem(k)
        })
    }

    /// [`LpmTrie::longest_match`] for a `K`-byte key; `mask(key, l)` builds
    /// the table key of length `l` in registers, so it is hashed and
    /// compared with fixed-size operations and no store-to-load stall.
    #[inline(always)]
    fn longest_match_fixed<const K: usize>(
        &self,
        key: &[u8; K],
        mask: impl Fn(&[u8; K], u32) -> [u8; K],
    ) -> Option<u32> {
        if K != 4 + self.data_size {
            return None;
        }
        let plen = u32::from_ne_bytes([key[0], key[1], key[2], key[3]]);
        self.probe_lengths(plen, |l| self.table.find_elem_fixed(&mask(key, l)))
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<*mut u8> {
        self.longest_match(key).map(|e| self.table.elem_value(e, 0))
    }

    pub(crate) fn lookup_copy(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        let e = self.longest_match(key).ok_or(MapError::NotFound)?;
        let mut out = vec![0; self.value_size];
        // SAFETY: e is an element of the table.
        unsafe { read_shared(self.table.elem_value(e, 0), &mut out) };
        Ok(out)
    }

    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags > update::EXIST {
            return Err(MapError::Invalid("update flags"));
        }
        let (plen, data) = self.split(key)?;
        if plen > self.max_plen {
            return Err(MapError::Invalid("prefix length beyond key data"));
        }
        let mut buf = [0u8; MAX_KEY];
        let k = self.masked(data, plen, &mut buf);
        match self.table.update(k, data, Slots::All(value), flags, 0, &[]) {
            Ok(Updated::Inserted) => {
                self.adjust_count(plen, 1);
                Ok(())
            }
            Ok(Updated::Replaced) => Ok(()),
            // The trie reports a full map as ENOSPC, unlike the hash maps.
            Err(MapError::TooBig) => Err(MapError::NoSpace),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let (plen, data) = self.split(key)?;
        if plen > self.max_plen {
            return Err(MapError::Invalid("prefix length beyond key data"));
        }
        let mut buf = [0u8; MAX_KEY];
        let k = self.masked(data, plen, &mut buf);
        self.table.delete(k)?;
        self.adjust_count(plen, -1);
        Ok(())
    }

    fn prefixes(&self) -> Vec<Prefix> {
        let mut v: Vec<Prefix> = self
            .table
            .elements()
            .into_iter()
            .map(|e| {
                let (k, data) = self.table.elem_key_aux(e);
                let plen = u32::from_ne_bytes(k[..4].try_into().unwrap_or([0; 4]));
                Prefix {
                    plen,
                    masked: k[4..].to_vec(),
                    data,
                    elem: e,
                }
            })
            .collect();
        v.sort_by(|a, b| postorder((a.plen, &a.masked), (b.plen, &b.masked)));
        v
    }

    fn key_of(p: &Prefix) -> Vec<u8> {
        let mut k = p.plen.to_ne_bytes().to_vec();
        k.extend_from_slice(&p.data);
        k
    }

    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        let all = self.prefixes();
        let first = || all.first().map(Self::key_of).ok_or(MapError::NotFound);
        let Some(key) = key else { return first() };
        let (plen, data) = self.split(key)?;
        if plen > self.max_plen {
            return first();
        }
        let mut buf = [0u8; MAX_KEY];
        let masked = self.masked(data, plen, &mut buf)[4..].to_vec();
        match all
            .iter()
            .position(|p| p.plen == plen && p.masked == masked)
        {
            None => first(),
            Some(i) => all.get(i + 1).map(Self::key_of).ok_or(MapError::NotFound),
        }
    }

    /// (key, value) of every prefix in `get_next_key` order.
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.prefixes()
            .iter()
            .map(|p| {
                let mut v = vec![0; self.value_size];
                // SAFETY: p.elem is an element of the table.
                unsafe { read_shared(self.table.elem_value(p.elem, 0), &mut v) };
                (Self::key_of(p), v)
            })
            .collect()
    }
}
