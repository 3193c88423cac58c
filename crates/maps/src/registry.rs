//! The per-instance registry: a small shared-memory table of the maps of
//! one running instance (id, name, type, sizes), so `bpfjet map list
//! --instance X` works and inner maps created at run time by a control
//! plane can be found by id from the data plane.

use crate::error::MapError;
use crate::header::NAME_MAX;
use crate::shm::{object_name, Shm};
use crate::spec::{MapSpec, MapType};
use crate::sync::SpinGuard;
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};

const REGISTRY_MAGIC: u64 = u64::from_le_bytes(*b"BPFJETRG");
const REGISTRY_VERSION: u32 = 1;
/// Most maps one instance can hold (map-in-map inner maps included).
pub const REGISTRY_CAPACITY: usize = 4096;

#[repr(C)]
struct RegHeader {
    magic: u64,
    version: u32,
    lock: AtomicU32,
    next_id: AtomicU32,
    ncpus: u32,
    ready: AtomicU32,
}
const REG_HEADER_BYTES: usize = 64;

#[repr(C)]
struct RegEntry {
    /// 0 free, 1 live.
    state: AtomicU32,
    id: u32,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
    /// 1 if the map was created as an inner map (not declared by the object).
    inner: u32,
    name_len: u32,
    name: [u8; NAME_MAX],
}

/// What the registry says about one map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapInfo {
    pub id: u32,
    pub name: String,
    pub map_type: MapType,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Created at run time as an inner map of a map-in-map.
    pub inner: bool,
}

pub(crate) struct Registry {
    shm: Shm,
}

fn size() -> usize {
    REG_HEADER_BYTES + REGISTRY_CAPACITY * std::mem::size_of::<RegEntry>()
}

impl Registry {
    pub(crate) fn create(
        instance: Option<&str>,
        ncpus: u32,
    ) -> Result<(Registry, Option<CString>), MapError> {
        let name = instance.map(|i| object_name(i, "registry")).transpose()?;
        let shm = Shm::create(name.as_ref(), size(), None)?;
        let r = Registry { shm };
        // SAFETY: fresh zeroed object of the right size, ours alone.
        let h = unsafe { &mut *(r.shm.base() as *mut RegHeader) };
        h.magic = REGISTRY_MAGIC;
        h.version = REGISTRY_VERSION;
        h.ncpus = ncpus;
        h.next_id.store(1, Ordering::Relaxed);
        h.ready.store(1, Ordering::Release);
        Ok((r, name))
    }

    pub(crate) fn open(instance: &str) -> Result<Registry, MapError> {
        let name = object_name(instance, "registry")?;
        let shm = Shm::open(&name, |_| Ok(None), REG_HEADER_BYTES).map_err(|e| match e {
            MapError::UnknownMap(_) => MapError::UnknownMap(format!("instance {instance}")),
            e => e,
        })?;
        if shm.len() != size() {
            return Err(MapError::Corrupt("registry size"));
        }
        let r = Registry { shm };
        let h = r.header();
        if h.magic != REGISTRY_MAGIC || h.version != REGISTRY_VERSION {
            return Err(MapError::Corrupt("registry header"));
        }
        if h.ready.load(Ordering::Acquire) == 0 {
            return Err(MapError::Busy);
        }
        Ok(r)
    }

    fn header(&self) -> &RegHeader {
        // SAFETY: the header is at the start of the mapping.
        unsafe { &*(self.shm.base() as *const RegHeader) }
    }

    fn entry(&self, i: usize) -> *mut RegEntry {
        // SAFETY: i < capacity.
        unsafe {
            self.shm
                .base()
                .add(REG_HEADER_BYTES + i * std::mem::size_of::<RegEntry>())
                as *mut RegEntry
        }
    }

    pub(crate) fn ncpus(&self) -> u32 {
        self.header().ncpus
    }

    pub(crate) fn alloc_id(&self) -> u32 {
        self.header().next_id.fetch_add(1, Ordering::AcqRel)
    }

    pub(crate) fn add(&self, id: u32, spec: &MapSpec, inner: bool) -> Result<(), MapError> {
        let _g = SpinGuard::lock(&self.header().lock);
        for i in 0..REGISTRY_CAPACITY {
            // SAFETY: entries are only written under the registry lock,
            // which we hold; `state` is published last.
            let e = unsafe { &mut *self.entry(i) };
            {
                if e.state.load(Ordering::Acquire) != 0 {
                    continue;
                }
                e.id = id;
                e.map_type = spec.map_type as u32;
                e.key_size = spec.key_size;
                e.value_size = spec.value_size;
                e.max_entries = spec.max_entries;
                e.flags = spec.flags;
                e.inner = inner as u32;
                let n = spec.name.len().min(NAME_MAX);
                e.name = [0; NAME_MAX];
                e.name[..n].copy_from_slice(&spec.name.as_bytes()[..n]);
                e.name_len = n as u32;
                e.state.store(1, Ordering::Release);
            }
            return Ok(());
        }
        Err(MapError::NoSpace)
    }

    pub(crate) fn remove(&self, id: u32) {
        let _g = SpinGuard::lock(&self.header().lock);
        for i in 0..REGISTRY_CAPACITY {
            // SAFETY: under the registry lock.
            let e = unsafe { &*self.entry(i) };
            if e.state.load(Ordering::Acquire) == 1 && e.id == id {
                e.state.store(0, Ordering::Release);
            }
        }
    }

    pub(crate) fn list(&self) -> Vec<MapInfo> {
        let _g = SpinGuard::lock(&self.header().lock);
        let mut out = Vec::new();
        for i in 0..REGISTRY_CAPACITY {
            // SAFETY: under the registry lock.
            let e = unsafe { &*self.entry(i) };
            {
                if e.state.load(Ordering::Acquire) != 1 {
                    continue;
                }
                let Some(map_type) = MapType::from_kernel(e.map_type) else {
                    continue;
                };
                let n = (e.name_len as usize).min(NAME_MAX);
                out.push(MapInfo {
                    id: e.id,
                    name: String::from_utf8_lossy(&e.name[..n]).into_owned(),
                    map_type,
                    key_size: e.key_size,
                    value_size: e.value_size,
                    max_entries: e.max_entries,
                    flags: e.flags,
                    inner: e.inner != 0,
                });
            }
        }
        out.sort_by_key(|m| m.id);
        out
    }
}
