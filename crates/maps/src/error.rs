//! Map errors, each standing for the errno the kernel returns in the same case.

/// Why a map operation failed. [`MapError::errno`] gives the kernel's
/// (positive) errno so helpers can return `-errno` to programs unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("no such element (ENOENT)")]
    NotFound,
    #[error("map is full or index out of range (E2BIG)")]
    TooBig,
    #[error("too big for the kernel's limits (E2BIG): {0}")]
    SizeLimit(&'static str),
    #[error("out of memory (ENOMEM)")]
    NoMemory,
    #[error("element already exists (EEXIST)")]
    Exists,
    #[error("invalid argument (EINVAL): {0}")]
    Invalid(&'static str),
    #[error("operation not permitted (EPERM): {0}")]
    Permission(&'static str),
    #[error("busy (EBUSY)")]
    Busy,
    #[error("no space left (ENOSPC)")]
    NoSpace,
    #[error("operation not supported by this map type (EOPNOTSUPP)")]
    NotSupported,
    #[error("not supported in this configuration (ENOTSUPP)")]
    KernelNotSupported,
    #[error("no such device (ENODEV)")]
    NoDevice,
    #[error("value too large (EOVERFLOW)")]
    Overflow,
    #[error("try again (EAGAIN)")]
    Again,
    #[error("shared memory {what}: {message}")]
    Os {
        what: String,
        errno: i32,
        message: String,
    },
    #[error("map {0:?} not found in the instance registry")]
    UnknownMap(String),
    #[error("shared map object is corrupt or from another version: {0}")]
    Corrupt(&'static str),
}

impl MapError {
    /// The kernel errno for this error, as a positive number.
    pub fn errno(&self) -> i32 {
        match self {
            MapError::NotFound => libc::ENOENT,
            MapError::TooBig | MapError::SizeLimit(_) => libc::E2BIG,
            MapError::NoMemory => libc::ENOMEM,
            MapError::Exists => libc::EEXIST,
            MapError::Invalid(_) => libc::EINVAL,
            MapError::Permission(_) => libc::EPERM,
            MapError::Busy => libc::EBUSY,
            MapError::NoSpace => libc::ENOSPC,
            MapError::NotSupported => libc::EOPNOTSUPP,
            // ENOTSUPP is kernel-internal (524) but does reach user space.
            MapError::KernelNotSupported => 524,
            MapError::NoDevice => libc::ENODEV,
            MapError::Overflow => libc::EOVERFLOW,
            MapError::Again => libc::EAGAIN,
            MapError::Os { errno, .. } => *errno,
            MapError::UnknownMap(_) => libc::ENOENT,
            MapError::Corrupt(_) => libc::EINVAL,
        }
    }

    pub(crate) fn os(what: impl Into<String>, source: std::io::Error) -> MapError {
        MapError::Os {
            what: what.into(),
            errno: source.raw_os_error().unwrap_or(libc::EIO),
            message: source.to_string(),
        }
    }
}
