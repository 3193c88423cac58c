//! Cgroups as `bpf_current_task_under_cgroup` sees them: a cgroup is named
//! by its id, the inode number of its directory on the cgroup v2
//! hierarchy (the kernel's `cgroup_id()`), and a thread is under a cgroup
//! when its own cgroup (`/proc/thread-self/cgroup`, the `0::` line) is that
//! cgroup or one of its descendants (`task_under_cgroup_hierarchy`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `CGROUP2_SUPER_MAGIC`.
const CGROUP2_MAGIC: i64 = 0x6367_7270;

static MOUNT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Where the cgroup v2 hierarchy is mounted (`/proc/self/mountinfo`).
pub fn mount() -> Option<&'static Path> {
    MOUNT
        .get_or_init(|| {
            let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            info.lines().find_map(|line| {
                // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SRC OPTS
                let (head, tail) = line.split_once(" - ")?;
                let fstype = tail.split_whitespace().next()?;
                let point = head.split_whitespace().nth(4)?;
                (fstype == "cgroup2").then(|| PathBuf::from(point))
            })
        })
        .as_deref()
}

/// The id of the cgroup whose directory is `dir`, or why it is none.
pub fn cgroup_id(dir: &Path) -> Result<u32, String> {
    // Where the hierarchy is, found now (outside any signal handler) for
    // `current_under`.
    if mount().is_none() {
        return Err("no cgroup v2 hierarchy is mounted".into());
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: not a path", dir.display()))?;
    // SAFETY: statfs writes into `st`, a properly sized struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "{}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    if st.f_type as i64 != CGROUP2_MAGIC {
        return Err(format!(
            "{}: not a directory of the cgroup v2 hierarchy",
            dir.display()
        ));
    }
    let ino = std::fs::metadata(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .ino();
    u32::try_from(ino).map_err(|_| format!("{}: cgroup id {ino} past 32 bits", dir.display()))
}

/// Whether the calling thread is in the cgroup with id `id` or below it.
/// Read afresh at each call, as the kernel reads the task's cgroup (a
/// thread may move), into stack buffers: the helper runs in signal
/// handlers, possibly on top of a `malloc` holding its lock. The mount
/// point was found when the cgroup was put into the map ([`cgroup_id`]).
pub fn current_under(id: u32) -> bool {
    let Some(root) = MOUNT.get().and_then(|m| m.as_deref()) else {
        return false;
    };
    let root = root.as_os_str().as_encoded_bytes();
    let mut own = [0u8; 4096];
    let n = super::task_view::read_small(b"/proc/thread-self/cgroup\0", &mut own);
    let Some(rel) = own[..n]
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"0::"))
    else {
        return false;
    };
    let mut path = [0u8; 4096 + 256];
    if root.len() + rel.len() + 2 > path.len() {
        return false;
    }
    path[..root.len()].copy_from_slice(root);
    let mut len = root.len();
    let rel = rel.strip_prefix(b"/").unwrap_or(rel);
    if !rel.is_empty() {
        path[len] = b'/';
        path[len + 1..len + 1 + rel.len()].copy_from_slice(rel);
        len += 1 + rel.len();
    }
    loop {
        path[len] = 0;
        // SAFETY: `path` is NUL-terminated at `len`; stat writes into `st`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::stat(path.as_ptr().cast(), &mut st) } == 0 && st.st_ino == u64::from(id) {
            return true;
        }
        if len <= root.len() {
            return false;
        }
        // Up one directory, not above the mount point.
        len = path[..len]
            .iter()
            .rposition(|&b| b == b'/')
            .unwrap_or(0)
            .max(root.len());
    }
}
