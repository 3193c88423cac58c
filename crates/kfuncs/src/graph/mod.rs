//! The run-time side of the kernel's object and graph kfuncs: objects of
//! program-local structs (`bpf_obj_new`) from a bounded arena, intrusive
//! red-black trees ([`rbtree`]) and lists ([`list`]) through their node
//! fields, `bpf_refcount`, and freeing an object's own special fields when
//! it dies (the kernel's `bpf_obj_free_fields`).
//!
//! An object is `HEADER` bytes of bookkeeping (its arena, its type)
//! followed by the struct itself, zeroed; the program gets the address of
//! the struct and reads its fields at the offsets its BTF says.

pub mod list;
pub mod rbtree;

use bpfjet_obj::{Btf, FieldKind, GraphKind, LocalType};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Bookkeeping before each object: `[arena][type]`. The arena word is a
/// strong reference (the object keeps its arena alive); the type word
/// points into the arena's type cache, which never drops an entry, so it
/// lives as long as the arena.
const HEADER: usize = 16;

/// Objects alive in the process, every arena together (tests use it).
static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// Objects from `bpf_obj_new` alive in this process now.
pub fn live_objects() -> usize {
    LIVE_OBJECTS.load(Ordering::Relaxed)
}

/// Default budget of one program's arena (bytes of objects alive at once).
pub const DEFAULT_ARENA_BYTES: usize = 64 << 20;

/// The objects of one program: a byte budget (allocation fails, as
/// `bpf_obj_new` under memory pressure, once it is spent) and the
/// program's struct types, resolved from its BTF on first use.
pub struct ObjArena {
    btf: Option<Btf>,
    limit: usize,
    used: AtomicUsize,
    live: AtomicUsize,
    types: RwLock<HashMap<u32, Arc<LocalType>>>,
    /// The first types looked up, read without a lock: a program has
    /// few object types, and `bpf_obj_new` runs per packet.
    recent: [OnceLock<(u32, Arc<LocalType>)>; RECENT_TYPES],
}

/// Types [`ObjArena`] finds without taking its lock.
const RECENT_TYPES: usize = 4;

impl ObjArena {
    pub fn new(btf: Option<Btf>, limit: usize) -> Arc<ObjArena> {
        Arc::new(ObjArena {
            btf,
            limit,
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            types: RwLock::new(HashMap::new()),
            recent: Default::default(),
        })
    }

    /// Objects alive now.
    pub fn live_objects(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Bytes of objects alive now (headers included).
    pub fn used_bytes(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Struct `type_id`. Types are never dropped while the arena lives
    /// (the map keeps the first one resolved for each id), so the
    /// reference is good for the arena's lifetime.
    fn local_type(&self, type_id: u32) -> Option<&LocalType> {
        for slot in &self.recent {
            match slot.get() {
                Some((id, t)) if *id == type_id => return Some(t),
                Some(_) => continue,
                None => break,
            }
        }
        let t = self.local_type_slow(type_id)?;
        // A race may fill the slot with another type: this one stays slow.
        if let Some(slot) = self.recent.iter().find(|s| s.get().is_none()) {
            let _ = slot.set((type_id, t.clone()));
        }
        // SAFETY: `types` holds this Arc until the arena drops.
        Some(unsafe { &*Arc::as_ptr(&t) })
    }

    fn local_type_slow(&self, type_id: u32) -> Option<Arc<LocalType>> {
        if let Some(t) = self.types.read().ok()?.get(&type_id) {
            return Some(t.clone());
        }
        let t = Arc::new(LocalType::of(self.btf.as_ref()?, type_id).ok()?);
        // The first resolved stays: objects point at it.
        let mut types = self.types.write().ok()?;
        Some(types.entry(type_id).or_insert(t).clone())
    }

    /// `bpf_obj_new`: a zeroed object of struct `type_id` (refcount 1), or
    /// 0 when the budget is spent or the type is unknown.
    pub fn obj_new(self: &Arc<Self>, type_id: u32) -> u64 {
        let Some(ty) = self.local_type(type_id) else {
            return 0;
        };
        let bytes = HEADER + ty.size.max(1) as usize;
        if self.used.fetch_add(bytes, Ordering::Relaxed) + bytes > self.limit {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return 0;
        }
        let Ok(layout) = Layout::from_size_align(bytes, 8) else {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return 0;
        };
        // SAFETY: a non-zero size.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return 0;
        }
        self.live.fetch_add(1, Ordering::Relaxed);
        LIVE_OBJECTS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the header's two words are ours; each object keeps its
        // arena (released in `free`), which keeps its type.
        unsafe {
            *(base as *mut u64) = Arc::into_raw(self.clone()) as u64;
            *(base as *mut u64).add(1) = ty as *const LocalType as u64;
        }
        let obj = base as u64 + HEADER as u64;
        if let Some(off) = ty.refcount_off() {
            // SAFETY: inside the object.
            unsafe { refcount(obj, off).store(1, Ordering::Relaxed) };
        }
        obj
    }
}

/// # Safety
/// `obj` is an object of a type with its `bpf_refcount` at `off`.
unsafe fn refcount<'a>(obj: u64, off: u32) -> &'a AtomicU32 {
    unsafe { AtomicU32::from_ptr((obj + u64::from(off)) as *mut u32) }
}

/// # Safety
/// `obj` came from [`ObjArena::obj_new`] and is alive.
unsafe fn type_of<'a>(obj: u64) -> &'a LocalType {
    unsafe { &*(*((obj - HEADER as u64 + 8) as *const u64) as *const LocalType) }
}

/// `bpf_refcount_acquire`: another owning reference to a refcounted
/// object; 0 if its count already dropped to zero.
///
/// # Safety
/// `obj` is a live object whose type has a `bpf_refcount`.
pub unsafe fn refcount_acquire(obj: u64) -> u64 {
    unsafe {
        let Some(off) = type_of(obj).refcount_off() else {
            return 0;
        };
        let rc = refcount(obj, off);
        let mut cur = rc.load(Ordering::Relaxed);
        while cur != 0 {
            match rc.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return obj,
                Err(now) => cur = now,
            }
        }
        0
    }
}

