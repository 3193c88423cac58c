//! eNetSTL's node-pointer library (`src/LKMs/bpf_ptr_structure_lib` of
//! chonepieceyb/eNetSTL) under its names and signatures: containers of
//! nodes, nodes of 512 bytes with 16 outgoing and 16 incoming links, two
//! data areas the program reads in place (`data1`, `data2`) and writes
//! through `ptr_write_data1/2`, and 32 "tmp" slots per container naming
//! nodes across calls (its skip list keeps its search path there).
//! Written from the module's documented behaviour, not its code.
//!
//! Ownership follows the module: `ptr_alloc_node` gives a node with
//! refcount 1 (the program's reference); `ptr_set_owner` adds the
//! container's; `ptr_get_out` / `ptr_container_get_tmp` hand out another
//! reference; `ptr_release_node` drops one, the last frees the node;
//! `ptr_unset_owner` takes the node out of its container (dropping the
//! container's reference); `ptr_destory_node_container` drops the
//! container's reference of every node it owns and frees it. The verifier
//! (`bpfjet_verifier::module_kptr`) makes the program release every
//! reference it takes and never use one after.
//!
//! Where bpfjet differs (lazy safety): links and tmps name a node by
//! handle — its slot and the slot's generation — so a freed node, or one
//! taken out of its container, is never reached through a stale link: it
//! reads as NULL (the module unlinks eagerly on `ptr_unset_owner` and
//! leaves dangling pointers in tmps and in links into nodes a destroyed
//! container freed). Nothing is ever unmapped: every node is a slot of a
//! space that lives as long as the process.
//!
//! Memory: one space per worker thread (CPU slot), [`SPACE_SLOTS`] slots
//! of 512 bytes (nodes and containers), allocated lazily (untouched pages
//! cost nothing), recycled to the next worker when a thread ends; a full
//! space makes the allocating kfunc return NULL. Objects may move between
//! threads through a map's `__kptr` (each call finds an object's space from
//! its address). Spaces are aligned to their size, so that lookup is O(1)
//! and needs no lock: the address's region (`addr >> SPACE_SHIFT`) indexes
//! [`REGION_SPACES`], which names the space there, and a handle's space
//! index indexes [`SPACE_BASES`]. The JIT compiles the hot kfuncs in
//! (`crates/jit/src/lift/ptr_kfunc.rs`): the handle checks below written
//! as IR with the table of bases; the checks of object arguments are the
//! verifier's there (the JIT runs only verified programs).
//!
//! The bookkeeping lives in the bytes of each node the program cannot
//! read (the module's owner, refcount, link and list fields): every
//! address a native receives is checked to be a slot of a space, of the
//! right kind, live, before it is used, so even an unverified
//! (bounds-checked) program cannot make a kfunc touch memory outside the
//! spaces.

