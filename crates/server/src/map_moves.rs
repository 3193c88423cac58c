//! Moving a bpfjet map to the kernel, for a kernel program that names it
//! under `bpfjet exec` (`kernel_objects.rs` decides when): a kernel map of
//! the same definition gets the elements (per-CPU values in the kernel's
//! layout), the frozen state, the loader's `mmap`s of the values (libbpf's
//! global data: remapped in place, checked against `/proc/self/maps`
//! first), every fd of this process on the map (switched in place with
//! `dup3`, so the numbers the loader holds stay valid) and the map's bpffs
//! pins. A map nothing can change any more (frozen, read-only for
//! programs: `.rodata`) that bpfjet programs use is copied instead.

use crate::backend::BpfjetBackend;
use crate::kernel_objects::{KernelSide, Transfer};
use crate::namespace::{Kind, ObjRef};
use crate::objects::{MapObj, Obj};
use crate::progs;
use bpfjet_maps::{Map, MapType};
use bpfjet_sys::{Backend, Command, Errno, MapCreate, MapElem, ObjPath};
use std::sync::PoisonError;

/// One `mmap` of an array's values, as the caller asked for it (`offset`
/// in the kernel's layout: element 0 at 0).
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub addr: usize,
    pub len: usize,
    pub prot: i32,
    pub flags: i32,
    pub offset: u64,
}

/// The file behind `fd`, read with the system call itself: the preload
/// library's `readlink` shows a bpfjet map fd as `anon_inode:bpf-map`, as
/// the kernel shows its own.
fn real_fd_path(fd: i32) -> String {
    let link = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).unwrap();
    let mut buf = [0u8; 4096];
    // SAFETY: a NUL-terminated path and a buffer of the length passed.
    let n = unsafe {
        libc::syscall(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            link.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n <= 0 {
        return String::new();
    }
    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
}

/// Whether `[addr, addr + len)` is still mapped from `file` (the bpfjet
/// map's shared-memory file) in this process: a mapping the caller has
/// since unmapped or replaced is left alone.
fn still_mapped(file: &str, addr: usize, len: usize) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    let mut covered = addr;
    let end = addr + len;
    let mut ranges: Vec<(usize, usize)> = maps
        .lines()
        .filter(|l| l.split_whitespace().nth(5) == Some(file))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    ranges.sort_unstable();
    for (a, b) in ranges {
        if a <= covered && b > covered {
            covered = b;
        }
    }
    covered >= end
}

/// Whether nothing can change `m` any more, from user space (frozen) or
/// from programs (`BPF_F_RDONLY_PROG`): libbpf's `.rodata`. A kernel copy
/// of such a map is the same map to every reader.
fn immutable(m: &MapObj) -> bool {
    m.map.is_frozen()
        && m.meta.map_flags & bpfjet_maps::spec::flags::RDONLY_PROG != 0
        && movable(m.map.map_type())
}

/// Map types whose contents are plain bytes a kernel map of the same
/// definition takes (no fds, program ids or bpfjet-only state).
fn movable(t: MapType) -> bool {
    use MapType::*;
    matches!(
        t,
        Hash | Array
            | PercpuHash
            | PercpuArray
            | LruHash
            | LruPercpuHash
            | LpmTrie
            | Ringbuf
            | Queue
            | Stack
    )
}

/// Close a kernel fd bpfjet made and no longer needs.
fn close(fd: i32) {
    // SAFETY: the caller's own fd.
    unsafe { libc::close(fd) };
}

/// `BPF_MAP_UPDATE_ELEM` of `key`/`value` into kernel map `fd`.
fn kernel_update(b: &BpfjetBackend, fd: i32, key: &[u8], value: &[u8]) -> Result<(), Errno> {
    let e = MapElem {
        map_fd: fd as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags: 0,
    };
    b.kernel.execute(&Command::MapUpdateElem(e)).map(|_| ())
}

/// Every element of `map` into kernel map `fd` (per-CPU values in the
/// kernel's layout: 8-byte slots for each possible CPU).
fn copy_elements(b: &BpfjetBackend, map: &Map, fd: i32) -> Result<(), Errno> {
    let per_cpu = map.map_type().is_per_cpu();
    let stride = (map.value_size() as usize).next_multiple_of(8);
    let cpus = bpfjet_runtime::possible_cpus();
    let value_of = |key: &[u8]| -> Result<Option<Vec<u8>>, Errno> {
        if per_cpu {
            let slots = map
                .lookup_percpu_slots(key)
                .map_err(|e| crate::maps::errno(&e))?;
            let mut v = vec![0u8; stride * cpus];
            for (i, s) in slots.iter().enumerate().take(cpus) {
                v[i * stride..i * stride + s.len()].copy_from_slice(s);
            }
            Ok(Some(v))
        } else {
            map.lookup_copy_flags(key, 0)
                .map(Some)
                .map_err(|e| crate::maps::errno(&e))
        }
    };
    if map.map_type() == MapType::Ringbuf {
        return Ok(());
    }
    if matches!(map.map_type(), MapType::Array | MapType::PercpuArray) {
        // A kernel array starts zeroed: only the elements that are not.
        for i in 0..map.max_entries() {
            let key = i.to_ne_bytes();
            if let Some(v) = value_of(&key)? {
                if v.iter().any(|&x| x != 0) {
                    kernel_update(b, fd, &key, &v)?;
                }
            }
        }
        return Ok(());
    }
    let mut key: Option<Vec<u8>> = None;
    while let Ok(next) = map.get_next_key(key.as_deref()) {
        if let Some(v) = value_of(&next)? {
            kernel_update(b, fd, &next, &v)?;
        }
        key = Some(next);
    }
    Ok(())
}

