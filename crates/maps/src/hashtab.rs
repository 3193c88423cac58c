//! The hash table engine behind HASH, PERCPU_HASH, LRU_HASH,
//! LRU_PERCPU_HASH, HASH_OF_MAPS, DEVMAP_HASH and (keyed by masked prefix)
//! LPM_TRIE.
//!
//! Memory model, like the kernel's preallocated hash map:
//! - a fixed pool of elements, recycled through a lock-free free stack and
//!   never unmapped, so a pointer a program got from `lookup` never faults;
//! - buckets hold a spinlock and the head of a singly linked chain; writers
//!   take the bucket lock, readers walk chains without any lock;
//! - a chain ends in a "nulls" marker naming its bucket: a reader that was
//!   carried into another chain by a concurrently recycled element notices
//!   the wrong marker and restarts (the kernel's hlist_nulls trick);
//! - replacing a value allocates a new element and swaps it into the chain,
//!   so a reader sees the old or the new value whole (per-CPU values and
//!   `BPF_F_LOCK` updates are written in place, as in the kernel).
//!
//! Everything is addressed by offsets from the object base, so any process
//! that maps the object can operate on it.

use crate::array::Slots;
use crate::error::MapError;
use crate::hash_fn::{key_hash, key_hash_fixed};
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::lru::{self, LruLinks, LruList, LIST_BYTES, META_REF, NONE};
use crate::spec::{flags as mf, update, MapType};
use crate::sync::{read_shared, write_shared, zero_shared, SpinGuard, ValueLock};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const NULLS: u32 = 1 << 31;
const ELEM_HDR: usize = 24;
/// Bounded lock-free attempts before a reader falls back to the bucket lock.
const LOCKLESS_TRIES: usize = 4;

/// Which element-memory policy the table follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lru {
    None,
    Common,
    PerCpu,
}

/// Offsets of the parts, kept in the header's layout words.
#[derive(Clone, Copy, Debug)]
struct Parts {
    ctl: usize,
    buckets: usize,
    n_buckets: usize,
    elems: usize,
    elem_size: usize,
    pool: usize,
    percpu: usize,
    percpu_stride: usize,
    aux_size: usize,
    n_lists: usize,
}

impl Parts {
    fn to_words(self) -> [u64; LAYOUT_WORDS] {
        let mut l = [0u64; LAYOUT_WORDS];
        let v = [
            self.ctl,
            self.buckets,
            self.n_buckets,
            self.elems,
            self.elem_size,
            self.pool,
            self.percpu,
            self.percpu_stride,
            self.aux_size,
            self.n_lists,
        ];
        for (d, s) in l.iter_mut().zip(v) {
            *d = s as u64;
        }
        l
    }

    fn from_words(l: &[u64; LAYOUT_WORDS]) -> Parts {
        let w = |i: usize| l[i] as usize;
        Parts {
            ctl: w(0),
            buckets: w(1),
            n_buckets: w(2),
            elems: w(3),
            elem_size: w(4),
            pool: w(5),
            percpu: w(6),
            percpu_stride: w(7),
            aux_size: w(8),
            n_lists: w(9),
        }
    }
}

/// Control block at `ctl`: counters and the free stack, then LRU lists.
#[repr(C)]
struct Ctl {
    /// Live elements (the kernel's `count`), for the E2BIG check.
    count: AtomicU32,
    /// Elements `bump..pool` were never used: allocation takes them lazily
    /// so creating a huge map touches no element memory.
    bump: AtomicU32,
    /// Treiber stack of freed elements: (ABA tag << 32) | index.
    free_head: AtomicU64,
}
const CTL_BYTES: usize = 64;

pub(crate) struct HashTable {
    base: *mut u8,
    // Absolute addresses and derived sizes of the lookup path, computed once
    // at attach so that a lookup needs no offset arithmetic on `p`.
    buckets_at: *mut u8,
    elems_at: *mut u8,
    elem_size: usize,
    bucket_mask: u32,
    pool: u32,
    /// Offset of the (non-per-CPU) value inside an element.
    value_off: usize,
    p: Parts,
    key_size: usize,
    value_size: usize,
    value_stride: usize,
    max_entries: u32,
    ncpus: u32,
    percpu: bool,
    lru: Lru,
    lock: ValueLock,
    kind: MapType,
}

/// Result of a successful update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Updated {
    Inserted,
    Replaced,
}

impl HashTable {
    pub(crate) fn lru_kind(g: &Geometry) -> Lru {
        match g.map_type {
            MapType::LruHash | MapType::LruPercpuHash if g.flags & mf::NO_COMMON_LRU != 0 => {
                Lru::PerCpu
            }
            MapType::LruHash | MapType::LruPercpuHash => Lru::Common,
            _ => Lru::None,
        }
    }

    fn is_percpu(g: &Geometry) -> bool {
        matches!(g.map_type, MapType::PercpuHash | MapType::LruPercpuHash)
    }

