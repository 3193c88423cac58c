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
pub use bpfjet_maps::FOREIGN_PROGRAM_PREFIX;

impl KernelObject {
    /// Every map of the object as STATE.json (see the crate documentation
    /// for the exact rules).
    pub fn dump_maps(&self) -> Result<MapState, KernelError> {
        self.dump_maps_where(|_| true)
    }

    /// [`KernelObject::dump_maps`] restricted to the maps whose STATE.json
    /// name `keep` accepts (to compare small maps often and big ones rarely).
    pub fn dump_maps_where(&self, keep: impl Fn(&str) -> bool) -> Result<MapState, KernelError> {
        let mut state = MapState::new();
        for map in self.maps() {
            if map.name == ".kconfig"
                || matches!(map.kind(), MapKind::Opaque(_))
                || !keep(&map.name)
            {
                continue;
            }
            let entries = self.dump_entries(&map.name, map.fd, &map.info)?;
            state.insert(map.name.clone(), entries);
        }
        Ok(state)
    }

    /// The entries of one map; `label` names it in errors.
    ///
    /// Arrays and hash maps are read with `BPF_MAP_LOOKUP_BATCH` (a few
    /// syscalls for a whole map instead of one per element: katran's
    /// 2.1M-entry ring); map types without batch support, and kernels
    /// that refuse it, are read key by key. Both paths produce the same
    /// entries through [`KernelObject::entry`].
    fn dump_entries(
        &self,
        label: &str,
        fd: RawFd,
        info: &MapInfo,
    ) -> Result<Vec<EntryState>, KernelError> {
        let kind = MapKind::of(info.map_type);
        let value_len = if kind.is_per_cpu() {
            sys::percpu_stride(info.value_size) * sys::possible_cpus()
        } else {
            info.value_size as usize
        };
        let key_len = info.key_size as usize;
        let batched = match kind {
            MapKind::DenseArray { .. } => read_batched(label, fd, info, value_len, true),
            MapKind::Keyed { .. } => read_batched(label, fd, info, value_len, false),
            _ => None,
        };
        if let Some((keys, values)) = batched {
            let n = keys.len() / key_len.max(1);
            let key = |i: usize| &keys[i * key_len..(i + 1) * key_len];
            let mut order: Vec<usize> = (0..n).collect();
            if matches!(kind, MapKind::Keyed { .. }) {
                order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
            }
            let mut entries = Vec::with_capacity(n);
            for i in order {
                let value = &values[i * value_len..(i + 1) * value_len];
                entries.push(self.entry(label, kind, info, key(i), value)?);
            }
            return Ok(entries);
        }
        let keys = match kind {
            MapKind::Opaque(_) => return Ok(Vec::new()),
            MapKind::DenseArray { .. } | MapKind::ProgArray | MapKind::MapInMap { array: true } => {
                (0..info.max_entries)
                    .map(|i| i.to_le_bytes().to_vec())
                    .collect()
            }
            MapKind::Keyed { .. } | MapKind::MapInMap { array: false } => {
                let mut keys =
                    sys::keys(fd, key_len).map_err(|errno| access(label, "listing keys", errno))?;
                keys.sort();
                keys
            }
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
            entries.push(self.entry(label, kind, info, &key, &value)?);
        }
        Ok(entries)
    }

    /// One present element in STATE.json form; `value` is as the lookup
    /// syscall returns it (per-CPU: every possible CPU's padded slot).
    fn entry(
        &self,
        label: &str,
        kind: MapKind,
        info: &MapInfo,
        key: &[u8],
        value: &[u8],
    ) -> Result<EntryState, KernelError> {
        let mut entry = EntryState {
            key: to_hex(key),
            ..EntryState::default()
        };
        if map_kind::holds_entry_programs(info.map_type, info.value_size) {
            let (first, prog) = bpfjet_maps::split_entry_program(value);
            entry.value = Some(to_hex(first));
            entry.prog = prog.map(|id| match self.program_name_by_id(id) {
                Some(name) => name.to_string(),
                None => format!("{FOREIGN_PROGRAM_PREFIX}{id}"),
            });
            return Ok(entry);
        }
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
            _ => entry.value = Some(to_hex(value)),
        }
        Ok(entry)
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

/// Bytes of keys and values one batch call may fill: big enough that
/// katran's ring takes a few dozen calls, small enough not to matter.
const BATCH_BYTES: usize = 4 << 20;

/// Every element of an array (`dense`: exactly the indices
/// `0..max_entries`, in order) or a hash map (any order), as packed keys
/// and packed syscall-layout values, read with `BPF_MAP_LOOKUP_BATCH`.
/// None (after saying why, once per process) when the kernel refuses the
/// batch operation or answers something the dump rules cannot use; the
/// caller then reads the map key by key.
fn read_batched(
    label: &str,
    fd: RawFd,
    info: &MapInfo,
    value_len: usize,
    dense: bool,
) -> Option<(Vec<u8>, Vec<u8>)> {
    const OP: &str = "BPF_MAP_LOOKUP_BATCH";
    let key_len = info.key_size as usize;
    if key_len == 0 || info.max_entries == 0 {
        return None;
    }
    let max = info.max_entries as usize;
    let mut chunk = (BATCH_BYTES / (key_len + value_len)).clamp(1, max);
    let mut keys = Vec::new();
    let mut values = Vec::new();
    let token_len = sys::batch_token_len(info.key_size);
    let (mut token_in, mut token_out) = (vec![0u8; token_len], vec![0u8; token_len]);
    let mut started = false;
    loop {
        let (k0, v0) = (keys.len(), values.len());
        keys.resize(k0 + chunk * key_len, 0);
        values.resize(v0 + chunk * value_len, 0);
        let read = sys::lookup_batch(
            fd,
            started.then_some(token_in.as_mut_slice()),
            &mut token_out,
            &mut keys[k0..],
            &mut values[v0..],
            chunk,
        );
        match read {
            Ok(read) => {
                let count = read.count.min(chunk);
                keys.truncate(k0 + count * key_len);
                values.truncate(v0 + count * value_len);
                if read.done {
                    break;
                }
                if count == 0 {
                    sys::note_batch_fallback(OP, label, &"no progress");
                    return None;
                }
                std::mem::swap(&mut token_in, &mut token_out);
                started = true;
            }
            // A hash bucket holds more elements than `chunk`: retry bigger.
            Err(errno) if errno.raw() == libc::ENOSPC && chunk < max => {
                keys.truncate(k0);
                values.truncate(v0);
                chunk = (chunk * 2).min(max);
            }
            Err(errno) => {
                sys::note_batch_fallback(OP, label, &errno);
                return None;
            }
        }
    }
    if dense {
        let n = keys.len() / key_len;
        let in_order = n == max
            && keys
                .chunks_exact(key_len)
                .enumerate()
                .all(|(i, k)| k[..4] == (i as u32).to_le_bytes() && k[4..].iter().all(|&b| b == 0));
        if !in_order {
            sys::note_batch_fallback(OP, label, &"the array's indices came back incomplete");
            return None;
        }
    }
    Some((keys, values))
}

fn access(map: &str, what: &'static str, errno: crate::error::Errno) -> KernelError {
    KernelError::MapAccess {
        map: map.to_string(),
        what,
        errno,
    }
}
