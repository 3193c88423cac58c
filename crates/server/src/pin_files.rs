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

use bpfjet_sys::{Cmd, Errno, KernelBackend};
use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The placeholder map's name, as `bpftool map` shows it outside bpfjet.
pub const PLACEHOLDER_NAME: &str = "bpfjet_pin";

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// A placeholder's identity: its file (device, inode) and its map's
/// kernel id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub map_id: u32,
}

impl FileId {
    /// Whether the file at `path` (not following a symlink) is this one.
    pub fn is_at(&self, path: &str) -> bool {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino)
    }

    /// Whether the placeholder map still exists: removed by its last
    /// `unlink`, it does not.
    pub fn exists(&self) -> bool {
        let mut attr = [0u8; 12];
        attr[0..4].copy_from_slice(&self.map_id.to_ne_bytes());
        // SAFETY: a MAP_GET_FD_BY_ID attr with no addresses in it.
        match unsafe { KernelBackend::raw(Cmd::MapGetFdById as u32, &mut attr) } {
            Ok(fd) => {
                // SAFETY: the fd just opened.
                unsafe { libc::close(fd as i32) };
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

/// Pin a placeholder at `path` on bpffs: its identity, or the kernel's
/// errno for the path (`EEXIST`, `ENOENT`, `EACCES`, ...). `Ok(None)` when
/// the path is not on bpffs (bpfjet's pin is then a record only, as before
/// bpffs was mounted) or the kernel cannot make the placeholder map.
pub fn place(path: &str) -> Result<Option<FileId>, Errno> {
    if !dir_on_bpffs(path) {
        return Ok(None);
    }
    let Ok(cpath) = CString::new(path) else {
        return Err(Errno::EINVAL);
    };
    let mut create = [0u8; 72];
    create[0..4].copy_from_slice(&BPF_MAP_TYPE_ARRAY.to_ne_bytes());
    create[4..8].copy_from_slice(&4u32.to_ne_bytes()); // key size
    create[8..12].copy_from_slice(&4u32.to_ne_bytes()); // value size
    create[12..16].copy_from_slice(&1u32.to_ne_bytes()); // max entries
    create[28..28 + PLACEHOLDER_NAME.len()].copy_from_slice(PLACEHOLDER_NAME.as_bytes());
    // SAFETY: a MAP_CREATE attr with no addresses in it.
    let fd = match unsafe { KernelBackend::raw(Cmd::MapCreate as u32, &mut create) } {
        Ok(fd) => fd as i32,
        // No kernel maps here (no privilege, no bpf()): the pin stays a
        // record, invisible to directory listings, as it was.
        Err(_) => return Ok(None),
    };
    let mut info = [0u8; 80];
    let mut info_attr = [0u8; 16];
    info_attr[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
    info_attr[4..8].copy_from_slice(&(info.len() as u32).to_ne_bytes());
    info_attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    // SAFETY: an OBJ_GET_INFO_BY_FD attr whose buffer outlives the call.
    let map_id = unsafe { KernelBackend::raw(Cmd::ObjGetInfoByFd as u32, &mut info_attr) }
        .map(|_| u32::from_ne_bytes(info[4..8].try_into().unwrap()));
    let mut pin = [0u8; 20];
    pin[0..8].copy_from_slice(&(cpath.as_ptr() as u64).to_ne_bytes());
    pin[8..12].copy_from_slice(&(fd as u32).to_ne_bytes());
    // SAFETY: an OBJ_PIN attr whose path pointer outlives the call.
    let pinned = unsafe { KernelBackend::raw(Cmd::ObjPin as u32, &mut pin) };
    // SAFETY: the fd made above, no longer needed: the pin holds the map.
    unsafe { libc::close(fd) };
    pinned?;
    let Ok(map_id) = map_id else {
        return Ok(None);
    };
    Ok(file_of(path).map(|(dev, ino)| FileId { dev, ino, map_id }))
}

/// The placeholder pinned at `path`, if the file there is one: a kernel
/// map with bpfjet's placeholder name and shape. (A kernel pin of anything
/// else is the kernel's and never touched.)
pub fn placeholder_at(path: &str) -> Option<FileId> {
    let (dev, ino) = file_of(path)?;
    let cpath = CString::new(path).ok()?;
    let mut get = [0u8; 20];
    get[0..8].copy_from_slice(&(cpath.as_ptr() as u64).to_ne_bytes());
    // SAFETY: an OBJ_GET attr whose path pointer outlives the call.
    let fd = unsafe { KernelBackend::raw(Cmd::ObjGet as u32, &mut get) }.ok()? as i32;
    let mut info = [0u8; 80];
    let mut attr = [0u8; 16];
    attr[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
    attr[4..8].copy_from_slice(&(info.len() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    // SAFETY: an OBJ_GET_INFO_BY_FD attr whose buffer outlives the call;
    // a map fd gives a `bpf_map_info`, another object's info differs in
    // shape and fails the checks below.
    let got = unsafe { KernelBackend::raw(Cmd::ObjGetInfoByFd as u32, &mut attr) };
    // SAFETY: the fd opened above.
    unsafe { libc::close(fd) };
    got.ok()?;
    let word = |at: usize| u32::from_ne_bytes(info[at..at + 4].try_into().unwrap());
    // bpf_map_info: type, id, key_size, value_size, max_entries, flags, name[16].
    let name = &info[24..40];
    let named = name.starts_with(PLACEHOLDER_NAME.as_bytes())
        && name[PLACEHOLDER_NAME.len()..].iter().all(|&b| b == 0);
    (word(0) == BPF_MAP_TYPE_ARRAY && word(8) == 4 && word(12) == 4 && word(16) == 1 && named).then(
        || FileId {
            dev,
            ino,
            map_id: word(4),
        },
    )
}

/// Remove the placeholder at `path` if it is still `id` (an `unlink` of the
/// pin): the kernel frees the placeholder map with its last pin.
pub fn remove(path: &str, id: FileId) {
    if id.is_at(path) {
        let _ = std::fs::remove_file(path);
    }
}