use bpfjet_verifier::module_kptr::{ModuleField, ModuleType};
use std::cell::RefCell;
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes of a node (eNetSTL's `struct __node_common`, cache-line aligned).
pub const NODE_BYTES: usize = 512;
/// Outgoing and incoming links of a node.
pub const LINKS: u64 = 16;
/// Tmp slots of a container.
pub const TMPS: u64 = 32;
/// Where the program's data lives in a node (the module's layout).
pub const DATA1: usize = 12;
pub const DATA1_BYTES: usize = 52;
pub const DATA2: usize = 352;
pub const DATA2_BYTES: usize = 160;
/// Slots (nodes + containers) of one worker's space: room for eNetSTL's
/// largest skip list (`*_16`: 65,536 keys plus its head and container).
pub const SPACE_SLOTS: usize = 1 << 18;
/// log2 of a space's bytes (`SPACE_SLOTS * NODE_BYTES`): spaces are aligned
/// to their size.
pub const SPACE_SHIFT: u32 = 27;
const SPACE_BYTES: usize = 1 << SPACE_SHIFT;
/// Regions of `1 << SPACE_SHIFT` bytes in the user half of the address
/// space (47 bits): the entries of the region table.
pub const REGIONS: usize = 1 << (47 - SPACE_SHIFT);
/// Spaces the process may have (one per worker thread alive at once).
pub const MAX_SPACES: usize = 256;

// The module's fields that hold bpfjet's bookkeeping (never readable by
// programs): owner, refcount, links, their bitmaps, the list node. What
// every access checks — the state — and the reference count share the
// first cache line with the start of `data1` (a skip list's key), so a
// search step touches two lines of a node (that one and its link's).
/// `generation << 32 | space << 24 | slot << 6 | kind` (the module's
/// `owner`): the slot's handle and its kind in one word, so a handle's
/// liveness is one compare (`state == handle | kind`) and a live slot's
/// handle is its state without the kind (`state & !KIND_MASK`).
pub const STATE: usize = 0;
/// The kind's bits of a state word (a handle's are 0).
pub const KIND_MASK: u64 = 0x3f;
/// Where a handle (and a state word) keeps the slot's space index (8 bits)
/// and its slot in that space (18 bits).
pub const HANDLE_SPACE_SHIFT: u32 = 24;
pub const HANDLE_SLOT_SHIFT: u32 = 6;
/// u32 reference count.
pub const REFCNT: usize = 8;
/// Outgoing links (handles).
pub const OUTS: usize = 64;
/// Incoming links (handles).
pub const INS: usize = 192;
/// The owning container's handle, 0 for none (the module's `in_map`).
pub const OWNER: usize = 320;
/// Container list: previous and next node (slot references, not handles:
/// the list is kept exact, eagerly).
const LIST_PREV: usize = 336;
const LIST_NEXT: usize = 344;
// A container: its tmps, then the first node it owns.
/// A container's tmps (handles).
pub const C_TMPS: usize = 16;
const C_FIRST: usize = 16 + 8 * TMPS as usize;

const FREE: u32 = 0;
/// Kind of a slot holding a node (low half of its state word).
pub const NODE: u32 = 1;
/// Kind of a slot holding a container.
pub const CONTAINER: u32 = 2;

/// The node type (`struct __node_common`, `ptr_node`).
pub const NODE_TYPE: &str = "__node_common";
/// The container type.
pub const CONTAINER_TYPE: &str = "ptr_node_container";
/// eNetSTL's list-buckets handle (`struct bpf_bkt_list { int fd; }`).
pub const BKT_LIST_TYPE: &str = "bpf_bkt_list";

const fn field(name: &'static str, off: u32, size: u32, readable: bool) -> ModuleField {
    ModuleField {
        name,
        off,
        size,
        readable,
    }
}

/// The library's types as the module defines them (x86-64 layout), for
/// the verifier (`VerifyEnv::module_types`).
pub static MODULE_TYPES: &[ModuleType] = &[
    ModuleType {
        name: NODE_TYPE,
        size: NODE_BYTES as u32,
        fields: &[
            field("owner", 0, 8, false),
            field("refcnt", 8, 4, false),
            field("data1", DATA1 as u32, DATA1_BYTES as u32, true),
            field("outs", 64, 128, false),
            field("ins", 192, 128, false),
            field("in_map", 320, 8, false),
            field("out_map", 328, 8, false),
            field("node", 336, 16, false),
            field("data2", DATA2 as u32, DATA2_BYTES as u32, true),
        ],
    },
    ModuleType {
        name: CONTAINER_TYPE,
        size: 16 + 8 * TMPS as u32,
        fields: &[
            field("node_list", 0, 16, false),
            field("tmps", 16, 8 * TMPS as u32, false),
        ],
    },
    ModuleType {
        name: BKT_LIST_TYPE,
        size: 4,
        fields: &[field("fd", 0, 4, true)],
    },
    // eNetSTL's sampler (`crate::random::ENetGeoCtx`): every field
    // readable, as the module's BTF-typed pointer is to the kernel; the
    // kfuncs alone change it.
    ModuleType {
        name: crate::random::GEO_CTX_TYPE,
        size: crate::random::ENET_CTX_BYTES,
        fields: &[
            field("fd", 0, 4, true),
            field("cnt", 4, 4, true),
            field("geo_sampling_idx", 64, 4, true),
            field("pool", 128, crate::random::ENET_CTX_BYTES - 128, true),
        ],
    },
];

/// The library type named `name`.
pub fn module_type(name: &str) -> Option<&'static ModuleType> {
    MODULE_TYPES.iter().find(|t| t.name == name)
}

