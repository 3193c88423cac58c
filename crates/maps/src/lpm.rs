//! LPM_TRIE: longest-prefix match over `struct bpf_lpm_trie_key`
//! (host-endian u32 prefix length, then the data, most significant bit
//! first).
//!
//! Instead of a pointer trie, prefixes live in the shared hash table keyed
//! by (prefix length, data masked to that length), next to a count of
//! entries per prefix length. A lookup probes the present lengths from
//! longest to shortest. This keeps the structure offset-only and lock-free
//! for readers; the observable semantics (matches, exact-prefix
//! update/delete, ENOSPC when full, `get_next_key` post-order) are the
//! kernel's.

use crate::array::Slots;
use crate::error::MapError;
use crate::hashtab::{HashTable, Updated};
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::spec::update;
use crate::sync::read_shared;
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU32, Ordering};

/// Layout word holding the offset of the per-length counts.
const COUNTS_WORD: usize = 12;
const MAX_KEY: usize = 4 + 256;

pub(crate) struct LpmTrie {
    table: HashTable,
    counts: *const AtomicU32,
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

impl LpmTrie {
    pub(crate) fn layout(
        g: &Geometry,
        data_off: usize,
    ) -> Result<(usize, [u64; LAYOUT_WORDS]), MapError> {
        let data_size = g.key_size as usize - 4;
        let (len, mut words) = HashTable::layout(g, data_off, data_size)?;
        let counts = round_up(data_off + len, 64);
        words[COUNTS_WORD] = counts as u64;
        let end = counts + (data_size * 8 + 1) * 4;
        Ok((end - data_off, words))
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        let data_size = g.key_size as usize - 4;
        LpmTrie {
            table: HashTable::attach(base, g, l),
            counts: base.add(l[COUNTS_WORD] as usize) as *const AtomicU32,
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

    fn longest_match(&self, key: &[u8]) -> Option<u32> {
        let (plen, data) = self.split(key).ok()?;
        let mut buf = [0u8; MAX_KEY];
        for l in (0..=plen.min(self.max_plen)).rev() {
            if self.count(l).load(Ordering::Acquire) == 0 {
                continue;
            }
            let k = self.masked(data, l, &mut buf);
            if let Some(e) = self.table.find_elem(k) {
                return Some(e);
            }
        }
        None
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
        match self.table.update(k, data, Slots::All(value), flags, 0) {
            Ok(Updated::Inserted) => {
                self.count(plen).fetch_add(1, Ordering::AcqRel);
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
        self.count(plen).fetch_sub(1, Ordering::AcqRel);
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
