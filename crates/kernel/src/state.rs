//! Applying a STATE.json map state to the kernel's maps.
//!
//! Frozen global data (`.rodata`) is written into the object's initial image
//! before the load, because libbpf freezes it right after creating it; every
//! other map is updated through the `bpf()` syscall after the load.

use crate::error::{EntryPart, KernelError};
use crate::map_kind::{self, MapKind};
use crate::object::{is_frozen, join, KernelObject};
use crate::sys::{self, MapInfo};
use bpfjet_maps::state::{parse_hex, EntryState, MapState};
use libbpf_rs::{AsRawLibbpf, OpenObject};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

impl KernelObject {
    /// Write `state` into the loaded object's maps. Entries of frozen maps
    /// (`.rodata`) are accepted only if they equal the current contents;
    /// to change them, pass the state to [`KernelObject::open_with`].
    pub fn apply_state(&self, state: &MapState) -> Result<(), KernelError> {
        self.check_state_names(state)?;
        for (name, entries) in state {
            let map = self.map(name)?;
            if map.frozen {
                self.check_frozen_unchanged(name, map.fd, &map.info, entries)?;
            } else {
                self.apply_entries(name, map.fd, &map.info, entries)?;
            }
        }
        Ok(())
    }

    /// The post-load half of [`KernelObject::open_with`]: frozen maps were
    /// already written before the load.
    pub(crate) fn apply_state_after_load(&self, state: &MapState) -> Result<(), KernelError> {
        for (name, entries) in state {
            let map = self.map(name)?;
            if !map.frozen {
                self.apply_entries(name, map.fd, &map.info, entries)?;
            }
        }
        Ok(())
    }

    fn check_state_names(&self, state: &MapState) -> Result<(), KernelError> {
        let names: Vec<(String, String)> = self
            .maps()
            .iter()
            .map(|m| (m.name.clone(), m.libbpf_name.clone()))
            .collect();
        check_names(state, &names)
    }

    fn check_frozen_unchanged(
        &self,
        map: &str,
        fd: RawFd,
        info: &MapInfo,
        entries: &[EntryState],
    ) -> Result<(), KernelError> {
        for (i, entry) in entries.iter().enumerate() {
            let (key, value) = global_data_entry(map, i, info.value_size as usize, entry)?;
            let current = sys::lookup(fd, &key, info.value_size as usize).map_err(|errno| {
                KernelError::MapAccess {
                    map: map.to_string(),
                    what: "lookup",
                    errno,
                }
            })?;
            if current.as_deref() != Some(value.as_slice()) {
                return Err(bad(
                    map,
                    i,
                    "the map is frozen after load; pass the state when loading \
                     (KernelObject::open_with) to change it",
                ));
            }
        }
        Ok(())
    }

    /// Fill one map (the object's or an inner map this crate created).
    /// `label` names it in errors: `outer`, `outer[2].inner`, ...
    fn apply_entries(
        &self,
        label: &str,
        fd: RawFd,
        info: &MapInfo,
        entries: &[EntryState],
    ) -> Result<(), KernelError> {
        let kind = MapKind::of(info.map_type);
        if let MapKind::Opaque(why) = kind {
            if !entries.is_empty() {
                return Err(bad(
                    label,
                    0,
                    &format!("cannot hold STATE.json entries: {why}"),
                ));
            }
        }
        if matches!(kind, MapKind::DenseArray { .. } | MapKind::Keyed { .. })
            && entries.len() >= BATCH_MIN
        {
            return self.apply_batched(label, fd, info, kind, entries);
        }
        for (i, entry) in entries.iter().enumerate() {
            let key = hex(label, i, "key", &entry.key)?;
            expect_size(label, i, EntryPart::Key, info.key_size as usize, key.len())?;
            let value = self.entry_value(label, i, info, kind, entry)?;
            sys::update(fd, &key, &value.bytes).map_err(|errno| {
                if value.inner_map.is_some() && errno.raw() == libc::EINVAL {
                    bad(
                        label,
                        i,
                        &format!(
                            "the kernel refused the inner map ({errno}): its type, key/value \
                             sizes, flags and max_entries must match the outer map's template"
                        ),
                    )
                } else {
                    KernelError::Update {
                        map: label.to_string(),
                        entry: i,
                        errno,
                    }
                }
            })?;
        }
        Ok(())
    }

