//! Map contents as STATE.json, by the kernel engine's dump rules
//! (`bpfjet_kernel`'s crate documentation), so that dumps of the two engines
//! compare equal as text:
//!
//! - arrays (and global data): every index in order, key = index as 4 LE bytes;
//! - hash-like maps (HASH, LRU, LPM, DEVMAP, DEVMAP_HASH, CPUMAP): present
//!   keys sorted by key bytes;
//! - per-CPU maps: always `values`, one per CPU slot;
//! - PROG_ARRAY: occupied slots as `prog` names (`#id:<n>` for unknown ids);
//! - DEVMAP, DEVMAP_HASH, CPUMAP with 8-byte values: `value` the 4-byte
//!   ifindex (qsize), `prog` the entry's program when it has one;
//! - map-in-maps: `inner` with the inner map's spec and its entries;
//! - omitted: RINGBUF, PERF_EVENT_ARRAY, QUEUE, STACK, BLOOM_FILTER, XSKMAP;
//! - special fields of values (locks, graph roots, kptrs) read as zeros.

use crate::loader::LoadedObject;
use crate::runtime_error::RuntimeError;
use bpfjet_maps::state::{to_hex, EntryState, InnerMapState, MapState};
use bpfjet_maps::{Map, MapError, MapType};
use std::sync::Arc;

/// Prefix of a `prog` entry whose id names no program of the object (the
/// kernel engine's too).
pub use bpfjet_maps::FOREIGN_PROGRAM_PREFIX;

fn is_dumped(t: MapType) -> bool {
    !matches!(
        t,
        MapType::Ringbuf
            | MapType::PerfEventArray
            | MapType::Queue
            | MapType::Stack
            | MapType::BloomFilter
            | MapType::Xskmap
    )
}

fn is_keyed(t: MapType) -> bool {
    matches!(
        t,
        MapType::Hash
            | MapType::LruHash
            | MapType::PercpuHash
            | MapType::LruPercpuHash
            | MapType::LpmTrie
            | MapType::Devmap
            | MapType::DevmapHash
            | MapType::Cpumap
            | MapType::HashOfMaps
    )
}

impl LoadedObject {
    /// Every map of the object as STATE.json, in the kernel engine's format.
    pub fn dump_state(&self) -> Result<MapState, RuntimeError> {
        self.dump_state_where(|_| true)
    }

    /// [`LoadedObject::dump_state`] restricted to the maps whose STATE.json
    /// name `keep` accepts (to compare small maps often and big ones rarely).
    pub fn dump_state_where(&self, keep: impl Fn(&str) -> bool) -> Result<MapState, RuntimeError> {
        self.dump(keep, true)
    }

    /// [`LoadedObject::dump_state`] with the special fields as the runtime
    /// holds them (kptrs and graph roots are addresses in this process):
    /// for code inspecting the runtime's structures in the same process,
    /// never what a control plane is shown.
    pub fn dump_state_with_special_fields(&self) -> Result<MapState, RuntimeError> {
        self.dump(|_| true, false)
    }

    fn dump(&self, keep: impl Fn(&str) -> bool, mask: bool) -> Result<MapState, RuntimeError> {
        let mut state = MapState::new();
        for (i, map) in self.maps.maps.iter().enumerate() {
            if !is_dumped(map.map_type()) || map.name() == ".kconfig" || !keep(map.name()) {
                continue;
            }
            let special = if mask {
                self.maps.special_fields_of(i)
            } else {
                &[]
            };
            let entries =
                self.dump_map(map, special, mask)
                    .map_err(|source| RuntimeError::Map {
                        map: map.name().to_string(),
                        source,
                    })?;
            state.insert(map.name().to_string(), entries);
        }
        Ok(state)
    }

    /// A map's entries; the bytes of `special` fields (locks, graph roots,
    /// kptrs: runtime pointers and state) read as zeros, as the kernel's
    /// lookup from user space gives them (`check_and_init_map_value`).
    fn dump_map(
        &self,
        map: &Map,
        special: &[bpfjet_obj::SpecialField],
        mask: bool,
    ) -> Result<Vec<EntryState>, MapError> {
        // Masked below by the object's own list (the map's owned fields
        // are a subset of it).
        let mut entries = map.entries_raw()?;
        for e in &mut entries {
            for v in &mut e.values {
                for f in special {
                    let lo = (f.off as usize).min(v.len());
                    let hi = (f.off as usize + f.size as usize).min(v.len());
                    v[lo..hi].fill(0);
                }
            }
        }
        if is_keyed(map.map_type()) {
            entries.sort_by(|a, b| a.key.cmp(&b.key));
        }
        let per_cpu = map.map_type().is_per_cpu();
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let mut entry = EntryState {
                key: to_hex(&e.key),
                ..EntryState::default()
            };
            let first = e.values.first().map(Vec::as_slice).unwrap_or_default();
            let id = first
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes)
                .unwrap_or_default();
            match map.map_type() {
                MapType::ProgArray => {
                    entry.prog = Some(match self.prog_names.get(id as usize) {
                        Some(name) => name.clone(),
                        None => format!("{FOREIGN_PROGRAM_PREFIX}{id}"),
                    });
                }
                _ if map.holds_entry_programs() => {
                    let (value, prog) = bpfjet_maps::split_entry_program(first);
                    entry.value = Some(to_hex(value));
                    entry.prog = prog.map(|id| match self.prog_names.get(id as usize) {
                        Some(name) => name.clone(),
                        None => format!("{FOREIGN_PROGRAM_PREFIX}{id}"),
                    });
                }
                MapType::ArrayOfMaps | MapType::HashOfMaps => {
                    let inner: Arc<Map> = self.maps.inner_map(id).ok_or(MapError::NotFound)?;
                    entry.inner = Some(InnerMapState {
                        map_type: inner.map_type().name().to_string(),
                        key_size: inner.key_size(),
                        value_size: inner.value_size(),
                        max_entries: inner.max_entries(),
                        flags: inner.spec().flags,
                        // An inner map that is one of the object's maps
                        // has its special fields masked as there.
                        entries: {
                            let own = self
                                .maps
                                .maps
                                .iter()
                                .position(|m| Arc::ptr_eq(m, &inner))
                                .filter(|_| mask);
                            let special = own.map_or(&[][..], |i| self.maps.special_fields_of(i));
                            self.dump_map(&inner, special, mask)?
                        },
                    });
                }
                _ if per_cpu => {
                    entry.values = Some(e.values.iter().map(|v| to_hex(v)).collect());
                }
                _ => entry.value = Some(to_hex(first)),
            }
            out.push(entry);
        }
        Ok(out)
    }
}
