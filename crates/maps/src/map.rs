//! `Map`: one map of any type, in its own shared-memory object, with the
//! data-plane operations (what helpers call) and control-plane operations
//! (what the CLI and libraries call).
//!
//! # Map handles
//! A BPF program's "map pointer" (the `ld_imm64` pseudo map fd, then the
//! first helper argument) is the address of the map's kernel view, a
//! read-only block inside the `Map` laid out like the kernel's
//! `struct bpf_map` (see `kernel_view.rs`): keep maps in `Arc<Map>` and use
//! [`Map::handle`]. The address stays valid as long as the `Arc` lives (the
//! runtime keeps the program's maps alive while the program can run);
//! [`Map::from_handle`] turns it back into a reference to the `Map` around
//! the block. `Map` is `Send + Sync`.

use crate::array::{ArrayMap, Slots};
use crate::bloom::BloomFilter;
use crate::error::MapError;
use crate::fd_array::FdArrayMap;
use crate::hashtab::HashTable;
use crate::header::{header_space, round_up, Geometry, MapHeader};
use crate::kernel_view::{KernelView, KERNEL_VIEW_BYTES};
use crate::lpm::LpmTrie;
use crate::perf_event::{PerfEvent, PerfEventArray, PerfbufStats};
use crate::queue_stack::QueueStack;
use crate::ringbuf::{Backpressure, MmapSegment, RingBuf, RingbufSnapshot, RingbufStats};
use crate::shm::{page_size, Shm};
use crate::spec::{flags as mf, update, MapSpec, MapType};
use crate::validate::validate;
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Creation options beyond the spec.
#[derive(Clone, Debug)]
pub struct MapOptions {
    /// Per-CPU slots: the number of data-plane workers, or the number of
    /// possible CPUs when mirroring the kernel.
    pub ncpus: u32,
    /// Offset of a `struct bpf_spin_lock` in the value (from BTF), enabling
    /// `BPF_F_LOCK`.
    pub spin_lock_off: Option<u32>,
    /// Bytes of each PERF_EVENT_ARRAY ring (rounded up to a power of two).
    pub perf_ring_bytes: usize,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            ncpus: 1,
            spin_lock_off: None,
            perf_ring_bytes: 64 << 10,
        }
    }
}

impl MapOptions {
    pub fn with_cpus(ncpus: u32) -> Self {
        MapOptions {
            ncpus,
            ..Default::default()
        }
    }
}

/// Where an array's values are, for the JIT to inline lookups as
/// `values + cpu * cpu_stride + index * stride` with `index < max_entries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayLayout {
    pub values: *mut u8,
    pub stride: usize,
    /// Bytes between CPUs' copies; 0 for a non-per-CPU array.
    pub cpu_stride: usize,
    pub max_entries: u32,
    pub value_size: u32,
}

/// One entry read by the control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub key: Vec<u8>,
    /// One value, or one per CPU for per-CPU maps.
    pub values: Vec<Vec<u8>>,
}

pub(crate) enum Family {
    Array(ArrayMap),
    FdArray(FdArrayMap),
    Hash(HashTable),
    Lpm(LpmTrie),
    QueueStack(QueueStack),
    Bloom(BloomFilter),
    Ringbuf(RingBuf),
    Perf(PerfEventArray),
}

/// A map in shared memory.
pub struct Map {
    // `family` holds raw pointers into `shm`, so it is declared first and
    // dropped before the mapping goes away.
    family: Family,
    shm: Shm,
    spec: MapSpec,
    id: u32,
    geo: Geometry,
    object: Option<CString>,
    /// What a program reads through the map pointer (the handle points here).
    view: KernelView,
    /// Byte ranges of the value that hold pointers the runtime owns (the
    /// program's `__kptr` fields and graph roots; set by the loader from the
    /// value's BTF): see [`Map::set_owned_fields`].
    owned_fields: std::sync::OnceLock<Vec<(u32, u32)>>,
    /// A PERF_EVENT_ARRAY whose elements a control plane set to its own
    /// perf events (`bpfjet trace --instance`): element i's ring, written
    /// instead of the map's rings ([`Map::bind_perf_rings`]).
    perf_rings: std::sync::OnceLock<Vec<Option<crate::PerfRing>>>,
}

// SAFETY: all mutable state is in the shared mapping and accessed through
// atomics, spinlocks in that memory, or (map values) racy by design like
// the kernel's maps; the raw pointers never change after construction.
unsafe impl Send for Map {}
unsafe impl Sync for Map {}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("id", &self.id)
            .field("name", &self.spec.name)
            .field("type", &self.spec.map_type)
            .finish()
    }
}

fn geometry(spec: &MapSpec, opts: &MapOptions, page: usize) -> Geometry {
    Geometry {
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        flags: spec.flags,
        ncpus: opts.ncpus.max(1),
        map_extra: spec.map_extra,
        lock: opts.spin_lock_off,
        page,
    }
}

type Words = [u64; crate::header::LAYOUT_WORDS];

