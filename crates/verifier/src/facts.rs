//! What verification proved, for the loader and the JIT.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The `xdp_md` fields (offsets 0, 4, ..., 20).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum XdpMdField {
    Data,
    DataEnd,
    DataMeta,
    IngressIfindex,
    RxQueueIndex,
    EgressIfindex,
}

impl XdpMdField {
    pub fn from_offset(off: i64) -> Option<XdpMdField> {
        Some(match off {
            0 => XdpMdField::Data,
            4 => XdpMdField::DataEnd,
            8 => XdpMdField::DataMeta,
            12 => XdpMdField::IngressIfindex,
            16 => XdpMdField::RxQueueIndex,
            20 => XdpMdField::EgressIfindex,
            _ => return None,
        })
    }

    pub fn offset(self) -> u32 {
        self as u32 * 4
    }

    /// Whether the field is a pointer (the runtime rewrites these loads).
    pub fn is_pointer(self) -> bool {
        matches!(
            self,
            XdpMdField::Data | XdpMdField::DataEnd | XdpMdField::DataMeta
        )
    }
}

/// A load from the context at some slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CtxAccess {
    pub field: XdpMdField,
    /// Bytes loaded (always 4 for XDP).
    pub size: u8,
}

/// A `bpf_map_lookup_elem` call on an array map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ConstKeyLookup {
    /// Index into the program's map table.
    pub map: u32,
    /// The key, when it is the same constant on every path (and below max_entries).
    pub key: Option<u32>,
}

/// A packet load or store at some slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PktAccess {
    /// Smallest `reg.off + insn.off` seen.
    pub min_off: i64,
    /// Largest `reg.off + insn.off + size` seen: bytes past the checked
    /// pointer's base that must exist.
    pub max_end: i64,
    /// Smallest proven range (bytes known to be inside the packet) over all
    /// paths; `max_end <= proven_range` always holds for accepted programs.
    pub proven_range: u32,
}

/// The memory one load or store instruction accesses (the kernel's
/// `insn_aux_data.ptr_type`), over every path that reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MemBase {
    Ctx,
    Packet,
    PacketMeta,
    MapValue,
    Stack,
    /// Memory from a helper or kfunc (ringbuf records, map keys, ...).
    Mem,
    /// Different non-context kinds on different paths (the kernel allows
    /// that; only the context must be the same on every path, because its
    /// loads are rewritten).
    Mixed,
}

impl MemBase {
    pub fn name(self) -> &'static str {
        match self {
            MemBase::Ctx => "ctx",
            MemBase::Packet => "pkt",
            MemBase::PacketMeta => "pkt_meta",
            MemBase::MapValue => "map_value",
            MemBase::Stack => "fp",
            MemBase::Mem => "mem",
            MemBase::Mixed => "mixed",
        }
    }
}

/// Per subprogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SubprogInfo {
    /// First slot.
    pub entry: usize,
    /// Deepest stack byte used, in bytes (0..=512).
    pub stack_depth: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// Every XDP context load, by slot (the loader rewrites them).
    pub ctx_accesses: BTreeMap<usize, CtxAccess>,
    /// Tracing programs: the end of the furthest context byte any load
    /// reads (the kernel's `max_ctx_offset`), checked against the real
    /// context size when the program is attached.
    pub max_ctx_end: u64,
    /// Array map lookups, by slot of the call.
    pub const_key_lookups: BTreeMap<usize, ConstKeyLookup>,
    /// What each load/store slot accesses, merged over every path.
    pub mem_bases: BTreeMap<usize, MemBase>,
    /// Packet accesses, by slot.
    pub pkt_accesses: BTreeMap<usize, PktAccess>,
    /// Helper ids called.
    pub helpers_used: BTreeSet<i32>,
    /// Call instructions (helpers, kfuncs, subprograms) some path reached:
    /// a call never reached may name a helper or kfunc the runtime does
    /// not provide (behind frozen configuration, like the kernel's dead
    /// code).
    pub calls_reached: BTreeSet<usize>,
    /// A load reads through a map pointer (`((struct bpf_map *)&m)->...`):
    /// the maps' kernel views must be laid out (`map_struct`).
    pub reads_map_struct: bool,
    /// Subprograms in slot order (the first is the program itself).
    pub subprogs: Vec<SubprogInfo>,
    /// Instructions the analysis processed (the kernel's complexity measure).
    pub insns_processed: u64,
    /// States kept for pruning.
    pub states_stored: u64,
    /// Explorations the verdict took: optimistic runs (see docs/VERIFIER.md,
    /// "Optimistic pruning") and, when their checks kept failing, the exact
    /// one. `insns_processed` is the last run's.
    pub runs: u32,
    /// Prune points where the last run compared with learned precision
    /// (an earlier optimistic run's prunes there did not hold); 0 when the
    /// exact rule decided.
    pub learned_prune_points: u32,
    /// Graph kfunc calls (`graph`) by slot: the byte offset of the node
    /// field in the objects of the root they operate on (the kernel
    /// patches it into the call's `off` argument; the runtime needs it to
    /// turn a node back into its object).
    pub graph_node_offs: BTreeMap<usize, u32>,
}

impl Facts {
    /// Subprogram entry slots.
    pub fn subprog_entries(&self) -> Vec<usize> {
        self.subprogs.iter().map(|s| s.entry).collect()
    }
}
