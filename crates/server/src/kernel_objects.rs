//! Objects bpfjet leaves to the kernel under `bpfjet exec`: programs of
//! types bpfjet does not run (a `tc`, cgroup or socket program beside an
//! XDP program in one object) and maps of types bpfjet has no
//! implementation of (sockmap, socket and cgroup storage, struct_ops).
//!
//! The kernel can only follow kernel objects, so what such a command names
//! is translated first: a BTF object bpfjet loaded (libbpf loads one BTF per
//! object and passes it with every program and map) is loaded into the
//! kernel as well, once, and its kernel fd goes in the command. A bpfjet map
//! cannot be shared — the kernel cannot reach bpfjet's memory — but one no
//! bpfjet program uses can move: a kernel program's load moves the bpfjet
//! maps it names to the kernel (its contents copied into a kernel map of
//! the same definition, then every fd of this process on it made an fd of
//! the kernel's map in place, so the fd numbers the loader holds stay
//! valid; the loader's mappings of the values and the map's bpffs pins
//! follow too). That is what an object whose tc or cgroup programs keep
//! their own maps needs (Katran's healthchecker). A map that cannot move —
//! a bpfjet program names it, a map-in-map holds it, it is pinned outside
//! bpffs, it is a mapped ring buffer, it holds fds or program ids
//! (PROG_ARRAY, perf event array, devmaps), or a queue or stack holds
//! elements — is named in the refusal of the kernel program, unless
//! nothing can change it any more (frozen and read-only for programs:
//! libbpf's `.rodata`, which an XDP and a tc program of one object both
//! read): then the kernel program gets a kernel copy of it, which no
//! reader can tell from the original.
//!
//! The kernel objects made this way (programs, maps, moved maps, links)
//! are registered in the instance by their kernel ids and listed with the
//! instance's own by `*_GET_NEXT_ID`, so `bpftool prog show`, `map show`
//! and `struct_ops list`/`unregister` under exec see them as on the
//! kernel. A kernel id that a bpfjet object of the instance also has is
//! not listed (bpfjet's object answers for it); ids of kernel objects that
//! are gone are dropped as a listing meets them.
//!
//! Which program types the kernel has is the kernel's to say: a probe load
//! (`r0 = 0; exit`) with the command's type, attach type and flags, cached
//! per process, answers for programs bpfjet loads without running them
//! (libbpf's feature probes with a global-data map).