fn family_layout(
    g: &Geometry,
    data_off: usize,
    opts: &MapOptions,
) -> Result<(usize, Words), MapError> {
    use MapType::*;
    Ok(match g.map_type {
        Array | PercpuArray => ArrayMap::layout(g, data_off),
        ProgArray | ArrayOfMaps | Devmap | Xskmap | Cpumap | CgroupArray => {
            FdArrayMap::layout(g, data_off)
        }
        Hash | PercpuHash | LruHash | LruPercpuHash | HashOfMaps | DevmapHash | StackTrace => {
            HashTable::layout(g, data_off, 0)?
        }
        LpmTrie => crate::lpm::LpmTrie::layout(g, data_off)?,
        Queue | Stack => QueueStack::layout(g, data_off),
        BloomFilter => crate::bloom::BloomFilter::layout(g, data_off),
        Ringbuf | UserRingbuf => RingBuf::layout(g, data_off),
        PerfEventArray => {
            crate::perf_event::PerfEventArray::layout(g, data_off, opts.perf_ring_bytes)
        }
    })
}

/// # Safety
/// `base` must be a mapped object laid out by `family_layout` for `g`.
unsafe fn attach(base: *mut u8, g: &Geometry, l: &Words) -> Family {
    use MapType::*;
    match g.map_type {
        Array | PercpuArray => Family::Array(ArrayMap::attach(base, g, l)),
        ProgArray | ArrayOfMaps | Devmap | Xskmap | Cpumap | CgroupArray => {
            Family::FdArray(FdArrayMap::attach(base, g, l))
        }
        Hash | PercpuHash | LruHash | LruPercpuHash | HashOfMaps | DevmapHash | StackTrace => {
            Family::Hash(HashTable::attach(base, g, l))
        }
        LpmTrie => Family::Lpm(crate::lpm::LpmTrie::attach(base, g, l)),
        Queue | Stack => Family::QueueStack(QueueStack::attach(base, g, l)),
        BloomFilter => Family::Bloom(crate::bloom::BloomFilter::attach(base, g, l)),
        Ringbuf | UserRingbuf => Family::Ringbuf(RingBuf::attach(base, g, l)),
        PerfEventArray => Family::Perf(crate::perf_event::PerfEventArray::attach(base, g, l)),
    }
}

impl Map {
    /// A private map (memfd) that no other process can open by name: for
    /// tests and `test-run`.
    pub fn create_anonymous(spec: &MapSpec, opts: &MapOptions) -> Result<Map, MapError> {
        Self::create(spec, opts, 0, None)
    }

    /// Create a map object; `object` names the POSIX shm object, None for a memfd.
    pub(crate) fn create(
        spec: &MapSpec,
        opts: &MapOptions,
        id: u32,
        object: Option<CString>,
    ) -> Result<Map, MapError> {
        let page = page_size();
        let spec = validate(spec, opts.ncpus.max(1), opts.spin_lock_off, page)?;
        let g = geometry(&spec, opts, page);
        let data_off = header_space(page);
        let (len, words) = family_layout(&g, data_off, opts)?;
        let total = if matches!(g.map_type, MapType::Ringbuf | MapType::UserRingbuf) {
            data_off + len
        } else {
            round_up(data_off + len, 64)
        };
        let mirror = matches!(g.map_type, MapType::Ringbuf | MapType::UserRingbuf)
            .then(|| RingBuf::mirror(&g, &words));
        let shm = Shm::create(object.as_ref(), total, mirror)?;
        // SAFETY: the object is zero-filled, at least a page long, and ours
        // alone until `ready` is set.
        let header = unsafe { &mut *(shm.base() as *mut MapHeader) };
        header.init(&spec, id, &g, total, words);
        // SAFETY: laid out by family_layout just above.
        let family = unsafe { attach(shm.base(), &g, &words) };
        match &family {
            Family::Hash(h) => h.init(),
            Family::Lpm(t) => t.init(),
            Family::Array(a) => {
                if let Some(img) = &spec.initial_data {
                    a.init_data(img);
                }
            }
            Family::Ringbuf(r) => r.init(crate::ringbuf::Backpressure::from_map_extra(
                spec.map_extra,
            )?),
            _ => {}
        }
        if spec.frozen {
            header.frozen.store(1, Ordering::Release);
        }
        header.ready.store(1, Ordering::Release);
        Ok(Map {
            family,
            shm,
            spec,
            id,
            geo: g,
            object,
            view: KernelView::new(),
            owned_fields: std::sync::OnceLock::new(),
            perf_rings: std::sync::OnceLock::new(),
        })
    }

    /// Open a map object another process created.
    pub(crate) fn open_object(object: CString) -> Result<Map, MapError> {
        let hlen = std::mem::size_of::<MapHeader>();
        let shm = Shm::open(
            &object,
            |bytes| {
                // SAFETY: `bytes` has exactly size_of::<MapHeader>() bytes;
                // MapHeader is plain data, read unaligned.
                let h: MapHeader = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
                if h.magic != crate::header::MAGIC {
                    return Err(MapError::Corrupt("bad magic"));
                }
                let g = Geometry::from_header(&h)?;
                Ok(
                    matches!(g.map_type, MapType::Ringbuf | MapType::UserRingbuf)
                        .then(|| RingBuf::mirror(&g, &h.layout)),
                )
            },
            hlen,
        )?;
        // SAFETY: the mapping is at least a header long (checked by open).
        let header = unsafe { &*(shm.base() as *const MapHeader) };
        header.check(shm.len())?;
        let g = Geometry::from_header(header)?;
        let spec = header.spec()?;
        let words = header.layout;
        // SAFETY: the creator laid the object out with these words.
        let family = unsafe { attach(shm.base(), &g, &words) };
        Ok(Map {
            family,
            id: header.id,
            shm,
            spec,
            geo: g,
            object: Some(object),
            view: KernelView::new(),
            owned_fields: std::sync::OnceLock::new(),
            perf_rings: std::sync::OnceLock::new(),
        })
    }

