//! What the JIT may assume about the environment a program runs in, beyond
//! its bytecode: the maps behind the handles its `lddw`s load, the keys the
//! verifier proved constant, and whether it runs with the kernel's XDP
//! helpers (so that their semantics may be compiled in).
//!
//! Everything here changes the generated code, so all of it takes part in
//! the cache key ([`Bindings::hash_into`]).
//!
//! Map addresses are NOT baked into the code: the lifter refers to a map's
//! handle and value memory through external symbols ([`map_symbol`] and
//! friends, absolute symbols the loader resolves per program), so the same
//! object runs against another instance of the maps: another load in this
//! process (a cache hit) or another process (AOT). Only map layouts are
//! part of the key.

use crate::cache::KeyHasher;
use bpfjet_isa::{Insn, LdDwKind};
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::{ArrayLayout, Map, MapType};
use bpfjet_runtime::MapBinding;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The handle (`*const Map`) of map `index` of the program's map table.
pub(crate) fn map_symbol(index: usize) -> String {
    format!("bpfjet_map_{index}")
}

/// The first value of array map `index` ([`ArrayLayout::values`]).
pub(crate) fn map_values_symbol(index: usize) -> String {
    format!("bpfjet_map_{index}_values")
}

/// The direct-value memory of map `index` (`lddw MapIdxValue`, global data).
pub(crate) fn map_direct_symbol(index: usize) -> String {
    format!("bpfjet_map_{index}_direct")
}

/// LLVM IR declaring the map symbols of a program with `count` maps, to
/// start its module from. `!absolute_symbol` with the full range makes
/// them addresses rather than PC-relative data, and `code_model "large"`
/// keeps LLVM from folding them into 32-bit displacements: each use is a
/// `movabs` with an `R_X86_64_64` relocation, as cheap as the immediate it
/// replaces. The opaque type keeps LLVM from assuming any object size.
/// (Neither attribute is reachable through LLVM's C API, hence text.)
pub(crate) fn map_declarations_ir(count: usize) -> String {
    let mut ir = String::from("; bpfjet map symbols\n%bpfjet_map_memory = type opaque\n");
    for i in 0..count {
        for name in [map_symbol(i), map_values_symbol(i), map_direct_symbol(i)] {
            ir.push_str(&format!(
                "@{name} = external global %bpfjet_map_memory, code_model \"large\", \
                 !absolute_symbol !0\n"
            ));
        }
    }
    ir.push_str("!0 = !{i64 -1, i64 -1}\n");
    ir
}

/// What an `lddw` of the program as written refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapRef {
    /// `lddw MapIdx`: the handle of map `index`.
    Handle(usize),
    /// `lddw MapIdxValue`: `offset` bytes into the direct value of map `index`.
    Direct { index: usize, offset: u64 },
}

/// The `lddw`s of `insns` (the program before `Program::new` resolved
/// them) that name maps, by slot.
pub(crate) fn map_refs(insns: &[Insn]) -> BTreeMap<usize, MapRef> {
    insns
        .iter()
        .enumerate()
        .filter_map(|(pc, insn)| match *insn {
            Insn::LdDw {
                kind: LdDwKind::MapIdx,
                imm,
                ..
            } => Some((pc, MapRef::Handle(imm as u32 as usize))),
            Insn::LdDw {
                kind: LdDwKind::MapIdxValue,
                imm,
                ..
            } => Some((
                pc,
                MapRef::Direct {
                    index: imm as u32 as usize,
                    offset: imm >> 32,
                },
            )),
            _ => None,
        })
        .collect()
}

/// `insns` as loaded with every map address replaced by 0: what the code
/// depends on, for the cache key.
pub(crate) fn without_addresses(loaded: &[Insn], refs: &BTreeMap<usize, MapRef>) -> Vec<Insn> {
    let mut insns = loaded.to_vec();
    for pc in refs.keys() {
        if let Some(Insn::LdDw { imm, .. }) = insns.get_mut(*pc) {
            *imm = 0;
        }
    }
    insns
}

/// The addresses of the map symbols of one program: the handles and value
/// memory of the maps it is loaded with (`maps`, by map-table index), array
/// storage from the bound maps behind those handles.
pub(crate) fn map_symbol_table(maps: &[MapBinding], bound: &[Arc<Map>]) -> HashMap<String, usize> {
    let mut table = HashMap::new();
    for (i, binding) in maps.iter().enumerate() {
        table.insert(map_symbol(i), binding.handle as usize);
        if let Some(value) = binding.value {
            table.insert(map_direct_symbol(i), value.start as usize);
        }
        let layout = bound
            .iter()
            .find(|m| Map::handle(m) as u64 == binding.handle)
            .and_then(|m| m.array_layout());
        if let Some(layout) = layout {
            table.insert(map_values_symbol(i), layout.values as usize);
        }
    }
    table
}

