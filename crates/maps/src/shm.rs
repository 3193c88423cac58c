//! One shared-memory object per map: POSIX shm (`/dev/shm/bpfjet.<instance>.<id>`)
//! for maps a control plane can open, or a memfd for private maps.
//!
//! The object is mapped once, whole; ring buffers additionally map their
//! data area a second time right behind the first mapping, so that a record
//! that wraps around the end of the ring is still contiguous in memory (the
//! kernel does the same with its double-mapped data pages).

use crate::error::MapError;
use std::ffi::CString;
use std::io;

/// The system's page size (asked once; 4096 if sysconf fails).
pub fn page_size() -> usize {
    // Asked once: ring-buffer commits need it on every record.
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p <= 0 {
            4096
        } else {
            p as usize
        }
    })
}

/// A mapped shared-memory object. The mapping is never moved or shrunk while
/// this value lives, so raw pointers into it stay valid.
#[derive(Debug)]
pub(crate) struct Shm {
    base: *mut u8,
    file_len: usize,
    map_len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access to it
// goes through atomics or is documented as racy-by-design (map values).
unsafe impl Send for Shm {}
unsafe impl Sync for Shm {}

/// Extra mapping of `[offset, offset+len)` of the file placed right after
/// the main mapping.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mirror {
    pub offset: usize,
    pub len: usize,
}

/// The POSIX shm name of a map object or registry.
pub(crate) fn object_name(instance: &str, what: &str) -> Result<CString, MapError> {
    if instance.is_empty()
        || instance.len() > 200
        || instance.contains('/')
        || instance.contains('\0')
    {
        return Err(MapError::Invalid(
            "instance name must be 1-200 chars without '/'",
        ));
    }
    CString::new(format!("/bpfjet.{instance}.{what}"))
        .map_err(|_| MapError::Invalid("instance name contains NUL"))
}

impl Shm {
    /// Create a zero-filled object of `len` bytes. `name` = None makes a
    /// private memfd. Fails with EEXIST if a named object already exists.
    pub(crate) fn create(
        name: Option<&CString>,
        len: usize,
        mirror: Option<Mirror>,
    ) -> Result<Shm, MapError> {
        // SAFETY: FFI calls with valid NUL-terminated strings; the returned
        // fd is checked and closed on every path.
        unsafe {
            let fd = match name {
                Some(n) => libc::shm_open(
                    n.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600,
                ),
                None => libc::memfd_create(c"bpfjet-map".as_ptr(), libc::MFD_CLOEXEC),
            };
            if fd < 0 {
                let e = io::Error::last_os_error();
                return Err(MapError::os(describe(name, "create"), e));
            }
            if libc::ftruncate(fd, len as libc::off_t) != 0 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                if let Some(n) = name {
                    libc::shm_unlink(n.as_ptr());
                }
                return Err(MapError::os(describe(name, "size"), e));
            }
            let r = Self::map_fd(fd, len, mirror);
            libc::close(fd);
            if r.is_err() {
                if let Some(n) = name {
                    libc::shm_unlink(n.as_ptr());
                }
            }
            r.map_err(|e| MapError::os(describe(name, "map"), e))
        }
    }

    /// Open an existing named object; `mirror_for` computes the mirror from
    /// the object's header bytes (read before mapping).
    pub(crate) fn open(
        name: &CString,
        mirror_for: impl FnOnce(&[u8]) -> Result<Option<Mirror>, MapError>,
        header_len: usize,
    ) -> Result<Shm, MapError> {
        // SAFETY: FFI with checked results; buffers are sized correctly.
        unsafe {
            let fd = libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0);
            if fd < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENOENT) {
                    return Err(MapError::UnknownMap(name.to_string_lossy().into_owned()));
                }
                return Err(MapError::os(describe(Some(name), "open"), e));
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(MapError::os(describe(Some(name), "stat"), e));
            }
            let len = st.st_size as usize;
            if len < header_len {
                libc::close(fd);
                return Err(MapError::Corrupt("object smaller than its header"));
            }
            let mut head = vec![0u8; header_len];
            let n = libc::pread(fd, head.as_mut_ptr().cast(), header_len, 0);
            if n != header_len as isize {
                libc::close(fd);
                return Err(MapError::Corrupt("short header read"));
            }
            let mirror = match mirror_for(&head) {
                Ok(m) => m,
                Err(e) => {
                    libc::close(fd);
                    return Err(e);
                }
            };
            let r = Self::map_fd(fd, len, mirror);
            libc::close(fd);
            r.map_err(|e| MapError::os(describe(Some(name), "map"), e))
        }
    }

    unsafe fn map_fd(fd: libc::c_int, len: usize, mirror: Option<Mirror>) -> io::Result<Shm> {
        let extra = mirror.map_or(0, |m| m.len);
        let map_len = len + extra;
        // Reserve the whole range first so the mirror lands exactly behind
        // the main mapping.
        let base = libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let main = libc::mmap(
            base,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        );
        if main == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            libc::munmap(base, map_len);
            return Err(e);
        }
        if let Some(m) = mirror {
            let p = libc::mmap(
                (base as *mut u8).add(len).cast(),
                m.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                m.offset as libc::off_t,
            );
            if p == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                libc::munmap(base, map_len);
                return Err(e);
            }
        }
        Ok(Shm {
            base: base.cast(),
            file_len: len,
            map_len,
        })
    }

    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.file_len
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map_fd mapped.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// Remove a named object; existing mappings stay valid until unmapped.
pub(crate) fn unlink(name: &CString) {
    // SAFETY: valid C string.
    unsafe {
        libc::shm_unlink(name.as_ptr());
    }
}

fn describe(name: Option<&CString>, op: &str) -> String {
    match name {
        Some(n) => format!("{op} {}", n.to_string_lossy()),
        None => format!("{op} memfd"),
    }
}