/// One worker's slots.
struct Space {
    index: u32,
    base: usize,
    free: Mutex<FreeList>,
}

struct FreeList {
    /// Slots never handed out start here.
    fresh: u32,
    released: Vec<u32>,
}

static SPACES: [AtomicPtr<Space>; MAX_SPACES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_SPACES];
static SPACE_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Spaces whose thread ended, for the next worker.
static IDLE: Mutex<Vec<&'static Space>> = Mutex::new(Vec::new());
static CREATE: Mutex<()> = Mutex::new(());

/// Space index + 1 of every region that is a space, 0 for the others
/// (2 MiB of zero pages: only those of regions holding spaces are touched).
pub static REGION_SPACES: [AtomicU16; REGIONS] = [const { AtomicU16::new(0) }; REGIONS];
/// Base address of every space by index, 0 for none.
pub static SPACE_BASES: [AtomicU64; MAX_SPACES] = [const { AtomicU64::new(0) }; MAX_SPACES];

const _: () = assert!(
    SPACE_BYTES == SPACE_SLOTS * NODE_BYTES
        && MAX_SPACES == 1 << (32 - HANDLE_SPACE_SHIFT)
        && SPACE_SLOTS == 1 << (HANDLE_SPACE_SHIFT - HANDLE_SLOT_SHIFT)
);

/// Symbols generated code uses for the table of space bases and the slow
/// path of a reference drop (resolved by [`resolve`]).
pub const BASES_SYMBOL: &str = "bpfjet_enetstl_ptr_bases";
pub const DROPPED_SYMBOL: &str = "bpfjet_enetstl_ptr_dropped";

/// The address of one of the symbols above.
pub fn resolve(name: &str) -> Option<usize> {
    Some(match name {
        BASES_SYMBOL => SPACE_BASES.as_ptr() as usize,
        DROPPED_SYMBOL => {
            let f: extern "C" fn(u64, u64) -> u64 = dropped;
            f as *const () as usize
        }
        _ => return None,
    })
}

/// Slots in use in every space (tests use it).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Nodes and containers alive in the process now.
pub fn live_objects() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn new_space() -> Option<&'static Space> {
    let _g = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    let index = SPACE_COUNT.load(Ordering::Acquire);
    if index >= MAX_SPACES {
        return None;
    }
    // Alignment 16 and twice the size, the space being the aligned half:
    // the system allocator's `calloc` then maps fresh zero pages, committed
    // as they are touched (asking for the space's alignment would make it
    // zero all 128 MiB up front); the other half is never touched.
    let layout = std::alloc::Layout::from_size_align(2 * SPACE_BYTES, 16).ok()?;
    // SAFETY: a non-zero size.
    let raw = unsafe { std::alloc::alloc_zeroed(layout) };
    if raw.is_null() {
        return None;
    }
    let base = (raw as usize).next_multiple_of(SPACE_BYTES);
    let region = base >> SPACE_SHIFT;
    if region >= REGIONS {
        // Not in the user half: the region table cannot name it.
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(raw, layout) };
        return None;
    }
    SPACE_BASES[index].store(base as u64, Ordering::Release);
    REGION_SPACES[region].store(index as u16 + 1, Ordering::Release);
    let space: &'static Space = Box::leak(Box::new(Space {
        index: index as u32,
        base,
        free: Mutex::new(FreeList {
            fresh: 0,
            released: Vec::new(),
        }),
    }));
    SPACES[index].store(space as *const Space as *mut Space, Ordering::Release);
    SPACE_COUNT.store(index + 1, Ordering::Release);
    Some(space)
}

/// The calling thread's space, given back for reuse when the thread ends.
struct Home(Option<&'static Space>);

impl Drop for Home {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            IDLE.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }
}

thread_local! {
    static HOME: RefCell<Home> = const { RefCell::new(Home(None)) };
}