/// Inputs for helper and map inlining. The default inlines nothing: helper
/// calls go through the trampoline, whatever the registry holds.
#[derive(Clone, Default)]
pub struct Bindings {
    /// Maps the program names by handle. Lookups in them may be inlined,
    /// and the compiled program keeps them alive.
    pub maps: Vec<Arc<Map>>,
    /// `bpf_map_lookup_elem` calls on arrays whose key the verifier proved
    /// to be one constant below `max_entries`: call slot -> key.
    pub const_keys: BTreeMap<usize, u32>,
    /// The program runs with [`bpfjet_runtime::xdp_helpers`] and an
    /// [`bpfjet_runtime::XdpEnv`] as its per-run context: the kernel's
    /// helper semantics may be inlined.
    pub xdp: bool,
    /// The program is a tracing program run by
    /// [`bpfjet_runtime::tracing::TracingObject`] with its `TracingEnv`:
    /// the helpers every program type shares (map lookups/updates/deletes,
    /// CPU id, clock, ring buffers, `bpf_loop`, tail calls) may be inlined,
    /// the XDP ones are not (tracing programs cannot call them).
    pub tracing: bool,
    /// The maps a tracing object keeps per thread (pairwise fusion's
    /// internalised hand-off maps), in the order of the run's slot table
    /// (`TracingEnv::thread_slot_table`): their rewritten calls
    /// (`THREAD_MAP_*`) are compiled as loads and stores on the slot.
    /// Empty: those calls are direct calls to the runtime's natives.
    pub thread_maps: Vec<ThreadMapBinding>,
    /// Fold loads from frozen `.rodata`-style values to constants (on by
    /// default; off only to measure what the folding is worth).
    pub fold_frozen: bool,
    /// Context loads known at the attach point, folded to constants
    /// (pairwise fusion's attach-site folding): byte offset into the
    /// context record, its width in bytes, the value.
    pub ctx_constants: Vec<CtxConstant>,
}

/// A map kept per thread, as the lifter inlines its slot operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThreadMapBinding {
    /// The handle the program loads for the map (r1 of the calls).
    pub handle: u64,
    pub key_size: u32,
    pub value_size: u32,
}

/// A context field whose value every run of the program sees the same
/// (for `tracepoint/syscalls/sys_enter_X`: the system-call number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtxConstant {
    pub offset: u64,
    pub size: u8,
    pub value: u64,
}

impl std::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings")
            .field("maps", &self.maps.len())
            .field("const_keys", &self.const_keys)
            .field("xdp", &self.xdp)
            .field("tracing", &self.tracing)
            .field("thread_maps", &self.thread_maps)
            .field("fold_frozen", &self.fold_frozen)
            .field("ctx_constants", &self.ctx_constants)
            .finish()
    }
}

/// How the lifter may treat one map.
#[derive(Clone, Debug)]
pub(crate) enum MapKind {
    /// ARRAY / PERCPU_ARRAY: lookups become address arithmetic.
    Array(ArrayLayout),
    /// A map whose `Map::lookup` is the helper's whole job (hash, LRU,
    /// per-CPU hash, LPM trie): a direct call, specialised by key size.
    Keyed { key_size: u32 },
    /// Anything else: the trampoline.
    Other,
}

/// A frozen, program-read-only single-value array (`.rodata`): its bytes
/// never change, so loads from it fold to constants.
#[derive(Clone, Debug)]
pub(crate) struct FrozenValue {
    pub start: u64,
    pub bytes: Vec<u8>,
}

/// [`Bindings`] resolved for the lifter.
#[derive(Default)]
pub(crate) struct Resolved {
    pub maps: HashMap<u64, MapKind>,
    pub frozen: Vec<FrozenValue>,
    pub const_keys: BTreeMap<usize, u32>,
    pub xdp: bool,
    pub tracing: bool,
    /// Map-table index of each handle the program is loaded with.
    pub map_index: HashMap<u64, usize>,
    /// Size of the map table (the symbols to declare).
    pub map_count: usize,
    /// The `lddw`s that name maps, by slot.
    pub lddw: BTreeMap<usize, MapRef>,
    /// Kfunc calls' imm -> the NF library's kfunc (compiled in or called
    /// directly; see `lift::kfunc`).
    pub kfuncs: BTreeMap<i32, &'static bpfjet_kfuncs::Kfunc>,
    /// Kfunc calls' imm -> the kernel's object and graph kfuncs, when the
    /// program's kfunc registry binds them (see `lift::graph`).
    pub graph_kfuncs: BTreeMap<i32, bpfjet_verifier::graph::GraphKfunc>,
    /// Kfunc calls' imm -> the kernel's dynptr kfuncs called directly
    /// (verified programs only; see `lift::kfunc`).
    pub dynptr_kfuncs: BTreeMap<i32, bpfjet_verifier::dynptr_kfunc::DynptrKfunc>,
    /// The verifier's node offset of each graph push/add call, by slot.
    pub graph_node_offs: BTreeMap<usize, u32>,
    /// Maps kept per thread by handle: (index in the slot table, binding).
    pub thread_maps: HashMap<u64, (usize, ThreadMapBinding)>,
    pub ctx_constants: Vec<CtxConstant>,
}