/// `bpf_obj_drop`: one owning reference ends; the object is freed (with
/// whatever its own graph roots and kptrs hold) when it was the last.
///
/// # Safety
/// `obj` is a live object the caller owns a reference to.
pub unsafe fn obj_drop(obj: u64) {
    unsafe {
        if let Some(off) = type_of(obj).refcount_off() {
            if refcount(obj, off).fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
        }
        free(obj);
    }
}

/// The object a graph node field at `node` belongs to.
pub fn container_of(node: u64, node_off: u32) -> u64 {
    node - u64::from(node_off)
}

/// Free the objects a value's special fields hold (graph roots drained,
/// kptrs taken), as the kernel's `bpf_obj_free_fields` when a map value
/// or an object dies.
///
/// # Safety
/// `value` is valid for the fields' offsets; nothing else uses them now.
pub unsafe fn free_fields(value: u64, fields: &[bpfjet_obj::SpecialField]) {
    unsafe {
        for f in fields {
            let at = value + u64::from(f.off);
            match f.kind {
                FieldKind::Kptr { .. } => {
                    let old = AtomicU64::from_ptr(at as *mut u64).swap(0, Ordering::AcqRel);
                    // A library object (eNetSTL's) has its own destructor.
                    if old != 0 && !crate::enetstl_ptr::release_module_object(old) {
                        obj_drop(old);
                    }
                }
                FieldKind::Root {
                    graph, node_off, ..
                } => {
                    let nodes = match graph {
                        GraphKind::List => list::drain(at),
                        GraphKind::Rbtree => rbtree::drain(at),
                    };
                    for n in nodes {
                        obj_drop(container_of(n, node_off));
                    }
                }
                _ => {}
            }
        }
    }
}

unsafe fn free(obj: u64) {
    unsafe {
        let ty = type_of(obj);
        free_fields(obj, &ty.fields);
        let base = (obj - HEADER as u64) as *mut u8;
        let bytes = HEADER + ty.size.max(1) as usize;
        let arena = Arc::from_raw(*(base as *const u64) as *const ObjArena);
        arena.used.fetch_sub(bytes, Ordering::Relaxed);
        arena.live.fetch_sub(1, Ordering::Relaxed);
        LIVE_OBJECTS.fetch_sub(1, Ordering::Relaxed);
        dealloc(base, Layout::from_size_align_unchecked(bytes, 8));
    }
}

/// `bpf_kptr_xchg`: store `new` in the kptr field at `field`, return what
/// it held.
///
/// # Safety
/// `field` is an aligned kptr field of a map value.
pub unsafe fn kptr_xchg(field: u64, new: u64) -> u64 {
    unsafe { AtomicU64::from_ptr(field as *mut u64).swap(new, Ordering::AcqRel) }
}

/// Whether node `node` of a refcounted object may be linked: claims it
/// (the kernel's `cmpxchg(&node->owner, NULL, BPF_PTR_POISON)`); false
/// when it already is in a graph.
///
/// # Safety
/// `owner_word` is the node's owner word.
pub unsafe fn claim_node(owner_word: u64) -> bool {
    unsafe {
        AtomicU64::from_ptr(owner_word as *mut u64)
            .compare_exchange(0, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

/// `-EINVAL`, what a push/add of a node already in a graph returns.
const EINVAL: u64 = (-22i64) as u64;

/// `bpf_list_push_{front,back}_impl`: link the owned node `node` (its
/// object's list node field at `node_off`) into the list at `head`; a
/// node already in a graph (a refcounted object's second reference) is
/// dropped instead and the call returns `-EINVAL`, as the kernel's.
///
/// # Safety
/// `head` is a list head under its held lock, `node` a list node field of
/// a live object the caller owns, of the head's contained type.
pub unsafe fn list_push_owned(head: u64, node: u64, node_off: u32, back: bool) -> u64 {
    unsafe {
        if !claim_node(node + 16) {
            obj_drop(container_of(node, node_off));
            return EINVAL;
        }
        list::push(head, node, back);
        0
    }
}

/// `bpf_rbtree_add_impl`: [`rbtree::add`] of the owned node `node`, with
/// the ownership rules of [`list_push_owned`]. An error of `less` leaves
/// the node in no tree (the walk fails before linking anything).
///
/// # Safety
/// As [`list_push_owned`], for a tree root and an rb node field.
pub unsafe fn rb_add_owned<E>(
    root: u64,
    node: u64,
    node_off: u32,
    less: impl FnMut(u64, u64) -> Result<bool, E>,
) -> Result<u64, E> {
    unsafe {
        if !claim_node(node + 24) {
            obj_drop(container_of(node, node_off));
            return Ok(EINVAL);
        }
        if let Err(e) = rbtree::add(root, node, less) {
            rbtree::set_owner(node, 0);
            return Err(e);
        }
        Ok(0)
    }
}
