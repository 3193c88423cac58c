//! Arrays whose values name other objects: PROG_ARRAY (program id),
//! ARRAY_OF_MAPS (inner map id), DEVMAP (`struct bpf_devmap_val`: ifindex,
//! program id), XSKMAP (socket/queue id) and CPUMAP (`struct bpf_cpumap_val`:
//! queue size, program id), CGROUP_ARRAY (cgroup id). The kernel stores object pointers here; bpfjet
//! stores the ids and the runtime resolves them, so a slot is a presence word
//! plus the value bytes.

use crate::array::{key_u32, next_index};
use crate::error::MapError;
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::spec::{update, MapType};
use crate::sync::{read_shared, write_shared};
use std::sync::atomic::{AtomicU32, Ordering};

/// The largest CPUMAP queue the kernel accepts.
const CPUMAP_MAX_QSIZE: u32 = 16384;

pub(crate) struct FdArrayMap {
    slots: *mut u8,
    stride: usize,
    max: u32,
    ncpus: u32,
    value_size: usize,
    kind: MapType,
}

impl FdArrayMap {
    pub(crate) fn layout(g: &Geometry, data_off: usize) -> (usize, [u64; LAYOUT_WORDS]) {
        let stride = 8 + round_up(g.value_size as usize, 8);
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64;
        l[1] = stride as u64;
        (stride * g.max_entries as usize, l)
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        FdArrayMap {
            slots: base.add(l[0] as usize),
            stride: l[1] as usize,
            max: g.max_entries,
            ncpus: g.ncpus,
            value_size: g.value_size as usize,
            kind: g.map_type,
        }
    }

    #[inline]
    fn present(&self, i: u32) -> &AtomicU32 {
        // SAFETY: callers check i < max; the word is 8-aligned.
        unsafe { &*(self.slots.add(i as usize * self.stride) as *const AtomicU32) }
    }

    #[inline]
    fn value(&self, i: u32) -> *mut u8 {
        // SAFETY: as for `present`.
        unsafe { self.slots.add(i as usize * self.stride + 8) }
    }

    /// The stored value (id, `bpf_devmap_val`, ...), or None if the slot is empty.
    #[inline]
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<*mut u8> {
        let i = key_u32(key).ok()?;
        if i >= self.max || self.present(i).load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(self.value(i))
    }

    /// The id stored in slot `i` (the first four value bytes: a program id
    /// in a PROG_ARRAY), or None if `i` is out of range or the slot is
    /// empty. One presence load and one value load, no key decoding: the
    /// JIT's tail calls read a slot per call.
    #[inline]
    pub(crate) fn slot_id(&self, i: u32) -> Option<u32> {
        if i >= self.max || self.present(i).load(Ordering::Acquire) == 0 {
            return None;
        }
        // SAFETY: i < max; every fd-array value is at least 4 bytes and
        // 8-aligned, and updates store it with one instruction.
        Some(unsafe { (self.value(i) as *const u32).read() })
    }

    /// Slot `i` holds `id` (a CGROUP_ARRAY's cgroup, resolved by the caller).
    pub(crate) fn set_slot(&self, i: u32, id: u32) -> Result<(), MapError> {
        if i >= self.max {
            return Err(MapError::TooBig);
        }
        // SAFETY: i < max; the value is 4 bytes, 8-aligned, one store.
        unsafe { write_shared(self.value(i), &id.to_ne_bytes()) };
        self.present(i).store(1, Ordering::Release);
        Ok(())
    }

    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        use MapType::*;
        if value.len() != self.value_size {
            return Err(MapError::Invalid("value size mismatch"));
        }
        let i = key_u32(key)?;
        match self.kind {
            ProgArray | ArrayOfMaps => {
                if flags != update::ANY {
                    return Err(MapError::Invalid("fd array updates take BPF_ANY only"));
                }
                if i >= self.max {
                    return Err(MapError::TooBig);
                }
            }
            Devmap | Cpumap => {
                if flags > update::EXIST {
                    return Err(MapError::Invalid("update flags"));
                }
                if i >= self.max {
                    return Err(MapError::TooBig);
                }
                if flags == update::NOEXIST {
                    return Err(MapError::Exists);
                }
                let first = u32::from_ne_bytes(value[..4].try_into().unwrap_or([0; 4]));
                let prog = if value.len() >= 8 {
                    u32::from_ne_bytes(value[4..8].try_into().unwrap_or([0; 4]))
                } else {
                    0
                };
                if self.kind == Cpumap {
                    if first > CPUMAP_MAX_QSIZE {
                        return Err(MapError::Overflow);
                    }
                    if i >= self.ncpus {
                        return Err(MapError::NoDevice);
                    }
                }
                if first == 0 {
                    // ifindex 0 / qsize 0 clears the slot; a program
                    // cannot be attached to nothing.
                    if self.kind == Devmap && prog != 0 {
                        return Err(MapError::Invalid("devmap program without ifindex"));
                    }
                    self.present(i).store(0, Ordering::Release);
                    return Ok(());
                }
            }
            Xskmap => {
                if flags > update::EXIST {
                    return Err(MapError::Invalid("update flags"));
                }
                if i >= self.max {
                    return Err(MapError::TooBig);
                }
                let occupied = self.present(i).load(Ordering::Acquire) != 0;
                if occupied && flags == update::NOEXIST {
                    return Err(MapError::Exists);
                }
                if !occupied && flags == update::EXIST {
                    return Err(MapError::NotFound);
                }
            }
            _ => return Err(MapError::NotSupported),
        }
        // SAFETY: i < max. The value is at most 8 bytes and 8-aligned, so
        // write_shared stores it with one instruction: readers never tear.
        unsafe { write_shared(self.value(i), value) };
        self.present(i).store(1, Ordering::Release);
        Ok(())
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let i = key_u32(key)?;
        match self.kind {
            MapType::ProgArray | MapType::ArrayOfMaps => {
                if i >= self.max {
                    return Err(MapError::TooBig);
                }
                if self.present(i).swap(0, Ordering::AcqRel) == 0 {
                    return Err(MapError::NotFound);
                }
            }
            _ => {
                if i >= self.max {
                    return Err(MapError::Invalid("index out of range"));
                }
                self.present(i).store(0, Ordering::Release);
            }
        }
        Ok(())
    }

    pub(crate) fn lookup_copy(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        let p = self.lookup(key).ok_or(MapError::NotFound)?;
        let mut out = vec![0; self.value_size];
        // SAFETY: p points at value_size bytes of a slot.
        unsafe { read_shared(p, &mut out) };
        Ok(out)
    }

    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        next_index(key, self.max)
    }
}