impl Resolved {
    /// Add what the lifter needs to refer to maps by symbol: the program as
    /// written (`insns`) and the map table it is loaded with.
    pub(crate) fn with_map_table(mut self, insns: &[Insn], maps: &[MapBinding]) -> Resolved {
        self.map_count = maps.len();
        for (i, m) in maps.iter().enumerate() {
            self.map_index.entry(m.handle).or_insert(i);
        }
        self.lddw = map_refs(insns);
        self
    }

    /// The frozen value holding address `addr`, and the offset into it.
    pub fn frozen_at(&self, addr: u64) -> Option<(usize, u64)> {
        self.frozen.iter().enumerate().find_map(|(i, f)| {
            let off = addr.checked_sub(f.start)?;
            (off < f.bytes.len() as u64).then_some((i, off))
        })
    }
}

fn kind(map: &Map) -> MapKind {
    use MapType::*;
    match map.map_type() {
        Array | PercpuArray => map.array_layout().map_or(MapKind::Other, MapKind::Array),
        Hash | PercpuHash | LruHash | LruPercpuHash | LpmTrie => MapKind::Keyed {
            key_size: map.key_size(),
        },
        _ => MapKind::Other,
    }
}

fn frozen_value(map: &Map) -> Option<FrozenValue> {
    let read_only = map.spec().flags & map_flags::RDONLY_PROG != 0;
    if !(read_only && map.is_frozen() && map.map_type() == MapType::Array) {
        return None;
    }
    if map.max_entries() != 1 {
        return None;
    }
    let ptr = map.lookup(&0u32.to_ne_bytes(), 0)?;
    let len = map.value_size() as usize;
    // SAFETY: `lookup` returned the value of index 0, `value_size` bytes
    // that stay mapped while the map lives (the caller holds it).
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
    Some(FrozenValue {
        start: ptr as u64,
        bytes,
    })
}

/// The bytes of `map`'s value if the JIT constant-folds it (a frozen,
/// program-read-only single-value array).
pub(crate) fn frozen_bytes(map: &Map) -> Option<Vec<u8>> {
    frozen_value(map).map(|f| f.bytes)
}

impl Bindings {
    pub(crate) fn resolve(&self) -> Resolved {
        let mut r = Resolved {
            const_keys: self.const_keys.clone(),
            xdp: self.xdp,
            tracing: self.tracing,
            ..Resolved::default()
        };
        for map in &self.maps {
            r.maps.insert(Map::handle(map) as u64, kind(map));
            if let Some(f) = frozen_value(map).filter(|_| self.fold_frozen) {
                r.frozen.push(f);
            }
        }
        for (i, m) in self.thread_maps.iter().enumerate() {
            r.thread_maps.insert(m.handle, (i, *m));
        }
        r.ctx_constants = self.ctx_constants.clone();
        r
    }

    /// Feed what the generated code depends on into a cache key: map
    /// layouts and how they line up with the map table (`table`), never
    /// addresses; frozen values by their bytes.
    pub(crate) fn hash_into(&self, h: &mut KeyHasher, table: &[MapBinding]) {
        h.u64(u64::from(self.xdp) | u64::from(self.tracing) << 1)
            .u64(self.maps.len() as u64);
        for map in &self.maps {
            let handle = Map::handle(map) as u64;
            let index = table.iter().position(|b| b.handle == handle);
            h.u64(index.map_or(u64::MAX, |i| i as u64));
            match kind(map) {
                MapKind::Array(l) => h
                    .u64(1)
                    .u64(l.stride as u64)
                    .u64(l.cpu_stride as u64)
                    .u64(u64::from(l.max_entries))
                    .u64(u64::from(l.value_size)),
                MapKind::Keyed { key_size } => h.u64(2).u64(u64::from(key_size)),
                MapKind::Other => h.u64(3),
            };
            match frozen_value(map).filter(|_| self.fold_frozen) {
                Some(f) => h.u64(1).bytes(&f.bytes),
                None => h.u64(0),
            };
        }
        for (slot, key) in &self.const_keys {
            h.u64(*slot as u64).u64(u64::from(*key));
        }
        // Which map each slot-table entry is, by its index in `table`.
        h.u64(self.thread_maps.len() as u64);
        for m in &self.thread_maps {
            let index = table.iter().position(|b| b.handle == m.handle);
            h.u64(index.map_or(u64::MAX, |i| i as u64))
                .u64(u64::from(m.key_size))
                .u64(u64::from(m.value_size));
        }
        h.u64(self.ctx_constants.len() as u64);
        for c in &self.ctx_constants {
            h.u64(c.offset).u64(u64::from(c.size)).u64(c.value);
        }
    }
}
