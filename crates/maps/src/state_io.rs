//! Applying STATE.json entries to maps and dumping maps back to it.
//!
//! Map-in-map entries create inner maps and PROG_ARRAY entries name
//! programs, neither of which a map can do alone: a [`StateResolver`]
//! supplied by the caller creates inner maps (normally in the instance
//! registry) and maps program names to the ids the runtime stores.

use crate::error::MapError;
use crate::instance::Instance;
use crate::map::Map;
use crate::spec::{update, MapSpec, MapType};
use crate::state::{parse_hex, to_hex, EntryState, InnerMapState, MapState, StateError};
use std::sync::Arc;

/// What applying or dumping state needs from outside the map.
pub trait StateResolver {
    /// Create a new inner map for a map-in-map entry.
    fn create_inner_map(&self, spec: &MapSpec) -> Result<Arc<Map>, MapError>;
    /// An existing map by id (to dump an inner map).
    fn map_by_id(&self, id: u32) -> Option<Arc<Map>>;
    /// The id a PROG_ARRAY stores for a program of the object.
    fn prog_id(&self, name: &str) -> Option<u32>;
    /// The program name for a stored id.
    fn prog_name(&self, id: u32) -> Option<String>;
}

/// An instance resolves maps; programs are named by their index in `progs`.
pub struct InstanceResolver<'a> {
    pub instance: &'a Instance,
    pub progs: &'a [String],
}

impl StateResolver for InstanceResolver<'_> {
    fn create_inner_map(&self, spec: &MapSpec) -> Result<Arc<Map>, MapError> {
        self.instance.create_inner_map(spec)
    }
    fn map_by_id(&self, id: u32) -> Option<Arc<Map>> {
        self.instance.map_by_id(id).ok()
    }
    fn prog_id(&self, name: &str) -> Option<u32> {
        self.progs.iter().position(|p| p == name).map(|i| i as u32)
    }
    fn prog_name(&self, id: u32) -> Option<String> {
        self.progs.get(id as usize).cloned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("map {map:?}: entry {index}: {source}")]
    Map {
        map: String,
        index: usize,
        #[source]
        source: MapError,
    },
    #[error("map {map:?}: entry {index}: {source}")]
    State {
        map: String,
        index: usize,
        #[source]
        source: StateError,
    },
    #[error("map {map:?}: entry {index}: {why}")]
    Bad {
        map: String,
        index: usize,
        why: String,
    },
    #[error("no map named {0:?}")]
    UnknownMap(String),
}

/// The spec of an inner map described in STATE.json.
pub fn inner_spec(inner: &InnerMapState) -> Result<MapSpec, String> {
    let t = MapType::from_name(&inner.map_type)
        .ok_or_else(|| format!("unknown map type {:?}", inner.map_type))?;
    let mut spec = MapSpec::new(
        "inner",
        t,
        inner.key_size,
        inner.value_size,
        inner.max_entries,
    );
    spec.flags = inner.flags;
    Ok(spec)
}

/// Prefix of a `prog` entry whose id names no program of the object.
pub const FOREIGN_PROGRAM_PREFIX: &str = "#id:";

/// An entry value of a map with entry programs: the ifindex (qsize) and
/// the program id, None when the slot is empty.
pub fn split_entry_program(value: &[u8]) -> (&[u8], Option<u32>) {
    let id = value
        .get(4..8)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes)
        .filter(|&id| id != 0);
    (&value[..value.len().min(4)], id)
}

impl Map {
    /// Whether the map's entries may hold programs (STATE.json names them
    /// with `prog` next to the `value`): a DEVMAP, DEVMAP_HASH or CPUMAP
    /// with 8-byte values (`struct bpf_devmap_val`, `bpf_cpumap_val`).
    pub fn holds_entry_programs(&self) -> bool {
        matches!(
            self.map_type(),
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap
        ) && self.value_size() >= 8
    }