impl KernelSide {
    pub(crate) fn array_mapped(&self, id: u32, m: Mapping) {
        self.arrays_mapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id)
            .or_default()
            .push(m);
    }

    pub(crate) fn ring_mapped(&self, id: u32) {
        self.rings_mapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
    }

    pub(crate) fn ring_was_mapped(&self, id: u32) -> bool {
        self.rings_mapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }

    fn take_array_mappings(&self, id: u32) -> Vec<Mapping> {
        self.arrays_mapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .unwrap_or_default()
    }
}

impl BpfjetBackend {
    /// Whether bpfjet map `m` can move to the kernel (module
    /// documentation), or why not.
    /// How map `m` can reach the kernel for a kernel program: it moves if
    /// it can, else a copy if it is immutable, else why not.
    pub(crate) fn transfer_of(&self, m: &MapObj) -> Result<Transfer, String> {
        match self.movable_map(m) {
            Ok(()) => Ok(Transfer::Move),
            Err(_) if immutable(m) => Ok(Transfer::Copy),
            Err(why) => Err(why),
        }
    }

    fn movable_map(&self, m: &MapObj) -> Result<(), String> {
        let map = &m.map;
        let id = map.id();
        if !movable(map.map_type()) {
            return Err(format!(
                "its type ({}) holds fds or program ids that the kernel's map cannot take",
                map.map_type().name()
            ));
        }
        // Named by a program's instructions; a map only bound to a program
        // (BPF_PROG_BIND_MAP: libbpf binds .rodata to every program of an
        // object) keeps that program's copy, which nothing reads.
        let referenced = |p: &crate::objects::ProgRecord| {
            progs::map_lddws(&p.insns)
                .into_iter()
                .any(|(pc, _)| p.map_ids.get((p.insns[pc] >> 32) as usize) == Some(&id))
        };
        if self.prog_records().iter().any(referenced) {
            return Err(
                "a program bpfjet runs uses it, and the kernel cannot reach bpfjet's maps".into(),
            );
        }
        if self.inner_map_somewhere(id) {
            return Err("a map-in-map holds it".into());
        }
        if let Some(p) = self
            .ns
            .pins()
            .into_iter()
            .find(|p| p.obj == ObjRef::Map(id) && p.live() && p.file.is_none())
        {
            return Err(format!(
                "it is pinned at {} (not on bpffs), where the kernel cannot pin it",
                p.path
            ));
        }
        if self.kernel_side.ring_was_mapped(id) {
            return Err(
                "it is a memory-mapped ring buffer, and the mapping cannot follow it to the kernel"
                    .into(),
            );
        }
        if matches!(map.map_type(), MapType::Queue | MapType::Stack) {
            let mut v = vec![0u8; map.value_size() as usize];
            if map.peek(&mut v).is_ok() {
                return Err(
                    "it holds elements, which a queue or stack gives up only by taking them".into(),
                );
            }
        }
        Ok(())
    }

    /// A kernel map of `m`'s definition holding its elements, frozen if
    /// `m` is: the kernel fd.
    pub(crate) fn kernel_twin(&self, m: &MapObj) -> Result<i32, String> {
        let map = &m.map;
        let btf_fd = if m.meta.btf_id != 0 {
            let b = self
                .open_btf(m.meta.btf_id)
                .map_err(|e| format!("its BTF (id {}) is gone: {e}", m.meta.btf_id))?;
            self.kernel_btf(&b)
                .map_err(|e| format!("the kernel refused its BTF: {e}"))?
        } else {
            0
        };
        let create = MapCreate {
            map_type: m.meta.map_type,
            key_size: map.key_size(),
            value_size: map.value_size(),
            max_entries: map.max_entries(),
            map_flags: m.meta.map_flags,
            name: map.name().to_string(),
            btf_fd,
            btf_key_type_id: if btf_fd != 0 {
                m.meta.btf_key_type_id
            } else {
                0
            },
            btf_value_type_id: if btf_fd != 0 {
                m.meta.btf_value_type_id
            } else {
                0
            },
            map_extra: m.meta.map_extra,
            ..MapCreate::default()
        };
        let kfd = self
            .kernel
            .execute(&Command::MapCreate(create))
            .map_err(|e| format!("the kernel refused to create it: {e}"))? as i32;
        if let Err(e) = copy_elements(self, map, kfd) {
            close(kfd);
            return Err(format!(
                "copying its elements into the kernel's map failed: {e}"
            ));
        }
        if map.is_frozen() {
            let freeze = MapElem {
                map_fd: kfd as u32,
                ..MapElem::default()
            };
            if let Err(e) = self.kernel.execute(&Command::MapFreeze(freeze)) {
                close(kfd);
                return Err(format!("freezing the kernel's map failed: {e}"));
            }
        }
        Ok(kfd)
    }

