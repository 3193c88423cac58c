//! [`BpfjetBackend`]: every served command, dispatched to the crates that
//! implement it.

use crate::fds::FdTable;
use crate::freplace;
use crate::kfunc_calls;
use crate::maps;
use crate::namespace::{Kind, Namespace, ObjRef};
use crate::objects::{Access, BtfObj, MapMeta, MapObj, Obj, ProgObj, ProgRecord};
use crate::pin_files;
use crate::progs::{self, Refusal, BPF_PROG_TYPE_XDP, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
use crate::user;
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::{Instance, MapOptions, MapSpec, MapType};
use bpfjet_runtime::xdp::frame::FrameError;
use bpfjet_runtime::{RuntimeError, TestRunOptions};
use bpfjet_sys::{
    Backend, BtfInfo, BtfLoad, Command, Errno, GetInfo, IdKind, KernelBackend, MapCreate, MapInfo,
    ObjPath, ProgInfo, ProgLoad, TestRun,
};
use std::collections::HashSet;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

const MAX_INSNS: u32 = 1_000_000;
const BTF_MAX_SIZE: u32 = 16 << 20;
const XDP_MD_SIZE: usize = 24;
const ETH_HLEN: u32 = 14;
const BPF_STATS_RUN_TIME: u32 = 0;

pub struct BpfjetBackend {
    pub(crate) ns: Namespace,
    pub(crate) fds: FdTable,
    pub(crate) kernel: KernelBackend,
    warned: Mutex<HashSet<String>>,
    /// Open `BPF_ENABLE_STATS` fds of this process.
    stats: AtomicUsize,
    /// BTF loaded into the kernel for kernel programs and maps, and the
    /// program kinds the kernel has (`kernel_objects.rs`).
    pub(crate) kernel_side: crate::kernel_objects::KernelSide,
}

impl BpfjetBackend {
    pub fn new(ns: Namespace) -> BpfjetBackend {
        BpfjetBackend {
            ns,
            fds: FdTable::default(),
            kernel: KernelBackend,
            warned: Mutex::default(),
            stats: AtomicUsize::new(0),
            kernel_side: Default::default(),
        }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    /// The fd is about to be closed: forget what it held. The caller
    /// closes it and then passes what this returns to [`Self::release`],
    /// so that the fd's own lock no longer counts as a holder.
    pub fn take_fd(&self, fd: i32) -> Option<ObjRef> {
        let obj = self.fds.forget(fd)?;
        match &obj {
            Obj::Map(m) => Some(ObjRef::Map(m.map.id())),
            Obj::Prog(p) => Some(ObjRef::Prog(p.rec.id)),
            Obj::Btf(b) => Some(ObjRef::Btf(b.id)),
            Obj::Link(id) => Some(ObjRef::Link(*id)),
            Obj::Stats => {
                self.stats.fetch_sub(1, Ordering::Relaxed);
                None
            }
            Obj::PerfEvent(p) => p.take_link().map(ObjRef::Link),
            Obj::PerfOutput(_) => None,
        }
    }

    /// Every fd this process still holds, at exit: what only it held goes,
    /// as when the kernel closes a process's fds. Each fd is pointed at
    /// `/dev/null` rather than closed: its number stays taken, so a later
    /// `close` of it by the application (an atexit handler that runs after
    /// this one) cannot close a file opened in the meantime.
    pub fn release_all(&self) {
        // SAFETY: opening /dev/null; the fd is closed below.
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        // Untracked fds that name objects (dups libxdp makes with
        // F_DUPFD_CLOEXEC) end with the process too.
        if null >= 0 {
            for (fd, _) in self.untracked_object_fds() {
                // SAFETY: as below.
                unsafe { libc::dup3(null, fd, libc::O_CLOEXEC) };
            }
        }
        for fd in self.fds.all() {
            let r = self.take_fd(fd);
            if null >= 0 {
                // SAFETY: dup2 onto an fd this process holds; it drops the
                // fd's open file description and with it the fd's lock.
                unsafe { libc::dup3(null, fd, libc::O_CLOEXEC) };
            }
            if let Some(r) = r {
                self.release(r);
            }
        }
        if null >= 0 {
            // SAFETY: the fd opened above.
            unsafe { libc::close(null) };
        }
    }

    fn held_here(&self, r: ObjRef) -> bool {
        self.held_in_table(r) || self.held_by_untracked_fd(r)
    }

    /// An fd bpfjet has not seen that names the object's file: a `dup` or
    /// `fcntl(F_DUPFD)` of one (iproute2 dups its program fds), inherited or
    /// received. Looked for only when an object is about to be freed.
    fn held_by_untracked_fd(&self, r: ObjRef) -> bool {
        self.untracked_object_fds().into_iter().any(|(_, o)| o == r)
    }

    /// This process's fds that name a bpfjet object but are not in the fd
    /// table, with the object.
    pub(crate) fn untracked_object_fds(&self) -> Vec<(i32, ObjRef)> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok())
            .filter_map(|e| {
                let fd = e.file_name().to_str()?.parse::<i32>().ok()?;
                if self.fds.get(fd).is_some() {
                    return None;
                }
                let target = std::fs::read_link(e.path()).ok()?;
                Some((fd, self.ns.identify(target.to_str()?)?))
            })
            .collect()
    }

    fn held_in_table(&self, r: ObjRef) -> bool {
        self.fds.any(|o| match (o, r) {
            (Obj::Map(m), ObjRef::Map(id)) => m.map.id() == id,
            (Obj::Prog(p), ObjRef::Prog(id)) => p.rec.id == id,
            (Obj::Btf(b), ObjRef::Btf(id)) => b.id == id,
            (Obj::Link(l), ObjRef::Link(id)) => *l == id,
            _ => false,
        })
    }

    /// Program records of the instance (for references to maps and BTF).
    pub(crate) fn prog_records(&self) -> Vec<ProgRecord> {
        self.ns
            .ids(Kind::Prog)
            .into_iter()
            .filter_map(|id| {
                serde_json::from_slice(&self.ns.read_record(Kind::Prog, id).ok()?).ok()
            })
            .collect()
    }

    /// Free `r` when nothing holds it any more: no fd of any process
    /// (`holders`), no pin, no attachment or link, no program using a map
    /// or BTF. Only objects made through `bpf()` (they have a record): the
    /// maps of a `bpfjet run` deployment are not a control plane's to free.
    pub fn release(&self, r: ObjRef) {
        let (kind, id) = r.kind_id();
        if !self.ns.record_path(kind, id).exists() || self.ns.is_pinned(r) {
            return;
        }
        if self.held_here(r) || self.held_by_fd(r) {
            return;
        }
        // An attached program runs on after its loader let go of it; an
        // EXT program not yet linked holds its load-time target.
        if let ObjRef::Prog(id) = r {
            if self.ns.prog_attached(id)
                || self.prog_linked(id)
                || crate::redirect_progs::held_by_entry(&self.ns, id)
                || self
                    .prog_records()
                    .iter()
                    .any(|p| p.attach_prog_id == id && !p.load_target_used)
            {
                return;
            }
        }
        match r {
            ObjRef::Prog(id) => {
                let rec: Option<ProgRecord> = self
                    .ns
                    .read_record(Kind::Prog, id)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                self.ns.remove_record(Kind::Prog, id);
                // What only this program held.
                if let Some(rec) = rec {
                    for m in rec.map_ids {
                        self.release(ObjRef::Map(m));
                    }
                    if rec.btf_id != 0 {
                        self.release(ObjRef::Btf(rec.btf_id));
                    }
                    if rec.attach_prog_id != 0 && !rec.load_target_used {
                        self.release(ObjRef::Prog(rec.attach_prog_id));
                    }
                }
            }
            ObjRef::Map(id) => {
                if self.prog_records().iter().any(|p| p.map_ids.contains(&id)) {
                    return;
                }
                let btf = self
                    .ns
                    .read_record(Kind::Map, id)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<MapMeta>(&b).ok())
                    .map_or(0, |m| m.btf_id);
                let held = self
                    .ns
                    .instance()
                    .map_by_id(id)
                    .map(|m| crate::redirect_progs::entry_programs(&m))
                    .unwrap_or_default();
                let _ = self.ns.instance().remove_map(id);
                self.ns.remove_record(Kind::Map, id);
                if btf != 0 {
                    self.release(ObjRef::Btf(btf));
                }
                // A devmap's entries held their programs.
                for p in held {
                    self.release(ObjRef::Prog(p));
                }
            }
            ObjRef::Link(id) => {
                self.release_link(id);
            }
            ObjRef::Btf(id) => {
                let used_by_prog = self.prog_records().iter().any(|p| p.btf_id == id);
                let used_by_map = self.ns.ids(Kind::Map).into_iter().any(|m| {
                    self.ns
                        .read_record(Kind::Map, m)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<MapMeta>(&b).ok())
                        .is_some_and(|meta| meta.btf_id == id)
                });
                if !used_by_prog && !used_by_map {
                    self.ns.remove_record(Kind::Btf, id);
                }
            }
        }
    }

    /// What `readlink("/proc/self/fd/N")` shows for a kernel object of the
    /// same kind (`anon_inode:bpf-map`), for tools that tell object types
    /// apart that way (bpftool); None for an fd that holds no bpfjet object.
    pub fn fd_link(&self, fd: i32) -> Option<&'static str> {
        match self.fds.get(fd)? {
            Obj::Map(_) => Some("anon_inode:bpf-map"),
            Obj::Prog(_) => Some("anon_inode:bpf-prog"),
            Obj::Btf(_) => Some("anon_inode:btf"),
            Obj::Link(_) => Some("anon_inode:bpf_link"),
            Obj::Stats => Some("anon_inode:bpf-stats"),
            Obj::PerfEvent(_) | Obj::PerfOutput(_) => Some("anon_inode:[perf_event]"),
        }
    }

    /// For `mmap(fd, offset)` of a bpfjet map: how far into the map's file
    /// the kernel's offset 0 is. None when `fd` holds no bpfjet object;
    /// `ENODEV`/`EINVAL` as the kernel for maps that cannot be mapped.
    pub fn mmap_offset(&self, fd: i32, writable: bool) -> Option<Result<u64, Errno>> {
        Some(match self.fds.get(fd)? {
            Obj::Map(m) if m.map.map_type() != MapType::Array => Err(Errno(libc::ENODEV)),
            Obj::Map(m) if writable && m.map.is_frozen() => Err(Errno::EPERM),
            Obj::Map(m) => m.map.mmap_offset().ok_or(Errno::EINVAL),
            _ => Err(Errno(libc::ENODEV)),
        })
    }

    /// `mmap` of a bpfjet array's values (`fd`, at `offset` of the
    /// kernel's layout) made `len` bytes at `addr`: recorded, so that a move
    /// of the map to the kernel maps the kernel's values there.
    pub fn array_mapped(
        &self,
        fd: i32,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        offset: u64,
    ) {
        if let Some(Obj::Map(m)) = self.fds.get(fd) {
            self.kernel_side.array_mapped(
                m.map.id(),
                crate::map_moves::Mapping {
                    addr,
                    len,
                    prot,
                    flags,
                    offset,
                },
            );
        }
    }

    /// The ring buffer map (RINGBUF or USER_RINGBUF) behind `fd` (also a
    /// dup or inherited fd), for the preload's mmap and epoll of ring
    /// buffer fds; None otherwise.
    pub fn ringbuf_map(&self, fd: i32) -> Option<Arc<bpfjet_maps::Map>> {
        if fd < 0 {
            return None;
        }
        match self.obj(fd as u32)? {
            Obj::Map(m) if matches!(m.map.map_type(), MapType::Ringbuf | MapType::UserRingbuf) => {
                Some(m.map.clone())
            }
            _ => None,
        }
    }

    /// For `mmap(fd, offset, len)` of a ring buffer fd: the pieces of the
    /// map's object (mapped through the same fd) that the kernel's layout
    /// shows there. None when `fd` is not a bpfjet ring buffer; EPERM/EINVAL
    /// as the kernel for writable or out-of-range mappings.
    pub fn ringbuf_mmap(
        &self,
        fd: i32,
        offset: u64,
        len: usize,
        writable: bool,
    ) -> Option<Result<Vec<bpfjet_maps::MmapSegment>, Errno>> {
        let map = self.ringbuf_map(fd)?;
        self.kernel_side.ring_mapped(map.id());
        Some(
            map.ringbuf_mmap_segments(offset, len, writable)
                .map_err(|e| Errno(e.errno())),
        )
    }

    /// `unlink(path)` of a bpffs path: removes a bpfjet pin (true), freeing
    /// the object if the pin was the last thing holding it and this process
    /// created it. False when bpfjet has no pin at `path`.
    pub fn unpin(&self, path: &str) -> bool {
        let pin = match self.ns.pinned(path) {
            Ok(pin) if pin.live() => pin,
            Ok(_) => {
                // The file at the path is not bpfjet's (its placeholder
                // went): the real unlink decides.
                self.settle_pin(path);
                return false;
            }
            // A renamed placeholder: its record, found by the file (only on
            // bpffs: every unlink of the process comes here).
            Err(_) if pin_files::dir_on_bpffs(path) => match self.moved_pin_at(path) {
                Some(pin) => pin,
                None => return false,
            },
            Err(_) => return false,
        };
        let Some(pin) = self.ns.unpin(&pin.path) else {
            return false;
        };
        if let Some(f) = pin.file {
            pin_files::remove(path, f);
        }
        self.release(pin.obj);
        true
    }

    /// Whether the file at `path` is a bpfjet placeholder (callers have
    /// looked for this instance's own pin there first). One no instance
    /// claims (its instance was removed without unpinning) is an orphan,
    /// and is removed here.
    fn foreign_placeholder(&self, path: &str) -> bool {
        let Some(id) = pin_files::placeholder_at(path) else {
            return false;
        };
        if !self.ns.placeholder_claimed(path, id) {
            pin_files::remove(path, id);
        }
        true
    }

    /// The record of a pin whose placeholder was renamed to `path`.
    fn moved_pin_at(&self, path: &str) -> Option<crate::namespace::Pin> {
        let (dev, ino) = pin_files::file_of(path)?;
        self.ns
            .pins()
            .into_iter()
            .find(|p| p.file.is_some_and(|f| f.is_file((dev, ino))) && !p.live())
    }

    /// One stderr line per process and subject: what bpfjet does not serve.
    pub fn warn_once(&self, subject: &str, why: &str) {
        self.note_once(subject, &format!("is not served by bpfjet: {why}"));
    }

    /// One stderr line per process and subject: `bpfjet: SUBJECT WHAT`.
    pub fn note_once(&self, subject: &str, what: &str) {
        let mut w = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if w.insert(subject.to_string()) {
            eprintln!("bpfjet: {subject} {what}");
        }
    }

    // ---- objects by fd and id ------------------------------------------------

    /// The bpfjet object behind `fd`: known, or recognised by the file it
    /// names (a dup, an inherited fd, one received over a socket).
    pub(crate) fn obj(&self, fd: u32) -> Option<Obj> {
        let fd = fd as i32;
        if let Some(o) = self.fds.get(fd) {
            return Some(o);
        }
        let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        let obj = match self.ns.identify(path.to_str()?)? {
            ObjRef::Map(id) => {
                // A read-only fd's description is opened read-only (below,
                // new_fd): a dup or an inherited copy keeps that.
                // SAFETY: F_GETFL on an fd of this process.
                let mode = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_ACCMODE;
                let access = if mode == libc::O_RDONLY {
                    Access {
                        read: true,
                        write: false,
                    }
                } else {
                    Access::READ_WRITE
                };
                Obj::Map(self.open_map(id, access).ok()?)
            }
            ObjRef::Prog(id) => Obj::Prog(self.open_prog(id).ok()?),
            ObjRef::Btf(id) => Obj::Btf(self.open_btf(id).ok()?),
            ObjRef::Link(id) => Obj::Link(id),
        };
        // A description opened elsewhere (a process without bpfjet) may not
        // hold its lock yet.
        crate::holders::hold(fd);
        self.fds.insert(fd, obj.clone());
        Some(obj)
    }

    fn map_obj(&self, fd: u32) -> Result<Arc<MapObj>, Errno> {
        match self.obj(fd) {
            Some(Obj::Map(m)) => Ok(m),
            Some(_) => Err(Errno::EINVAL),
            None => Err(Errno::EBADF),
        }
    }

    fn open_map(&self, id: u32, access: Access) -> Result<Arc<MapObj>, Errno> {
        let map = self
            .ns
            .instance()
            .map_by_id(id)
            .map_err(|_| Errno::ENOENT)?;
        let meta = self
            .ns
            .read_record(Kind::Map, id)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| MapMeta {
                map_type: map.map_type() as u32,
                map_flags: map.spec().flags,
                map_extra: map.spec().map_extra,
                ..MapMeta::default()
            });
        Ok(Arc::new(MapObj { map, meta, access }))
    }

    fn open_prog(&self, id: u32) -> Result<Arc<ProgObj>, Errno> {
        let rec: ProgRecord = serde_json::from_slice(&self.ns.read_record(Kind::Prog, id)?)
            .map_err(|_| Errno::EINVAL)?;
        let maps = rec
            .map_ids
            .iter()
            .map(|&id| self.ns.instance().map_by_id(id).map_err(|_| Errno::ENOENT))
            .collect::<Result<Vec<_>, _>>()?;
        let btf = crate::prog_btf::of(&self.ns, &rec).map_err(|r| {
            self.warn_once(&format!("program id {id}"), &r.log);
            r.errno
        })?;
        let loaded = progs::build(&rec, &maps, self.instance_handle()?, btf).map_err(|r| {
            self.warn_once(&format!("program id {id}"), &r.log);
            r.errno
        })?;
        Ok(Arc::new(progs::prog_obj(rec, loaded)))
    }

    pub(crate) fn open_btf(&self, id: u32) -> Result<Arc<BtfObj>, Errno> {
        let raw = self.ns.read_record(Kind::Btf, id)?;
        Ok(Arc::new(BtfObj { id, raw }))
    }

    fn instance_handle(&self) -> Result<Instance, Errno> {
        Instance::open(self.ns.name()).map_err(|e| Errno(e.errno()))
    }

    /// A new fd holding `obj`.
    pub(crate) fn new_fd(&self, obj: Obj) -> Result<i64, Errno> {
        let fd = match &obj {
            Obj::Map(m) => {
                let name = m.map.object_name().ok_or(Errno::EINVAL)?;
                let c = CString::new(name).map_err(|_| Errno::EINVAL)?;
                let mode = if m.access.write {
                    libc::O_RDWR
                } else {
                    libc::O_RDONLY
                };
                // SAFETY: a valid C string; the fd is owned by the table.
                unsafe { libc::shm_open(c.as_ptr(), mode | libc::O_CLOEXEC, 0) }
            }
            Obj::Prog(p) => self.ns.open_record(Kind::Prog, p.rec.id)?,
            Obj::Btf(b) => self.ns.open_record(Kind::Btf, b.id)?,
            Obj::Link(id) => self.ns.open_record(Kind::Link, *id)?,
            // SAFETY: a valid C string.
            Obj::Stats => unsafe {
                libc::memfd_create(c"bpfjet-stats".as_ptr(), libc::MFD_CLOEXEC)
            },
            Obj::PerfOutput(out) => {
                let path = CString::new(out.path.as_os_str().as_encoded_bytes())
                    .map_err(|_| Errno::EINVAL)?;
                // SAFETY: a valid C string; the fd is owned by the table.
                unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) }
            }
            // SAFETY: a valid C string.
            Obj::PerfEvent(_) => unsafe {
                libc::memfd_create(c"bpfjet-perf-event".as_ptr(), libc::MFD_CLOEXEC)
            },
        };
        if fd < 0 {
            return Err(Errno::from_io(&std::io::Error::last_os_error()));
        }
        if !matches!(obj, Obj::Stats | Obj::PerfEvent(_) | Obj::PerfOutput(_)) {
            crate::holders::hold(fd);
        }
        self.fds.insert(fd, obj);
        Ok(i64::from(fd))
    }

    // ---- commands --------------------------------------------------------------

    fn map_create(&self, m: &MapCreate) -> Result<i64, Errno> {
        if !m
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(Errno::EINVAL);
        }
        let Some(map_type) = MapType::from_kernel(m.map_type) else {
            return self.kernel_map_create(m);
        };
        if m.map_ifindex != 0 || m.btf_vmlinux_value_type_id != 0 {
            self.warn_once(
                "BPF_MAP_CREATE with map_ifindex/btf_vmlinux_value_type_id",
                "offloaded and struct_ops maps do not exist in bpfjet",
            );
            return Err(Errno::EINVAL);
        }
        if m.btf_fd != 0 && !matches!(self.obj(m.btf_fd), Some(Obj::Btf(_))) {
            return Err(Errno::EBADF);
        }
        let mut spec = MapSpec::new(&m.name, map_type, m.key_size, m.value_size, m.max_entries);
        // BPF_F_TOKEN_FD: the kernel sets it aside, checks the map, then
        // looks for the BPF token in map_token_fd. bpfjet has no tokens:
        // a map the kernel would create fails there (EINVAL, as for an fd
        // that is not a token).
        const BPF_F_TOKEN_FD: u32 = 1 << 16;
        spec.flags = m.map_flags & !BPF_F_TOKEN_FD;
        if m.map_flags & BPF_F_TOKEN_FD != 0 {
            spec.map_extra = m.map_extra;
            bpfjet_maps::check_creatable(&spec, self.ns.instance().ncpus())
                .map_err(|e| maps::errno(&e))?;
            self.warn_once(
                "BPF_MAP_CREATE with BPF_F_TOKEN_FD",
                "bpfjet has no BPF tokens",
            );
            return Err(Errno::EINVAL);
        }
        // The kernel refuses map_extra on anything but bloom filters and
        // arenas; bpfjet's ring-buffer backpressure bits are not for bpf().
        if m.map_extra != 0 && map_type != MapType::BloomFilter {
            return Err(Errno::EINVAL);
        }
        spec.map_extra = m.map_extra;
        if matches!(map_type, MapType::ArrayOfMaps | MapType::HashOfMaps) {
            let inner = self.map_obj(m.inner_map_fd)?;
            spec.inner = Some(Box::new(inner.map.spec().clone()));
        } else if m.inner_map_fd != 0 {
            return Err(Errno::EINVAL);
        }
        // BPF_F_RDONLY / BPF_F_WRONLY are the creating fd's access, not the
        // map's: checked with the map's type (some types refuse them), then
        // kept on the fd only, so that an fd opened by id or from a pin has
        // its own.
        let access = Access::from_flags(m.map_flags).ok_or(Errno::EINVAL)?;
        if access != Access::READ_WRITE {
            bpfjet_maps::check_creatable(&spec, self.ns.instance().ncpus())
                .map_err(|e| maps::errno(&e))?;
            spec.flags &= !(map_flags::RDONLY | map_flags::WRONLY);
        }
        // The value's BTF: a `struct bpf_spin_lock` enables BPF_F_LOCK and
        // bpf_spin_lock, for the map types the kernel allows; timers, kptrs
        // and graph roots are the runtime's bytes (never copied from or to
        // user space), and a timer outside the map types that may hold one
        // is the kernel's EOPNOTSUPP (libbpf then retries without BTF).
        let (spin_lock_off, owned) = match self.obj(m.btf_fd) {
            Some(Obj::Btf(b)) if m.btf_fd != 0 && m.btf_value_type_id != 0 => {
                use bpfjet_obj::special_fields::{
                    kernel_refuses_value, runtime_owned_ranges, value_fields,
                };
                let btf = bpfjet_obj::Btf::parse(&b.raw).map_err(|_| Errno::EINVAL)?;
                let fields = value_fields(&btf, m.btf_value_type_id).map_err(|_| Errno::EINVAL)?;
                if kernel_refuses_value(map_type, &fields) {
                    return Err(Errno::EOPNOTSUPP);
                }
                let lock = bpfjet_obj::spin_lock_offset(&btf, &m.name, m.btf_value_type_id)
                    .map_err(|_| Errno::EINVAL)?
                    .filter(|_| matches!(map_type, MapType::Hash | MapType::Array));
                (lock, runtime_owned_ranges(&fields))
            }
            _ => (None, Vec::new()),
        };
        let opts = MapOptions {
            spin_lock_off,
            ..MapOptions::default()
        };
        let map = self
            .ns
            .instance()
            .create_map(&spec, &opts)
            .map_err(|e| maps::errno(&e))?;
        map.set_owned_fields(owned);
        let btf_id = match self.obj(m.btf_fd) {
            Some(Obj::Btf(b)) if m.btf_fd != 0 => b.id,
            _ => 0,
        };
        let meta = MapMeta {
            map_type: m.map_type,
            map_flags: m.map_flags,
            map_extra: m.map_extra,
            btf_id,
            btf_key_type_id: m.btf_key_type_id,
            btf_value_type_id: m.btf_value_type_id,
            tail_owner: None,
        };
        let record = serde_json::to_vec(&meta).map_err(|_| Errno::EINVAL)?;
        let id = map.id();
        // The fd (and its lock) first: a sweep frees only maps with a record.
        let fd = self.new_fd(Obj::Map(Arc::new(MapObj { map, meta, access })))?;
        if let Err(e) = self.ns.write_record(Kind::Map, id, &record) {
            self.take_fd(fd as i32);
            // SAFETY: the fd made above, not yet returned to the caller.
            unsafe { libc::close(fd as i32) };
            let _ = self.ns.instance().remove_map(id);
            return Err(e);
        }
        Ok(fd)
    }

    /// Map-in-map values are map fds for user space and map ids inside.
    fn map_value_in(&self, m: &MapObj, e: &bpfjet_sys::MapElem) -> Result<Option<[u8; 4]>, Errno> {
        if !matches!(m.map.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps) {
            return Ok(None);
        }
        let outer = &m.map;
        if outer.map_type() == MapType::ArrayOfMaps {
            // bpf_fd_array_map_update_elem: flags and index before the fd.
            if e.flags != 0 {
                return Err(Errno::EINVAL);
            }
            let k = user::read(e.key, 4)?;
            if u32::from_ne_bytes(k[..4].try_into().unwrap()) >= outer.max_entries() {
                return Err(Errno(libc::E2BIG));
            }
        }
        let raw = user::read(e.value, 4)?;
        let fd = u32::from_ne_bytes(raw[..4].try_into().unwrap());
        let inner = self.map_obj(fd)?;
        if let Some(template) = &outer.spec().inner {
            if !template.fits_inner_template(inner.map.spec()) {
                return Err(Errno::EINVAL);
            }
        }
        Ok(Some(inner.map.id().to_ne_bytes()))
    }

    fn map_elem(&self, cmd: &Command) -> Result<i64, Errno> {
        let (Command::MapLookupElem(e)
        | Command::MapUpdateElem(e)
        | Command::MapDeleteElem(e)
        | Command::MapGetNextKey(e)
        | Command::MapLookupAndDeleteElem(e)
        | Command::MapFreeze(e)) = cmd
        else {
            return Err(Errno::EINVAL);
        };
        let m = match self.obj(e.map_fd) {
            Some(Obj::Map(m)) => m,
            Some(_) => return Err(Errno::EINVAL),
            // Not bpfjet's: a map the kernel holds.
            None => return self.kernel.execute(cmd),
        };
        let map = &m.map;
        // The fd's access, before any map type's rule (map_update_elem,
        // map_delete_elem, map_get_next_key check it first).
        match cmd {
            Command::MapUpdateElem(_) | Command::MapDeleteElem(_) => maps::writable(map, m.access)?,
            Command::MapGetNextKey(_) => maps::readable(map, m.access)?,
            _ => {}
        }
        if map.map_type() == MapType::Xskmap && matches!(cmd, Command::MapUpdateElem(_)) {
            // AF_XDP socket fds: bpfjet's data plane has no consumer for an
            // XSKMAP redirect; refuse rather than store an fd number.
            self.warn_once(
                "BPF_MAP_UPDATE_ELEM on an xskmap map",
                "socket fds as map values are not translated",
            );
            return Err(Errno::EINVAL);
        }
        if let Command::MapUpdateElem(e) = cmd {
            // Program fds in 8-byte devmap/cpumap values (crate::redirect_progs).
            if let Some(value) = self.redirect_map_value(&m, e)? {
                let k = user::slice(e.key, map.key_size() as usize)?;
                let old = crate::redirect_progs::entry_program(map, k);
                map.update_elem(k, &value, e.flags)
                    .map_err(|e| maps::errno(&e))?;
                if let Some(old) = old {
                    self.release(ObjRef::Prog(old));
                }
                // The attached programs redirecting through it run its
                // entries' programs: rebuilt with them.
                self.prog_array_changed(map.id())?;
                return Ok(0);
            }
        }
        if let (MapType::Devmap | MapType::DevmapHash, Command::MapUpdateElem(e)) =
            (map.map_type(), cmd)
        {
            // The kernel's __dev_map_alloc_node: the ifindex names a device
            // of the caller's network namespace (this process's), else
            // EINVAL. (0 clears an array slot: the map checks that.)
            let raw = user::read(e.value, 4)?;
            let ifindex = u32::from_ne_bytes(raw[..4].try_into().unwrap());
            if ifindex != 0 && crate::attach::ifname(ifindex).is_err() {
                return Err(Errno::EINVAL);
            }
        }
        if map.map_type() == MapType::UserRingbuf {
            // The kernel's ringbuf map ops have no element commands
            // (ENOTSUPP, 524), after the generic key copy: a key pointer
            // for a 0-byte key is EINVAL. Freezing is the generic one.
            let key = match cmd {
                Command::MapLookupElem(e)
                | Command::MapUpdateElem(e)
                | Command::MapDeleteElem(e)
                | Command::MapGetNextKey(e)
                | Command::MapLookupAndDeleteElem(e) => e.key,
                _ => 0,
            };
            if !matches!(cmd, Command::MapFreeze(_)) {
                return Err(if key != 0 {
                    Errno::EINVAL
                } else {
                    Errno::ENOTSUPP
                });
            }
        }
        if map.map_type() == MapType::PerfEventArray {
            match cmd {
                Command::MapUpdateElem(e) => return self.perf_array_elem(map, e, true).map(|()| 0),
                Command::MapDeleteElem(e) => {
                    return self.perf_array_elem(map, e, false).map(|()| 0)
                }
                // The kernel's perf event array has no lookup from user
                // space: ENOTSUPP (524), not EOPNOTSUPP.
                Command::MapLookupElem(_) | Command::MapLookupAndDeleteElem(_) => {
                    return Err(Errno(524))
                }
                _ => {}
            }
        }
        if map.map_type() == MapType::ProgArray {
            // Program fds in, program ids stored (crate::tail_calls).
            let r = match cmd {
                Command::MapUpdateElem(e) => {
                    let id = self.prog_array_value(map, e.value)?;
                    let k = user::slice(e.key, map.key_size() as usize)?;
                    map.update_elem(k, &id, e.flags)
                        .map_err(|e| maps::errno(&e))
                }
                Command::MapDeleteElem(e) => maps::delete(map, m.access, e),
                Command::MapLookupElem(e) => return maps::lookup(map, m.access, e).map(|()| 0),
                Command::MapGetNextKey(e) => return maps::next_key(map, m.access, e).map(|()| 0),
                _ => Err(Errno::EINVAL),
            };
            r?;
            self.prog_array_changed(map.id())?;
            return Ok(0);
        }
        match cmd {
            Command::MapLookupElem(e) => maps::lookup(map, m.access, e),
            Command::MapUpdateElem(e) => match self.map_value_in(&m, e)? {
                Some(id) => {
                    let k = user::slice(e.key, map.key_size() as usize)?;
                    map.update_elem(k, &id, e.flags)
                        .map_err(|e| maps::errno(&e))
                }
                None => maps::update(map, m.access, e),
            },
            Command::MapDeleteElem(e) => {
                let old = user::slice(e.key, map.key_size() as usize)
                    .ok()
                    .and_then(|k| crate::redirect_progs::entry_program(map, k));
                maps::delete(map, m.access, e)?;
                if let Some(old) = old {
                    // The entry held its program.
                    self.release(ObjRef::Prog(old));
                }
                Ok(())
            }
            Command::MapGetNextKey(e) => maps::next_key(map, m.access, e),
            Command::MapLookupAndDeleteElem(e) => maps::lookup_and_delete(map, m.access, e),
            Command::MapFreeze(_) => maps::freeze(map, m.access),
            _ => Err(Errno::EINVAL),
        }
        .map(|()| 0)
    }

    fn prog_load(&self, p: &ProgLoad) -> Result<i64, Errno> {
        if p.insn_cnt == 0 {
            return Err(Errno::EINVAL);
        }
        if p.insn_cnt > MAX_INSNS {
            return Err(Errno::E2BIG);
        }
        let bytes = user::read(p.insns, p.insn_cnt as usize * 8)?;
        let mut words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // Of the instructions as passed, before map references are rewritten.
        let tag = progs::tag(&words);
        user::check_log(p.log_level, p.log_buf, p.log_size)?;
        let license = user::cstring(p.license, 128)?;
        let refs = progs::map_lddws(&words);
        let func_info = freplace::read_func_info(p)?;
        let ext_target = if p.prog_type == freplace::BPF_PROG_TYPE_EXT {
            match self.ext_load_target(p, &func_info) {
                // The target is a kernel program: the kernel's extension.
                None => return self.kernel_prog_load(p, &words),
                Some(Err(r)) => return self.refuse(p, r),
                Some(Ok(t)) => Some(t),
            }
        } else {
            None
        };
        let (attach_prog_id, mut attach_btf_id, mut attach_btf_obj_id) =
            ext_target.unwrap_or((0, 0, 0));
        // A tp_btf program of an XDP tracepoint: bpfjet's data planes fire
        // it; an fentry/fexit program on a bpfjet XDP program: they run it
        // around that program.
        let mut tracepoint = crate::tp_btf::xdp_tracepoint(p);
        if tracepoint.is_some() {
            (attach_btf_id, attach_btf_obj_id) = (p.attach_btf_id, crate::tp_btf::VMLINUX_BTF_ID);
        }
        let mut attach_prog_id = attach_prog_id;
        match self.xdp_trace_target(p) {
            Some(Ok(t)) => {
                (attach_prog_id, attach_btf_id, attach_btf_obj_id) =
                    (t.prog_id, p.attach_btf_id, t.btf_obj_id);
                tracepoint = Some(t.func);
            }
            Some(Err(r)) => return self.refuse(p, r),
            None => {}
        }
        if p.prog_type != BPF_PROG_TYPE_XDP
            && ext_target.is_none()
            && tracepoint.is_none()
            && progs::tracing_kind(p.prog_type).is_none()
        {
            // A program type bpfjet does not run: the kernel's program, the
            // bpfjet maps it names moved to the kernel. When one cannot
            // move, a program that is straight-line code never reading its
            // context (libbpf's global-data probe) means the same under
            // every type: bpfjet loads that one (without running it) if the
            // kernel has the type at all.
            let plan = self.kernel_plan(p, &words)?;
            if plan.is_ok() || !progs::context_free(&words) {
                return self.kernel_prog_load_planned(p, &words, plan);
            }
            self.kernel_has_prog_kind(p)?;
        }
        let mut maps: Vec<Arc<bpfjet_maps::Map>> = Vec::new();
        for (pc, src) in refs {
            let imm = (words[pc] >> 32) as u32;
            let fd = if matches!(src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) {
                imm
            } else {
                if p.fd_array == 0 {
                    return self.refuse(
                        p,
                        Refusal::new(
                            Errno::EINVAL,
                            format!("insn {pc}: map index {imm} without fd_array"),
                        ),
                    );
                }
                let raw = user::read(p.fd_array + u64::from(imm) * 4, 4)?;
                u32::from_ne_bytes(raw[..4].try_into().unwrap())
            };
            let m = match self.map_obj(fd) {
                Ok(m) => m,
                Err(e) => {
                    return self.refuse(
                        p,
                        Refusal::new(
                            e,
                            format!(
                                "fd {fd} is not pointing to valid bpf_map: not a bpfjet map (a \
                                 map the kernel holds — a type bpfjet lacks, or one moved to \
                                 the kernel for a kernel program — cannot be used by a program \
                                 bpfjet runs)"
                            ),
                        ),
                    )
                }
            };
            let index = match maps.iter().position(|x| x.id() == m.map.id()) {
                Some(i) => i,
                None => {
                    maps.push(m.map.clone());
                    maps.len() - 1
                }
            };
            progs::set_map_index(&mut words[pc], src, index as u32);
        }
        let kfuncs = match kfunc_calls::resolve(&mut words) {
            Ok(t) => t,
            Err(r) => return self.refuse(p, r),
        };
        let btf_id = match self.obj(p.prog_btf_fd) {
            Some(Obj::Btf(b)) if p.prog_btf_fd != 0 => b.id,
            _ => 0,
        };
        let mut rec = ProgRecord {
            id: 0,
            prog_type: p.prog_type,
            expected_attach_type: p.expected_attach_type,
            prog_flags: p.prog_flags,
            name: p.name.clone(),
            license,
            tag,
            insns: words,
            map_ids: maps.iter().map(|m| m.id()).collect(),
            btf_id,
            load_time: boottime_ns(),
            // SAFETY: getuid cannot fail.
            uid: unsafe { libc::getuid() },
            func_info,
            attach_prog_id,
            attach_btf_id,
            attach_btf_obj_id,
            load_target_used: false,
            kfuncs: kfuncs.kfuncs,
            weak_kfuncs: kfuncs.weak,
            tracepoint: tracepoint.unwrap_or_default(),
        };
        let btf = match crate::prog_btf::of(&self.ns, &rec) {
            Ok(b) => b,
            Err(r) => return self.refuse(p, r),
        };
        let loaded = match progs::build(&rec, &maps, self.instance_handle()?, btf) {
            Ok(l) => l,
            Err(r) => return self.refuse(p, r),
        };
        // The kernel's PROG_ARRAY owner rule for the arrays it uses.
        for m in maps.iter().filter(|m| m.map_type() == MapType::ProgArray) {
            if self.claim_prog_array(m.id(), &rec).is_err() {
                return self.refuse(
                    p,
                    Refusal::new(
                        Errno::EINVAL,
                        format!(
                            "PROG_ARRAY {} belongs to programs of another type, frags flag or attach type",
                            m.name()
                        ),
                    ),
                );
            }
        }
        let (id, _creating) = self.ns.create_record(Kind::Prog, |id| {
            let mut r = rec.clone();
            r.id = id;
            serde_json::to_vec(&r).unwrap_or_default()
        })?;
        rec.id = id;
        if p.log_level != 0 {
            let needed = user::write_log(p.log_buf, p.log_size, "")?;
            p.log_true_size.set(needed);
        }
        self.new_fd(Obj::Prog(Arc::new(progs::prog_obj(rec, loaded))))
    }

    /// A refused load: the explanation goes to the log buffer when the
    /// caller asked for one (libbpf retries with a log to print it).
    pub(crate) fn refuse(&self, p: &ProgLoad, r: Refusal) -> Result<i64, Errno> {
        let (errno, needed) = user::log_refusal(
            p.log_level,
            p.log_buf,
            p.log_size,
            &format!("{}\n", r.log),
            r.errno,
        );
        p.log_true_size.set(needed);
        Err(errno)
    }

    fn test_run(&self, t: &TestRun, cmd: &Command) -> Result<i64, Errno> {
        // bpf_prog_test_run, before the program: a context pointer and its
        // size come together, in and out.
        if (t.ctx_size_in != 0) != (t.ctx_in != 0)
            || (t.ctx_size_out.get() != 0) != (t.ctx_out != 0)
        {
            return Err(Errno::EINVAL);
        }
        let prog = match self.obj(t.prog_fd) {
            Some(Obj::Prog(p)) => p,
            Some(_) => return Err(Errno::EINVAL),
            None => return self.kernel.execute(cmd),
        };
        if prog.rec.prog_type == progs::BPF_PROG_TYPE_TRACING {
            // The kernel's bpf_prog_test_run_tracing runs fentry, fexit
            // and fmod_ret programs only: ENOTSUPP for tp_btf.
            return Err(Errno(524));
        }
        if progs::tracing_kind(prog.rec.prog_type).is_some() {
            return self.tracing_test_run(&prog, t);
        }
        if prog.rec.prog_type != BPF_PROG_TYPE_XDP {
            self.warn_once(
                &format!("BPF_PROG_TEST_RUN of program type {}", prog.rec.prog_type),
                "bpfjet runs XDP and raw tracepoint programs only",
            );
            return Err(Errno::EINVAL);
        }
        // bpf_prog_test_run_xdp's checks, in its order.
        const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
        if matches!(
            prog.rec.expected_attach_type,
            progs::BPF_XDP_DEVMAP | progs::BPF_XDP_CPUMAP
        ) {
            return Err(Errno::EINVAL);
        }
        if t.flags & !BPF_F_TEST_XDP_LIVE_FRAMES != 0 {
            return Err(Errno::EINVAL);
        }
        if t.flags & BPF_F_TEST_XDP_LIVE_FRAMES != 0 {
            self.warn_once(
                "BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES",
                "live frames (transmitting what the program returns) are not emulated",
            );
            return Err(Errno::EINVAL);
        }
        if t.batch_size != 0 {
            return Err(Errno::EINVAL);
        }
        // bpf_ctx_init: a context when one goes in or comes out (zeros
        // where the caller gave none); bytes past struct xdp_md must be 0.
        let ctx: Option<[u32; 6]> = if t.ctx_in != 0 || t.ctx_out != 0 {
            let mut words = [0u32; 6];
            if t.ctx_in != 0 {
                let given = user::read(t.ctx_in, t.ctx_size_in as usize)?;
                if given.iter().skip(XDP_MD_SIZE).any(|&b| b != 0) {
                    return Err(Errno(libc::E2BIG));
                }
                for (i, w) in words.iter_mut().enumerate() {
                    let mut b = [0u8; 4];
                    for (j, byte) in b.iter_mut().enumerate() {
                        *byte = given.get(i * 4 + j).copied().unwrap_or(0);
                    }
                    *w = u32::from_ne_bytes(b);
                }
            }
            Some(words)
        } else {
            None
        };
        let mut opts = TestRunOptions {
            repeat: t.repeat,
            ..TestRunOptions::default()
        };
        if let Some(c) = ctx {
            // data, data_end, data_meta, ingress_ifindex, rx_queue_index,
            // egress_ifindex; data_end counts from the metadata.
            if c[2] != 0 || c[1] > t.data_size_in || c[0] > c[1] {
                return Err(Errno::EINVAL);
            }
            opts.meta_len = c[0];
            opts.linear_size = Some(c[1]);
            opts.ingress_ifindex = c[3];
            opts.rx_queue_index = c[4];
        }
        let meta = opts.meta_len;
        if !meta.is_multiple_of(4) || meta as usize > bpfjet_runtime::xdp::frame::TEST_RUN_META_MAX
        {
            return Err(Errno::EINVAL);
        }
        if t.data_size_in - meta < ETH_HLEN {
            return Err(Errno::EINVAL);
        }
        let data = user::read(t.data_in, t.data_size_in as usize)?;
        // xdp_convert_md_to_buff.
        if let Some(c) = ctx {
            if c[5] != 0 || (c[3] == 0 && c[4] != 0) {
                return Err(Errno::EINVAL);
            }
            if c[3] != 0 {
                let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
                // SAFETY: `name` has IF_NAMESIZE bytes, as if_indextoname
                // requires.
                if unsafe { libc::if_indextoname(c[3], name.as_mut_ptr()) }.is_null() {
                    return Err(Errno(libc::ENODEV));
                }
            }
        }
        // With its extensions linked in and the programs its PROG_ARRAYs
        // hold, as it would run attached.
        let linked = if self.needs_rebuild(&prog.rec) {
            let instance = self.instance_handle()?;
            let (_, loaded, _) = crate::tail_calls::runnable(&self.ns, &prog.rec, instance)
                .map_err(|r| {
                    self.warn_once(&format!("program {}", prog.rec.name), &r.log);
                    r.errno
                })?;
            Some(loaded)
        } else {
            None
        };
        let loaded = linked.as_ref().unwrap_or(&prog.loaded);
        let name = loaded.program_names()[0].to_string();
        let started = Instant::now();
        let r = loaded.test_run(&name, &data, &opts).map_err(|e| {
            self.warn_once(&format!("BPF_PROG_TEST_RUN of {name}"), &e.to_string());
            match e {
                // More than MAX_SKB_FRAGS fragments, as the kernel.
                RuntimeError::Frame(FrameError::TooLong(_)) => Errno::ENOMEM,
                _ => Errno::EINVAL,
            }
        })?;
        if self.stats.load(Ordering::Relaxed) > 0 {
            let mut s = prog
                .run_time_ns
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            s.0 += started.elapsed().as_nanos() as u64;
            s.1 += u64::from(opts.repeat.max(1));
        }
        // bpf_test_finish: data_size_out 0 means "as much as there is";
        // a smaller room is filled and ENOSPC, with the sizes and the
        // return value still written back (not when the room ends inside
        // the linear part of a multi-buffer frame); then bpf_ctx_finish.
        let size = r.data_out.len();
        let room = t.data_size_out.get() as usize;
        let mut copy = size;
        let mut result = Ok(0);
        if room != 0 && copy > room {
            copy = room;
            result = Err(Errno::ENOSPC);
        }
        if t.data_out != 0 {
            let linear = r.md_offsets.1 as usize;
            if size > linear && copy < linear {
                return Err(Errno::ENOSPC);
            }
            user::write(t.data_out, &r.data_out[..copy])?;
        }
        t.data_size_out.set(size as u32);
        t.retval.set(r.retval);
        t.duration
            .set(r.duration_ns.min(u64::from(u32::MAX)) as u32);
        result?;
        if let (Some(mut c), true) = (ctx, t.ctx_out != 0) {
            (c[0], c[1]) = r.md_offsets;
            let bytes: Vec<u8> = c.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let room = t.ctx_size_out.get() as usize;
            let n = room.min(XDP_MD_SIZE);
            user::write(t.ctx_out, &bytes[..n])?;
            t.ctx_size_out.set(XDP_MD_SIZE as u32);
            if room < XDP_MD_SIZE {
                return Err(Errno::ENOSPC);
            }
        }
        Ok(0)
    }

    fn get_info(&self, i: &GetInfo, cmd: &Command) -> Result<i64, Errno> {
        let Some(obj) = self.obj(i.bpf_fd) else {
            return self.kernel.execute(cmd);
        };
        let (info, size) = match &obj {
            Obj::Map(m) => (self.map_info(m), MapInfo::SIZE),
            Obj::Prog(p) => (self.prog_info(p, i)?, ProgInfo::SIZE),
            Obj::Btf(b) => (self.btf_info(b, i)?, BtfInfo::SIZE),
            Obj::Link(id) => {
                let n = (i.info_len.get() as usize).min(crate::links::LINK_INFO_SIZE);
                self.link_info(*id, &user::read(i.info, n)?)?
            }
            Obj::Stats | Obj::PerfEvent(_) | Obj::PerfOutput(_) => return Err(Errno::EINVAL),
        };
        let user_len = i.info_len.get() as usize;
        if user_len > size
            && user::slice(i.info + size as u64, user_len - size)?
                .iter()
                .any(|&b| b != 0)
        {
            return Err(Errno::E2BIG);
        }
        let n = user_len.min(size);
        user::write(i.info, &info[..n])?;
        i.info_len.set(n as u32);
        Ok(0)
    }

    fn map_info(&self, m: &MapObj) -> Vec<u8> {
        MapInfo {
            map_type: m.meta.map_type,
            id: m.map.id(),
            key_size: m.map.key_size(),
            value_size: m.map.value_size(),
            max_entries: m.map.max_entries(),
            // The kernel keeps BPF_F_RDONLY/WRONLY on the fd, not the map
            // (bpf_map_flags_retain_permanent): info never shows them. It
            // makes devmaps read-only for programs at creation.
            map_flags: m.meta.map_flags & !(map_flags::RDONLY | map_flags::WRONLY)
                | if matches!(m.map.map_type(), MapType::Devmap | MapType::DevmapHash) {
                    map_flags::RDONLY_PROG
                } else {
                    0
                },
            name: m.map.name().to_string(),
            btf_id: m.meta.btf_id,
            btf_key_type_id: m.meta.btf_key_type_id,
            btf_value_type_id: m.meta.btf_value_type_id,
            map_extra: m.meta.map_extra,
        }
        .to_bytes()
    }

    /// The caller's `u32` at `off` of its info struct, if it passed that far.
    fn user_u32(i: &GetInfo, off: usize) -> Result<u32, Errno> {
        if (i.info_len.get() as usize) < off + 4 {
            return Ok(0);
        }
        let b = user::read(i.info + off as u64, 4)?;
        Ok(u32::from_ne_bytes(b[..4].try_into().unwrap()))
    }

    fn user_u64(i: &GetInfo, off: usize) -> Result<u64, Errno> {
        if (i.info_len.get() as usize) < off + 8 {
            return Ok(0);
        }
        let b = user::read(i.info + off as u64, 8)?;
        Ok(u64::from_ne_bytes(b[..8].try_into().unwrap()))
    }

    fn prog_info(&self, p: &ProgObj, i: &GetInfo) -> Result<Vec<u8>, Errno> {
        let rec = &p.rec;
        let (run_time_ns, run_cnt) = *p.run_time_ns.lock().unwrap_or_else(PoisonError::into_inner);
        // As the kernel's xlated dump shows them: map references as
        // `PSEUDO_MAP_FD`/`PSEUDO_MAP_VALUE` with the map's id.
        let mut words = rec.insns.clone();
        for (pc, src) in progs::map_lddws(&words) {
            let index = (words[pc] >> 32) as usize;
            let id = rec.map_ids.get(index).copied().unwrap_or(0);
            progs::set_map_ref(&mut words[pc], src, id);
        }
        let xlated: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut b = ProgInfo {
            prog_type: rec.prog_type,
            id: rec.id,
            tag: rec.tag,
            jited_prog_len: 0,
            xlated_prog_len: xlated.len() as u32,
            load_time: rec.load_time,
            created_by_uid: rec.uid,
            nr_map_ids: rec.map_ids.len() as u32,
            name: rec.name.clone(),
            gpl_compatible: is_gpl(&rec.license),
            btf_id: rec.btf_id,
            run_time_ns,
            run_cnt,
            // The kernel's count is its verifier's processed
            // instructions: bpfjet's verifier's, for the program it runs.
            verified_insns: p
                .loaded
                .verified(&progs::program_name(rec))
                .ok()
                .flatten()
                .map_or(0, |v| {
                    v.facts.insns_processed.min(u64::from(u32::MAX)) as u32
                }),
        }
        .to_bytes();
        // Arrays the caller provided room for.
        let want_xlated = Self::user_u32(i, ProgInfo::XLATED_LEN_OFF)? as usize;
        let xlated_ptr = Self::user_u64(i, ProgInfo::XLATED_INSNS_OFF)?;
        if want_xlated > 0 && xlated_ptr != 0 {
            user::write(xlated_ptr, &xlated[..want_xlated.min(xlated.len())])?;
        }
        b[ProgInfo::XLATED_INSNS_OFF..ProgInfo::XLATED_INSNS_OFF + 8]
            .copy_from_slice(&xlated_ptr.to_ne_bytes());
        let want_ids = Self::user_u32(i, ProgInfo::NR_MAP_IDS_OFF)? as usize;
        let ids_ptr = Self::user_u64(i, ProgInfo::MAP_IDS_OFF)?;
        if want_ids > 0 && ids_ptr != 0 {
            let ids: Vec<u8> = rec
                .map_ids
                .iter()
                .take(want_ids)
                .flat_map(|id| id.to_ne_bytes())
                .collect();
            user::write(ids_ptr, &ids)?;
        }
        b[ProgInfo::MAP_IDS_OFF..ProgInfo::MAP_IDS_OFF + 8].copy_from_slice(&ids_ptr.to_ne_bytes());
        self.func_info_out(rec, i, &mut b)?;
        Ok(b)
    }

    /// `func_info` (8-byte `bpf_func_info` records) into the caller's
    /// array, as the kernel: a record size other than 8 is `EINVAL`.
    fn func_info_out(&self, rec: &ProgRecord, i: &GetInfo, b: &mut [u8]) -> Result<(), Errno> {
        const REC_SIZE: u32 = 8;
        let want = Self::user_u32(i, ProgInfo::NR_FUNC_INFO_OFF)? as usize;
        let rec_size = Self::user_u32(i, ProgInfo::FUNC_INFO_REC_SIZE_OFF)?;
        if (want != 0 || rec_size != 0) && rec_size != REC_SIZE {
            return Err(Errno::EINVAL);
        }
        let ptr = Self::user_u64(i, ProgInfo::FUNC_INFO_OFF)?;
        if want > 0 && ptr != 0 {
            let recs: Vec<u8> = rec
                .func_info
                .iter()
                .take(want)
                .flat_map(|&(off, ty)| off.to_ne_bytes().into_iter().chain(ty.to_ne_bytes()))
                .collect();
            user::write(ptr, &recs)?;
        }
        let put =
            |b: &mut [u8], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        put(b, ProgInfo::FUNC_INFO_REC_SIZE_OFF, REC_SIZE);
        b[ProgInfo::FUNC_INFO_OFF..ProgInfo::FUNC_INFO_OFF + 8].copy_from_slice(&ptr.to_ne_bytes());
        put(b, ProgInfo::NR_FUNC_INFO_OFF, rec.func_info.len() as u32);
        put(b, ProgInfo::ATTACH_BTF_OBJ_ID_OFF, rec.attach_btf_obj_id);
        put(b, ProgInfo::ATTACH_BTF_ID_OFF, rec.attach_btf_id);
        Ok(())
    }

    fn btf_info(&self, btf: &BtfObj, i: &GetInfo) -> Result<Vec<u8>, Errno> {
        let mut b = BtfInfo {
            btf_size: btf.raw.len() as u32,
            id: btf.id,
        }
        .to_bytes();
        let ptr = Self::user_u64(i, 0)?;
        let room = Self::user_u32(i, 8)? as usize;
        if ptr != 0 {
            if room < btf.raw.len() {
                return Err(Errno::ENOSPC);
            }
            user::write(ptr, &btf.raw)?;
        }
        b[..8].copy_from_slice(&ptr.to_ne_bytes());
        Ok(b)
    }

    fn btf_load(&self, b: &BtfLoad) -> Result<i64, Errno> {
        if b.btf_size > BTF_MAX_SIZE {
            return Err(Errno::E2BIG);
        }
        let raw = user::read(b.btf, b.btf_size as usize)?;
        user::check_log(b.btf_log_level, b.btf_log_buf, b.btf_log_size)?;
        if let Err(e) = bpfjet_obj::Btf::parse(&raw) {
            let (errno, needed) = user::log_refusal(
                b.btf_log_level,
                b.btf_log_buf,
                b.btf_log_size,
                &format!("{e}\n"),
                Errno::EINVAL,
            );
            b.btf_log_true_size.set(needed);
            return Err(errno);
        }
        let (id, _creating) = self.ns.create_record(Kind::Btf, |_| raw.clone())?;
        self.new_fd(Obj::Btf(Arc::new(BtfObj { id, raw })))
    }

    fn obj_pin(&self, p: &ObjPath, cmd: &Command) -> Result<i64, Errno> {
        let path = user::cstring(p.pathname, libc::PATH_MAX as usize)?;
        let r = match self.obj(p.bpf_fd) {
            Some(Obj::Map(m)) => ObjRef::Map(m.map.id()),
            Some(Obj::Prog(pr)) => ObjRef::Prog(pr.rec.id),
            Some(Obj::Btf(b)) => ObjRef::Btf(b.id),
            Some(Obj::Link(id)) => ObjRef::Link(id),
            Some(Obj::Stats | Obj::PerfEvent(_) | Obj::PerfOutput(_)) => return Err(Errno::EINVAL),
            None => return self.kernel.execute(cmd),
        };
        self.settle_pin(&path);
        // An orphan goes; another instance's stays, and the kernel says
        // EEXIST below.
        self.foreign_placeholder(&path);
        // The kernel decides whether the path can be taken (EEXIST, ENOENT).
        let file = pin_files::place(&path)?;
        self.ns.pin(&path, r, file).map(|()| 0).inspect_err(|_| {
            if let Some(f) = file {
                pin_files::remove(&path, f);
            }
        })
    }

    fn obj_get(&self, p: &ObjPath, cmd: &Command) -> Result<i64, Errno> {
        let path = user::cstring(p.pathname, libc::PATH_MAX as usize)?;
        match self.ns.pinned(&path) {
            Ok(pin) if pin.live() => {
                // BPF_OBJ_GET: a map fd's access from file_flags.
                let access = Access::from_flags(p.file_flags).ok_or(Errno::EINVAL)?;
                return self.open_ref_as(pin.obj, access);
            }
            Ok(_) => self.settle_pin(&path),
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(e),
        }
        // A placeholder renamed on bpffs (`mv`): the pin is found by the
        // file's identity and its record follows it.
        if let Some(pin) = self.moved_pin_at(&path) {
            self.ns.move_pin(&pin, &path)?;
            return self.open_ref(pin.obj);
        }
        // Another live instance's pin: its object is not this instance's
        // to open, and the placeholder map is no object to hand out.
        if self.foreign_placeholder(&path) {
            return Err(Errno::ENOENT);
        }
        // Not a bpfjet pin: perhaps the kernel's.
        self.kernel.execute(cmd)
    }

    /// The pin record at `path` when its placeholder left that path behind
    /// bpfjet's back: removed (the record goes, freeing the object if it
    /// was all that held it) or renamed (the record is parked until the new
    /// path is opened).
    fn settle_pin(&self, path: &str) {
        let Ok(pin) = self.ns.pinned(path) else {
            return;
        };
        if pin.live() {
            return;
        }
        if pin.gone() {
            if let Some(pin) = self.ns.unpin(path) {
                self.release(pin.obj);
            }
        } else {
            let _ = self.ns.park_pin(&pin);
        }
    }

    /// `BPF_PROG_BIND_MAP`: the map lives as long as the program, as one
    /// the program references (the kernel adds it to `used_maps`).
    fn prog_bind_map(&self, raw: &[u8], cmd: &Command) -> Result<i64, Errno> {
        let word = |off: usize| u32::from_ne_bytes(raw[off..off + 4].try_into().unwrap());
        let (prog_fd, map_fd, flags) = (word(0), word(4), word(8));
        let prog = match self.obj(prog_fd) {
            Some(Obj::Prog(p)) => p,
            Some(_) => return Err(Errno::EINVAL),
            None => return self.kernel_bind_map(map_fd, cmd),
        };
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        let map = self.map_obj(map_fd)?;
        let id = prog.rec.id;
        let mut rec: ProgRecord = serde_json::from_slice(&self.ns.read_record(Kind::Prog, id)?)
            .map_err(|_| Errno::EINVAL)?;
        if !rec.map_ids.contains(&map.map.id()) {
            rec.map_ids.push(map.map.id());
            let bytes = serde_json::to_vec(&rec).map_err(|_| Errno::EINVAL)?;
            self.ns.write_record(Kind::Prog, id, &bytes)?;
        }
        Ok(0)
    }

    pub(crate) fn open_ref(&self, r: ObjRef) -> Result<i64, Errno> {
        self.open_ref_as(r, Access::READ_WRITE)
    }

    /// [`Backend::open_ref`] with a map fd's access.
    fn open_ref_as(&self, r: ObjRef, access: Access) -> Result<i64, Errno> {
        let obj = match r {
            ObjRef::Map(id) => Obj::Map(self.open_map(id, access)?),
            ObjRef::Prog(id) => Obj::Prog(self.open_prog(id)?),
            ObjRef::Btf(id) => Obj::Btf(self.open_btf(id)?),
            ObjRef::Link(id) => {
                self.ns.read_record(Kind::Link, id)?;
                Obj::Link(id)
            }
        };
        self.new_fd(obj)
    }
}

