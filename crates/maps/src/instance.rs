//! An instance: the set of maps of one running program object, published
//! under a name (`bpfjet run --name X`) or private (`test-run`).
//!
//! The owning instance (the data plane) creates the registry and the maps
//! and unlinks every object on drop; control planes `open` the instance by
//! name and may create inner maps in it, which the data plane then finds by id.

use crate::error::MapError;
use crate::map::{Map, MapOptions};
use crate::registry::{MapInfo, Registry};
use crate::shm::{object_name, unlink};
use crate::spec::MapSpec;
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Hashes a map id with one multiply: `map_by_id` runs on every map-in-map
/// lookup of a program, where SipHash would cost more than the lookup.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type MapCache = HashMap<u32, Arc<Map>, BuildHasherDefault<IdHasher>>;

pub struct Instance {
    /// None for a private instance.
    name: Option<String>,
    registry: Registry,
    registry_object: Option<CString>,
    ncpus: u32,
    owner: bool,
    /// Maps this process has created or opened, by id. Read-mostly: data
    /// plane workers look inner maps up concurrently.
    maps: RwLock<MapCache>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .finish()
    }
}

impl Instance {
    /// Create and own a named instance (`/dev/shm/bpfjet.<name>.*`).
    /// EEXIST if one with that name exists (possibly left by a crash:
    /// see [`Instance::remove_stale`]).
    pub fn create(name: &str, ncpus: u32) -> Result<Instance, MapError> {
        let (registry, obj) = Registry::create(Some(name), ncpus.max(1))?;
        Ok(Instance {
            name: Some(name.to_string()),
            registry,
            registry_object: obj,
            ncpus: ncpus.max(1),
            owner: true,
            maps: RwLock::default(),
        })
    }

    /// A private instance: memfd-backed, invisible to other processes.
    pub fn anonymous(ncpus: u32) -> Result<Instance, MapError> {
        let (registry, _) = Registry::create(None, ncpus.max(1))?;
        Ok(Instance {
            name: None,
            registry,
            registry_object: None,
            ncpus: ncpus.max(1),
            owner: true,
            maps: RwLock::default(),
        })
    }

    /// Attach to a running instance as a control plane.
    pub fn open(name: &str) -> Result<Instance, MapError> {
        let registry = Registry::open(name)?;
        let ncpus = registry.ncpus();
        Ok(Instance {
            name: Some(name.to_string()),
            registry,
            registry_object: None,
            ncpus,
            owner: false,
            maps: RwLock::default(),
        })
    }

    /// Unlink the objects of an instance whose owner died without cleaning up.
    pub fn remove_stale(name: &str) -> Result<(), MapError> {
        if let Ok(r) = Registry::open(name) {
            for m in r.list() {
                unlink(&object_name(name, &m.id.to_string())?);
            }
        }
        unlink(&object_name(name, "registry")?);
        // The CPU slot table tracing programs of the instance lease their
        // slots from (bpfjet_runtime's `tracing::slots`): one more object
        // of the instance, left behind otherwise.
        unlink(&object_name(name, "cpuslots")?);
        Ok(())
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn ncpus(&self) -> u32 {
        self.ncpus
    }

    fn cache(&self) -> RwLockReadGuard<'_, MapCache> {
        self.maps.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn cache_mut(&self) -> RwLockWriteGuard<'_, MapCache> {
        self.maps.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn create_in(
        &self,
        spec: &MapSpec,
        opts: &MapOptions,
        inner: bool,
    ) -> Result<Arc<Map>, MapError> {
        let id = self.registry.alloc_id();
        let object = match &self.name {
            Some(n) => Some(object_name(n, &id.to_string())?),
            None => None,
        };
        let opts = MapOptions {
            ncpus: self.ncpus,
            ..opts.clone()
        };
        let map = Arc::new(Map::create(spec, &opts, id, object.clone())?);
        if let Err(e) = self.registry.add(id, map.spec(), inner) {
            if let Some(o) = &object {
                unlink(o);
            }
            return Err(e);
        }
        self.cache_mut().insert(id, map.clone());
        Ok(map)
    }

    /// Create a map of the object (its per-CPU slot count is the instance's).
    pub fn create_map(&self, spec: &MapSpec, opts: &MapOptions) -> Result<Arc<Map>, MapError> {
        self.create_in(spec, opts, false)
    }

    /// Create an inner map at run time (from STATE.json or a control plane).
    pub fn create_inner_map(&self, spec: &MapSpec) -> Result<Arc<Map>, MapError> {
        self.create_in(spec, &MapOptions::default(), true)
    }

    /// Remove a map from the instance (e.g. an inner map no longer
    /// referenced). Its memory stays mapped for processes that hold it.
    pub fn remove_map(&self, id: u32) -> Result<(), MapError> {
        self.registry.remove(id);
        self.cache_mut().remove(&id);
        if let Some(n) = &self.name {
            unlink(&object_name(n, &id.to_string())?);
        }
        Ok(())
    }

    /// The maps of the instance, by id.
    pub fn list(&self) -> Vec<MapInfo> {
        self.registry.list()
    }

    /// The map with this id: cached, or opened from shared memory (an inner
    /// map another process created).
    pub fn map_by_id(&self, id: u32) -> Result<Arc<Map>, MapError> {
        if let Some(m) = self.cache().get(&id) {
            return Ok(m.clone());
        }
        let Some(n) = &self.name else {
            return Err(MapError::UnknownMap(format!("id {id}")));
        };
        if !self.registry.list().iter().any(|m| m.id == id) {
            return Err(MapError::UnknownMap(format!("id {id}")));
        }
        let map = Arc::new(Map::open_object(object_name(n, &id.to_string())?)?);
        Ok(self.cache_mut().entry(id).or_insert(map).clone())
    }

    /// The first map (lowest id) with this name.
    pub fn map_by_name(&self, name: &str) -> Result<Arc<Map>, MapError> {
        let info = self
            .list()
            .into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| MapError::UnknownMap(name.to_string()))?;
        self.map_by_id(info.id)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        if let Some(n) = &self.name {
            for m in self.registry.list() {
                if let Ok(o) = object_name(n, &m.id.to_string()) {
                    unlink(&o);
                }
            }
        }
        if let Some(o) = &self.registry_object {
            unlink(o);
        }
    }
}