    /// Lay out a table after `data_off`; `aux_size` extra bytes per element
    /// (LPM keeps the unmasked key there). Returns bytes used and words.
    pub(crate) fn layout(
        g: &Geometry,
        data_off: usize,
        aux_size: usize,
    ) -> Result<(usize, [u64; LAYOUT_WORDS]), MapError> {
        let lru = Self::lru_kind(g);
        let percpu = Self::is_percpu(g);
        let max = g.max_entries as usize;
        let n_lists = match lru {
            Lru::None => 0,
            Lru::Common => 1,
            Lru::PerCpu => g.ncpus as usize,
        };
        // Spare elements so that replacing a value never fails for lack of
        // memory while the map is full (the kernel keeps per-CPU extras),
        // plus the one each LRU list keeps cached (`LruList::spare`).
        let pool = max + g.ncpus as usize + 1 + n_lists;
        if pool >= NULLS as usize {
            return Err(MapError::TooBig);
        }
        let n_buckets = max.next_power_of_two();
        let vstride = g.value_stride();
        let elem_size = ELEM_HDR
            + round_up(g.key_size as usize, 8)
            + round_up(aux_size, 8)
            + if percpu { 0 } else { vstride };
        let ctl = data_off;
        let buckets = round_up(ctl + CTL_BYTES + n_lists * LIST_BYTES, 64);
        let elems = round_up(buckets + n_buckets * 8, 64);
        let percpu_at = round_up(elems + pool * elem_size, 64);
        let percpu_stride = if percpu {
            round_up(pool * vstride, 64)
        } else {
            0
        };
        let end = percpu_at + percpu_stride * g.ncpus as usize;
        let p = Parts {
            ctl,
            buckets,
            n_buckets,
            elems,
            elem_size,
            pool,
            percpu: percpu_at,
            percpu_stride,
            aux_size,
            n_lists,
        };
        Ok((end - data_off, p.to_words()))
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        let p = Parts::from_words(l);
        HashTable {
            base,
            buckets_at: base.add(p.buckets),
            elems_at: base.add(p.elems),
            elem_size: p.elem_size,
            bucket_mask: p.n_buckets as u32 - 1,
            pool: p.pool as u32,
            value_off: ELEM_HDR + round_up(g.key_size as usize, 8) + round_up(p.aux_size, 8),
            p,
            key_size: g.key_size as usize,
            value_size: g.value_size as usize,
            value_stride: g.value_stride(),
            max_entries: g.max_entries,
            ncpus: g.ncpus,
            percpu: Self::is_percpu(g),
            lru: Self::lru_kind(g),
            lock: ValueLock(g.lock),
            kind: g.map_type,
        }
    }

    /// Initialise a freshly zeroed object: empty chains, empty free stack,
    /// LRU list capacities.
    pub(crate) fn init(&self) {
        self.ctl().free_head.store(NONE as u64, Ordering::Relaxed);
        for b in 0..self.p.n_buckets {
            self.bucket_head(b as u32)
                .store(NULLS | b as u32, Ordering::Relaxed);
        }
        let n = self.p.n_lists as u32;
        for i in 0..n {
            let cap = self.max_entries / n + u32::from(i < self.max_entries % n);
            self.list(i).init(cap);
        }
    }

    // ---- addressing -------------------------------------------------------

    #[inline]
    fn ctl(&self) -> &Ctl {
        // SAFETY: the control block is inside the mapping and 64-aligned.
        unsafe { &*(self.base.add(self.p.ctl) as *const Ctl) }
    }

    #[inline]
    fn list(&self, i: u32) -> &LruList {
        // SAFETY: i < n_lists, checked by callers.
        unsafe {
            &*(self
                .base
                .add(self.p.ctl + CTL_BYTES + i as usize * LIST_BYTES)
                as *const LruList)
        }
    }

    #[inline]
    fn bucket_lock(&self, b: u32) -> &AtomicU32 {
        // SAFETY: b < n_buckets.
        unsafe { &*(self.buckets_at.add(b as usize * 8) as *const AtomicU32) }
    }

    #[inline]
    fn bucket_head(&self, b: u32) -> &AtomicU32 {
        // SAFETY: b < n_buckets.
        unsafe { &*(self.buckets_at.add(b as usize * 8 + 4) as *const AtomicU32) }
    }

    #[inline]
    fn elem(&self, e: u32) -> *mut u8 {
        // SAFETY: e < pool, checked when links are followed.
        unsafe { self.elems_at.add(e as usize * self.elem_size) }
    }

    #[inline]
    fn word(&self, e: u32, off: usize) -> &AtomicU32 {
        // SAFETY: element header words are 4-aligned inside the element.
        unsafe { &*(self.elem(e).add(off) as *const AtomicU32) }
    }

    #[inline]
    fn chain_next(&self, e: u32) -> &AtomicU32 {
        self.word(e, 0)
    }
    #[inline]
    fn hash_of(&self, e: u32) -> &AtomicU32 {
        self.word(e, 4)
    }
    #[inline]
    fn free_next(&self, e: u32) -> &AtomicU32 {
        self.word(e, 8)
    }

    #[inline]
    fn key_ptr(&self, e: u32) -> *mut u8 {
        // SAFETY: inside the element.
        unsafe { self.elem(e).add(ELEM_HDR) }
    }