    /// Apply STATE.json entries to this map with control-plane semantics
    /// (`BPF_ANY` updates; EPERM on a frozen map).
    pub fn apply_state(
        &self,
        entries: &[EntryState],
        r: &dyn StateResolver,
    ) -> Result<(), ApplyError> {
        let map = self.name().to_string();
        for (index, e) in entries.iter().enumerate() {
            let merr = |source| ApplyError::Map {
                map: map.clone(),
                index,
                source,
            };
            let serr = |source| ApplyError::State {
                map: map.clone(),
                index,
                source,
            };
            let bad = |why: String| ApplyError::Bad {
                map: map.clone(),
                index,
                why,
            };
            let key = parse_hex(&e.key).map_err(serr)?;
            if self.holds_entry_programs() {
                // `value` is the ifindex (qsize) alone or with a zero
                // program slot; `prog` names the entry's program.
                let Some(v) = &e.value else {
                    return Err(bad(
                        "a devmap/cpumap entry takes `value` (and `prog`)".into()
                    ));
                };
                let v = parse_hex(v).map_err(serr)?;
                if v.len() != 4 && !(v.len() == 8 && v[4..] == [0; 4]) {
                    return Err(bad(
                        "`value` is the 4-byte ifindex (qsize); name the program with `prog`"
                            .into(),
                    ));
                }
                let id = match &e.prog {
                    Some(p) => r
                        .prog_id(p)
                        .ok_or_else(|| bad(format!("no program {p:?}")))?,
                    None => 0,
                };
                let mut value = v[..4].to_vec();
                value.extend_from_slice(&id.to_ne_bytes());
                self.update_elem(&key, &value, update::ANY).map_err(merr)?;
                continue;
            }
            match (&e.value, &e.values, &e.inner, &e.prog) {
                (Some(v), None, None, None) => {
                    let v = parse_hex(v).map_err(serr)?;
                    self.update_elem(&key, &v, update::ANY).map_err(merr)?;
                }
                (None, Some(vs), None, None) => {
                    let vs = vs
                        .iter()
                        .map(|v| parse_hex(v))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(serr)?;
                    let refs: Vec<&[u8]> = vs.iter().map(|v| v.as_slice()).collect();
                    self.update_percpu(&key, &refs, update::ANY).map_err(merr)?;
                }
                (None, None, Some(inner), None) => {
                    if !matches!(self.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps) {
                        return Err(bad("`inner` on a map that is not a map-in-map".into()));
                    }
                    let spec = inner_spec(inner).map_err(bad)?;
                    if let Some(t) = &self.spec().inner {
                        if t.map_type != spec.map_type
                            || t.key_size != spec.key_size
                            || t.value_size != spec.value_size
                        {
                            return Err(bad("inner map does not match the template".into()));
                        }
                    }
                    let m = r.create_inner_map(&spec).map_err(merr)?;
                    m.apply_state(&inner.entries, r)?;
                    self.update_elem(&key, &m.id().to_ne_bytes(), update::ANY)
                        .map_err(merr)?;
                }
                (None, None, None, Some(p)) => {
                    if self.map_type() != MapType::ProgArray {
                        return Err(bad("`prog` on a map that is not a prog array".into()));
                    }
                    let id = r
                        .prog_id(p)
                        .ok_or_else(|| bad(format!("no program {p:?}")))?;
                    self.update_elem(&key, &id.to_ne_bytes(), update::ANY)
                        .map_err(merr)?;
                }
                _ => return Err(bad("exactly one of value, values, inner, prog".into())),
            }
        }
        Ok(())
    }

    /// The map's contents in STATE.json form.
    pub fn dump(&self, r: &dyn StateResolver) -> Result<Vec<EntryState>, MapError> {
        let per_cpu = self.map_type().is_per_cpu();
        let mut out = Vec::new();
        for e in self.entries()? {
            let mut s = EntryState {
                key: to_hex(&e.key),
                ..Default::default()
            };
            let id = e.values[0]
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes);
            match (self.map_type(), id) {
                (MapType::ProgArray, Some(id)) if r.prog_name(id).is_some() => {
                    s.prog = r.prog_name(id)
                }
                _ if self.holds_entry_programs() => {
                    let (value, prog) = split_entry_program(&e.values[0]);
                    s.value = Some(to_hex(value));
                    s.prog = prog.map(|id| {
                        r.prog_name(id)
                            .unwrap_or_else(|| format!("{FOREIGN_PROGRAM_PREFIX}{id}"))
                    });
                }
                (MapType::ArrayOfMaps | MapType::HashOfMaps, Some(id))
                    if r.map_by_id(id).is_some() =>
                {
                    let m = r.map_by_id(id).ok_or(MapError::NotFound)?;
                    s.inner = Some(InnerMapState {
                        map_type: m.map_type().name().to_string(),
                        key_size: m.key_size(),
                        value_size: m.value_size(),
                        max_entries: m.max_entries(),
                        flags: m.spec().flags,
                        entries: m.dump(r)?,
                    });
                }
                _ if per_cpu => s.values = Some(e.values.iter().map(|v| to_hex(v)).collect()),
                _ => s.value = Some(to_hex(&e.values[0])),
            }
            out.push(s);
        }
        Ok(out)
    }
}

impl Instance {
    /// Apply a whole STATE.json to the instance's maps, by name.
    pub fn apply_state(&self, state: &MapState, r: &dyn StateResolver) -> Result<(), ApplyError> {
        for (name, entries) in state {
            let m = self
                .map_by_name(name)
                .map_err(|_| ApplyError::UnknownMap(name.clone()))?;
            m.apply_state(entries, r)?;
        }
        Ok(())
    }

    /// Every map the object declared (inner maps appear under their outer map).
    pub fn dump_state(&self, r: &dyn StateResolver) -> Result<MapState, MapError> {
        let mut out = MapState::new();
        for info in self.list().into_iter().filter(|m| !m.inner) {
            let m = self.map_by_id(info.id)?;
            out.insert(info.name.clone(), m.dump(r)?);
        }
        Ok(out)
    }
}
