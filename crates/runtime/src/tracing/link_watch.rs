//! Programs that run while their control plane's link lasts.
//!
//! `bpfjet trace --instance` runs programs a control plane linked in a
//! `bpf()` instance (crates/server, probe_links.rs). In the kernel a probe
//! stops firing the moment its link goes (the tool ends, or destroys the
//! link). Here the programs run inside the traced processes, so each
//! program knows its link's record file, and the instance keeps a
//! generation word (`<instance dir>/links.gen`, shared memory) that the
//! server bumps whenever a probe link goes. A run first compares the word
//! with the generation this object last saw — one load of a rarely written
//! line — and only when it moved checks its programs' records with
//! `access(2)`: no allocation, async-signal-safe, as a run may be inside a
//! signal handler. A program whose record is gone runs no more.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The instance's generation word, mapped.
pub(crate) struct LinkWatch {
    word: *const AtomicU64,
    seen: AtomicU64,
}

// SAFETY: the word is shared memory read through an atomic; the mapping
// lives as long as the watch (it is never unmapped: objects are leaked by
// the agent, and a stale mapping of 8 bytes costs nothing).
unsafe impl Send for LinkWatch {}
unsafe impl Sync for LinkWatch {}

fn map_word(path: &Path) -> io::Result<*const AtomicU64> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if file.metadata()?.len() < 8 {
        file.set_len(8)?;
    }
    // SAFETY: a fresh shared mapping of the file's first 8 bytes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            8,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as *const AtomicU64)
}

impl LinkWatch {
    pub(crate) fn open(path: &Path) -> io::Result<LinkWatch> {
        let word = map_word(path)?;
        // SAFETY: mapped above.
        let now = unsafe { &*word }.load(Ordering::Acquire);
        Ok(LinkWatch {
            word,
            seen: AtomicU64::new(now),
        })
    }

    /// The generation, when it moved since the last call that returned
    /// it (the caller then checks its links).
    #[inline(always)]
    pub(crate) fn moved(&self) -> Option<u64> {
        // SAFETY: mapped in `open`, never unmapped.
        let now = unsafe { &*self.word }.load(Ordering::Acquire);
        (now != self.seen.load(Ordering::Relaxed)).then_some(now)
    }

    /// The links were checked as of generation `g`.
    pub(crate) fn saw(&self, g: u64) {
        self.seen.store(g, Ordering::Relaxed);
    }
}

/// A link's record as a C string for [`record_exists`].
pub(crate) fn record_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// Whether the record still exists (only a definite "no such file" says
/// it is gone).
pub(crate) fn record_exists(path: &CString) -> bool {
    // SAFETY: a NUL-terminated path; access(2) only reads it.
    if unsafe { libc::access(path.as_ptr(), libc::F_OK) } == 0 {
        return true;
    }
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() != libc::ENOENT }
}

/// Bump the generation of the instance whose word is `path`: a probe link
/// of it went (the server, after removing the link's record).
pub fn bump_link_generation(path: &Path) -> io::Result<()> {
    let word = map_word(path)?;
    // SAFETY: mapped by map_word; unmapped right after.
    unsafe {
        (*word).fetch_add(1, Ordering::AcqRel);
        libc::munmap(word as *mut libc::c_void, 8);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_is_seen_once_and_records_are_checked() {
        let dir = std::env::temp_dir().join(format!("bpfjet-link-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gen = dir.join("links.gen");
        let w = LinkWatch::open(&gen).unwrap();
        assert_eq!(w.moved(), None);
        bump_link_generation(&gen).unwrap();
        let g = w.moved().expect("the bump is seen");
        w.saw(g);
        assert_eq!(w.moved(), None);
        let rec = dir.join("7");
        std::fs::write(&rec, b"{}").unwrap();
        let c = record_path(&rec).unwrap();
        assert!(record_exists(&c));
        std::fs::remove_file(&rec).unwrap();
        assert!(!record_exists(&c));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