    #[inline]
    fn aux_ptr(&self, e: u32) -> *mut u8 {
        // SAFETY: inside the element.
        unsafe { self.key_ptr(e).add(round_up(self.key_size, 8)) }
    }

    /// The key of the element whose (only) value starts at `value`, if
    /// `value` is the start of an element's value (the kernel's
    /// `value - round_up(key_size, 8)` for a timer's callback). Not for
    /// per-CPU maps, whose values are outside the elements.
    pub(crate) fn key_of_value(&self, value: *const u8) -> Option<*const u8> {
        if self.percpu {
            return None;
        }
        let rel = (value as usize)
            .checked_sub(self.elems_at as usize)?
            .checked_sub(self.value_off)?;
        let e = rel / self.elem_size;
        (rel % self.elem_size == 0 && e < self.pool as usize)
            .then(|| self.key_ptr(e as u32) as *const u8)
    }

    /// The value of element `e` on `cpu` (per-CPU maps) or its only value.
    #[inline]
    fn value_ptr(&self, e: u32, cpu: u32) -> *mut u8 {
        // SAFETY: e < pool and cpu < ncpus; both regions are in the mapping.
        unsafe {
            if self.percpu {
                self.base.add(
                    self.p.percpu
                        + cpu as usize * self.p.percpu_stride
                        + e as usize * self.value_stride,
                )
            } else {
                self.elem(e).add(self.value_off)
            }
        }
    }

    #[inline]
    fn bucket_of(&self, hash: u32) -> u32 {
        hash & self.bucket_mask
    }

    #[inline]
    fn key_eq(&self, e: u32, key: &[u8]) -> bool {
        // SAFETY: the key area holds key_size bytes. A concurrent writer may
        // be recycling the element; a torn compare only yields a miss.
        unsafe { key_at_eq(self.key_ptr(e), key) }
    }

    // ---- element allocation ----------------------------------------------

    fn alloc(&self) -> Option<u32> {
        let ctl = self.ctl();
        loop {
            let head = ctl.free_head.load(Ordering::Acquire);
            let idx = head as u32;
            if idx == NONE {
                let b = ctl.bump.load(Ordering::Relaxed);
                if b as usize >= self.p.pool {
                    return None;
                }
                if ctl
                    .bump
                    .compare_exchange(b, b + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(b);
                }
                continue;
            }
            // A stale `free_next` read is harmless: the tag makes the CAS fail.
            let next = self.free_next(idx).load(Ordering::Relaxed);
            let new = (((head >> 32) + 1) << 32) | next as u64;
            if ctl
                .free_head
                .compare_exchange(head, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(idx);
            }
        }
    }

