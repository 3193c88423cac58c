//! Hand-off maps kept per thread: pairwise fusion's state internalisation.
//!
//! A hash map whose every access, by every program of the object, is a
//! lookup, update or delete keyed by the *current thread*
//! (`bpf_get_current_pid_tgid()` or its low half: `crates/fusion` proves
//! it from the code) and that nothing else can reach (not pinned, no
//! control plane, no iteration) holds at most one entry per thread, and a
//! thread only ever sees its own. So one slot per thread — occupied or not,
//! the key and the value bytes — *is* that map, with no hashing, bucket
//! lock or handle table:
//!
//! - update honours `BPF_ANY`, `BPF_NOEXIST` (`-EEXIST`) and `BPF_EXIST`
//!   (`-ENOENT`), refuses other flags (`-EINVAL`), and fails with `-E2BIG`
//!   when inserting would make more occupied slots, across all threads,
//!   than `max_entries` (one atomic counter, as the hash map's count);
//! - lookup returns a pointer to the slot's value, or NULL;
//! - delete empties the slot (`-ENOENT` when empty).
//!
//! Recursion on one thread behaves as the map does: the inner entry
//! overwrites the outer's value, the inner exit deletes it, the outer exit
//! finds nothing. Slots of threads that ended stay (as their map entries
//! would); [`ThreadMap::write_back`] copies every occupied slot into the
//! real map so its dump (the report) equals the unfused run's.
//!
//! The programs' map helper calls on such a map are rewritten, after
//! verification (the verifier saw and checked the map calls), into the
//! internal helpers of [`crate::helpers`] `thread_map_*`, which the
//! interpreter runs; the JIT calls [`thread_map_lookup`] and friends
//! directly or compiles the operations itself on the slot's fields
//! ([`slot_layout`], reached through [`super::TracingEnv::thread_slot_table`]),
//! with the same checks and atomics as the methods below.

use crate::errno;
use bpfjet_maps::spec::update;
use bpfjet_maps::{Map, MapError, MapType};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Internal helper ids the rewritten calls use: outside the kernel's range
/// (and the dense part of the registry), never in a loaded object.
pub const THREAD_MAP_LOOKUP: u32 = 0x7f00_0001;
pub const THREAD_MAP_UPDATE: u32 = 0x7f00_0002;
pub const THREAD_MAP_DELETE: u32 = 0x7f00_0003;

/// The internal helper replacing kernel map helper `id`.
pub(crate) fn internal_helper(id: u32) -> Option<u32> {
    match id {
        crate::helpers::ids::MAP_LOOKUP_ELEM => Some(THREAD_MAP_LOOKUP),
        crate::helpers::ids::MAP_UPDATE_ELEM => Some(THREAD_MAP_UPDATE),
        crate::helpers::ids::MAP_DELETE_ELEM => Some(THREAD_MAP_DELETE),
        _ => None,
    }
}

/// What to keep per thread: a map of the object by name and every map
/// helper call on it (program name, instruction slot), as
/// `bpfjet_fusion::plan` lists them. The caller vouches (by that analysis)
/// that these are all the accesses and that each is keyed by the thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadMapSpec {
    pub map: String,
    pub sites: Vec<(String, usize)>,
}

/// Keys of thread-keyed maps are a `u64` or a `u32`.
const MAX_KEY: usize = 8;

/// Byte offsets of a per-thread slot's fields, for native code that runs
/// the slot operations itself (the JIT compiles lookup, update and delete
/// of a map kept per thread as loads and stores on the slot).
pub mod slot_layout {
    /// `u64`: 1 when the slot holds an entry, else 0.
    pub const OCCUPIED: u64 = 0;
    /// `u64`: the entry's key, zero-padded to 8 bytes, little-endian.
    pub const KEY: u64 = 8;
    /// Pointer to the value bytes (8-byte aligned, never moves).
    pub const VALUE: u64 = 16;
    /// Pointer to the map's `u32` count of occupied slots, all threads.
    pub const COUNT: u64 = 24;
    /// `u64`: the map's `max_entries`.
    pub const MAX_ENTRIES: u64 = 32;
}

/// One thread's slot. Only its thread writes it; [`ThreadMap::write_back`]
/// reads it from another thread, racily like any map value. `repr(C)`
/// with the layout of [`slot_layout`]: native code reads and writes it.
#[repr(C)]
pub struct ThreadSlot {
    occupied: AtomicU64,
    /// The key's bytes, zero-padded to 8, as a little-endian integer.
    key: AtomicU64,
    /// The value area of `_storage`.
    value: *mut u8,
    /// `count`'s address.
    count_ptr: *const AtomicU32,
    max_entries: u64,
    /// 8-byte aligned, as map values are; never replaced.
    _storage: UnsafeCell<Box<[u64]>>,
    /// The map's occupied-slot count, shared by all its slots.
    count: Arc<AtomicU32>,
}