    // ---- identity ------------------------------------------------------------

    /// The spec the map was created with (max_entries as adjusted at
    /// creation; `frozen` as at open time — see [`Map::is_frozen`]).
    pub fn spec(&self) -> &MapSpec {
        &self.spec
    }
    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    pub fn map_type(&self) -> MapType {
        self.spec.map_type
    }
    pub fn key_size(&self) -> u32 {
        self.geo.key_size
    }
    pub fn value_size(&self) -> u32 {
        self.geo.value_size
    }
    pub fn max_entries(&self) -> u32 {
        self.geo.max_entries
    }
    pub fn ncpus(&self) -> u32 {
        self.geo.ncpus
    }
    /// Offset of the value's `bpf_spin_lock`, if any.
    pub fn spin_lock_off(&self) -> Option<u32> {
        self.geo.lock
    }
    /// The shm object name (`/bpfjet.<instance>.<id>`), None for private maps.
    pub fn object_name(&self) -> Option<&str> {
        self.object.as_ref().and_then(|c| c.to_str().ok())
    }

    /// The program-visible map pointer: the address of the map's kernel
    /// view inside the `Arc`'s allocation (typed `*const Map` because it is
    /// only ever turned back into the map by [`Map::from_handle`]; it does
    /// not point at the start of a `Map`).
    pub fn handle(this: &Arc<Map>) -> *const Map {
        // SAFETY: in bounds of the live allocation `this` owns.
        unsafe { Arc::as_ptr(this).byte_add(std::mem::offset_of!(Map, view)) }
    }

    /// # Safety
    /// `h` must come from [`Map::handle`] of an `Arc` that is still alive.
    pub unsafe fn from_handle<'a>(h: *const Map) -> &'a Map {
        &*h.byte_sub(std::mem::offset_of!(Map, view))
    }

    /// Lay out the block behind the handle (the kernel struct a program may
    /// read through its map pointer) once; `fill` gets it zeroed. Call
    /// before handing the handle to a program; later calls do nothing.
    pub fn init_kernel_view(&self, fill: impl FnOnce(&mut [u8; KERNEL_VIEW_BYTES])) {
        self.view.init(fill);
    }

    /// The block behind the handle as programs read it.
    pub fn kernel_view(&self) -> Vec<u8> {
        self.view.bytes()
    }

    fn header(&self) -> &MapHeader {
        // SAFETY: the header is at the start of the mapping.
        unsafe { &*(self.shm.base() as *const MapHeader) }
    }

    /// Freeze (`BPF_MAP_FREEZE`): control-plane writes fail with EPERM from
    /// now on, in every process.
    pub fn freeze(&self) {
        self.header().frozen.store(1, Ordering::Release);
    }

    pub fn is_frozen(&self) -> bool {
        self.header().frozen.load(Ordering::Acquire) != 0
    }

    // ---- data plane ------------------------------------------------------------

    /// `bpf_map_lookup_elem`: pointer to the value (this CPU's for per-CPU
    /// maps), or None. For fd-holding maps the value is the stored id /
    /// `bpf_devmap_val` / `bpf_cpumap_val` for the runtime to resolve.
    /// The pointer stays valid while the element exists and never faults
    /// afterwards (element memory is recycled, not unmapped).
    #[inline]
    pub fn lookup(&self, key: &[u8], cpu: u32) -> Option<*mut u8> {
        match &self.family {
            Family::Array(a) => a.lookup(key, cpu),
            Family::Hash(h) => h.lookup(key, cpu),
            Family::Lpm(t) => t.lookup(key),
            Family::FdArray(f) => f.lookup(key),
            _ => None,
        }
    }

    /// The key of the element whose value starts at `value` (a pointer a
    /// program got from a lookup): an array's index, a hash map's key bytes.
    /// `None` for other addresses and for per-CPU and other map types. A
    /// timer's callback gets this key, as in the kernel.
    pub fn element_key(&self, value: *const u8) -> Option<Vec<u8>> {
        match &self.family {
            Family::Array(a) => a.index_of_value(value).map(|i| i.to_ne_bytes().to_vec()),
            Family::Hash(_) => {
                let key = self.element_key_ptr(value)?;
                let n = self.spec.key_size as usize;
                // SAFETY: the key of an element inside the mapping, `n` bytes.
                Some(unsafe { std::slice::from_raw_parts(key, n) }.to_vec())
            }
            _ => None,
        }
    }

    /// Where a hash map element's key is, given its value's address (a
    /// non-per-CPU hash map's element holds both).
    pub fn element_key_ptr(&self, value: *const u8) -> Option<*const u8> {
        match &self.family {
            Family::Hash(h) => h.key_of_value(value),
            _ => None,
        }
    }

    /// A hash-family map's elements in place (`bpf_for_each_map_elem`):
    /// `f(key, value)` until it returns false, `value` being `cpu`'s copy
    /// of a per-CPU map's (see `HashTable::visit_in_place`). Returns false,
    /// calling nothing, for a map of another family.
    pub fn visit_hash_elems(&self, cpu: u32, f: impl FnMut(*const u8, *mut u8) -> bool) -> bool {
        match &self.family {
            Family::Hash(h) => {
                h.visit_in_place(cpu, f);
                true
            }
            _ => false,
        }
    }

