//! Errno values as the kernel returns them from `bpf()`.

use std::fmt;

/// A positive errno (`EINVAL`, ...): the failure of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const E2BIG: Errno = Errno(libc::E2BIG);
    pub const EBADF: Errno = Errno(libc::EBADF);
    pub const EAGAIN: Errno = Errno(libc::EAGAIN);
    pub const ENOMEM: Errno = Errno(libc::ENOMEM);
    pub const EACCES: Errno = Errno(libc::EACCES);
    pub const EFAULT: Errno = Errno(libc::EFAULT);
    pub const EBUSY: Errno = Errno(libc::EBUSY);
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const ENOSPC: Errno = Errno(libc::ENOSPC);
    pub const ENOTSUPP: Errno = Errno(524); // the kernel-internal ENOTSUPP bpf() leaks
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENOTDIR: Errno = Errno(libc::ENOTDIR);

    /// The errno of an I/O error, EINVAL when it has none.
    pub fn from_io(e: &std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EINVAL))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}