    fn free(&self, e: u32) {
        let ctl = self.ctl();
        loop {
            let head = ctl.free_head.load(Ordering::Acquire);
            self.free_next(e).store(head as u32, Ordering::Relaxed);
            let new = (((head >> 32) + 1) << 32) | e as u64;
            if ctl
                .free_head
                .compare_exchange(head, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    // ---- lookup ------------------------------------------------------------

    /// Find the element holding `key`, without locks.
    #[inline]
    fn find(&self, key: &[u8], hash: u32) -> Option<u32> {
        self.find_with(key, hash, |stored| {
            // SAFETY: the key area holds key_size == key.len() bytes. A
            // concurrent writer may be recycling the element; a torn compare
            // only yields a miss (or, as in the kernel's prealloc hash, a
            // stale element).
            unsafe { key_at_eq(stored, key) }
        })
    }

    /// [`HashTable::find`] for a key size known at compile time: the key
    /// compare is a few fixed-size loads instead of a `bcmp` call.
    #[inline(always)]
    fn find_fixed<const K: usize>(&self, key: &[u8; K], hash: u32) -> Option<u32> {
        self.find_with(key, hash, |stored| {
            // SAFETY: as in `find`; K == key_size, checked by the caller.
            unsafe { stored.cast::<[u8; K]>().read_unaligned() == *key }
        })
    }

    /// The lock-free chain walk; `eq` compares the key stored at a pointer
    /// with the one looked up (`key` is the same key, for the locked walk).
    #[inline(always)]
    fn find_with(&self, key: &[u8], hash: u32, eq: impl Fn(*const u8) -> bool) -> Option<u32> {
        let b = self.bucket_of(hash);
        let head = self.bucket_head(b);
        'restart: for _ in 0..LOCKLESS_TRIES {
            let mut link = head.load(Ordering::Acquire);
            let mut steps = 0u32;
            loop {
                if link & NULLS != 0 {
                    if link == NULLS | b {
                        return None;
                    }
                    continue 'restart;
                }
                // A recycled element may carry us into a cycle or (torn read
                // of a corrupt link) out of the pool: restart either way.
                if link >= self.pool || steps > self.pool {
                    continue 'restart;
                }
                if self.hash_of(link).load(Ordering::Relaxed) == hash && eq(self.key_ptr(link)) {
                    return Some(link);
                }
                link = self.chain_next(link).load(Ordering::Acquire);
                steps += 1;
            }
        }
        self.find_contended(b, key, hash)
    }

    /// Heavy churn kept moving elements under a lock-free walk: walk under
    /// the bucket lock instead.
    #[cold]
    #[inline(never)]
    fn find_contended(&self, b: u32, key: &[u8], hash: u32) -> Option<u32> {
        let _g = SpinGuard::lock(self.bucket_lock(b));
        self.find_locked(b, key, hash).map(|(_, e)| e)
    }

    /// Find `key` in bucket `b` whose lock the caller holds; also returns
    /// the link word that points at the element.
    fn find_locked(&self, b: u32, key: &[u8], hash: u32) -> Option<(&AtomicU32, u32)> {
        let mut prev = self.bucket_head(b);
        let mut link = prev.load(Ordering::Relaxed);
        while link & NULLS == 0 {
            if self.hash_of(link).load(Ordering::Relaxed) == hash && self.key_eq(link, key) {
                return Some((prev, link));
            }
            prev = self.chain_next(link);
            link = prev.load(Ordering::Relaxed);
        }
        None
    }

    /// Data-plane lookup: pointer to this CPU's value, valid while the
    /// element lives and never unmapped. Common key sizes go through a
    /// path specialised for their size.
    #[inline]
    pub(crate) fn lookup(&self, key: &[u8], cpu: u32) -> Option<*mut u8> {
        macro_rules! fixed {
            ($($k:literal),*) => {
                match key.len() {
                    $($k => return self.lookup_fixed::<$k>(key.try_into().ok()?, cpu),)*
                    _ => {}
                }
            };
        }
        fixed!(4, 8, 12, 16, 20, 36, 40);
        if key.len() != self.key_size || (self.percpu && cpu >= self.ncpus) {
            return None;
        }
        let e = self.find(key, key_hash(key))?;
        Some(self.found(e, cpu))
    }

    /// [`HashTable::lookup`] for a `K`-byte key. Always inlined: it is the
    /// whole body of the JIT's per-key-size lookup natives.
    #[inline(always)]
    pub(crate) fn lookup_fixed<const K: usize>(&self, key: &[u8; K], cpu: u32) -> Option<*mut u8> {
        if K != self.key_size || (self.percpu && cpu >= self.ncpus) {
            return None;
        }
        let e = self.find_fixed(key, key_hash_fixed(key))?;
        Some(self.found(e, cpu))
    }

    /// The lookup result for element `e`: mark it referenced (LRU) and
    /// point at its value.
    #[inline(always)]
    fn found(&self, e: u32, cpu: u32) -> *mut u8 {
        if self.lru != Lru::None {
            // Test before setting: a hot element keeps its bit set, and a
            // read leaves its cache line clean (shared between CPUs).
            let m = self.word(e, 20);
            if m.load(Ordering::Relaxed) & META_REF == 0 {
                m.fetch_or(META_REF, Ordering::Relaxed);
            }
        }
        self.value_ptr(e, cpu)
    }

    /// Lookup without LRU side effects for a `K`-byte key.
    #[inline]
    pub(crate) fn find_elem_fixed<const K: usize>(&self, key: &[u8; K]) -> Option<u32> {
        if K != self.key_size {
            return None;
        }
        self.find_fixed(key, key_hash_fixed(key))
    }

    /// Lookup without LRU side effects, returning the element index.
    pub(crate) fn find_elem(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_size {
            return None;
        }
        self.find(key, key_hash(key))
    }

    pub(crate) fn elem_value(&self, e: u32, cpu: u32) -> *mut u8 {
        self.value_ptr(e, cpu)
    }

    // ---- update ------------------------------------------------------------

    fn check_update(
        &self,
        key: &[u8],
        aux: &[u8],
        slots: &Slots<'_>,
        flags: u64,
    ) -> Result<(), MapError> {
        let lru_or_percpu = self.lru != Lru::None || self.percpu;
        if (lru_or_percpu && flags > update::EXIST) || flags & !update::F_LOCK > update::EXIST {
            return Err(MapError::Invalid("update flags"));
        }
        if flags & update::F_LOCK != 0 && self.lock.0.is_none() {
            return Err(MapError::Invalid(
                "BPF_F_LOCK on a value without bpf_spin_lock",
            ));
        }
        if key.len() != self.key_size || aux.len() != self.p.aux_size {
            return Err(MapError::Invalid("key size mismatch"));
        }
        if self.percpu {
            slots.check(self.value_size, self.ncpus)
        } else {
            slots.single(self.value_size).map(|_| ())
        }
    }

    /// Write key, aux and value(s) into a fresh element.
    fn fill(&self, e: u32, hash: u32, key: &[u8], aux: &[u8], slots: &Slots<'_>) {
        self.hash_of(e).store(hash, Ordering::Relaxed);
        // SAFETY: the element is private to us until published.
        unsafe {
            write_shared(self.key_ptr(e), key);
            write_shared(self.aux_ptr(e), aux);
            if self.percpu {
                for cpu in 0..self.ncpus {
                    match slots.for_cpu(cpu) {
                        Some(v) => write_shared(self.value_ptr(e, cpu), v),
                        None => zero_shared(self.value_ptr(e, cpu), self.value_size),
                    }
                }
            } else if let Ok(v) = slots.single(self.value_size) {
                write_shared(self.value_ptr(e, 0), v);
                if let Some(off) = self.lock.0 {
                    // A recycled element must not carry a stale lock.
                    zero_shared(self.value_ptr(e, 0).add(off as usize), 4);
                }
            }
        }
    }

    /// Overwrite an existing element's value(s) in place, leaving the byte
    /// ranges `keep` of a single value as they are.
    fn write_in_place(&self, e: u32, slots: &Slots<'_>, locked: bool, keep: &[(u32, u32)]) {
        // SAFETY: e is live (we hold its bucket lock or it is a stale but
        // mapped element).
        unsafe {
            if self.percpu {
                for cpu in 0..self.ncpus {
                    if let Some(v) = slots.for_cpu(cpu) {
                        write_shared(self.value_ptr(e, cpu), v);
                    }
                }
            } else if let Ok(v) = slots.single(self.value_size) {
                self.lock
                    .store_keeping(self.value_ptr(e, 0), v, keep, locked);
            }
        }
    }

    /// Insert or replace. `cpu` picks the LRU list for per-CPU LRU maps.
    /// `special` are the value's runtime-owned fields (timers, kptrs, graph
    /// roots): a `BPF_F_LOCK` update keeps them, as the kernel's
    /// `htab_map_update_elem` (it copies around them in place); any other
    /// replace gives the key a value whose fields are empty.
    pub(crate) fn update(
        &self,
        key: &[u8],
        aux: &[u8],
        slots: Slots<'_>,
        flags: u64,
        cpu: u32,
        special: &[(u32, u32)],
    ) -> Result<Updated, MapError> {
        self.check_update(key, aux, &slots, flags)?;
        let hash = key_hash(key);
        if self.lru != Lru::None {
            return self.update_lru(key, aux, slots, flags, cpu, hash);
        }
        let b = self.bucket_of(hash);
        let with_lock = flags & update::F_LOCK != 0;
        let cmd = flags & !update::F_LOCK;
        let guard = SpinGuard::lock(self.bucket_lock(b));
        let found = self.find_locked(b, key, hash);
        match (found, cmd) {
            (Some(_), update::NOEXIST) => return Err(MapError::Exists),
            (None, update::EXIST) => return Err(MapError::NotFound),
            _ => {}
        }
        if let Some((prev, old)) = found {
            if self.percpu || with_lock {
                let keep = if with_lock { special } else { &[] };
                self.write_in_place(old, &slots, with_lock, keep);
                return Ok(Updated::Replaced);
            }
            let Some(new) = self.alloc() else {
                // Every spare element is in flight: fall back to writing in
                // place (a concurrent reader may see a torn value).
                self.write_in_place(old, &slots, false, &[]);
                return Ok(Updated::Replaced);
            };
            self.fill(new, hash, key, aux, &slots);
            self.chain_next(new).store(
                self.chain_next(old).load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            prev.store(new, Ordering::Release);
            drop(guard);
            self.free(old);
            return Ok(Updated::Replaced);
        }
        let ctl = self.ctl();
        if ctl.count.fetch_add(1, Ordering::AcqRel) >= self.max_entries {
            ctl.count.fetch_sub(1, Ordering::AcqRel);
            return Err(MapError::TooBig);
        }
        let Some(new) = self.alloc() else {
            ctl.count.fetch_sub(1, Ordering::AcqRel);
            return Err(MapError::TooBig);
        };
        self.fill(new, hash, key, aux, &slots);
        let head = self.bucket_head(b);
        self.chain_next(new)
            .store(head.load(Ordering::Relaxed), Ordering::Relaxed);
        head.store(new, Ordering::Release);
        Ok(Updated::Inserted)
    }

    fn list_for_cpu(&self, cpu: u32) -> u32 {
        match self.lru {
            Lru::PerCpu => cpu % self.p.n_lists as u32,
            _ => 0,
        }
    }

    /// Take an element charged to list `l`, evicting from `l` when it is at
    /// capacity. Called with no bucket lock held (eviction takes one).
    fn lru_alloc(&self, l: u32) -> Result<u32, MapError> {
        let list = self.list(l);
        for _ in 0..64 {
            let c = list.count.load(Ordering::Acquire);
            if c < list.cap.load(Ordering::Relaxed) {
                if list
                    .count
                    .compare_exchange(c, c + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                // `ctl.count` counts linked elements only: it goes up when
                // the element is inserted, not for a reservation that a
                // replace or a failed update gives back.
                return match self.alloc() {
                    Some(e) => Ok(e),
                    None => {
                        list.count.fetch_sub(1, Ordering::AcqRel);
                        Err(MapError::NoMemory)
                    }
                };
            }
            self.evict_one(l);
        }
        Err(MapError::NoMemory)
    }

    /// Give back an element reserved by `lru_alloc` but not linked.
    fn lru_release(&self, e: u32, l: u32) {
        self.free(e);
        self.list(l).count.fetch_sub(1, Ordering::AcqRel);
    }

    /// Evict one element of list `l`. Lock order is always bucket → list,
    /// so the victim is chosen under the list lock, then both are taken in
    /// order and the choice re-checked.
    fn evict_one(&self, l: u32) -> bool {
        let list = self.list(l);
        for _ in 0..8 {
            let (victim, b) = {
                let _g = SpinGuard::lock(&list.lock);
                let Some(v) = list.pick_victim(self, l) else {
                    return false;
                };
                (v, self.bucket_of(self.hash_of(v).load(Ordering::Relaxed)))
            };
            let _bg = SpinGuard::lock(self.bucket_lock(b));
            // Under the bucket lock, chain membership is stable; being in
            // the chain means the element is live and on its list.
            let Some(prev) = self.chain_link_to(b, victim) else {
                continue;
            };
            let _lg = SpinGuard::lock(&list.lock);
            let meta = self.word(victim, 20).load(Ordering::Acquire);
            if meta & lru::META_ON_LIST == 0 || lru::list_of(meta) != l {
                continue;
            }
            prev.store(
                self.chain_next(victim).load(Ordering::Relaxed),
                Ordering::Release,
            );
            list.unlink(self, victim);
            list.count.fetch_sub(1, Ordering::AcqRel);
            self.ctl().count.fetch_sub(1, Ordering::AcqRel);
            drop(_lg);
            drop(_bg);
            self.free(victim);
            return true;
        }
        false
    }

    /// The link word pointing at `e` in bucket `b` (lock held), if `e` is there.
    fn chain_link_to(&self, b: u32, e: u32) -> Option<&AtomicU32> {
        let mut prev = self.bucket_head(b);
        let mut link = prev.load(Ordering::Relaxed);
        while link & NULLS == 0 {
            if link == e {
                return Some(prev);
            }
            prev = self.chain_next(link);
            link = prev.load(Ordering::Relaxed);
        }
        None
    }

    /// The common LRU update, replacing a key that is already on list `l`
    /// (a flow's entry refreshed on every packet). The list's element count
    /// does not change, so no slot is reserved on it; the new element is
    /// the list's cached spare (taken and refilled under the list lock the
    /// swap needs anyway), so in the steady state the update costs the
    /// bucket lock and the list lock and no other atomic read-modify-write.
    /// The replaced element becomes the next spare: like an element pushed
    /// on the free stack, it may be reused by the next replace while a
    /// lock-free reader still looks at it (the kernel's prealloc hash
    /// behaves the same), but a replaced key always gets a different
    /// element than the one it had. None, with nothing changed, when a
    /// lock-free look does not find the key on `l`, the key moved before
    /// the bucket was locked, or there is no spare and the pool is empty:
    /// the general path then runs.
    fn replace_on_list(
        &self,
        key: &[u8],
        aux: &[u8],
        slots: &Slots<'_>,
        l: u32,
        hash: u32,
    ) -> Option<Updated> {
        let on_list = |e: u32| {
            let meta = self.word(e, 20).load(Ordering::Acquire);
            meta & lru::META_ON_LIST != 0 && lru::list_of(meta) == l
        };
        if !on_list(self.find(key, hash)?) {
            return None;
        }
        let b = self.bucket_of(hash);
        let _bg = SpinGuard::lock(self.bucket_lock(b));
        // Under the bucket lock chain membership is stable, and an element
        // in a chain stays on its list until unlinked under this lock.
        let (prev, old) = self
            .find_locked(b, key, hash)
            .filter(|&(_, e)| on_list(e))?;
        let list = self.list(l);
        let _lg = SpinGuard::lock(&list.lock);
        let cached = list.spare.load(Ordering::Relaxed);
        let new = if cached != NONE {
            cached
        } else {
            // First replace on this list (or its spare went back to the
            // pool): take one from the free stack; the old element becomes
            // the spare below.
            self.alloc()?
        };
        // Filled under both locks: the spare is only reachable under the
        // list lock, and a key plus value is a few dozen bytes.
        self.fill(new, hash, key, aux, slots);
        self.chain_next(new).store(
            self.chain_next(old).load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        prev.store(new, Ordering::Release);
        list.unlink(self, old);
        list.push_head(self, new, l);
        list.spare.store(old, Ordering::Relaxed);
        Some(Updated::Replaced)
    }

    fn update_lru(
        &self,
        key: &[u8],
        aux: &[u8],
        slots: Slots<'_>,
        flags: u64,
        cpu: u32,
        hash: u32,
    ) -> Result<Updated, MapError> {
        let l = self.list_for_cpu(cpu);
        if !self.percpu && flags != update::NOEXIST {
            if let Some(done) = self.replace_on_list(key, aux, &slots, l, hash) {
                return Ok(done);
            }
        }
        // Like the kernel, take (and maybe evict for) a new element before
        // looking, except for a per-CPU in-place update with BPF_EXIST.
        let new = if self.percpu && flags == update::EXIST {
            None
        } else {
            Some(self.lru_alloc(l)?)
        };
        if let Some(n) = new {
            self.fill(n, hash, key, aux, &slots);
        }
        let b = self.bucket_of(hash);
        let guard = SpinGuard::lock(self.bucket_lock(b));
        let found = self.find_locked(b, key, hash);
        let err = match (found, flags) {
            (Some(_), update::NOEXIST) => Some(MapError::Exists),
            (None, update::EXIST) => Some(MapError::NotFound),
            _ => None,
        };
        if let Some(e) = err {
            drop(guard);
            if let Some(n) = new {
                self.lru_release(n, l);
            }
            return Err(e);
        }
        if let (Some((_, old)), true) = (found, self.percpu) {
            self.write_in_place(old, &slots, false, &[]);
            self.word(old, 20).fetch_or(META_REF, Ordering::Relaxed);
            drop(guard);
            if let Some(n) = new {
                self.lru_release(n, l);
            }
            return Ok(Updated::Replaced);
        }
        let Some(new) = new else {
            return Err(MapError::NotFound);
        };
        let list = self.list(l);
        match found {
            Some((prev, old)) => {
                self.chain_next(new).store(
                    self.chain_next(old).load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
                prev.store(new, Ordering::Release);
                // The live count is unchanged (one element for another).
                let old_list = lru::list_of(self.word(old, 20).load(Ordering::Acquire));
                if old_list == l {
                    // The common case: one lock section swaps the two.
                    let _g = SpinGuard::lock(&list.lock);
                    list.unlink(self, old);
                    list.count.fetch_sub(1, Ordering::AcqRel);
                    list.push_head(self, new, l);
                } else {
                    let ol = self.list(old_list);
                    {
                        let _g = SpinGuard::lock(&ol.lock);
                        ol.unlink(self, old);
                        ol.count.fetch_sub(1, Ordering::AcqRel);
                    }
                    let _g = SpinGuard::lock(&list.lock);
                    list.push_head(self, new, l);
                }
                drop(guard);
                self.free(old);
                Ok(Updated::Replaced)
            }
            None => {
                let head = self.bucket_head(b);
                self.chain_next(new)
                    .store(head.load(Ordering::Relaxed), Ordering::Relaxed);
                head.store(new, Ordering::Release);
                self.ctl().count.fetch_add(1, Ordering::AcqRel);
                {
                    let _g = SpinGuard::lock(&list.lock);
                    list.push_head(self, new, l);
                }
                drop(guard);
                Ok(Updated::Inserted)
            }
        }
    }

    // ---- delete ------------------------------------------------------------

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid("key size mismatch"));
        }
        let hash = key_hash(key);
        let b = self.bucket_of(hash);
        let guard = SpinGuard::lock(self.bucket_lock(b));
        let (prev, e) = self.find_locked(b, key, hash).ok_or(MapError::NotFound)?;
        prev.store(
            self.chain_next(e).load(Ordering::Relaxed),
            Ordering::Release,
        );
        if self.lru != Lru::None {
            let l = lru::list_of(self.word(e, 20).load(Ordering::Acquire));
            let list = self.list(l);
            let _g = SpinGuard::lock(&list.lock);
            list.unlink(self, e);
            list.count.fetch_sub(1, Ordering::AcqRel);
        }
        self.ctl().count.fetch_sub(1, Ordering::AcqRel);
        drop(guard);
        self.free(e);
        Ok(())
    }

    // ---- control plane -----------------------------------------------------

    /// Copy of the value (per-CPU: every CPU's value, each padded to 8
    /// bytes, as `BPF_MAP_LOOKUP_ELEM` returns it). No LRU side effect.
    pub(crate) fn lookup_copy(&self, key: &[u8], flags: u64) -> Result<Vec<u8>, MapError> {
        let with_lock = crate::array::check_lookup_flags(flags, self.lock)?;
        self.check_key(key)?;
        let e = self.find_elem(key).ok_or(MapError::NotFound)?;
        if self.percpu {
            let mut out = vec![0; self.value_stride * self.ncpus as usize];
            for cpu in 0..self.ncpus {
                let at = cpu as usize * self.value_stride;
                // SAFETY: e < pool, cpu < ncpus.
                unsafe { read_shared(self.value_ptr(e, cpu), &mut out[at..at + self.value_size]) };
            }
            return Ok(out);
        }
        let mut out = vec![0; self.value_size];
        let mut e = e;
        for _ in 0..LOCKLESS_TRIES {
            // SAFETY: e < pool.
            unsafe { self.lock.load(self.value_ptr(e, 0), &mut out, with_lock) };
            // The element may have been recycled for another key while we
            // copied; a control plane can afford to check and retry.
            if self.key_eq(e, key) {
                return Ok(out);
            }
            e = self.find_elem(key).ok_or(MapError::NotFound)?;
        }
        let b = self.bucket_of(key_hash(key));
        let _g = SpinGuard::lock(self.bucket_lock(b));
        let (_, e) = self
            .find_locked(b, key, key_hash(key))
            .ok_or(MapError::NotFound)?;
        // SAFETY: e is live under the bucket lock.
        unsafe { self.lock.load(self.value_ptr(e, 0), &mut out, with_lock) };
        Ok(out)
    }

    /// Every CPU's value, `len` bytes each (the value size, or its 8-byte
    /// slot with the padding).
    pub(crate) fn lookup_percpu(&self, key: &[u8], len: usize) -> Result<Vec<Vec<u8>>, MapError> {
        self.check_key(key)?;
        let e = self.find_elem(key).ok_or(MapError::NotFound)?;
        let cpus = if self.percpu { self.ncpus } else { 1 };
        Ok((0..cpus)
            .map(|cpu| {
                let mut out = vec![0; len];
                // SAFETY: e < pool, cpu < ncpus.
                unsafe { self.lock.load(self.value_ptr(e, cpu), &mut out, false) };
                out
            })
            .collect())
    }

    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid("key size mismatch"));
        }
        Ok(())
    }