    /// The program id in slot `index` of a PROG_ARRAY: None when the map is
    /// not a PROG_ARRAY, `index` is out of range, or the slot is empty.
    /// `bpf_tail_call`'s read of the slot, without [`Map::lookup`]'s key
    /// decoding and dispatch.
    #[inline]
    pub fn prog_array_slot(&self, index: u32) -> Option<u32> {
        match &self.family {
            Family::FdArray(f) if self.spec.map_type == MapType::ProgArray => f.slot_id(index),
            _ => None,
        }
    }

    /// The cgroup id in slot `index` of a CGROUP_ARRAY (None: not one,
    /// out of range, or empty).
    #[inline]
    pub fn cgroup_array_slot(&self, index: u32) -> Option<u32> {
        match &self.family {
            Family::FdArray(f) if self.spec.map_type == MapType::CgroupArray => f.slot_id(index),
            _ => None,
        }
    }

    /// Puts the cgroup whose id (its cgroup2 directory's inode number, the
    /// kernel's `cgroup_id()`) is `cgroup_id` into slot `index` of a
    /// CGROUP_ARRAY: what the kernel stores for a control plane's update
    /// with a cgroup fd, resolved by the caller (an update's value is an fd
    /// in the caller's process, which the map cannot open).
    pub fn set_cgroup(&self, index: u32, cgroup_id: u32) -> Result<(), MapError> {
        match &self.family {
            Family::FdArray(f) if self.spec.map_type == MapType::CgroupArray => {
                f.set_slot(index, cgroup_id)
            }
            _ => Err(MapError::NotSupported),
        }
    }

    /// [`Map::lookup`] for a key whose size `K` is known at compile time
    /// (the JIT's per-key-size lookup natives): hash maps then hash and
    /// compare the key with fixed-size loads.
    #[inline(always)]
    pub fn lookup_fixed<const K: usize>(&self, key: &[u8; K], cpu: u32) -> Option<*mut u8> {
        match &self.family {
            Family::Hash(h) => h.lookup_fixed(key, cpu),
            _ => self.lookup(key, cpu),
        }
    }