    /// [`Self::apply_entries`] for many plain entries of an array or hash
    /// map: `BPF_MAP_UPDATE_BATCH` in chunks, with the per-entry path's
    /// exact effects and errors. Entries before a bad one are applied, the
    /// bad one and those after it are not; an element the kernel refuses is
    /// retried alone so that its error is the one `BPF_MAP_UPDATE_ELEM` gives.
    fn apply_batched(
        &self,
        label: &str,
        fd: RawFd,
        info: &MapInfo,
        kind: MapKind,
        entries: &[EntryState],
    ) -> Result<(), KernelError> {
        let key_len = info.key_size as usize;
        let value_len = if kind.is_per_cpu() {
            sys::percpu_stride(info.value_size) * sys::possible_cpus()
        } else {
            info.value_size as usize
        };
        let chunk = (BATCH_BYTES / (key_len + value_len).max(1)).max(1);
        let mut batch = Batch {
            label,
            fd,
            key_len,
            value_len,
            first: 0,
            keys: Vec::with_capacity(chunk.min(entries.len()) * key_len),
            values: Vec::with_capacity(chunk.min(entries.len()) * value_len),
            use_batch: true,
        };
        for (i, entry) in entries.iter().enumerate() {
            let parsed = hex(label, i, "key", &entry.key).and_then(|key| {
                expect_size(label, i, EntryPart::Key, key_len, key.len())?;
                Ok((key, self.entry_value(label, i, info, kind, entry)?))
            });
            match parsed {
                Ok((key, value)) => {
                    batch.keys.extend_from_slice(&key);
                    batch.values.extend_from_slice(&value.bytes);
                }
                Err(e) => {
                    batch.flush()?;
                    return Err(e);
                }
            }
            if batch.len() == chunk {
                batch.flush()?;
            }
        }
        batch.flush()
    }

    fn entry_value(
        &self,
        label: &str,
        i: usize,
        info: &MapInfo,
        kind: MapKind,
        entry: &EntryState,
    ) -> Result<EntryValue, KernelError> {
        if map_kind::holds_entry_programs(info.map_type, info.value_size) {
            let fd = match &entry.prog {
                Some(p) => self.program(p)?.fd,
                None => -1,
            };
            return entry_program_value(label, i, entry, fd).map(Into::into);
        }
        let set = [
            entry.value.is_some(),
            entry.values.is_some(),
            entry.inner.is_some(),
            entry.prog.is_some(),
        ];
        if set.iter().filter(|&&s| s).count() != 1 {
            return Err(bad(
                label,
                i,
                "exactly one of value, values, inner, prog must be given",
            ));
        }
        let value_size = info.value_size as usize;
        if let Some(text) = &entry.value {
            let value = hex(label, i, "value", text)?;
            expect_size(label, i, EntryPart::Value, value_size, value.len())?;
            return match kind {
                MapKind::DenseArray { .. } | MapKind::Keyed { .. } if kind.is_per_cpu() => {
                    Ok(per_cpu_image(
                        std::iter::repeat_n(value.as_slice(), sys::possible_cpus()),
                        value_size,
                    )
                    .into())
                }
                MapKind::DenseArray { .. } | MapKind::Keyed { .. } => Ok(value.into()),
                MapKind::ProgArray => Err(bad(label, i, "a PROG_ARRAY entry takes `prog`")),
                MapKind::MapInMap { .. } => Err(bad(label, i, "a map-in-map entry takes `inner`")),
                MapKind::Opaque(why) => Err(bad(label, i, why)),
            };
        }
        if let Some(texts) = &entry.values {
            if !kind.is_per_cpu() {
                return Err(bad(
                    label,
                    i,
                    "`values` is only for per-CPU maps; use `value`",
                ));
            }
            expect_size(
                label,
                i,
                EntryPart::CpuCount,
                sys::possible_cpus(),
                texts.len(),
            )?;
            let mut values = Vec::with_capacity(texts.len());
            for text in texts {
                let value = hex(label, i, "value", text)?;
                expect_size(label, i, EntryPart::Value, value_size, value.len())?;
                values.push(value);
            }
            return Ok(per_cpu_image(values.iter().map(Vec::as_slice), value_size).into());
        }
        if let Some(program) = &entry.prog {
            if kind != MapKind::ProgArray {
                return Err(bad(label, i, "`prog` is only for PROG_ARRAY maps"));
            }
            let fd = self.program(program)?.fd;
            return Ok((fd as u32).to_le_bytes().to_vec().into());
        }
        let inner = entry.inner.as_ref().expect("exactly one kind is set");
        if !matches!(kind, MapKind::MapInMap { .. }) {
            return Err(bad(
                label,
                i,
                "`inner` is only for ARRAY_OF_MAPS / HASH_OF_MAPS maps",
            ));
        }
        let map_type = map_kind::type_from_name(&inner.map_type).ok_or_else(|| {
            bad(
                label,
                i,
                &format!("unknown inner map type {:?}", inner.map_type),
            )
        })?;
        let inner_label = format!("{label}[{i}].inner");
        let inner_fd = sys::create_map(
            map_type,
            "bpfjet_inner",
            inner.key_size,
            inner.value_size,
            inner.max_entries,
            inner.flags,
        )
        .map_err(|errno| KernelError::MapAccess {
            map: inner_label.clone(),
            what: "creating the inner map",
            errno,
        })?;
        let inner_info =
            sys::map_info(inner_fd.as_raw_fd()).map_err(|errno| KernelError::MapAccess {
                map: inner_label.clone(),
                what: "reading map info",
                errno,
            })?;
        self.apply_entries(
            &inner_label,
            inner_fd.as_raw_fd(),
            &inner_info,
            &inner.entries,
        )?;
        Ok(EntryValue {
            bytes: (inner_fd.as_raw_fd() as u32).to_le_bytes().to_vec(),
            inner_map: Some(inner_fd),
        })
    }
}