const _: () = {
    assert!(std::mem::offset_of!(ThreadSlot, occupied) == slot_layout::OCCUPIED as usize);
    assert!(std::mem::offset_of!(ThreadSlot, key) == slot_layout::KEY as usize);
    assert!(std::mem::offset_of!(ThreadSlot, value) == slot_layout::VALUE as usize);
    assert!(std::mem::offset_of!(ThreadSlot, count_ptr) == slot_layout::COUNT as usize);
    assert!(std::mem::offset_of!(ThreadSlot, max_entries) == slot_layout::MAX_ENTRIES as usize);
};

// SAFETY: the key and value are written by the owning thread only; other
// threads read them only to copy them out (map values are racy by design,
// as in the kernel). The raw pointers point into `_storage` and `count`,
// which the slot owns.
unsafe impl Send for ThreadSlot {}
unsafe impl Sync for ThreadSlot {}

impl ThreadSlot {
    fn value_ptr(&self) -> *mut u8 {
        self.value
    }

    fn is_occupied(&self) -> bool {
        self.occupied.load(Ordering::Acquire) != 0
    }

    fn holds(&self, key: &[u8]) -> bool {
        self.is_occupied() && self.key.load(Ordering::Relaxed) == key_bits(key)
    }
}

/// A key of at most 8 bytes as a zero-padded little-endian integer.
fn key_bits(key: &[u8]) -> u64 {
    let mut b = [0u8; MAX_KEY];
    let n = key.len().min(MAX_KEY);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_le_bytes(b)
}

