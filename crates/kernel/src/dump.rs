//! Reading the kernel's maps back as STATE.json. The rules are listed in the
//! crate documentation, because the userspace engines must produce the
//! identical format for differential tests to compare dumps as text.

use crate::error::KernelError;
use crate::map_kind::{self, MapKind};
use crate::object::KernelObject;
use crate::sys::{self, MapInfo};
use bpfjet_maps::state::{to_hex, EntryState, InnerMapState, MapState};
use std::os::fd::{AsRawFd, RawFd};

/// Prefix of a `prog` name for a program that is not part of the object
/// (only possible if something outside bpfjet wrote the PROG_ARRAY).
pub const FOREIGN_PROGRAM_PREFIX: &str = "#id:";

impl KernelObject {
    /// Every map of the object as STATE.json (see the crate documentation
    /// for the exact rules).
    pub fn dump_maps(&self) -> Result<MapState, KernelError> {
        let mut state = MapState::new();
        for map in self.maps() {
            if map.name == ".kconfig" || matches!(map.kind(), MapKind::Opaque(_)) {
                continue;
            }
            let entries = self.dump_entries(&map.name, map.fd, &map.info)?;
            state.insert(map.name.clone(), entries);
        }
        Ok(state)
    }

    /// The entries of one map; `label` names it in errors.
    fn dump_entries(
        &self,
        label: &str,
        fd: RawFd,
        info: &MapInfo,
    ) -> Result<Vec<EntryState>, KernelError> {
        let kind = MapKind::of(info.map_type);
        let keys = match kind {
            MapKind::Opaque(_) => return Ok(Vec::new()),
            MapKind::DenseArray { .. } | MapKind::ProgArray | MapKind::MapInMap { array: true } => {
                (0..info.max_entries)
                    .map(|i| i.to_le_bytes().to_vec())
                    .collect()
            }
            MapKind::Keyed { .. } | MapKind::MapInMap { array: false } => {
                let mut keys = sys::keys(fd, info.key_size as usize)
                    .map_err(|errno| access(label, "listing keys", errno))?;
                keys.sort();
                keys
            }
        };
        let value_len = if kind.is_per_cpu() {
            sys::percpu_stride(info.value_size) * sys::possible_cpus()
        } else {
            info.value_size as usize
        };
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            // Absent: an empty PROG_ARRAY / map-in-map slot, or a key deleted
            // between listing and lookup.
            let Some(value) =
                sys::lookup(fd, &key, value_len).map_err(|errno| access(label, "lookup", errno))?
            else {
                continue;
            };
            let mut entry = EntryState {
                key: to_hex(&key),
                ..EntryState::default()
            };
            match kind {
                MapKind::ProgArray => {
                    let id = u32::from_le_bytes(value[..4].try_into().expect("4-byte prog id"));
                    entry.prog = Some(match self.program_name_by_id(id) {
                        Some(name) => name.to_string(),
                        None => format!("{FOREIGN_PROGRAM_PREFIX}{id}"),
                    });
                }
                MapKind::MapInMap { .. } => {
                    let id = u32::from_le_bytes(value[..4].try_into().expect("4-byte map id"));
                    entry.inner = Some(self.dump_inner(&format!("{label}[{}]", entry.key), id)?);
                }
                _ if kind.is_per_cpu() => {
                    let stride = sys::percpu_stride(info.value_size);
                    entry.values = Some(
                        value
                            .chunks(stride)
                            .map(|slot| to_hex(&slot[..info.value_size as usize]))
                            .collect(),
                    );
                }
                _ => entry.value = Some(to_hex(&value)),
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn dump_inner(&self, label: &str, id: u32) -> Result<InnerMapState, KernelError> {
        let fd =
            sys::map_fd_by_id(id).map_err(|errno| access(label, "opening inner map", errno))?;
        let info = sys::map_info(fd.as_raw_fd())
            .map_err(|errno| access(label, "reading inner map info", errno))?;
        Ok(InnerMapState {
            map_type: map_kind::type_name(info.map_type),
            key_size: info.key_size,
            value_size: info.value_size,
            max_entries: info.max_entries,
            flags: info.flags,
            entries: self.dump_entries(label, fd.as_raw_fd(), &info)?,
        })
    }
}

fn access(map: &str, what: &'static str, errno: crate::error::Errno) -> KernelError {
    KernelError::MapAccess {
        map: map.to_string(),
        what,
        errno,
    }
}
