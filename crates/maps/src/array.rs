//! ARRAY and PERCPU_ARRAY: preallocated values indexed by a u32 key.
//!
//! Values are plain memory at `values + index * stride` (per-CPU:
//! `values + cpu * cpu_stride + index * stride`), which is what the JIT
//! inlines. Per-CPU values are laid out CPU-major so that one worker's
//! values share no cache line with another's.

use crate::error::MapError;
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::spec::{update, MapType};
use crate::sync::{read_shared, ValueLock};

/// Values to write into a per-CPU (or ordinary) map.
#[derive(Clone, Copy, Debug)]
pub enum Slots<'a> {
    /// One CPU's slot (a program's update; a new element's other slots are zeroed).
    One(u32, &'a [u8]),
    /// Every CPU's slot gets the same value (STATE.json `value`).
    All(&'a [u8]),
    /// One value per CPU (`BPF_MAP_UPDATE_ELEM` on a per-CPU map from user space).
    Each(&'a [&'a [u8]]),
}

impl<'a> Slots<'a> {
    /// Check every value has `len` bytes and there is one per CPU. User
    /// space's per-CPU values may also come as the kernel's 8-byte slots,
    /// padding included: the kernel stores and returns the padding too
    /// (`copy_map_value_long`).
    pub(crate) fn check(&self, len: usize, ncpus: u32) -> Result<(), MapError> {
        let slot = |v: &[u8]| v.len() == len || v.len() == len.next_multiple_of(8);
        let ok = match self {
            Slots::One(cpu, v) => *cpu < ncpus && v.len() == len,
            Slots::All(v) => v.len() == len,
            Slots::Each(vs) => vs.len() == ncpus as usize && vs.iter().all(|v| slot(v)),
        };
        if ok {
            Ok(())
        } else {
            Err(MapError::Invalid("value size or CPU count mismatch"))
        }
    }

    /// The one value of a non-per-CPU map.
    pub(crate) fn single(&self, len: usize) -> Result<&'a [u8], MapError> {
        let v = match *self {
            Slots::One(_, v) | Slots::All(v) => v,
            Slots::Each([v]) => v,
            Slots::Each(_) => return Err(MapError::Invalid("one value expected")),
        };
        if v.len() != len {
            return Err(MapError::Invalid("value size mismatch"));
        }
        Ok(v)
    }

    /// The value for `cpu`, or None if that slot is not written (`One` for another CPU).
    pub(crate) fn for_cpu(&self, cpu: u32) -> Option<&'a [u8]> {
        match *self {
            Slots::One(c, v) => (c == cpu).then_some(v),
            Slots::All(v) => Some(v),
            Slots::Each(vs) => vs.get(cpu as usize).copied(),
        }
    }
}

pub(crate) fn key_u32(key: &[u8]) -> Result<u32, MapError> {
    let b: [u8; 4] = key
        .try_into()
        .map_err(|_| MapError::Invalid("key must be 4 bytes"))?;
    Ok(u32::from_ne_bytes(b))
}

/// `get_next_key` over indices `0..max`: a missing or out-of-range key
/// restarts at 0, the last index ends the walk.
pub(crate) fn next_index(key: Option<&[u8]>, max: u32) -> Result<Vec<u8>, MapError> {
    let idx = match key {
        None => None,
        Some(k) => Some(key_u32(k)?),
    };
    let next = match idx {
        Some(i) if i < max => {
            if i == max - 1 {
                return Err(MapError::NotFound);
            }
            i + 1
        }
        _ => 0,
    };
    Ok(next.to_ne_bytes().to_vec())
}

pub(crate) struct ArrayMap {
    values: *mut u8,
    stride: usize,
    cpu_stride: usize,
    max: u32,
    ncpus: u32,
    percpu: bool,
    value_size: usize,
    lock: ValueLock,
}

impl ArrayMap {
    /// Bytes needed after the header, and the layout words.
    pub(crate) fn layout(g: &Geometry, data_off: usize) -> (usize, [u64; LAYOUT_WORDS]) {
        let stride = g.value_stride();
        let per_cpu = round_up(stride * g.max_entries as usize, 64);
        let copies = if g.map_type == MapType::PercpuArray {
            g.ncpus as usize
        } else {
            1
        };
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64;
        l[1] = stride as u64;
        l[2] = per_cpu as u64;
        (per_cpu * copies, l)
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        ArrayMap {
            values: base.add(l[0] as usize),
            stride: l[1] as usize,
            cpu_stride: l[2] as usize,
            max: g.max_entries,
            ncpus: g.ncpus,
            percpu: g.map_type == MapType::PercpuArray,
            value_size: g.value_size as usize,
            lock: ValueLock(g.lock),
        }
    }

