//! The file a bpfjet pin leaves on the bpf filesystem.
//!
//! A kernel pin is a file: `ls`, `readdir`, `stat`, `rm` and `rmdir` see
//! it, and tools rely on that — xdp-filter finds its programs by listing
//! `/sys/fs/bpf/xdp-filter/programs/IFNAME/`, bpftool's `prog show` walks
//! bpffs for pinned paths, and `rmdir` of a directory still holding pins
//! fails. bpfjet keeps what a pin names in its instance (the namespace's
//! `pins/` records), so on bpffs each pin also gets a placeholder: a
//! one-slot kernel array named [`PLACEHOLDER_NAME`] pinned at the same path.
//! The kernel then gives the path its semantics (`EEXIST` for a taken path,
//! `ENOENT` for a missing directory, `ENOTEMPTY` for `rmdir`), and the
//! file's identity (device, inode) tells bpfjet whether the pin it recorded
//! is still the file at that path, and the placeholder map's kernel id
//! whether it still exists anywhere: a placeholder removed by a process
//! outside bpfjet (`rm` without `bpfjet exec`) frees its map, so the pin is
//! gone; one renamed (`mv`) keeps its map and inode, and is found again
//! under its new name.
//!
//! A process outside the instance that opens the path (`BPF_OBJ_GET`
//! without `bpfjet exec`) gets the placeholder, a map named `bpfjet_pin`,
//! not the object: bpfjet's objects are served to the instance's processes
//! only.

use bpfjet_sys::{
    Backend, Command, Errno, GetFdById, GetInfo, IdKind, KernelBackend, MapCreate, MapInfo, ObjPath,
};
use std::cell::Cell;
use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The placeholder map's name, as `bpftool map` shows it outside bpfjet.
pub const PLACEHOLDER_NAME: &str = "bpfjet_pin";

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// The placeholder map: one 4-byte slot, bpfjet's name. What `place`
/// creates and what `placeholder_at` recognises.
fn placeholder_spec() -> MapCreate {
    MapCreate {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        name: PLACEHOLDER_NAME.into(),
        ..MapCreate::default()
    }
}

/// A placeholder's identity: its file (device, inode) and its map's
/// kernel id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub map_id: u32,
}

impl FileId {
    /// Whether this is the file with (device, inode) `file`.
    pub fn is_file(&self, file: (u64, u64)) -> bool {
        (self.dev, self.ino) == file
    }

    /// Whether the file at `path` (not following a symlink) is this one.
    pub fn is_at(&self, path: &str) -> bool {
        file_of(path).is_some_and(|f| self.is_file(f))
    }

    /// Whether the placeholder map still exists: removed by its last
    /// `unlink`, it does not.
    pub fn exists(&self) -> bool {
        match KernelBackend.execute(&Command::GetFdById(GetFdById {
            kind: IdKind::Map,
            id: self.map_id,
            open_flags: 0,
        })) {
            Ok(fd) => {
                close(fd);
                true
            }
            Err(e) => e != Errno::ENOENT,
        }
    }
}

/// The file at `path`'s (device, inode).
pub fn file_of(path: &str) -> Option<(u64, u64)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// Whether `path`'s directory is on a bpf filesystem.
pub fn dir_on_bpffs(path: &str) -> bool {
    let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
    let Ok(c) = CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string and a statfs buffer of the right type.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == BPF_FS_MAGIC
}

fn close(fd: i64) {
    // SAFETY: an fd this module opened and no longer needs.
    unsafe { libc::close(fd as i32) };
}

/// The kernel's info on the map behind `fd` (None for another object).
fn map_info(fd: i64) -> Option<MapInfo> {
    let mut buf = [0u8; MapInfo::SIZE];
    KernelBackend
        .execute(&Command::ObjGetInfoByFd(GetInfo {
            bpf_fd: fd as u32,
            info_len: Cell::new(buf.len() as u32),
            info: buf.as_mut_ptr() as u64,
        }))
        .ok()?;
    Some(MapInfo::from_bytes(&buf))
}

fn obj_path(path: &CString, fd: i64) -> ObjPath {
    ObjPath {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd as u32,
        ..ObjPath::default()
    }
}

/// Pin a placeholder at `path` on bpffs: its identity, or the kernel's
/// errno for the path (`EEXIST`, `ENOENT`, `EACCES`, ...). `Ok(None)` when
/// the path is not on bpffs (bpfjet's pin is then a record only, as before
/// bpffs was mounted) or the kernel cannot make the placeholder map.
pub fn place(path: &str) -> Result<Option<FileId>, Errno> {
    if !dir_on_bpffs(path) {
        return Ok(None);
    }
    let cpath = CString::new(path).map_err(|_| Errno::EINVAL)?;
    // No kernel maps here (no privilege, no bpf()): the pin stays a
    // record, invisible to directory listings, as it was.
    let Ok(fd) = KernelBackend.execute(&Command::MapCreate(placeholder_spec())) else {
        return Ok(None);
    };
    let map_id = map_info(fd).map(|i| i.id);
    let pinned = KernelBackend.execute(&Command::ObjPin(obj_path(&cpath, fd)));
    // The pin holds the map now.
    close(fd);
    pinned?;
    let (Some(map_id), Some((dev, ino))) = (map_id, file_of(path)) else {
        return Ok(None);
    };
    Ok(Some(FileId { dev, ino, map_id }))
}

/// The placeholder pinned at `path`, if the file there is one: a kernel
/// map with bpfjet's placeholder name and shape. (A kernel pin of anything
/// else is the kernel's and never touched.)
pub fn placeholder_at(path: &str) -> Option<FileId> {
    let (dev, ino) = file_of(path)?;
    let cpath = CString::new(path).ok()?;
    let fd = KernelBackend
        .execute(&Command::ObjGet(obj_path(&cpath, 0)))
        .ok()?;
    let info = map_info(fd);
    close(fd);
    let info = info?;
    let spec = placeholder_spec();
    let placeholder = (
        info.map_type,
        info.key_size,
        info.value_size,
        info.max_entries,
    ) == (
        spec.map_type,
        spec.key_size,
        spec.value_size,
        spec.max_entries,
    ) && info.name == spec.name;
    placeholder.then_some(FileId {
        dev,
        ino,
        map_id: info.id,
    })
}

/// Remove the placeholder at `path` if it is still `id` (an `unlink` of the
/// pin): the kernel frees the placeholder map with its last pin.
pub fn remove(path: &str, id: FileId) {
    if id.is_at(path) {
        let _ = std::fs::remove_file(path);
    }
}