use crate::backend::BpfjetBackend;
use crate::namespace::{Kind, ObjRef};
use crate::objects::{BtfObj, MapObj, Obj};
use crate::progs::{self, Refusal, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
use crate::user;
use bpfjet_maps::{Map, MapType};
use bpfjet_sys::{
    Backend, BtfLoad, Command, Errno, IdKind, KernelBackend, MapCreate, MapElem, ObjPath, ProgLoad,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

/// A bpfjet map a kernel program names that cannot move to the kernel:
/// the instruction, the fd, the map and why.
pub(crate) type Unmovable = (usize, u32, std::sync::Arc<MapObj>, String);

/// A kind of program: (program type, expected attach type, flags).
type ProgKind = (u32, u32, u32);

/// The kernel's side of a process's bpfjet objects.
#[derive(Default)]
pub struct KernelSide {
    /// bpfjet BTF id → the kernel fd of the same BTF, loaded on first use
    /// and kept for the process's life (the kernel's programs and maps hold
    /// their own references).
    btf: Mutex<HashMap<u32, i32>>,
    /// (program type, expected attach type, flags) → the kernel's answer to
    /// a probe load of that kind.
    prog_kinds: Mutex<HashMap<ProgKind, Result<(), Errno>>>,
    /// Where this process mapped bpfjet arrays' values (global data), by
    /// map id: a move maps the kernel map's values at the same places.
    arrays_mapped: Mutex<HashMap<u32, Vec<Mapping>>>,
    /// Ring buffers this process mapped: they stay bpfjet's (their pages
    /// are shared with the consumer's own bookkeeping).
    rings_mapped: Mutex<HashSet<u32>>,
    /// bpfjet map id → the kernel fd of its copy, for immutable maps
    /// (frozen, read-only for programs: `.rodata`) that bpfjet programs
    /// use too: kernel programs read the copy, which cannot diverge.
    copies: Mutex<HashMap<u32, i32>>,
}

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

    fn ring_was_mapped(&self, id: u32) -> bool {
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

/// The kernel id of the object behind kernel fd `fd` (the `id` of its
/// `bpf_{prog,map,link}_info`, at byte 4 of each).
fn kernel_id(fd: i32) -> Option<u32> {
    let mut info = [0u8; 8];
    let mut attr = [0u8; 16];
    attr[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
    attr[4..8].copy_from_slice(&(info.len() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
    // SAFETY: the attr names `info`, which lives across the call.
    unsafe { KernelBackend::raw(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.ok()?;
    Some(u32::from_ne_bytes(info[4..8].try_into().unwrap()))
}

fn id_kind(kind: Kind) -> Option<IdKind> {
    match kind {
        Kind::Map => Some(IdKind::Map),
        Kind::Prog => Some(IdKind::Prog),
        Kind::Link => Some(IdKind::Link),
        Kind::Btf => None,
    }
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

/// The map fd each map reference of `words` names (`lddw` with a map fd,
/// or an index into `fd_array`), with its instruction index.
pub(crate) fn map_ref_fds(p: &ProgLoad, words: &[u64]) -> Result<Vec<(usize, u32)>, Errno> {
    let mut out = Vec::new();
    for (pc, src) in progs::map_lddws(words) {
        let imm = (words[pc] >> 32) as u32;
        let fd = if matches!(src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) {
            imm
        } else if p.fd_array == 0 {
            // The kernel's own refusal follows (or bpfjet's, with its log).
            continue;
        } else {
            let raw = user::read(p.fd_array + u64::from(imm) * 4, 4)?;
            u32::from_ne_bytes(raw[..4].try_into().unwrap())
        };
        out.push((pc, fd));
    }
    Ok(out)
}

impl BpfjetBackend {
    /// The kernel fd standing for bpfjet BTF fd `fd` in a command for the
    /// kernel; `fd` itself when it is not bpfjet's (0, or a kernel BTF).
    fn kernel_btf_fd(&self, fd: u32) -> Result<u32, Errno> {
        match self.obj(fd) {
            Some(Obj::Btf(b)) if fd != 0 => self.kernel_btf(&b),
            Some(_) if fd != 0 => Err(Errno::EINVAL),
            _ => Ok(fd),
        }
    }

    /// The kernel's copy of bpfjet BTF object `b`, loaded on first use.
    fn kernel_btf(&self, b: &BtfObj) -> Result<u32, Errno> {
        let mut cache = self
            .kernel_side
            .btf
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(&k) = cache.get(&b.id) {
            return Ok(k as u32);
        }
        let load = Command::BtfLoad(BtfLoad {
            btf: b.raw.as_ptr() as u64,
            btf_size: b.raw.len() as u32,
            ..BtfLoad::default()
        });
        let k = self.kernel.execute(&load).inspect_err(|e| {
            self.note_once(
                &format!("BTF id {} for a kernel program or map", b.id),
                &format!("was refused by the kernel's BPF_BTF_LOAD: {e}"),
            )
        })? as i32;
        cache.insert(b.id, k);
        Ok(k as u32)
    }

    /// Whether bpfjet map `m` can move to the kernel (module
    /// documentation), or why not.
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
    fn kernel_twin(&self, m: &MapObj) -> Result<i32, String> {
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

    /// `words` and the caller's `fd_array` with each `(pc, kernel fd)` of
    /// `copies` in place of the map the `lddw` at `pc` names (in the
    /// instruction for a map fd, in the array for an index); both empty
    /// without copies.
    fn with_copies(
        &self,
        p: &ProgLoad,
        words: &[u64],
        copies: &[(usize, i32)],
    ) -> Result<(Vec<u64>, Vec<u32>), Errno> {
        if copies.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let srcs: HashMap<usize, u8> = progs::map_lddws(words).into_iter().collect();
        let by_index =
            |pc: usize| !matches!(srcs.get(&pc), Some(&(PSEUDO_MAP_FD | PSEUDO_MAP_VALUE)));
        let mut insns = words.to_vec();
        let mut fd_array: Vec<u32> = Vec::new();
        let max = copies
            .iter()
            .filter(|&&(pc, _)| by_index(pc))
            .map(|&(pc, _)| (words[pc] >> 32) as u32)
            .max();
        if let Some(max) = max {
            fd_array = user::read(p.fd_array, (max as usize + 1) * 4)?
                .chunks(4)
                .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
                .collect();
        }
        for &(pc, kfd) in copies {
            if by_index(pc) {
                fd_array[(words[pc] >> 32) as usize] = kfd as u32;
            } else {
                insns[pc] = (insns[pc] & 0xffff_ffff) | (u64::from(kfd as u32) << 32);
            }
        }
        Ok((insns, fd_array))
    }

    /// The kernel copy of immutable bpfjet map `m` (made once per
    /// process), for a kernel program that names a map bpfjet programs use.
    fn kernel_copy(&self, m: &MapObj) -> Result<i32, String> {
        if !immutable(m) {
            return Err(self.movable_map(m).err().unwrap_or_default());
        }
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

    /// Move bpfjet map `m` to the kernel (after [`Self::movable_map`]).
    fn move_map(&self, m: &MapObj) -> Result<(), String> {
        let map = &m.map;
        let id = map.id();
        self.movable_map(m)?;
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

    /// The refusal of a kernel program because bpfjet map `m` (at
    /// instruction `pc`, fd `fd`) cannot move to the kernel, and its
    /// stderr line.
    fn cannot_move(&self, p: &ProgLoad, pc: usize, fd: u32, m: &MapObj, why: &str) -> Refusal {
        self.warn_once(
            &format!("BPF_PROG_LOAD of program type {} with map '{}'", p.prog_type, m.map.name()),
            &format!("the kernel runs programs of this type, and the map cannot move to the kernel: {why}"),
        );
        Refusal::new(
            Errno::EINVAL,
            format!(
                "insn {pc}: map '{}' (fd {fd}) is a bpfjet map; a program of type {} runs in \
                 the kernel, and the map cannot move there: {why}",
                m.map.name(),
                p.prog_type
            ),
        )
    }

    /// The first bpfjet map `p` names that cannot move to the kernel (its
    /// instruction, fd, map and why): checked for all before any moves.
    pub(crate) fn unmovable_map(
        &self,
        p: &ProgLoad,
        words: &[u64],
    ) -> Result<Option<Unmovable>, Errno> {
        for (pc, fd) in map_ref_fds(p, words)? {
            if let Some(Obj::Map(m)) = self.obj(fd) {
                if let Err(why) = self.movable_map(&m) {
                    if !immutable(&m) {
                        return Ok(Some((pc, fd, m, why)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Register the kernel object behind kernel fd `fd` (a `bpf()` result
    /// of a kernel program, map or link this process made) in the
    /// instance, unless a bpfjet object of the instance has its id.
    pub(crate) fn register_kernel_object(&self, kind: Kind, fd: i64) {
        let Some(id) = kernel_id(fd as i32) else {
            return;
        };
        if !self.ns.ids(kind).contains(&id) {
            self.ns.register_kernel_id(kind, id);
        }
    }

    /// The next registered kernel object of `kind` after `start` that the
    /// kernel still has (those gone are dropped), and is not shadowed by a
    /// bpfjet object of the same id.
    pub(crate) fn next_kernel_id(&self, kind: Kind, start: u32) -> Option<u32> {
        let ik = id_kind(kind)?;
        let ours = self.ns.ids(kind);
        for id in self
            .ns
            .kernel_ids(kind)
            .into_iter()
            .filter(|&id| id > start)
        {
            if ours.contains(&id) {
                continue;
            }
            if self.kernel_has(ik, id) {
                return Some(id);
            }
            self.ns.forget_kernel_id(kind, id);
        }
        None
    }

    /// Whether the kernel still has object `id` of kind `ik`.
    fn kernel_has(&self, ik: IdKind, id: u32) -> bool {
        let g = bpfjet_sys::GetFdById {
            kind: ik,
            id,
            open_flags: 0,
        };
        match self.kernel.execute(&Command::GetFdById(g)) {
            Ok(fd) => {
                // SAFETY: the fd the probe just opened.
                unsafe { libc::close(fd as i32) };
                true
            }
            Err(e) => e != Errno::ENOENT,
        }
    }

    /// Whether `id` is a registered kernel object of `kind` (and no bpfjet
    /// object of the instance has it): its `*_GET_FD_BY_ID` is the kernel's.
    pub(crate) fn is_kernel_id(&self, kind: Kind, id: u32) -> bool {
        self.ns.kernel_ids(kind).contains(&id) && !self.ns.ids(kind).contains(&id)
    }

    /// Whether an ARRAY_OF_MAPS or HASH_OF_MAPS of the instance holds map
    /// `id` (values are inner map ids).
    fn inner_map_somewhere(&self, id: u32) -> bool {
        let instance = self.ns.instance();
        self.ns
            .ids(crate::namespace::Kind::Map)
            .into_iter()
            .any(|outer| {
                let Ok(m) = instance.map_by_id(outer) else {
                    return false;
                };
                if !matches!(m.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps) {
                    return false;
                }
                let mut key: Option<Vec<u8>> = None;
                while let Ok(next) = m.get_next_key(key.as_deref()) {
                    if m.lookup_copy_flags(&next, 0).ok().as_deref() == Some(&id.to_ne_bytes()[..])
                    {
                        return true;
                    }
                    key = Some(next);
                }
                false
            })
    }

    /// `BPF_PROG_BIND_MAP` of a kernel program and bpfjet map `map_fd`:
    /// the map moves to the kernel (as for a kernel program naming it),
    /// then the kernel binds it; `EINVAL` and a stderr line when it cannot
    /// move.
    pub(crate) fn kernel_bind_map(&self, map_fd: u32, cmd: &Command) -> Result<i64, Errno> {
        if let Some(Obj::Map(m)) = self.obj(map_fd) {
            if self.movable_map(&m).is_err() && immutable(&m) {
                // libbpf binds .rodata to every program: a kernel program
                // gets its kernel copy bound, as it reads that copy.
                let kfd = self.kernel_copy(&m).map_err(|_| Errno::EINVAL)?;
                let Command::Other(_, raw) = cmd else {
                    return Err(Errno::EINVAL);
                };
                let mut attr = raw.clone();
                attr[4..8].copy_from_slice(&(kfd as u32).to_ne_bytes());
                const BPF_PROG_BIND_MAP: u32 = 35;
                // SAFETY: the caller's attr with the copy's fd; it names no
                // memory.
                return unsafe { KernelBackend::raw(BPF_PROG_BIND_MAP, &mut attr) };
            }
            if let Err(why) = self.move_map(&m) {
                self.warn_once(
                    &format!(
                        "BPF_PROG_BIND_MAP of a kernel program and map '{}'",
                        m.map.name()
                    ),
                    &format!("the map cannot move to the kernel: {why}"),
                );
                return Err(Errno::EINVAL);
            }
        }
        self.kernel.execute(cmd)
    }

    /// `BPF_PROG_LOAD` of a program the kernel runs: its BTF translated,
    /// refused (`EINVAL`, the map named in the log) when it names a bpfjet
    /// map.
    pub(crate) fn kernel_prog_load(&self, p: &ProgLoad, words: &[u64]) -> Result<i64, Errno> {
        if let Some((pc, fd, m, why)) = self.unmovable_map(p, words)? {
            return self.refuse(p, self.cannot_move(p, pc, fd, &m, &why));
        }
        // Maps that move; immutable ones bpfjet programs keep are copied,
        // and the program is given the copy's fd instead.
        let mut copies: Vec<(usize, i32)> = Vec::new();
        for (pc, fd) in map_ref_fds(p, words)? {
            let Some(Obj::Map(m)) = self.obj(fd) else {
                continue;
            };
            let r = if self.movable_map(&m).is_ok() {
                self.move_map(&m)
            } else {
                self.kernel_copy(&m).map(|kfd| copies.push((pc, kfd)))
            };
            if let Err(why) = r {
                return self.refuse(p, self.cannot_move(p, pc, fd, &m, &why));
            }
        }
        let mut k = p.clone();
        k.prog_btf_fd = self.kernel_btf_fd(p.prog_btf_fd)?;
        // The instructions (and fd_array) with the copies' fds, kept alive
        // across the call.
        let (insns, fd_array) = self.with_copies(p, words, &copies)?;
        if !copies.is_empty() {
            k.insns = insns.as_ptr() as u64;
            if !fd_array.is_empty() {
                k.fd_array = fd_array.as_ptr() as u64;
            }
        }
        let r = self.kernel.execute(&Command::ProgLoad(k.clone()));
        p.log_true_size.set(k.log_true_size.get());
        if let Ok(fd) = r {
            self.register_kernel_object(Kind::Prog, fd);
        }
        r
    }

    /// Whether the kernel loads programs of `p`'s type, attach type and
    /// flags at all: the kernel's errno when it does not.
    pub(crate) fn kernel_has_prog_kind(&self, p: &ProgLoad) -> Result<(), Errno> {
        let kind: ProgKind = (p.prog_type, p.expected_attach_type, p.prog_flags);
        let mut cache = self
            .kernel_side
            .prog_kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = cache.get(&kind) {
            return *r;
        }
        // r0 = 0; exit
        let insns: [u64; 2] = [0xb7, 0x95];
        let probe = ProgLoad {
            prog_type: p.prog_type,
            insn_cnt: 2,
            insns: insns.as_ptr() as u64,
            license: p.license,
            kern_version: p.kern_version,
            prog_flags: p.prog_flags,
            expected_attach_type: p.expected_attach_type,
            attach_btf_id: p.attach_btf_id,
            ..ProgLoad::default()
        };
        let r = self.kernel.execute(&Command::ProgLoad(probe)).map(|fd| {
            // SAFETY: the fd the probe load just made, used by nothing.
            unsafe { libc::close(fd as i32) };
        });
        cache.insert(kind, r);
        r
    }

    /// `BPF_MAP_CREATE` of a map type bpfjet has no implementation of: the
    /// kernel's map (its BTF translated), which kernel programs use; bpfjet
    /// programs naming it are refused at load.
    pub(crate) fn kernel_map_create(&self, m: &MapCreate) -> Result<i64, Errno> {
        if m.inner_map_fd != 0 && matches!(self.obj(m.inner_map_fd), Some(Obj::Map(_))) {
            return Err(Errno::EINVAL);
        }
        let mut k = m.clone();
        k.btf_fd = self.kernel_btf_fd(m.btf_fd)?;
        let subject = format!("BPF_MAP_CREATE of map type {}", m.map_type);
        let r = self.kernel.execute(&Command::MapCreate(k));
        if let Ok(fd) = r {
            self.register_kernel_object(Kind::Map, fd);
        }
        match r {
            Ok(_) => self.note_once(
                &subject,
                "goes to the kernel: bpfjet has no such map type, so only kernel programs can use it",
            ),
            Err(e) => self.warn_once(
                &subject,
                &format!("bpfjet has no such map type, and the kernel refused it: {e}"),
            ),
        }
        r
    }
}