    /// Copy a global-data image (`.data`, `.rodata`) into element 0.
    pub(crate) fn init_data(&self, image: &[u8]) {
        let n = image.len().min(self.value_size);
        // SAFETY: element 0 exists (max_entries > 0) and has value_size bytes.
        unsafe { crate::sync::write_shared(self.values, &image[..n]) }
    }

    /// The index of the element whose value starts at `value` (not per-CPU
    /// arrays), as the kernel computes a timer callback's key.
    pub(crate) fn index_of_value(&self, value: *const u8) -> Option<u32> {
        if self.percpu {
            return None;
        }
        let rel = (value as usize).checked_sub(self.values as usize)?;
        let i = rel / self.stride;
        (rel % self.stride == 0 && i < self.max as usize).then_some(i as u32)
    }

    pub(crate) fn values_ptr(&self) -> *mut u8 {
        self.values
    }
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }
    pub(crate) fn cpu_stride(&self) -> usize {
        if self.percpu {
            self.cpu_stride
        } else {
            0
        }
    }

    #[inline]
    fn slot(&self, index: u32, cpu: u32) -> *mut u8 {
        let cpu_off = if self.percpu {
            cpu as usize * self.cpu_stride
        } else {
            0
        };
        // SAFETY: callers checked index < max and cpu < ncpus.
        unsafe { self.values.add(cpu_off + index as usize * self.stride) }
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u8], cpu: u32) -> Option<*mut u8> {
        let i = key_u32(key).ok()?;
        if i >= self.max || (self.percpu && cpu >= self.ncpus) {
            return None;
        }
        Some(self.slot(i, cpu))
    }

    pub(crate) fn update(&self, key: &[u8], slots: Slots<'_>, flags: u64) -> Result<(), MapError> {
        let with_lock = flags & update::F_LOCK != 0;
        // User space's per-CPU update (`bpf_percpu_array_update`) refuses
        // BPF_F_LOCK first; a program's (`array_map_update_elem`, one
        // CPU's slot) checks it last, after the index and BPF_NOEXIST.
        if self.percpu && !matches!(slots, Slots::One(..)) {
            if flags > update::EXIST {
                return Err(MapError::Invalid("update flags"));
            }
        } else if flags & !update::F_LOCK > update::EXIST {
            return Err(MapError::Invalid("update flags"));
        }
        let i = key_u32(key)?;
        if i >= self.max {
            return Err(MapError::TooBig);
        }
        if flags & update::NOEXIST != 0 {
            // Every array element always exists.
            return Err(MapError::Exists);
        }
        if with_lock && self.lock.0.is_none() {
            return Err(MapError::Invalid(
                "BPF_F_LOCK on a value without bpf_spin_lock",
            ));
        }
        if self.percpu {
            slots.check(self.value_size, self.ncpus)?;
            for cpu in 0..self.ncpus {
                if let Some(v) = slots.for_cpu(cpu) {
                    // SAFETY: i < max, cpu < ncpus.
                    unsafe { self.lock.store(self.slot(i, cpu), v, false) };
                }
            }
        } else {
            let v = slots.single(self.value_size)?;
            // SAFETY: i < max.
            unsafe { self.lock.store(self.slot(i, 0), v, with_lock) };
        }
        Ok(())
    }

    pub(crate) fn lookup_copy(&self, key: &[u8], flags: u64) -> Result<Vec<u8>, MapError> {
        let with_lock = check_lookup_flags(flags, self.lock)?;
        let i = key_u32(key)?;
        if i >= self.max {
            return Err(MapError::NotFound);
        }
        let mut out = vec![0; self.value_size];
        // SAFETY: i < max.
        unsafe { self.lock.load(self.slot(i, 0), &mut out, with_lock) };
        Ok(out)
    }

    /// Every CPU's value, `len` bytes each (the value size, or its 8-byte
    /// slot with the padding).
    pub(crate) fn lookup_percpu(&self, key: &[u8], len: usize) -> Result<Vec<Vec<u8>>, MapError> {
        let i = key_u32(key)?;
        if i >= self.max {
            return Err(MapError::NotFound);
        }
        let cpus = if self.percpu { self.ncpus } else { 1 };
        Ok((0..cpus)
            .map(|cpu| {
                let mut out = vec![0; len];
                // SAFETY: i < max, cpu < ncpus.
                unsafe { read_shared(self.slot(i, cpu), &mut out) };
                out
            })
            .collect())
    }

    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        next_index(key, self.max)
    }
}

/// `BPF_F_LOCK` is the only lookup flag; it needs a lock in the value.
pub(crate) fn check_lookup_flags(flags: u64, lock: ValueLock) -> Result<bool, MapError> {
    if flags & !update::F_LOCK != 0 {
        return Err(MapError::Invalid("lookup flags"));
    }
    let with_lock = flags & update::F_LOCK != 0;
    if with_lock && lock.0.is_none() {
        return Err(MapError::Invalid(
            "BPF_F_LOCK on a value without bpf_spin_lock",
        ));
    }
    Ok(with_lock)
}
