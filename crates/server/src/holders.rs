//! Whether any process still holds an fd on a bpfjet object, and freeing
//! what nothing holds any more.
//!
//! The kernel frees an object when its last reference goes, whichever
//! process held it and however that process ended. bpfjet's fds are files
//! (a map's shared memory, the record of a program, BTF object or link),
//! and every fd bpfjet hands out takes a shared `flock(2)` on its open file
//! description. Such a lock lives exactly as long as the description:
//! `dup`, `fork` and `SCM_RIGHTS` share it, and the kernel drops it when the
//! last fd on it closes — at exit, or when the process is killed. So
//! "can an exclusive lock be taken on the object's file?" answers "does an
//! fd anywhere still name this object?", for processes bpfjet never sees
//! exit too.
//!
//! A process that ends normally lets go of its objects itself (atexit); one
//! that crashed cannot, so [`BpfjetBackend::sweep`] frees what no fd, pin,
//! attachment or reference holds. It runs when a process of the instance
//! starts serving `bpf()`, before ids are listed, in `bpfjet status`, and
//! periodically in every attachment's data plane, so a crashed link holder
//! detaches as the kernel detaches it.

use crate::backend::BpfjetBackend;
use crate::namespace::{Kind, ObjRef};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// An object this young is not swept: its creator may not have taken the
/// lock of its first fd yet (creating the object and opening that fd are
/// two steps).
const GRACE: Duration = Duration::from_secs(2);

/// Mark `fd` as a holder of the object its file is. Blocking: a prober's
/// exclusive lock is held only for the moment of its probe.
pub(crate) fn hold(fd: i32) {
    // SAFETY: flock on an fd the caller owns; failure (EBADF, ENOLCK)
    // leaves the object looking unheld by this fd, which the process's own
    // fd table still covers.
    while unsafe { libc::flock(fd, libc::LOCK_SH) } != 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Whether an fd (of any process) holds the object whose file is `path`.
fn held_by_any_fd(path: &PathBuf) -> bool {
    let Ok(f) = std::fs::File::options().read(true).open(path) else {
        // No file: nothing can hold it.
        return false;
    };
    // SAFETY: flock on the fd of `f`; the probe's lock goes with `f`.
    let taken = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    !taken
}

impl BpfjetBackend {
    /// The file whose open descriptions hold `r`.
    fn holder_file(&self, r: ObjRef) -> PathBuf {
        match r.kind_id() {
            (Kind::Map, id) => self.ns.map_file(id),
            (kind, id) => self.ns.record_path(kind, id),
        }
    }

    /// Whether an fd of any process — this one's being closed excepted, as
    /// it is closed before its object is released — still names `r`.
    pub(crate) fn held_by_fd(&self, r: ObjRef) -> bool {
        held_by_any_fd(&self.holder_file(r))
    }

    /// Free every object of the instance created through `bpf()` that
    /// nothing holds any more (its holders exited without letting go).
    pub fn sweep(&self) {
        let now = SystemTime::now();
        // Links first: a link holds its program, a program its maps and BTF.
        for kind in [Kind::Link, Kind::Prog, Kind::Map, Kind::Btf] {
            for id in self.ns.ids(kind) {
                let record = self.ns.record_path(kind, id);
                let Some(age) = std::fs::metadata(&record)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                else {
                    // Maps of `bpfjet run` have no record: not ours to free.
                    continue;
                };
                let r = ObjRef::new(kind, id);
                if age >= GRACE && !self.held_by_fd(r) {
                    self.release(r);
                }
            }
        }
    }
}