/// Entry lists at least this long go through `BPF_MAP_UPDATE_BATCH`.
const BATCH_MIN: usize = 64;

/// Bytes of keys and values per `BPF_MAP_UPDATE_BATCH` call.
const BATCH_BYTES: usize = 4 << 20;

/// Parsed entries waiting for one `BPF_MAP_UPDATE_BATCH`.
struct Batch<'a> {
    label: &'a str,
    fd: RawFd,
    key_len: usize,
    value_len: usize,
    /// Index in the entry list of the first pending element.
    first: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
    /// False once the kernel refused the batch operation for this map.
    use_batch: bool,
}

impl Batch<'_> {
    fn len(&self) -> usize {
        self.keys.len() / self.key_len.max(1)
    }

    /// Write the pending elements; an error names the entry it came from.
    fn flush(&mut self) -> Result<(), KernelError> {
        let n = self.len();
        let mut done = 0;
        if n > 0 && self.use_batch {
            match sys::update_batch(self.fd, &self.keys, &self.values, n) {
                Ok(()) => done = n,
                Err((applied, errno)) => {
                    if applied == 0 && sys::batch_unsupported(&errno) {
                        sys::note_batch_fallback("BPF_MAP_UPDATE_BATCH", self.label, &errno);
                        self.use_batch = false;
                    }
                    done = applied;
                }
            }
        }
        for j in done..n {
            let key = &self.keys[j * self.key_len..(j + 1) * self.key_len];
            let value = &self.values[j * self.value_len..(j + 1) * self.value_len];
            sys::update(self.fd, key, value).map_err(|errno| KernelError::Update {
                map: self.label.to_string(),
                entry: self.first + j,
                errno,
            })?;
        }
        self.first += n;
        self.keys.clear();
        self.values.clear();
        Ok(())
    }
}

/// Value bytes as the update syscall wants them. An inner map created for
/// the entry must stay open until the outer map took its own reference on
/// update; after that, dropping our fd leaves the map alive in the kernel.
struct EntryValue {
    bytes: Vec<u8>,
    inner_map: Option<OwnedFd>,
}

impl From<Vec<u8>> for EntryValue {
    fn from(bytes: Vec<u8>) -> Self {
        EntryValue {
            bytes,
            inner_map: None,
        }
    }
}

/// Every name in `state` must resolve to a map; `names` are (state name, libbpf name).
pub(crate) fn check_names(state: &MapState, names: &[(String, String)]) -> Result<(), KernelError> {
    for name in state.keys() {
        if !names.iter().any(|(s, l)| s == name || l == name) {
            return Err(KernelError::MapNotFound {
                map: name.clone(),
                available: join(names.iter().map(|(s, _)| s.as_str())),
            });
        }
    }
    Ok(())
}

/// Write state for frozen global data into the object's initial image.
pub(crate) fn apply_before_load(
    open: &mut OpenObject,
    state: &MapState,
) -> Result<(), KernelError> {
    for mut map in open.maps_mut() {
        let libbpf_name = map.name().to_string_lossy().into_owned();
        // SAFETY: the map pointer is valid while `open` lives.
        let global = unsafe { libbpf_sys::bpf_map__is_internal(map.as_libbpf_object().as_ptr()) };
        let name = crate::object::state_name(&libbpf_name, global);
        if !is_frozen(&name, global) {
            continue;
        }
        let Some(entries) = state.get(&name).or_else(|| state.get(&libbpf_name)) else {
            continue;
        };
        let mut image = map.initial_value().map(<[u8]>::to_vec).unwrap_or_default();
        for (i, entry) in entries.iter().enumerate() {
            let (_, value) = global_data_entry(&name, i, image.len(), entry)?;
            image = value;
        }
        map.set_initial_value(&image)
            .map_err(|e| bad(&name, 0, &e.to_string()))?;
    }
    Ok(())
}