/// A map kept per thread.
pub struct ThreadMap {
    name: String,
    map: Arc<Map>,
    handle: u64,
    key_size: usize,
    value_size: usize,
    max_entries: u32,
    occupied: Arc<AtomicU32>,
    slots: Mutex<Vec<Arc<ThreadSlot>>>,
    /// Keys the last write-back put into the map.
    written: Mutex<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for ThreadMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadMap")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ThreadMap {
    /// Per-thread storage standing for `map`, or why it cannot.
    pub(crate) fn new(map: Arc<Map>) -> Result<ThreadMap, String> {
        if map.map_type() != MapType::Hash {
            return Err(format!(
                "map {} is a {:?}, not a plain hash map",
                map.name(),
                map.map_type()
            ));
        }
        let key_size = map.key_size() as usize;
        if key_size != 4 && key_size != 8 {
            return Err(format!(
                "map {}: a {key_size}-byte key is not a thread id",
                map.name()
            ));
        }
        if map.spin_lock_off().is_some() {
            return Err(format!(
                "map {}: its value holds a bpf_spin_lock (BPF_F_LOCK updates)",
                map.name()
            ));
        }
        if map.element_count().is_some_and(|n| n > 0) {
            return Err(format!("map {} already holds entries", map.name()));
        }
        Ok(ThreadMap {
            name: map.name().to_string(),
            handle: crate::env::map_handle(&map),
            key_size,
            value_size: map.value_size() as usize,
            max_entries: map.max_entries(),
            occupied: Arc::new(AtomicU32::new(0)),
            slots: Mutex::new(Vec::new()),
            written: Mutex::new(Vec::new()),
            map,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The handle programs load for the map (`lddw`), which the rewritten
    /// calls still pass as their first argument.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    pub fn value_size(&self) -> usize {
        self.value_size
    }

    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// A new thread's slot. Slots of ended threads that are empty are
    /// dropped here (an entry left by an ended thread stays, as in the map).
    pub(crate) fn new_slot(&self) -> Arc<ThreadSlot> {
        let storage = UnsafeCell::new(vec![0u64; self.value_size.div_ceil(8)].into_boxed_slice());
        // SAFETY: the box is owned by the slot and never replaced.
        let value = unsafe { (*storage.get()).as_mut_ptr().cast() };
        let slot = Arc::new(ThreadSlot {
            occupied: AtomicU64::new(0),
            key: AtomicU64::new(0),
            value,
            count_ptr: Arc::as_ptr(&self.occupied),
            max_entries: u64::from(self.max_entries),
            _storage: storage,
            count: Arc::clone(&self.occupied),
        });
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.retain(|s| Arc::strong_count(s) > 1 || s.is_occupied());
        slots.push(Arc::clone(&slot));
        slot
    }

    /// `bpf_map_lookup_elem` on the calling thread's slot.
    pub(crate) fn lookup(&self, slot: &ThreadSlot, key: &[u8]) -> Option<*mut u8> {
        slot.holds(key).then(|| slot.value_ptr())
    }

    /// `bpf_map_update_elem` on the calling thread's slot.
    pub(crate) fn update(
        &self,
        slot: &ThreadSlot,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), MapError> {
        // The hash map's checks, in its order: flags, then existence, then
        // room.
        if flags & !update::F_LOCK > update::EXIST {
            return Err(MapError::Invalid("update flags"));
        }
        if flags & update::F_LOCK != 0 {
            return Err(MapError::Invalid(
                "BPF_F_LOCK on a value without bpf_spin_lock",
            ));
        }
        let exists = slot.holds(key);
        match (exists, flags) {
            (true, update::NOEXIST) => return Err(MapError::Exists),
            (false, update::EXIST) => return Err(MapError::NotFound),
            _ => {}
        }
        if !exists {
            if slot.is_occupied() {
                // Occupied under another key: the thread's id changed
                // (a forked child). The map would hold both entries; one
                // slot cannot, and the old one is given up.
                slot.count.fetch_sub(1, Ordering::AcqRel);
                slot.occupied.store(0, Ordering::Release);
            }
            if slot.count.fetch_add(1, Ordering::AcqRel) >= self.max_entries {
                slot.count.fetch_sub(1, Ordering::AcqRel);
                return Err(MapError::TooBig);
            }
            slot.key.store(key_bits(key), Ordering::Relaxed);
        }
        // SAFETY: the value area holds at least value_size bytes.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), slot.value_ptr(), self.value_size) };
        slot.occupied.store(1, Ordering::Release);
        Ok(())
    }

    /// `bpf_map_delete_elem` on the calling thread's slot.
    pub(crate) fn delete(&self, slot: &ThreadSlot, key: &[u8]) -> Result<(), MapError> {
        if !slot.holds(key) {
            return Err(MapError::NotFound);
        }
        slot.occupied.store(0, Ordering::Release);
        slot.count.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    /// Occupied slots across all threads.
    pub fn occupied(&self) -> u32 {
        self.occupied.load(Ordering::Acquire)
    }

    /// Make the real map hold exactly the occupied slots (the entries the
    /// unfused programs would have left), for dumps and reports. Entries a
    /// previous write-back put there and whose slot has emptied since are
    /// removed.
    pub fn write_back(&self) -> Result<(), MapError> {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        for key in written.drain(..) {
            match self.map.delete_elem(&key) {
                Ok(()) | Err(MapError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for s in slots.iter() {
            if !s.is_occupied() {
                continue;
            }
            let key = s.key.load(Ordering::Relaxed).to_le_bytes()[..self.key_size].to_vec();
            // SAFETY: value_size bytes of the slot's value area.
            let value =
                unsafe { std::slice::from_raw_parts(s.value_ptr(), self.value_size) }.to_vec();
            self.map.update_elem(&key, &value, update::ANY)?;
            written.push(key);
        }
        Ok(())
    }
}

/// The result code a helper returns for `r`.
pub(crate) fn result_code(r: Result<(), MapError>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => errno::neg(e.errno() as u64),
    }
}

/// The calling thread's slot of the map kept per thread whose handle is
/// `handle`, as the run's context holds it.
fn find(env: &super::TracingEnv, handle: u64) -> Option<&ThreadMapRef> {
    env.thread_maps.iter().find(|r| r.handle == handle)
}

/// `bpf_map_lookup_elem` on a map kept per thread, for native code that
/// calls it directly (the JIT, in place of the helper trampoline): the
/// value pointer or 0; `None` when `handle` is not such a map.
///
/// # Safety
/// `key` points to the map's key size in readable bytes.
pub unsafe fn thread_map_lookup(
    env: &super::TracingEnv,
    handle: u64,
    key: *const u8,
) -> Option<u64> {
    let r = find(env, handle)?;
    // SAFETY: per the contract above.
    let key = unsafe { std::slice::from_raw_parts(key, r.map.key_size) };
    Some(r.map.lookup(&r.slot, key).map_or(0, |p| p as u64))
}

/// `bpf_map_update_elem` on a map kept per thread (see
/// [`thread_map_lookup`]): 0 or a negative errno.
///
/// # Safety
/// `key` and `value` point to the map's key and value sizes in readable
/// bytes.
pub unsafe fn thread_map_update(
    env: &super::TracingEnv,
    handle: u64,
    key: *const u8,
    value: *const u8,
    flags: u64,
) -> Option<u64> {
    let r = find(env, handle)?;
    // SAFETY: per the contract above.
    let (key, value) = unsafe {
        (
            std::slice::from_raw_parts(key, r.map.key_size),
            std::slice::from_raw_parts(value, r.map.value_size),
        )
    };
    Some(result_code(r.map.update(&r.slot, key, value, flags)))
}

/// `bpf_map_delete_elem` on a map kept per thread (see
/// [`thread_map_lookup`]): 0 or a negative errno.
///
/// # Safety
/// `key` points to the map's key size in readable bytes.
pub unsafe fn thread_map_delete(
    env: &super::TracingEnv,
    handle: u64,
    key: *const u8,
) -> Option<u64> {
    let r = find(env, handle)?;
    // SAFETY: per the contract above.
    let key = unsafe { std::slice::from_raw_parts(key, r.map.key_size) };
    Some(result_code(r.map.delete(&r.slot, key)))
}

/// One thread's view of one internalised map: what its runs use.
#[derive(Clone)]
pub(crate) struct ThreadMapRef {
    pub handle: u64,
    pub map: Arc<ThreadMap>,
    pub slot: Arc<ThreadSlot>,
}

impl std::fmt::Debug for ThreadMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadMapRef")
            .field("map", &self.map.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfjet_maps::{MapOptions, MapSpec};

    /// The same operations on a real hash map and on thread slots give the
    /// same results, and the write-back leaves the map as the real one.
    #[test]
    fn slots_answer_as_the_hash_map_does() {
        let spec = MapSpec::new("starts", MapType::Hash, 8, 8, 2);
        let real = Map::create_anonymous(&spec, &MapOptions::default()).unwrap();
        let kept = ThreadMap::new(Arc::new(
            Map::create_anonymous(&spec, &MapOptions::default()).unwrap(),
        ))
        .unwrap();
        let threads: Vec<Arc<ThreadSlot>> = (0..3).map(|_| kept.new_slot()).collect();
        let key = |t: usize| (0x1000_0000_0000u64 + t as u64).to_le_bytes();
        let v = |x: u64| x.to_le_bytes();
        // (thread, op, value, flags): op 0 update, 1 lookup, 2 delete.
        let script: &[(usize, u8, u64, u64)] = &[
            (0, 0, 1, update::EXIST),   // ENOENT
            (0, 0, 1, update::NOEXIST), // ok
            (0, 0, 2, update::NOEXIST), // EEXIST
            (0, 1, 0, 0),               // 1
            (0, 0, 3, update::ANY),     // overwrite
            (0, 1, 0, 0),               // 3
            (1, 0, 4, update::ANY),     // ok: 2 entries
            (2, 0, 5, update::ANY),     // E2BIG
            (2, 0, 5, 4),               // EINVAL
            (0, 0, 6, update::EXIST),   // full, but replacing: ok
            (2, 1, 0, 0),               // NULL
            (1, 2, 0, 0),               // ok
            (1, 2, 0, 0),               // ENOENT
            (2, 0, 7, update::ANY),     // room again
        ];
        for &(t, op, x, flags) in script {
            let (want, got) = match op {
                0 => (
                    result_code(real.update(&key(t), &v(x), flags, 0)),
                    result_code(kept.update(&threads[t], &key(t), &v(x), flags)),
                ),
                1 => {
                    let read = |p: Option<*mut u8>| {
                        // SAFETY: a value pointer of an 8-byte value.
                        p.map(|p| unsafe { std::ptr::read_unaligned(p as *const u64) })
                    };
                    let a = read(real.lookup(&key(t), 0));
                    let b = read(kept.lookup(&threads[t], &key(t)));
                    (a.map_or(u64::MAX, |x| x), b.map_or(u64::MAX, |x| x))
                }
                _ => (
                    result_code(real.delete(&key(t))),
                    result_code(kept.delete(&threads[t], &key(t))),
                ),
            };
            assert_eq!(want, got, "thread {t} op {op} value {x} flags {flags}");
        }
        assert_eq!(kept.occupied(), 2);
        kept.write_back().unwrap();
        let sorted = |m: &Map| {
            let mut e = m.entries().unwrap();
            e.sort_by(|a, b| a.key.cmp(&b.key));
            e
        };
        assert_eq!(sorted(&real), sorted(&kept.map));
        // A second write-back after thread 0's delete removes its entry.
        kept.delete(&threads[0], &key(0)).unwrap();
        real.delete(&key(0)).unwrap();
        kept.write_back().unwrap();
        assert_eq!(sorted(&real), sorted(&kept.map));
    }
}
