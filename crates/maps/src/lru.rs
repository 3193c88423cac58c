//! LRU lists for LRU_HASH and LRU_PERCPU_HASH.
//!
//! One common list (default) or one list per CPU (`BPF_F_NO_COMMON_LRU`),
//! each a doubly linked list of element indices in shared memory, guarded by
//! a spinlock in the list header. Lookups only set a reference bit (no lock,
//! no list move); eviction takes elements from the tail and gives a
//! referenced element a second chance by moving it to the head (CLOCK).
//!
//! Each list also caches one free element (`spare`) for replacing a key
//! already on it, the small cousin of the kernel's per-CPU free-node caches.
//!
//! Where this differs from the kernel: the kernel keeps active/inactive
//! lists and larger per-CPU caches of free nodes, and it may evict several nodes at
//! once to refill a CPU's cache, so with small maps it can evict entries
//! before the map is full. Here a list evicts exactly one entry when it
//! reaches its capacity, the least recently inserted one that has not been
//! looked up since it last went around the list.

use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) const NONE: u32 = u32::MAX;
/// Element `meta` bits.
pub(crate) const META_REF: u32 = 1;
pub(crate) const META_ON_LIST: u32 = 2;
pub(crate) const META_LIST_SHIFT: u32 = 8;

/// Size of one list header; a cache line so lists of different CPUs do not
/// share one.
pub(crate) const LIST_BYTES: usize = 64;

/// A list header in shared memory.
#[repr(C)]
pub(crate) struct LruList {
    pub lock: AtomicU32,
    pub head: AtomicU32,
    pub tail: AtomicU32,
    /// Live plus reserved elements charged to this list.
    pub count: AtomicU32,
    /// Most elements this list may hold.
    pub cap: AtomicU32,
    /// One free element owned by this list (or `NONE`), guarded by `lock`:
    /// replacing a key on the list takes its new element from here and
    /// leaves the replaced one here, so a flow refreshed on every packet
    /// costs no compare-and-swap on the map's global free stack (the
    /// kernel's per-CPU LRU free lists serve the same purpose).
    pub spare: AtomicU32,
}

/// Access to the link words of elements, implemented by the hash table.
pub(crate) trait LruLinks {
    fn prev(&self, e: u32) -> &AtomicU32;
    fn next(&self, e: u32) -> &AtomicU32;
    fn meta(&self, e: u32) -> &AtomicU32;
}

impl LruList {
    /// Fresh list (shared memory starts zeroed, so head/tail must be set).
    pub(crate) fn init(&self, cap: u32) {
        self.head.store(NONE, Ordering::Relaxed);
        self.tail.store(NONE, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        self.cap.store(cap, Ordering::Relaxed);
        self.spare.store(NONE, Ordering::Relaxed);
    }

    /// Insert `e` at the head. Caller holds `self.lock`.
    pub(crate) fn push_head(&self, l: &impl LruLinks, e: u32, list_id: u32) {
        let head = self.head.load(Ordering::Relaxed);
        l.prev(e).store(NONE, Ordering::Relaxed);
        l.next(e).store(head, Ordering::Relaxed);
        if head != NONE {
            l.prev(head).store(e, Ordering::Relaxed);
        } else {
            self.tail.store(e, Ordering::Relaxed);
        }
        self.head.store(e, Ordering::Relaxed);
        l.meta(e).store(
            META_ON_LIST | (list_id << META_LIST_SHIFT),
            Ordering::Release,
        );
    }

    /// Remove `e`. Caller holds `self.lock` and `e` is on this list.
    pub(crate) fn unlink(&self, l: &impl LruLinks, e: u32) {
        let p = l.prev(e).load(Ordering::Relaxed);
        let n = l.next(e).load(Ordering::Relaxed);
        if p != NONE {
            l.next(p).store(n, Ordering::Relaxed);
        } else {
            self.head.store(n, Ordering::Relaxed);
        }
        if n != NONE {
            l.prev(n).store(p, Ordering::Relaxed);
        } else {
            self.tail.store(p, Ordering::Relaxed);
        }
        // A plain load and store, not an atomic read-modify-write: under
        // the list lock the only concurrent change to `meta` is a lock-free
        // reader setting META_REF, and losing that bit is harmless here —
        // every caller either frees `e` or re-inserts it with the bit
        // cleared (`push_head` stores a fresh meta word).
        let m = l.meta(e).load(Ordering::Relaxed);
        l.meta(e).store(m & !META_ON_LIST, Ordering::Release);
    }

    /// Pick the eviction victim: walk from the tail, moving referenced
    /// elements to the head with their bit cleared; after a full lap take
    /// the tail regardless. Caller holds `self.lock`.
    pub(crate) fn pick_victim(&self, l: &impl LruLinks, list_id: u32) -> Option<u32> {
        let lap = self.count.load(Ordering::Relaxed).saturating_add(1);
        for _ in 0..lap {
            let t = self.tail.load(Ordering::Relaxed);
            if t == NONE {
                return None;
            }
            if l.meta(t).load(Ordering::Relaxed) & META_REF == 0 {
                return Some(t);
            }
            self.unlink(l, t);
            self.push_head(l, t, list_id);
        }
        let t = self.tail.load(Ordering::Relaxed);
        (t != NONE).then_some(t)
    }
}

/// Which list an element is on, from its meta word.
pub(crate) fn list_of(meta: u32) -> u32 {
    meta >> META_LIST_SHIFT
}