    /// The kernel copy of immutable bpfjet map `m` (made once per
    /// process), for a kernel program that names a map bpfjet programs use
    /// (when [`Self::transfer_of`] says [`Transfer::Copy`]).
    pub(crate) fn kernel_copy(&self, m: &MapObj) -> Result<i32, String> {
        let mut copies = self
            .kernel_side
            .copies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(&k) = copies.get(&m.map.id()) {
            return Ok(k);
        }
        let kfd = self.kernel_twin(m)?;
        self.register_kernel_object(Kind::Map, i64::from(kfd));
        copies.insert(m.map.id(), kfd);
        Ok(kfd)
    }

    /// Move bpfjet map `m` to the kernel (when [`Self::transfer_of`] says
    /// [`Transfer::Move`]).
    pub(crate) fn move_map(&self, m: &MapObj) -> Result<(), String> {
        let map = &m.map;
        let id = map.id();
        let kfd = self.kernel_twin(m)?;
        // Every fd of this process on the map becomes an fd of the kernel's
        // map, in place: the numbers the loader holds stay valid.
        let mut fds: Vec<i32> = self
            .fds
            .all()
            .into_iter()
            .filter(|&fd| matches!(self.fds.get(fd), Some(Obj::Map(x)) if x.map.id() == id))
            .collect();
        fds.extend(
            self.untracked_object_fds()
                .into_iter()
                .filter(|&(_, r)| r == ObjRef::Map(id))
                .map(|(fd, _)| fd),
        );
        // The caller's mappings of the values (libbpf's global data) map
        // the kernel's values at the same addresses.
        let file = fds.first().map_or_else(String::new, |&fd| real_fd_path(fd));
        for mp in self.kernel_side.take_array_mappings(id) {
            if file.is_empty() || !still_mapped(&file, mp.addr, mp.len) {
                continue;
            }
            // SAFETY: the range is this process's mapping of the map's
            // values (checked above); MAP_FIXED replaces it with the same
            // bytes of the kernel's map, at the same protection.
            let r = unsafe {
                libc::mmap(
                    mp.addr as *mut libc::c_void,
                    mp.len,
                    mp.prot,
                    mp.flags | libc::MAP_FIXED,
                    kfd,
                    mp.offset as libc::off_t,
                )
            };
            if r == libc::MAP_FAILED {
                // The kernel's values cannot be where the program's
                // loader reads them: keep the map bpfjet's.
                let e = std::io::Error::last_os_error();
                close(kfd);
                return Err(format!(
                    "mapping the kernel's values where the loader has them failed: {e}"
                ));
            }
        }
        for fd in fds {
            // SAFETY: fcntl and dup3 on fds of this process; dup3 replaces
            // the bpfjet map file with the kernel's map atomically.
            unsafe {
                let cloexec = libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0;
                self.take_fd(fd);
                libc::dup3(kfd, fd, if cloexec { libc::O_CLOEXEC } else { 0 });
            }
        }
        // Its pins on bpffs follow: bpfjet's placeholder goes, the kernel
        // pins its map at the path.
        for pin in self.ns.pins() {
            if pin.obj != ObjRef::Map(id) || !pin.live() {
                continue;
            }
            let (Some(_), Some(file)) = (self.ns.unpin(&pin.path), pin.file) else {
                continue;
            };
            crate::pin_files::remove(&pin.path, file);
            let path = std::ffi::CString::new(pin.path.clone()).unwrap_or_default();
            let kpin = ObjPath {
                pathname: path.as_ptr() as u64,
                bpf_fd: kfd as u32,
                ..ObjPath::default()
            };
            if let Err(e) = self.kernel.execute(&Command::ObjPin(kpin)) {
                self.warn_once(
                    &format!("pin {} of map '{}'", pin.path, map.name()),
                    &format!("was lost moving the map to the kernel: the kernel's BPF_OBJ_PIN failed: {e}"),
                );
            }
        }
        self.register_kernel_object(Kind::Map, i64::from(kfd));
        close(kfd);
        self.release(ObjRef::Map(id));
        Ok(())
    }

    /// Whether an ARRAY_OF_MAPS or HASH_OF_MAPS of the instance holds map
    /// `id` (values are inner map ids).
    fn inner_map_somewhere(&self, id: u32) -> bool {
        let instance = self.ns.instance();
        self.ns.ids(Kind::Map).into_iter().any(|outer| {
            let Ok(m) = instance.map_by_id(outer) else {
                return false;
            };
            if !matches!(m.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps) {
                return false;
            }
            let mut key: Option<Vec<u8>> = None;
            while let Ok(next) = m.get_next_key(key.as_deref()) {
                if m.lookup_copy_flags(&next, 0).ok().as_deref() == Some(&id.to_ne_bytes()[..]) {
                    return true;
                }
                key = Some(next);
            }
            false
        })
    }
}