fn home() -> Option<&'static Space> {
    HOME.with(|h| {
        let mut h = h.borrow_mut();
        if h.0.is_none() {
            let idle = IDLE.lock().unwrap_or_else(|e| e.into_inner()).pop();
            h.0 = idle.or_else(new_space);
        }
        h.0
    })
}

fn space(index: usize) -> Option<&'static Space> {
    if index >= SPACE_COUNT.load(Ordering::Acquire) {
        return None;
    }
    let p = SPACES[index].load(Ordering::Acquire);
    // SAFETY: registered spaces are leaked, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// A slot: its space and index.
#[derive(Clone, Copy)]
struct Slot {
    space: &'static Space,
    slot: u32,
}

impl Slot {
    fn addr(self) -> usize {
        self.space.base + self.slot as usize * NODE_BYTES
    }

    fn word(self, off: usize) -> &'static AtomicU64 {
        // SAFETY: inside the slot (every `off` is a constant below 512,
        // 8-aligned), in a space that is never freed.
        unsafe { AtomicU64::from_ptr((self.addr() + off) as *mut u64) }
    }

    fn refcnt(self) -> &'static AtomicU32 {
        // SAFETY: as `word`.
        unsafe { AtomicU32::from_ptr((self.addr() + REFCNT) as *mut u32) }
    }

    fn state(self) -> u64 {
        self.word(STATE).load(Ordering::Acquire)
    }

    fn generation(self) -> u32 {
        (self.state() >> 32) as u32
    }

    fn kind(self) -> u32 {
        (self.state() & KIND_MASK) as u32
    }

    /// Where the slot is, as handles and state words keep it.
    fn id(self) -> u64 {
        u64::from(self.space.index) << HANDLE_SPACE_SHIFT
            | u64::from(self.slot) << HANDLE_SLOT_SHIFT
    }

    /// Its handle now: generation, space, slot (never 0: generations
    /// start at 1).
    fn handle(self) -> u64 {
        self.state() & !KIND_MASK
    }

    /// The state word of generation `gen` holding `kind`.
    fn set_state(self, gen: u32, kind: u32) {
        self.word(STATE).store(
            u64::from(gen) << 32 | self.id() | u64::from(kind),
            Ordering::Release,
        );
    }

    /// A reference that ignores the generation (container lists).
    fn slot_ref(self) -> u64 {
        (u64::from(self.space.index) << 20 | u64::from(self.slot)) + 1
    }

    /// A new generation: every handle to the slot is stale from now on.
    fn bump(self, kind: u32) {
        self.set_state(self.generation().wrapping_add(1).max(1), kind);
    }
}

/// The slot at address `addr` if it is one of a space's and of `kind`:
/// its region is a space's (spaces are aligned to their size), it is a
/// slot's start, and the slot holds that kind.
fn at(addr: u64, kind: u32) -> Option<Slot> {
    let addr = addr as usize;
    let region = addr >> SPACE_SHIFT;
    if region >= REGIONS {
        return None;
    }
    let index = REGION_SPACES[region].load(Ordering::Acquire);
    let s = space(usize::from(index.checked_sub(1)?))?;
    let off = addr - s.base;
    if !off.is_multiple_of(NODE_BYTES) {
        return None;
    }
    let slot = Slot {
        space: s,
        slot: (off / NODE_BYTES) as u32,
    };
    (slot.kind() == kind).then_some(slot)
}

fn from_parts(space_index: u64, slot: u64) -> Option<Slot> {
    let s = space(space_index as usize)?;
    (slot < SPACE_SLOTS as u64).then_some(Slot {
        space: s,
        slot: slot as u32,
    })
}

/// The live slot of `kind` a handle names (None when stale): its state
/// is the handle with that kind (generation and place both match).
fn by_handle(h: u64, kind: u32) -> Option<Slot> {
    if h == 0 {
        return None;
    }
    let slot = from_parts(
        (h >> HANDLE_SPACE_SHIFT) & (MAX_SPACES as u64 - 1),
        (h >> HANDLE_SLOT_SHIFT) & (SPACE_SLOTS as u64 - 1),
    )?;
    (slot.state() == h | u64::from(kind)).then_some(slot)
}