    /// `bpf_map_update_elem` from a program on `cpu`: per-CPU maps update
    /// that CPU's value only (a new element's other CPUs read zero).
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64, cpu: u32) -> Result<(), MapError> {
        self.update_slots(key, Slots::One(cpu, value), flags, cpu)
    }

    /// Declare byte ranges `(offset, size)` of the value that hold pointers
    /// owned by the runtime: `__kptr` fields, `bpf_list_head` /
    /// `bpf_rb_root` graph roots and `bpf_timer`s. Copies to user space
    /// read them as zeros. As the kernel's `copy_map_value`, an
    /// update never copies them from the caller's value: a program (or a
    /// control plane in this process) cannot forge an object pointer with
    /// `bpf_map_update_elem`. They read as empty after the update, as in
    /// the kernel, which frees what they held (`bpf_obj_free_fields`); what
    /// they held stays allocated in the program's bounded object arena.
    /// Set once, before any program runs; later calls are ignored.
    pub fn set_owned_fields(&self, ranges: Vec<(u32, u32)>) {
        let _ = self.owned_fields.set(ranges);
    }

    fn update_slots(
        &self,
        key: &[u8],
        slots: Slots<'_>,
        flags: u64,
        cpu: u32,
    ) -> Result<(), MapError> {
        match self.owned_fields.get() {
            Some(owned) if !owned.is_empty() => {
                let size = self.geo.value_size as usize;
                let clear = |v: &[u8]| {
                    let mut v = v.to_vec();
                    for &(off, len) in owned {
                        let (off, len) = (off as usize, len as usize);
                        if off + len <= v.len() && v.len() == size {
                            v[off..off + len].fill(0);
                        }
                    }
                    v
                };
                match slots {
                    Slots::One(c, v) => {
                        self.update_family(key, Slots::One(c, &clear(v)), flags, cpu)
                    }
                    Slots::All(v) => self.update_family(key, Slots::All(&clear(v)), flags, cpu),
                    Slots::Each(vs) => {
                        let cleared: Vec<Vec<u8>> = vs.iter().map(|v| clear(v)).collect();
                        let refs: Vec<&[u8]> = cleared.iter().map(Vec::as_slice).collect();
                        self.update_family(key, Slots::Each(&refs), flags, cpu)
                    }
                }
            }
            _ => self.update_family(key, slots, flags, cpu),
        }
    }

    fn update_family(
        &self,
        key: &[u8],
        slots: Slots<'_>,
        flags: u64,
        cpu: u32,
    ) -> Result<(), MapError> {
        match &self.family {
            Family::Array(a) => a.update(key, slots, flags),
            Family::Hash(h) => {
                if h.kind() == MapType::DevmapHash {
                    if flags > update::EXIST {
                        return Err(MapError::Invalid("update flags"));
                    }
                    let v = slots.single(self.geo.value_size as usize)?;
                    if v[..4] == [0; 4] {
                        return Err(MapError::Invalid("devmap entry needs an ifindex"));
                    }
                }
                let special = self.owned_fields.get().map_or(&[][..], Vec::as_slice);
                h.update(key, &[], slots, flags, cpu, special).map(|_| ())
            }
            Family::Lpm(t) => t.update(key, slots.single(self.geo.value_size as usize)?, flags),
            Family::FdArray(f) => f.update(key, slots.single(self.geo.value_size as usize)?, flags),
            Family::QueueStack(_) | Family::Bloom(_) => {
                if !key.is_empty() {
                    return Err(MapError::Invalid("queue/stack/bloom maps have no key"));
                }
                self.push(slots.single(self.geo.value_size as usize)?, flags)
            }
            Family::Ringbuf(_) => Err(MapError::KernelNotSupported),
            Family::Perf(_) => Err(MapError::NotSupported),
        }
    }

    /// `bpf_map_delete_elem`.
    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        match &self.family {
            Family::Array(_) | Family::QueueStack(_) => Err(MapError::Invalid("cannot delete")),
            Family::Hash(h) => h.delete(key),
            Family::Lpm(t) => t.delete(key),
            Family::FdArray(f) => f.delete(key),
            Family::Bloom(_) | Family::Perf(_) => Err(MapError::NotSupported),
            Family::Ringbuf(_) => Err(MapError::KernelNotSupported),
        }
    }

    /// `bpf_map_push_elem` (queue, stack, bloom filter).
    pub fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        match &self.family {
            Family::QueueStack(q) => q.push(value, flags),
            Family::Bloom(b) => b.push(value, flags),
            _ => Err(MapError::NotSupported),
        }
    }

    /// `bpf_map_pop_elem`: copy the next element into `out` and remove it.
    pub fn pop(&self, out: &mut [u8]) -> Result<(), MapError> {
        match &self.family {
            Family::QueueStack(q) => q.take(out, false),
            _ => Err(MapError::NotSupported),
        }
    }

    /// `bpf_map_peek_elem`. For a bloom filter `value` is the input to test:
    /// Ok = maybe present, ENOENT = definitely absent.
    pub fn peek(&self, value: &mut [u8]) -> Result<(), MapError> {
        match &self.family {
            Family::QueueStack(q) => q.take(value, true),
            Family::Bloom(b) => b.peek(value),
            _ => Err(MapError::NotSupported),
        }
    }

    fn ring(&self) -> Option<&RingBuf> {
        match &self.family {
            Family::Ringbuf(r) => Some(r),
            _ => None,
        }
    }

    /// `bpf_ringbuf_reserve`: None is the helper's NULL.
    pub fn ringbuf_reserve(&self, size: u64, flags: u64) -> Option<*mut u8> {
        self.ring()?.reserve(size, flags)
    }

    /// `bpf_ringbuf_submit(sample, flags)`; `flags` are the kernel's
    /// wake-up flags (`BPF_RB_NO_WAKEUP`, `BPF_RB_FORCE_WAKEUP`).
    ///
    /// # Safety
    /// `sample` must come from `ringbuf_reserve` and not be committed yet.
    pub unsafe fn ringbuf_submit(sample: *mut u8, flags: u64) {
        crate::ringbuf::commit(sample, flags, false)
    }

    /// `bpf_ringbuf_discard(sample, flags)`.
    ///
    /// # Safety
    /// As for [`Map::ringbuf_submit`].
    pub unsafe fn ringbuf_discard(sample: *mut u8, flags: u64) {
        crate::ringbuf::commit(sample, flags, true)
    }

    /// `bpf_ringbuf_output`: EAGAIN when the ring is full.
    pub fn ringbuf_output(&self, data: &[u8], flags: u64) -> Result<(), MapError> {
        self.ring()
            .ok_or(MapError::Invalid("not a ring buffer"))?
            .output(data, flags)
    }

    /// `bpf_ringbuf_query`; 0 for unknown flags or a non-ringbuf map.
    pub fn ringbuf_query(&self, flags: u64) -> u64 {
        self.ring().map_or(0, |r| r.query(flags))
    }

    /// A ring buffer's produced / consumed / dropped / discarded counts.
    pub fn ringbuf_stats(&self) -> Option<RingbufStats> {
        self.ring().map(|r| r.stats())
    }

    /// The records a consumer would read now, without consuming them.
    pub fn ringbuf_snapshot(&self) -> Option<RingbufSnapshot> {
        self.ring().map(|r| r.snapshot())
    }

    /// Switch a ring buffer between drop mode (None, the kernel's) and
    /// backpressure mode, for every process using it.
    pub fn set_ringbuf_backpressure(&self, bp: Option<Backpressure>) -> Result<(), MapError> {
        self.ring()
            .ok_or(MapError::Invalid("not a ring buffer"))?
            .set_backpressure(bp);
        Ok(())
    }

    /// A ring buffer's backpressure setting (None: drop mode or not a ring).
    pub fn ringbuf_backpressure(&self) -> Option<Backpressure> {
        self.ring().and_then(|r| r.backpressure())
    }

    /// The pieces of this map's shared-memory object that a kernel
    /// `mmap(len, offset)` of a ring buffer fd shows (consumer page at 0,
    /// producer page, data twice), with the writability rules of its type
    /// (RINGBUF or USER_RINGBUF).
    pub fn ringbuf_mmap_segments(
        &self,
        offset: u64,
        len: usize,
        writable: bool,
    ) -> Result<Vec<MmapSegment>, MapError> {
        self.ring()
            .ok_or(MapError::Invalid("not a ring buffer"))?
            .mmap_segments(
                offset,
                len,
                writable,
                self.map_type() == MapType::UserRingbuf,
            )
    }

    /// `bpf_perf_event_output` on `cpu`; `parts` are concatenated.
    pub fn perf_event_output(&self, flags: u64, parts: &[&[u8]], cpu: u32) -> Result<(), MapError> {
        if let Some(rings) = self.perf_rings.get() {
            if flags & !crate::BPF_F_INDEX_MASK != 0 {
                return Err(MapError::Invalid("perf event output flags"));
            }
            let index = match flags & crate::BPF_F_INDEX_MASK {
                crate::BPF_F_CURRENT_CPU => cpu,
                i => i as u32,
            };
            if index >= self.geo.max_entries {
                return Err(MapError::TooBig);
            }
            // An element without an event: the kernel's -ENOENT.
            let ring = rings
                .get(index as usize)
                .and_then(Option::as_ref)
                .ok_or(MapError::NotFound)?;
            return if ring.output(parts, cpu) {
                Ok(())
            } else {
                Err(MapError::NoSpace)
            };
        }
        match &self.family {
            Family::Perf(p) => p.output(flags, parts, cpu),
            _ => Err(MapError::Invalid("not a perf event array")),
        }
    }

    /// Route this PERF_EVENT_ARRAY's output to a control plane's perf
    /// events: `rings[i]` is element i's (None: no event, output fails
    /// with `-ENOENT` as in the kernel). Once per map object; later calls
    /// fail.
    pub fn bind_perf_rings(&self, rings: Vec<Option<crate::PerfRing>>) -> Result<(), MapError> {
        if self.perf().is_none() {
            return Err(MapError::Invalid("not a perf event array"));
        }
        self.perf_rings
            .set(rings)
            .map_err(|_| MapError::Invalid("perf rings already bound"))
    }

    /// Array value storage for inlined lookups; None for other types.
    pub fn array_layout(&self) -> Option<ArrayLayout> {
        match &self.family {
            Family::Array(a) => Some(ArrayLayout {
                values: a.values_ptr(),
                stride: a.stride(),
                cpu_stride: a.cpu_stride(),
                max_entries: self.geo.max_entries,
                value_size: self.geo.value_size,
            }),
            _ => None,
        }
    }

    /// Where a `BPF_F_MMAPABLE` array's values start in its shared-memory
    /// object: mapping the object from there gives the kernel's mmap
    /// layout (values at an 8-byte-aligned stride). None for other maps,
    /// or when that offset is not page aligned.
    pub fn mmap_offset(&self) -> Option<u64> {
        if self.spec.map_type != MapType::Array || self.geo.flags & mf::MMAPABLE == 0 {
            return None;
        }
        let layout = self.array_layout()?;
        let off = layout.values as usize - self.shm.base() as usize;
        off.is_multiple_of(page_size()).then_some(off as u64)
    }

    // ---- control plane ---------------------------------------------------------

    /// What user space may do with the map (`map_get_sys_perms`): write
    /// unless frozen or created `BPF_F_RDONLY`.
    pub fn check_writable(&self) -> Result<(), MapError> {
        if self.is_frozen() {
            return Err(MapError::Permission("map is frozen"));
        }
        if self.geo.flags & mf::RDONLY != 0 {
            return Err(MapError::Permission("map is read-only for user space"));
        }
        Ok(())
    }

    /// Read unless created `BPF_F_WRONLY`.
    pub fn check_readable(&self) -> Result<(), MapError> {
        if self.geo.flags & mf::WRONLY != 0 {
            return Err(MapError::Permission("map is write-only for user space"));
        }
        Ok(())
    }

    /// `BPF_MAP_LOOKUP_ELEM`: a copy of the value. Per-CPU maps return every
    /// CPU's value, each padded to 8 bytes, like the syscall; queues and
    /// stacks peek (empty key).
    pub fn lookup_copy(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        self.lookup_copy_flags(key, 0)
    }

    /// `BPF_MAP_LOOKUP_ELEM` with flags (`BPF_F_LOCK`).
    pub fn lookup_copy_flags(&self, key: &[u8], flags: u64) -> Result<Vec<u8>, MapError> {
        let mut out = self.lookup_copy_unmasked(key, flags)?;
        let stride = if self.spec.map_type.is_per_cpu() {
            self.geo.value_stride()
        } else {
            self.geo.value_size as usize
        };
        if stride > 0 {
            for v in out.chunks_mut(stride) {
                self.mask_owned(v);
            }
        }
        Ok(out)
    }

    /// Zero the runtime-owned fields (kptrs, graph roots, timers) of a
    /// value copied out to user space, as the kernel's
    /// `check_and_init_map_value` does: their bytes are the runtime's
    /// pointers and handles, not data.
    fn mask_owned(&self, v: &mut [u8]) {
        let Some(owned) = self.owned_fields.get() else {
            return;
        };
        for &(off, len) in owned {
            let (off, len) = (off as usize, len as usize);
            if off + len <= v.len() {
                v[off..off + len].fill(0);
            }
        }
    }

    fn lookup_copy_unmasked(&self, key: &[u8], flags: u64) -> Result<Vec<u8>, MapError> {
        self.check_readable()?;
        match &self.family {
            Family::Array(a) if self.spec.map_type == MapType::PercpuArray => {
                if flags != 0 {
                    return Err(MapError::Invalid("lookup flags"));
                }
                let stride = self.geo.value_stride();
                let mut out = vec![0; stride * self.geo.ncpus as usize];
                for (i, v) in a
                    .lookup_percpu(key, self.geo.value_size as usize)?
                    .iter()
                    .enumerate()
                {
                    out[i * stride..i * stride + v.len()].copy_from_slice(v);
                }
                Ok(out)
            }
            Family::Array(a) => a.lookup_copy(key, flags),
            Family::Hash(h) => h.lookup_copy(key, flags),
            Family::Lpm(t) => t.lookup_copy(key),
            Family::FdArray(f) => f.lookup_copy(key),
            Family::QueueStack(q) => {
                let mut out = vec![0; self.geo.value_size as usize];
                q.take(&mut out, true)?;
                Ok(out)
            }
            Family::Bloom(_) => Err(MapError::Invalid("bloom filter: use peek with the value")),
            Family::Ringbuf(_) => Err(MapError::KernelNotSupported),
            Family::Perf(_) => Err(MapError::NotSupported),
        }
    }

    /// Every CPU's value (one value for other maps), each `value_size` bytes.
    pub fn lookup_percpu(&self, key: &[u8]) -> Result<Vec<Vec<u8>>, MapError> {
        self.lookup_percpu_len(key, self.geo.value_size as usize)
    }

    /// [`Map::lookup_percpu`] as `BPF_MAP_LOOKUP_ELEM` returns a per-CPU
    /// map's values: one 8-byte slot per CPU, padding included (what user
    /// space last wrote there, as the kernel's `copy_map_value_long`).
    pub fn lookup_percpu_slots(&self, key: &[u8]) -> Result<Vec<Vec<u8>>, MapError> {
        self.lookup_percpu_len(key, (self.geo.value_size as usize).next_multiple_of(8))
    }

    fn lookup_percpu_len(&self, key: &[u8], len: usize) -> Result<Vec<Vec<u8>>, MapError> {
        self.check_readable()?;
        match &self.family {
            Family::Array(a) => a.lookup_percpu(key, len),
            Family::Hash(h) => h.lookup_percpu(key, len),
            _ => Ok(vec![self.lookup_copy(key)?]),
        }
    }

    /// `BPF_MAP_UPDATE_ELEM` from user space with one value; for a per-CPU
    /// map it sets every CPU's value (STATE.json `value`).
    pub fn update_elem(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_writable()?;
        self.update_slots(key, Slots::All(value), flags, 0)
    }

    /// `BPF_MAP_UPDATE_ELEM` on a per-CPU map: one value per CPU.
    pub fn update_percpu(&self, key: &[u8], values: &[&[u8]], flags: u64) -> Result<(), MapError> {
        self.check_writable()?;
        if !self.spec.map_type.is_per_cpu() {
            return match values {
                [v] => self.update_slots(key, Slots::All(v), flags, 0),
                _ => Err(MapError::Invalid("one value expected")),
            };
        }
        self.update_slots(key, Slots::Each(values), flags, 0)
    }

    /// `BPF_MAP_DELETE_ELEM` from user space.
    pub fn delete_elem(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_writable()?;
        self.delete(key)
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` on a queue or stack.
    pub fn pop_elem(&self) -> Result<Vec<u8>, MapError> {
        self.check_writable()?;
        let mut out = vec![0; self.geo.value_size as usize];
        self.pop(&mut out)?;
        Ok(out)
    }

    /// `BPF_MAP_GET_NEXT_KEY`: None (or a key not in the map) gives the first key.
    pub fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        match &self.family {
            Family::Array(a) => a.get_next_key(key),
            Family::FdArray(f) => f.get_next_key(key),
            Family::Hash(h) => h.get_next_key(key),
            Family::Lpm(t) => t.get_next_key(key),
            Family::Perf(p) => crate::array::next_index(key, p.entries()),
            Family::QueueStack(_) => Err(MapError::Invalid("no keys")),
            Family::Bloom(_) => Err(MapError::NotSupported),
            Family::Ringbuf(_) => Err(MapError::KernelNotSupported),
        }
    }

    /// Snapshot of every entry in `get_next_key` order (queues and stacks:
    /// empty keys, in pop order; fd arrays: occupied slots only).
    pub fn entries(&self) -> Result<Vec<MapEntry>, MapError> {
        let mut entries = self.entries_raw()?;
        for e in &mut entries {
            for v in &mut e.values {
                self.mask_owned(v);
            }
        }
        Ok(entries)
    }

    /// [`Map::entries`] with the runtime-owned fields as they are (their
    /// pointers and handles): for code inspecting the runtime's own
    /// structures in this process.
    pub fn entries_raw(&self) -> Result<Vec<MapEntry>, MapError> {
        self.check_readable()?;
        let one = |key: Vec<u8>, v: Vec<u8>| MapEntry {
            key,
            values: vec![v],
        };
        Ok(match &self.family {
            Family::Array(a) => (0..self.geo.max_entries)
                .filter_map(|i| {
                    let key = i.to_ne_bytes().to_vec();
                    a.lookup_percpu(&key, self.geo.value_size as usize)
                        .ok()
                        .map(|values| MapEntry { key, values })
                })
                .collect(),
            Family::FdArray(f) => (0..self.geo.max_entries)
                .filter_map(|i| {
                    let key = i.to_ne_bytes().to_vec();
                    f.lookup_copy(&key).ok().map(|v| one(key, v))
                })
                .collect(),
            Family::Hash(h) => h
                .elements()
                .into_iter()
                .filter_map(|e| {
                    let key = h.elem_key_aux(e).0;
                    h.lookup_percpu(&key, self.geo.value_size as usize)
                        .ok()
                        .map(|values| MapEntry { key, values })
                })
                .collect(),
            Family::Lpm(t) => t.entries().into_iter().map(|(k, v)| one(k, v)).collect(),
            Family::QueueStack(q) => q
                .snapshot()
                .into_iter()
                .map(|v| one(Vec::new(), v))
                .collect(),
            Family::Bloom(_) | Family::Ringbuf(_) | Family::Perf(_) => Vec::new(),
        })
    }

    /// Iterate a snapshot of the entries.
    pub fn iter(&self) -> impl Iterator<Item = MapEntry> {
        self.entries().unwrap_or_default().into_iter()
    }

    /// Number of live elements for hash-like maps (None for others).
    pub fn element_count(&self) -> Option<u32> {
        match &self.family {
            Family::Hash(h) => Some(h.len()),
            Family::Lpm(t) => Some(t.entries().len() as u32),
            _ => None,
        }
    }

    pub(crate) fn ringbuf(&self) -> Option<&RingBuf> {
        self.ring()
    }

    pub(crate) fn perf(&self) -> Option<&PerfEventArray> {
        match &self.family {
            Family::Perf(p) => Some(p),
            _ => None,
        }
    }
}

/// Reads a PERF_EVENT_ARRAY map: samples of every ring, and losses.
pub struct PerfEventConsumer {
    map: Arc<Map>,
    seen_lost: Vec<u64>,
    consumed: u64,
}

impl PerfEventConsumer {
    pub fn new(map: Arc<Map>) -> Result<Self, MapError> {
        let n = map
            .perf()
            .ok_or(MapError::Invalid("not a perf event array"))?
            .entries();
        Ok(PerfEventConsumer {
            map,
            seen_lost: vec![0; n as usize],
            consumed: 0,
        })
    }

    /// Hand every available event to `f`; returns the number of samples.
    pub fn poll(&mut self, f: impl FnMut(PerfEvent<'_>)) -> usize {
        let n = match self.map.perf() {
            Some(p) => p.consume(&mut self.seen_lost, f),
            None => 0,
        };
        self.consumed += n as u64;
        n
    }

    /// Samples written to the map, read by this consumer, and lost (the
    /// losses this consumer has been told of: those before its last poll).
    pub fn stats(&self) -> PerfbufStats {
        PerfbufStats {
            produced: self.map.perf().map_or(0, |p| p.produced()),
            consumed: self.consumed,
            dropped: self.seen_lost.iter().sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::update;

    fn map(t: MapType, k: u32, v: u32, n: u32) -> Map {
        let spec = MapSpec::new("m", t, k, v, n);
        Map::create_anonymous(&spec, &MapOptions::with_cpus(2)).expect("create")
    }

    #[test]
    fn prog_array_slot_reads_ids_of_prog_arrays_only() {
        let m = map(MapType::ProgArray, 4, 4, 4);
        assert_eq!(m.prog_array_slot(1), None, "empty slot");
        m.update_elem(&1u32.to_ne_bytes(), &7u32.to_ne_bytes(), update::ANY)
            .unwrap();
        assert_eq!(m.prog_array_slot(1), Some(7));
        assert_eq!(m.prog_array_slot(4), None, "out of range");
        m.delete_elem(&1u32.to_ne_bytes()).unwrap();
        assert_eq!(m.prog_array_slot(1), None, "deleted");
        let devmap = map(MapType::Devmap, 4, 4, 4);
        devmap
            .update_elem(&0u32.to_ne_bytes(), &7u32.to_ne_bytes(), update::ANY)
            .unwrap();
        assert_eq!(devmap.prog_array_slot(0), None, "not a PROG_ARRAY");
        let array = map(MapType::Array, 4, 4, 4);
        assert_eq!(array.prog_array_slot(0), None, "not a PROG_ARRAY");
    }

    #[test]
    fn lru_replace_keeps_count_and_recency() {
        let m = map(MapType::LruHash, 4, 8, 4);
        let k = |i: u32| i.to_ne_bytes();
        for i in 0..4 {
            m.update(&k(i), &[i as u8; 8], update::ANY, 0).unwrap();
        }
        // Replacing key 0 over and over (the same-list fast path) changes
        // neither the count nor anything but 0's value, and makes 0 the
        // most recently used.
        for round in 0..100u8 {
            m.update(&k(0), &[round; 8], update::ANY, 0).unwrap();
            m.update(&k(0), &[round; 8], update::EXIST, 0).unwrap();
        }
        assert_eq!(m.element_count(), Some(4));
        assert_eq!(m.lookup_copy(&k(0)).unwrap(), [99; 8]);
        assert_eq!(m.lookup_copy(&k(2)).unwrap(), [2; 8]);
        // NOEXIST still refuses an existing key.
        assert!(m.update(&k(0), &[0; 8], update::NOEXIST, 0).is_err());
        // A new key evicts the least recently used (1), not 0.
        m.update(&k(4), &[4; 8], update::ANY, 0).unwrap();
        assert!(m.lookup_copy(&k(1)).is_err(), "1 was least recently used");
        assert_eq!(m.lookup_copy(&k(0)).unwrap(), [99; 8]);
        assert_eq!(m.element_count(), Some(4));
    }
}
