//! What the JIT may assume about the environment a program runs in, beyond
//! its bytecode: the maps behind the handles its `lddw`s load, the keys the
//! verifier proved constant, and whether it runs with the kernel's XDP
//! helpers (so that their semantics may be compiled in).
//!
//! Everything here changes the generated code, so all of it takes part in
//! the cache key ([`Bindings::hash_into`]).

use crate::cache::KeyHasher;
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::{ArrayLayout, Map, MapType};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

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
}

impl std::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings")
            .field("maps", &self.maps.len())
            .field("const_keys", &self.const_keys)
            .field("xdp", &self.xdp)
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
}

impl Resolved {
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

impl Bindings {
    pub(crate) fn resolve(&self) -> Resolved {
        let mut r = Resolved {
            const_keys: self.const_keys.clone(),
            xdp: self.xdp,
            ..Resolved::default()
        };
        for map in &self.maps {
            r.maps.insert(Map::handle(map) as u64, kind(map));
            if let Some(f) = frozen_value(map) {
                r.frozen.push(f);
            }
        }
        r
    }

    /// Feed what the generated code depends on into a cache key.
    pub(crate) fn hash_into(&self, h: &mut KeyHasher) {
        let r = self.resolve();
        h.u64(u64::from(r.xdp));
        let mut maps: Vec<_> = r.maps.iter().collect();
        maps.sort_by_key(|(handle, _)| **handle);
        for (handle, kind) in maps {
            h.u64(*handle);
            match kind {
                MapKind::Array(l) => h
                    .u64(1)
                    .u64(l.values as u64)
                    .u64(l.stride as u64)
                    .u64(l.cpu_stride as u64)
                    .u64(u64::from(l.max_entries))
                    .u64(u64::from(l.value_size)),
                MapKind::Keyed { key_size } => h.u64(2).u64(u64::from(*key_size)),
                MapKind::Other => h.u64(3),
            };
        }
        for f in &r.frozen {
            h.u64(f.start).bytes(&f.bytes);
        }
        for (slot, key) in &r.const_keys {
            h.u64(*slot as u64).u64(u64::from(*key));
        }
    }
}