fn by_slot_ref(r: u64) -> Option<Slot> {
    let r = r.checked_sub(1)?;
    from_parts(r >> 20, r & 0xf_ffff)
}

fn alloc_slot(kind: u32) -> Option<Slot> {
    let space = home()?;
    let slot = {
        let mut f = space.free.lock().unwrap_or_else(|e| e.into_inner());
        match f.released.pop() {
            Some(s) => s,
            None if (f.fresh as usize) < SPACE_SLOTS => {
                f.fresh += 1;
                f.fresh - 1
            }
            None => return None,
        }
    };
    let s = Slot { space, slot };
    let gen = s.generation();
    // SAFETY: the slot is ours (just taken off the free list).
    unsafe { std::ptr::write_bytes(s.addr() as *mut u8, 0, NODE_BYTES) };
    s.set_state(gen.max(1), kind);
    LIVE.fetch_add(1, Ordering::Relaxed);
    Some(s)
}

fn free_slot(s: Slot) {
    if s.kind() == FREE {
        return;
    }
    s.bump(FREE);
    LIVE.fetch_sub(1, Ordering::Relaxed);
    s.space
        .free
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .released
        .push(s.slot);
}

fn get_ref(s: Slot) -> u64 {
    s.refcnt().fetch_add(1, Ordering::AcqRel);
    s.addr() as u64
}

fn link(s: Slot, at: usize, i: u64) -> &'static AtomicU64 {
    s.word(at + 8 * i as usize)
}

/// `ptr_create_node_container(tmp_num)`: an empty container (its 32 tmps
/// whatever `tmp_num` says, as the module), or NULL when the space is full.
pub fn create_container() -> u64 {
    alloc_slot(CONTAINER).map_or(0, |s| s.addr() as u64)
}

/// `ptr_destory_node_container(c)`: every node it owns leaves it (their
/// container reference dropped, the last frees them), then it is freed.
pub fn destroy_container(c: u64) {
    let Some(c) = at(c, CONTAINER) else {
        return;
    };
    let mut next = c.word(C_FIRST).load(Ordering::Acquire);
    // Bounded: a list longer than a space's slots is corrupt.
    for _ in 0..SPACE_SLOTS * 2 {
        let Some(n) = by_slot_ref(next).filter(|n| n.kind() == NODE) else {
            break;
        };
        next = n.word(LIST_NEXT).load(Ordering::Acquire);
        n.word(LIST_PREV).store(0, Ordering::Relaxed);
        n.word(LIST_NEXT).store(0, Ordering::Relaxed);
        n.word(OWNER).store(0, Ordering::Release);
        drop_ref(n);
    }
    free_slot(c);
}

fn drop_ref(n: Slot) {
    after_drop(n, n.refcnt().fetch_sub(1, Ordering::AcqRel));
}

/// What follows a reference count's decrement from `old`.
fn after_drop(n: Slot, old: u32) {
    match old {
        1 => free_slot(n),
        // Not a live reference (an unverified caller): undo.
        0 => {
            n.refcnt().fetch_add(1, Ordering::AcqRel);
        }
        _ => {}
    }
}

/// The rare end of the JIT's inline `ptr_release_node` (`DROPPED_SYMBOL`):
/// the node's count just went down from `old`, 1 (the last reference: free
/// it) or 0 (no reference was held: undo), as `drop_ref` goes on.
extern "C" fn dropped(node: u64, old: u64) -> u64 {
    if let Some(n) = at(node, NODE) {
        after_drop(n, old as u32);
    }
    0
}

/// `ptr_alloc_node()`: a zeroed node, refcount 1, no owner; NULL when the
/// space is full.
pub fn alloc_node() -> u64 {
    match alloc_slot(NODE) {
        Some(s) => {
            s.refcnt().store(1, Ordering::Release);
            s.addr() as u64
        }
        None => 0,
    }
}

/// `ptr_release_node(node)`: one reference less; the last frees it.
pub fn release_node(node: u64) {
    if let Some(n) = at(node, NODE) {
        drop_ref(n);
    }
}