fn is_gpl(license: &str) -> bool {
    matches!(
        license,
        "GPL"
            | "GPL v2"
            | "GPL and additional rights"
            | "Dual BSD/GPL"
            | "Dual MIT/GPL"
            | "Dual MPL/GPL"
    )
}

fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Backend for BpfjetBackend {
    fn execute(&self, cmd: &Command) -> Result<i64, Errno> {
        match cmd {
            Command::MapCreate(m) => self.map_create(m),
            Command::MapLookupElem(_)
            | Command::MapUpdateElem(_)
            | Command::MapDeleteElem(_)
            | Command::MapGetNextKey(_)
            | Command::MapLookupAndDeleteElem(_)
            | Command::MapFreeze(_) => self.map_elem(cmd),
            Command::ProgLoad(p) => self.prog_load(p),
            Command::TaskFdQuery(q) => self.task_fd_query(q, cmd),
            Command::ObjPin(p) => self.obj_pin(p, cmd),
            Command::ObjGet(p) => self.obj_get(p, cmd),
            Command::ProgTestRun(t) => self.test_run(t, cmd),
            Command::GetNextId(g) => {
                let kind = match g.kind {
                    IdKind::Map => Kind::Map,
                    IdKind::Prog => Kind::Prog,
                    IdKind::Btf => Kind::Btf,
                    IdKind::Link => Kind::Link,
                };
                if g.start_id == 0 {
                    // A listing starts: what crashed holders left goes
                    // first, so it lists what the kernel would.
                    self.sweep();
                }
                // The kernel's BTF (vmlinux, modules) below bpfjet's ids:
                // tools find vmlinux's BTF by walking the BTF ids.
                if kind == Kind::Btf && g.start_id < crate::namespace::BTF_ID_BASE {
                    match self.kernel.execute(cmd) {
                        Ok(r) if g.next_id.get() < crate::namespace::BTF_ID_BASE => return Ok(r),
                        _ => {}
                    }
                }
                let ours = self.ns.ids(kind).into_iter().find(|&id| id > g.start_id);
                // Kernel objects the instance's processes made (programs of
                // types bpfjet does not run, their maps and links).
                let kernel = self.next_kernel_id(kind, g.start_id);
                let next = match (ours, kernel) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b).ok_or(Errno::ENOENT)?,
                };
                g.next_id.set(next);
                Ok(0)
            }
            Command::GetFdById(g)
                if matches!(g.kind, IdKind::Map | IdKind::Prog | IdKind::Link)
                    && self.is_kernel_id(
                        match g.kind {
                            IdKind::Map => Kind::Map,
                            IdKind::Prog => Kind::Prog,
                            _ => Kind::Link,
                        },
                        g.id,
                    ) =>
            {
                self.kernel.execute(cmd)
            }
            Command::GetFdById(g) => match g.kind {
                // BPF_MAP_GET_FD_BY_ID: the fd's access from open_flags
                // (nothing else may be set); the other kinds take none.
                IdKind::Map => {
                    let access = Access::from_flags(g.open_flags)
                        .filter(|_| g.open_flags & !(map_flags::RDONLY | map_flags::WRONLY) == 0)
                        .ok_or(Errno::EINVAL)?;
                    self.open_ref_as(ObjRef::Map(g.id), access)
                }
                IdKind::Prog => self.open_ref(ObjRef::Prog(g.id)),
                IdKind::Btf if g.id < crate::namespace::BTF_ID_BASE => self.kernel.execute(cmd),
                IdKind::Btf => self.open_ref(ObjRef::Btf(g.id)),
                IdKind::Link => self.open_ref(ObjRef::Link(g.id)),
            },
            Command::ObjGetInfoByFd(i) => self.get_info(i, cmd),
            Command::BtfLoad(b) => self.btf_load(b),
            Command::EnableStats(t) => {
                if *t != BPF_STATS_RUN_TIME {
                    return Err(Errno::EINVAL);
                }
                let fd = self.new_fd(Obj::Stats)?;
                self.stats.fetch_add(1, Ordering::Relaxed);
                Ok(fd)
            }
            Command::MapBatch(c, b) => match self.obj(b.map_fd) {
                Some(Obj::Map(m))
                    if *c == bpfjet_sys::Cmd::MapUpdateBatch
                        && matches!(
                            m.map.map_type(),
                            MapType::ProgArray
                                | MapType::Xskmap
                                | MapType::ArrayOfMaps
                                | MapType::HashOfMaps
                        ) =>
                {
                    self.warn_once(
                        &format!("BPF_MAP_UPDATE_BATCH on a {} map", m.map.map_type()),
                        "fds as batch values are not translated yet",
                    );
                    Err(Errno::EINVAL)
                }
                Some(Obj::Map(m)) => maps::batch(&m.map, m.access, *c, b).map(|()| 0),
                Some(_) => Err(Errno::EINVAL),
                None => self.kernel.execute(cmd),
            },
            Command::Other(bpfjet_sys::Cmd::ProgBindMap, raw) => self.prog_bind_map(raw, cmd),
            // bpfjet attaches only XDP, which has no PROG_QUERY: what is
            // asked about (tc, cgroups, flow dissector; `bpftool net`) is
            // the kernel's.
            Command::Other(bpfjet_sys::Cmd::ProgQuery, _) => self.kernel.execute(cmd),
            Command::Other(
                c @ (bpfjet_sys::Cmd::ProgAttach | bpfjet_sys::Cmd::ProgDetach),
                raw,
            ) => {
                let fd = |off: usize| {
                    let mut b = [0u8; 4];
                    for (i, x) in b.iter_mut().enumerate() {
                        *x = raw.get(off + i).copied().unwrap_or(0);
                    }
                    u32::from_ne_bytes(b)
                };
                // target_fd, attach_bpf_fd, ..., replace_bpf_fd
                if [0, 4, 16]
                    .into_iter()
                    .any(|o| fd(o) != 0 && self.obj(fd(o)).is_some())
                {
                    self.warn_once(
                        c.name(),
                        "bpfjet objects attach to XDP only (netlink or BPF_LINK_CREATE)",
                    );
                    return Err(Errno::EINVAL);
                }
                self.kernel.execute(cmd)
            }
            Command::Other(bpfjet_sys::Cmd::RawTracepointOpen, raw) => {
                if let Some(prog) = self.tracing_prog(crate::links::word(raw, 8)) {
                    return self.probe_raw_tracepoint_open(&prog, raw);
                }
                match self.raw_tracepoint_open(raw) {
                    Some(r) => r,
                    None => self.kernel.execute(cmd),
                }
            }
            Command::Other(c, raw) if crate::links::is_link_command(*c) => {
                self.link_command(*c, raw, cmd)
            }
            Command::Other(c, _) => {
                self.warn_once(c.name(), "not implemented yet");
                Err(Errno::EINVAL)
            }
        }
    }
}
