//! The header at offset 0 of every map object: what the map is and where
//! its parts are, so that another process can open it knowing only the name.

use crate::error::MapError;
use crate::spec::{MapSpec, MapType, Pinning};
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"BPFJETMP");
/// Bumped whenever the layout of any map family changes.
pub(crate) const VERSION: u32 = 4;
pub(crate) const NAME_MAX: usize = 64;
pub(crate) const NO_LOCK: u32 = u32::MAX;
/// Number of family-specific layout words (offsets and sizes).
pub(crate) const LAYOUT_WORDS: usize = 16;

/// `#[repr(C)]` so its layout is the same in every process built from the
/// same source; the `version` field guards against others.
#[repr(C)]
pub(crate) struct MapHeader {
    pub magic: u64,
    pub version: u32,
    /// Set (release) once the creator has fully initialised the object.
    pub ready: AtomicU32,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    pub ncpus: u32,
    pub map_extra: u64,
    pub spin_lock_off: u32,
    pub frozen: AtomicU32,
    pub id: u32,
    pub name_len: u32,
    pub name: [u8; NAME_MAX],
    /// Inner map template of a map-in-map: type, key, value, max, flags
    /// (type 0 = none).
    pub inner: [u32; 5],
    pub total_len: u64,
    /// Page size the object was laid out with (ring buffers depend on it).
    pub page_size: u64,
    pub layout: [u64; LAYOUT_WORDS],
}

/// Space reserved for the header: one page, so that family data (ring
/// buffer pages in particular) starts page aligned.
pub(crate) fn header_space(page: usize) -> usize {
    page.max(std::mem::size_of::<MapHeader>())
}

impl MapHeader {
    /// Fill a zeroed header in place.
    pub(crate) fn init(
        &mut self,
        spec: &MapSpec,
        id: u32,
        g: &Geometry,
        total_len: usize,
        layout: [u64; LAYOUT_WORDS],
    ) {
        let (ncpus, lock, page) = (g.ncpus, g.lock, g.page);
        self.magic = MAGIC;
        self.version = VERSION;
        self.map_type = spec.map_type as u32;
        self.key_size = spec.key_size;
        self.value_size = spec.value_size;
        self.max_entries = spec.max_entries;
        self.flags = spec.flags;
        self.ncpus = ncpus;
        self.map_extra = spec.map_extra;
        self.spin_lock_off = lock.unwrap_or(NO_LOCK);
        self.id = id;
        let n = spec.name.len().min(NAME_MAX);
        self.name[..n].copy_from_slice(&spec.name.as_bytes()[..n]);
        self.name_len = n as u32;
        if let Some(inner) = &spec.inner {
            self.inner = [
                inner.map_type as u32,
                inner.key_size,
                inner.value_size,
                inner.max_entries,
                inner.flags,
            ];
        }
        self.total_len = total_len as u64;
        self.page_size = page as u64;
        self.layout = layout;
    }

    /// Check a header read from another process's object.
    pub(crate) fn check(&self, file_len: usize) -> Result<(), MapError> {
        if self.magic != MAGIC {
            return Err(MapError::Corrupt("bad magic"));
        }
        if self.version != VERSION {
            return Err(MapError::Corrupt("layout version mismatch"));
        }
        if self.total_len as usize != file_len {
            return Err(MapError::Corrupt("size does not match header"));
        }
        if MapType::from_kernel(self.map_type).is_none() {
            return Err(MapError::Corrupt("unknown map type"));
        }
        if self.ready.load(Ordering::Acquire) == 0 {
            return Err(MapError::Busy);
        }
        Ok(())
    }

    /// The spec as recorded by the creator (`initial_data` is not kept).
    pub(crate) fn spec(&self) -> Result<MapSpec, MapError> {
        let map_type = MapType::from_kernel(self.map_type).ok_or(MapError::Corrupt("type"))?;
        let n = (self.name_len as usize).min(NAME_MAX);
        let name = String::from_utf8_lossy(&self.name[..n]).into_owned();
        let mut spec = MapSpec::new(
            &name,
            map_type,
            self.key_size,
            self.value_size,
            self.max_entries,
        );
        spec.flags = self.flags;
        spec.map_extra = self.map_extra;
        spec.pinning = Pinning::None;
        spec.frozen = self.frozen.load(Ordering::Acquire) != 0;
        if self.inner[0] != 0 {
            let t = MapType::from_kernel(self.inner[0]).ok_or(MapError::Corrupt("inner type"))?;
            let mut inner = MapSpec::new("", t, self.inner[1], self.inner[2], self.inner[3]);
            inner.flags = self.inner[4];
            spec.inner = Some(Box::new(inner));
        }
        Ok(spec)
    }

    pub(crate) fn lock_off(&self) -> Option<u32> {
        (self.spin_lock_off != NO_LOCK).then_some(self.spin_lock_off)
    }
}

/// The numbers every family needs, copied out of the header once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub map_type: MapType,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    pub ncpus: u32,
    pub map_extra: u64,
    pub lock: Option<u32>,
    pub page: usize,
}

impl Geometry {
    pub(crate) fn from_header(h: &MapHeader) -> Result<Geometry, MapError> {
        Ok(Geometry {
            map_type: MapType::from_kernel(h.map_type).ok_or(MapError::Corrupt("type"))?,
            key_size: h.key_size,
            value_size: h.value_size,
            max_entries: h.max_entries,
            flags: h.flags,
            ncpus: h.ncpus.max(1),
            map_extra: h.map_extra,
            lock: h.lock_off(),
            page: h.page_size as usize,
        })
    }

    /// Value slot size: the kernel rounds values up to 8 bytes.
    pub(crate) fn value_stride(&self) -> usize {
        round_up(self.value_size as usize, 8)
    }
}

pub(crate) fn round_up(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}