/// `ptr_set_owner(c, node)`: a node without owner joins `c` (which takes
/// a reference); a node that has one is left alone.
pub fn set_owner(c: u64, node: u64) {
    let (Some(c), Some(n)) = (at(c, CONTAINER), at(node, NODE)) else {
        return;
    };
    if by_handle(n.word(OWNER).load(Ordering::Acquire), CONTAINER).is_some() {
        return;
    }
    let first = c.word(C_FIRST).load(Ordering::Acquire);
    if let Some(f) = by_slot_ref(first) {
        f.word(LIST_PREV).store(n.slot_ref(), Ordering::Release);
    }
    n.word(LIST_NEXT).store(first, Ordering::Release);
    n.word(LIST_PREV).store(0, Ordering::Release);
    c.word(C_FIRST).store(n.slot_ref(), Ordering::Release);
    n.word(OWNER).store(c.handle(), Ordering::Release);
    n.refcnt().fetch_add(1, Ordering::AcqRel);
}

/// `ptr_unset_owner(node)`: the node leaves its container (dropping the
/// container's reference); every link and tmp naming it reads NULL from
/// now on (a new generation), its own links stay.
pub fn unset_owner(node: u64) {
    let Some(n) = at(node, NODE) else {
        return;
    };
    let Some(c) = by_handle(n.word(OWNER).load(Ordering::Acquire), CONTAINER) else {
        return;
    };
    let (prev, next) = (
        n.word(LIST_PREV).load(Ordering::Acquire),
        n.word(LIST_NEXT).load(Ordering::Acquire),
    );
    match by_slot_ref(prev) {
        Some(p) => p.word(LIST_NEXT).store(next, Ordering::Release),
        None => c.word(C_FIRST).store(next, Ordering::Release),
    }
    if let Some(x) = by_slot_ref(next) {
        x.word(LIST_PREV).store(prev, Ordering::Release);
    }
    n.word(LIST_PREV).store(0, Ordering::Relaxed);
    n.word(LIST_NEXT).store(0, Ordering::Relaxed);
    n.word(OWNER).store(0, Ordering::Release);
    n.bump(NODE);
    drop_ref(n);
}

/// `ptr_container_set_tmp(c, node, idx)`: tmp `idx` (< 32) names `node`,
/// which `c` must own; otherwise nothing happens.
pub fn container_set_tmp(c: u64, node: u64, idx: u64) {
    let (Some(c), Some(n)) = (at(c, CONTAINER), at(node, NODE)) else {
        return;
    };
    if idx >= TMPS || n.word(OWNER).load(Ordering::Acquire) != c.handle() {
        return;
    }
    link(c, C_TMPS, idx).store(n.handle(), Ordering::Release);
}

/// `ptr_container_get_tmp(c, idx)`: a new reference to the node tmp
/// `idx & 31` names, NULL when none (or it was freed or left `c`).
pub fn container_get_tmp(c: u64, idx: u64) -> u64 {
    let Some(c) = at(c, CONTAINER) else {
        return 0;
    };
    let h = link(c, C_TMPS, idx & (TMPS - 1)).load(Ordering::Acquire);
    by_handle(h, NODE).map_or(0, get_ref)
}

/// `ptr_get_out(parent, idx)`: a new reference to the node outgoing link
/// `idx & 15` leads to, NULL when none (or it was freed or unowned).
pub fn get_out(parent: u64, idx: u64) -> u64 {
    let Some(p) = at(parent, NODE) else {
        return 0;
    };
    let h = link(p, OUTS, idx & (LINKS - 1)).load(Ordering::Acquire);
    by_handle(h, NODE).map_or(0, get_ref)
}

fn einval() -> u64 {
    crate::errno::neg(crate::errno::EINVAL)
}

/// Both nodes owned by the same container, the links in range.
fn linkable(p1: u64, idx1: u64, p2: u64, idx2: u64) -> Option<(Slot, Slot)> {
    let (a, b) = (at(p1, NODE)?, at(p2, NODE)?);
    let owner = a.word(OWNER).load(Ordering::Acquire);
    if owner != b.word(OWNER).load(Ordering::Acquire) || by_handle(owner, CONTAINER).is_none() {
        return None;
    }
    (idx1 < LINKS && idx2 < LINKS).then_some((a, b))
}