    /// The key and aux bytes of element `e`.
    pub(crate) fn elem_key_aux(&self, e: u32) -> (Vec<u8>, Vec<u8>) {
        let mut k = vec![0; self.key_size];
        let mut a = vec![0; self.p.aux_size];
        // SAFETY: e < pool.
        unsafe {
            read_shared(self.key_ptr(e), &mut k);
            read_shared(self.aux_ptr(e), &mut a);
        }
        (k, a)
    }

    /// Keys of bucket `b` in chain order, read under the bucket lock.
    fn bucket_elems(&self, b: u32) -> Vec<u32> {
        let _g = SpinGuard::lock(self.bucket_lock(b));
        let mut out = Vec::new();
        let mut link = self.bucket_head(b).load(Ordering::Relaxed);
        while link & NULLS == 0 {
            out.push(link);
            link = self.chain_next(link).load(Ordering::Relaxed);
        }
        out
    }

    /// Kernel `get_next_key` walk: chain order within a bucket, buckets in
    /// index order; a missing (or absent) key restarts from the first key.
    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        let mut start = 0u32;
        if let Some(k) = key {
            if k.len() != self.key_size {
                return Err(MapError::Invalid("key size mismatch"));
            }
            let hash = key_hash(k);
            let b = self.bucket_of(hash);
            let elems = self.bucket_elems(b);
            if let Some(pos) = elems
                .iter()
                .position(|&e| self.hash_of(e).load(Ordering::Relaxed) == hash && self.key_eq(e, k))
            {
                if let Some(&n) = elems.get(pos + 1) {
                    return Ok(self.elem_key_aux(n).0);
                }
                start = b + 1;
            }
        }
        for b in start..self.p.n_buckets as u32 {
            if let Some(&e) = self.bucket_elems(b).first() {
                return Ok(self.elem_key_aux(e).0);
            }
        }
        Err(MapError::NotFound)
    }

    /// Calls `f(key, value)` for each element in place, bucket by bucket,
    /// until it returns false; `value` is `cpu`'s copy for a per-CPU map.
    /// As the kernel's `bpf_for_each_map_elem` walks a hash map: no lock is
    /// held across `f` (which may update or delete elements of this map,
    /// the one it is given included), nothing is copied or allocated, and
    /// no LRU reference is marked. An element `f` deletes keeps its chain
    /// link, so the walk goes on after it; one recycled into another chain
    /// meanwhile ends its bucket's walk at that chain's end (the kernel's
    /// walk may likewise see an element twice or miss one that moved).
    /// The pointers stay valid memory for the map's life (the pool is
    /// never unmapped).
    pub(crate) fn visit_in_place(&self, cpu: u32, mut f: impl FnMut(*const u8, *mut u8) -> bool) {
        for b in 0..self.p.n_buckets as u32 {
            let mut link = self.bucket_head(b).load(Ordering::Acquire);
            let mut steps = 0u32;
            // A link out of the pool (a torn read) or a walk longer than
            // the pool (a cycle through recycled elements) ends the bucket.
            while link & NULLS == 0 && link < self.pool && steps <= self.pool {
                if !f(self.key_ptr(link), self.value_ptr(link, cpu)) {
                    return;
                }
                link = self.chain_next(link).load(Ordering::Acquire);
                steps += 1;
            }
        }
    }

    /// Every live element, in `get_next_key` order.
    pub(crate) fn elements(&self) -> Vec<u32> {
        (0..self.p.n_buckets as u32)
            .flat_map(|b| self.bucket_elems(b))
            .collect()
    }

    pub(crate) fn len(&self) -> u32 {
        self.ctl().count.load(Ordering::Acquire)
    }

    pub(crate) fn kind(&self) -> MapType {
        self.kind
    }
}

/// Whether the `key.len()` bytes at `stored` equal `key`; common sizes
/// compare with fixed-size loads instead of a `bcmp` call.
///
/// # Safety
/// `stored` must point to `key.len()` readable bytes.
#[inline(always)]
unsafe fn key_at_eq(stored: *const u8, key: &[u8]) -> bool {
    macro_rules! fixed {
        ($($k:literal),*) => {
            match key.len() {
                $($k => {
                    if let Ok(k) = <&[u8; $k]>::try_from(key) {
                        return stored.cast::<[u8; $k]>().read_unaligned() == *k;
                    }
                })*
                _ => {}
            }
        };
    }
    fixed!(4, 8, 16);
    std::slice::from_raw_parts(stored, key.len()) == key
}

impl LruLinks for HashTable {
    fn prev(&self, e: u32) -> &AtomicU32 {
        self.word(e, 12)
    }
    fn next(&self, e: u32) -> &AtomicU32 {
        self.word(e, 16)
    }
    fn meta(&self, e: u32) -> &AtomicU32 {
        self.word(e, 20)
    }
}
