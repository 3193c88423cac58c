//! Memory regions a bounds-checked program may touch.

use crate::error::Access;

/// A contiguous range of host memory `[start, start + len)` that a program may
/// access in bounds-checked mode: the context, the packet, map values, memory
/// a helper hands out. Stack frames are not listed here; their bounds follow
/// from the call depth (see [`crate::RunState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub start: u64,
    pub len: u64,
    pub writable: bool,
}

impl Region {
    pub fn read_only(start: u64, len: u64) -> Self {
        Region {
            start,
            len,
            writable: false,
        }
    }

    pub fn writable(start: u64, len: u64) -> Self {
        Region {
            start,
            len,
            writable: true,
        }
    }

    /// The memory of a slice the program may only read.
    pub fn of_slice(bytes: &[u8]) -> Self {
        Region::read_only(bytes.as_ptr() as u64, bytes.len() as u64)
    }

    /// The memory of a slice the program may read and write.
    pub fn of_mut_slice(bytes: &mut [u8]) -> Self {
        Region::writable(bytes.as_mut_ptr() as u64, bytes.len() as u64)
    }

    /// Whether `size` bytes at `addr` lie entirely inside this region and the
    /// region permits `access`. Written to be overflow-proof: the program
    /// controls `addr` completely.
    #[inline]
    pub fn permits(&self, addr: u64, size: u64, access: Access) -> bool {
        if access.writes() && !self.writable {
            return false;
        }
        match addr.checked_sub(self.start) {
            Some(offset) => offset <= self.len && size <= self.len - offset,
            None => false,
        }
    }
}