/// `ptr_connect(p1, idx1, p2, idx2)`: `p1`'s out link `idx1` and `p2`'s in
/// link `idx2` join them: 0; -EINVAL for nodes of different (or no)
/// containers or links out of range; -1 when either link is taken.
pub fn connect(p1: u64, idx1: u64, p2: u64, idx2: u64) -> u64 {
    let Some((a, b)) = linkable(p1, idx1, p2, idx2) else {
        return einval();
    };
    let (out, inn) = (link(a, OUTS, idx1), link(b, INS, idx2));
    if by_handle(out.load(Ordering::Acquire), NODE).is_some()
        || by_handle(inn.load(Ordering::Acquire), NODE).is_some()
    {
        return u64::MAX;
    }
    out.store(b.handle(), Ordering::Release);
    inn.store(a.handle(), Ordering::Release);
    0
}

/// `ptr_unconnect(p1, idx1, p2, idx2)`: undoes that connection: 0; errors
/// as connect, -1 when the links do not join these two nodes.
pub fn unconnect(p1: u64, idx1: u64, p2: u64, idx2: u64) -> u64 {
    let Some((a, b)) = linkable(p1, idx1, p2, idx2) else {
        return einval();
    };
    let (out, inn) = (link(a, OUTS, idx1), link(b, INS, idx2));
    if out.load(Ordering::Acquire) != b.handle() || inn.load(Ordering::Acquire) != a.handle() {
        return u64::MAX;
    }
    out.store(0, Ordering::Release);
    inn.store(0, Ordering::Release);
    0
}

/// `ptr_write_data1/2(node, off, data, size)`: copies `data` to the node
/// at byte `off` (offsets in the node, as the module's), which must lie
/// inside data area `[lo, lo + len)`: 0, else -1.
///
/// # Safety
/// `data` is readable for `size` bytes.
pub unsafe fn write_data(node: u64, off: u64, data: u64, size: u64, second: bool) -> u64 {
    let (lo, len) = if second {
        (DATA2, DATA2_BYTES)
    } else {
        (DATA1, DATA1_BYTES)
    };
    let Some(n) = at(node, NODE) else {
        return u64::MAX;
    };
    let end = off.checked_add(size);
    if off < lo as u64 || end.is_none_or(|e| e > (lo + len) as u64) {
        return u64::MAX;
    }
    // SAFETY: the source per the contract; the target inside the node's
    // data area (`copy`: the two may overlap for an unverified caller).
    unsafe {
        std::ptr::copy(
            data as *const u8,
            (n.addr() + off as usize) as *mut u8,
            size as usize,
        )
    };
    0
}

/// The list-buckets handle eNetSTL's `bpf_bktlist_new` gives: read-only
/// (`fd` 1), the same for every thread (the fd names the calling
/// thread's queues), so a map's `__kptr` can keep it.
static BKT_HANDLE: u32 = 1;

/// The address of the list-buckets handle.
pub fn bkt_handle() -> u64 {
    &BKT_HANDLE as *const u32 as u64
}

/// What a map's `__kptr` holding a library object does when the map (or
/// the object holding it) is freed: the module's destructors
/// (`ptr_destory_node_container`, `ptr_release_node`, `bpf_bktlist_free`,
/// `bpf_geo_sampling_ctx_free`).
/// False when `addr` is no library object (a `bpf_obj_new` one).
pub fn release_module_object(addr: u64) -> bool {
    if addr == bkt_handle() || crate::random::is_enetstl_ctx(addr) {
        return true;
    }
    if at(addr, CONTAINER).is_some() {
        destroy_container(addr);
        return true;
    }
    if at(addr, NODE).is_some() {
        release_node(addr);
        return true;
    }
    false
}