/// A global data map is an array of one element: key 0, the section image as value.
fn global_data_entry(
    map: &str,
    i: usize,
    image_len: usize,
    entry: &EntryState,
) -> Result<(Vec<u8>, Vec<u8>), KernelError> {
    let key = hex(map, i, "key", &entry.key)?;
    expect_size(map, i, EntryPart::Key, 4, key.len())?;
    if key != [0, 0, 0, 0] {
        return Err(bad(map, i, "global data has a single entry, key 00000000"));
    }
    let Some(text) = &entry.value else {
        return Err(bad(map, i, "global data takes `value` (the section image)"));
    };
    if entry.values.is_some() || entry.inner.is_some() || entry.prog.is_some() {
        return Err(bad(map, i, "global data takes only `value`"));
    }
    let value = hex(map, i, "value", text)?;
    expect_size(map, i, EntryPart::Value, image_len, value.len())?;
    Ok((key, value))
}

/// Per-CPU values in the syscall's layout: one 8-byte aligned slot per possible CPU.
pub(crate) fn per_cpu_image<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    value_size: usize,
) -> Vec<u8> {
    let stride = sys::percpu_stride(value_size as u32);
    let mut image = Vec::new();
    for v in values {
        let start = image.len();
        image.extend_from_slice(v);
        image.resize(start + stride, 0);
    }
    image
}

fn hex(map: &str, i: usize, what: &str, text: &str) -> Result<Vec<u8>, KernelError> {
    parse_hex(text).map_err(|e| bad(map, i, &format!("{what}: {e}")))
}

fn expect_size(
    map: &str,
    entry: usize,
    part: EntryPart,
    expected: usize,
    got: usize,
) -> Result<(), KernelError> {
    if expected == got {
        Ok(())
    } else {
        Err(KernelError::SizeMismatch {
            map: map.to_string(),
            entry,
            part,
            expected,
            got,
        })
    }
}

fn bad(map: &str, entry: usize, why: &str) -> KernelError {
    KernelError::BadEntry {
        map: map.to_string(),
        entry,
        why: why.to_string(),
    }
}

/// A devmap/cpumap entry's value as the kernel takes it: the ifindex
/// (qsize) from `value` (4 bytes, or 8 with a zero program slot), then the
/// program fd (-1: none).
pub(crate) fn entry_program_value(
    label: &str,
    i: usize,
    entry: &EntryState,
    fd: i32,
) -> Result<Vec<u8>, KernelError> {
    let Some(text) = &entry.value else {
        return Err(bad(
            label,
            i,
            "a devmap/cpumap entry takes `value` (and `prog`)",
        ));
    };
    let v = hex(label, i, "value", text)?;
    if v.len() != 4 && !(v.len() == 8 && v[4..] == [0; 4]) {
        return Err(bad(
            label,
            i,
            "`value` is the 4-byte ifindex (qsize); name the program with `prog`",
        ));
    }
    let mut value = v[..4].to_vec();
    value.extend_from_slice(&fd.to_ne_bytes());
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_slots_are_padded_to_eight_bytes() {
        let image = per_cpu_image([&[1u8, 2, 3][..], &[4, 5, 6][..]].into_iter(), 3);
        assert_eq!(image, [1, 2, 3, 0, 0, 0, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0]);
        let aligned = per_cpu_image([&[9u8; 8][..]].into_iter(), 8);
        assert_eq!(aligned, [9; 8]);
    }

    #[test]
    fn global_data_entry_wants_key_zero_and_the_whole_image() {
        let entry = |key: &str, value: &str| EntryState {
            key: key.into(),
            value: Some(value.into()),
            ..EntryState::default()
        };
        assert!(global_data_entry(".rodata", 0, 4, &entry("00000000", "01000000")).is_ok());
        assert!(global_data_entry(".rodata", 0, 4, &entry("01000000", "01000000")).is_err());
        let err = global_data_entry(".rodata", 0, 8, &entry("00000000", "01000000")).unwrap_err();
        assert!(err.to_string().contains("expected 8, got 4"), "{err}");
    }
}