/// What a control plane reads of a node: its two data areas (None when
/// `addr` is not a live node).
pub fn node_data(addr: u64) -> Option<([u8; DATA1_BYTES], [u8; DATA2_BYTES])> {
    let n = at(addr, NODE)?;
    let mut d1 = [0u8; DATA1_BYTES];
    let mut d2 = [0u8; DATA2_BYTES];
    // SAFETY: inside a live slot of a space that is never freed.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (n.addr() + DATA1) as *const u8,
            d1.as_mut_ptr(),
            DATA1_BYTES,
        );
        std::ptr::copy_nonoverlapping(
            (n.addr() + DATA2) as *const u8,
            d2.as_mut_ptr(),
            DATA2_BYTES,
        );
    }
    Some((d1, d2))
}

/// The nodes container `c` owns (None when `c` is not a live container).
pub fn container_nodes(c: u64) -> Option<Vec<u64>> {
    let c = at(c, CONTAINER)?;
    let mut out = Vec::new();
    let mut next = c.word(C_FIRST).load(Ordering::Acquire);
    while let Some(n) = by_slot_ref(next).filter(|n| n.kind() == NODE) {
        out.push(n.addr() as u64);
        if out.len() > SPACE_SLOTS {
            break;
        }
        next = n.word(LIST_NEXT).load(Ordering::Acquire);
    }
    Some(out)
}

/// The node outgoing link `idx` of `node` leads to, without taking a
/// reference (a control plane's walk).
pub fn peek_out(node: u64, idx: u64) -> u64 {
    at(node, NODE)
        .filter(|_| idx < LINKS)
        .and_then(|p| by_handle(link(p, OUTS, idx).load(Ordering::Acquire), NODE))
        .map_or(0, |n| n.addr() as u64)
}

/// The node tmp `idx` of container `c` names, without taking a reference.
pub fn peek_tmp(c: u64, idx: u64) -> u64 {
    at(c, CONTAINER)
        .filter(|_| idx < TMPS)
        .and_then(|c| by_handle(link(c, C_TMPS, idx).load(Ordering::Acquire), NODE))
        .map_or(0, |n| n.addr() as u64)
}

/// A node's reference count (None when not a live node).
pub fn refcount(node: u64) -> Option<u32> {
    at(node, NODE).map(|n| n.refcnt().load(Ordering::Acquire))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_to_released_or_unowned_nodes_read_null() {
        let c = create_container();
        let (a, b) = (alloc_node(), alloc_node());
        assert!(c != 0 && a != 0 && b != 0);
        // Not owned: no links.
        assert_eq!(connect(a, 0, b, 0), einval());
        set_owner(c, a);
        set_owner(c, b);
        assert_eq!(connect(a, 0, b, 0), 0);
        assert_eq!(connect(a, 0, b, 1), u64::MAX, "out link taken");
        let got = get_out(a, 0);
        assert_eq!(got, b);
        assert_eq!(refcount(b), Some(3));
        release_node(got);
        container_set_tmp(c, b, 5);
        assert_eq!(peek_tmp(c, 5), b);
        unset_owner(b);
        assert_eq!(get_out(a, 0), 0, "link to an unowned node");
        assert_eq!(container_get_tmp(c, 5), 0, "tmp naming an unowned node");
        assert_eq!(refcount(b), Some(1));
        release_node(b);
        assert_eq!(refcount(b), None, "freed");
        assert_eq!(container_nodes(c), Some(vec![a]));
        destroy_container(c);
        assert_eq!(refcount(a), Some(1), "the program's reference stays");
        release_node(a);
        assert_eq!(refcount(a), None);
    }

    #[test]
    fn forged_addresses_are_ignored() {
        let n = alloc_node();
        assert_eq!(get_out(n + 8, 0), 0);
        assert_eq!(get_out(12345, 0), 0);
        release_node(n + 64);
        assert_eq!(refcount(n), Some(1));
        assert_eq!(unsafe { write_data(n, 11, n, 4, false) }, u64::MAX);
        assert_eq!(unsafe { write_data(n, 60, n, 5, false) }, u64::MAX);
        let v = 7u32;
        assert_eq!(
            unsafe { write_data(n, 12, &v as *const u32 as u64, 4, false) },
            0
        );
        assert_eq!(node_data(n).unwrap().0[..4], 7u32.to_ne_bytes());
        release_node(n);
        release_node(n);
        assert_eq!(refcount(n), None);
    }
}
