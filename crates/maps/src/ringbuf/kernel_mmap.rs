//! `mmap` of a ring buffer map fd with the kernel's offsets: page 0 is the
//! consumer page, page 1 the producer page, then the data pages twice. A
//! RINGBUF's consumer page is the only writable one
//! (`ringbuf_map_mmap_kern`); a USER_RINGBUF's is the only one that may
//! not be mapped writable (`ringbuf_map_mmap_user`). bpfjet's object keeps consumer page, producer page
//! and data contiguous, so a kernel range becomes at most two pieces of the
//! object: up to the end of the data, and the data again.

use super::RingBuf;
use crate::error::MapError;

/// `len` bytes of the map's shared-memory object from `file_off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapSegment {
    pub file_off: u64,
    pub len: usize,
}

impl RingBuf {
    /// The pieces of the object that a kernel `mmap(len, offset)` of the
    /// ring's fd shows, in order. EPERM as the kernel for a writable
    /// mapping of anything but exactly the consumer page (RINGBUF) or of
    /// the consumer page (`user`: USER_RINGBUF), EINVAL beyond the end.
    pub(crate) fn mmap_segments(
        &self,
        offset: u64,
        len: usize,
        writable: bool,
        user: bool,
    ) -> Result<Vec<MmapSegment>, MapError> {
        let page = self.page as u64;
        let len = (len as u64).div_ceil(page) * page;
        if !offset.is_multiple_of(page) || len == 0 {
            return Err(MapError::Invalid("ringbuf mmap: offset not page aligned"));
        }
        if user && writable && offset == 0 {
            return Err(MapError::Permission(
                "user ringbuf mmap: the consumer page may not be mapped writable",
            ));
        }
        if !user && writable && (offset != 0 || len != page) {
            return Err(MapError::Permission(
                "ringbuf mmap: only the consumer page may be mapped writable",
            ));
        }
        let size = self.size();
        let once = 2 * page + size; // consumer, producer, data
        if offset + len > once + size {
            return Err(MapError::Invalid(
                "ringbuf mmap: beyond the double-mapped data",
            ));
        }
        let mut out = Vec::new();
        let first_end = (offset + len).min(once);
        if offset < first_end {
            out.push(MmapSegment {
                file_off: self.cons_off as u64 + offset,
                len: (first_end - offset) as usize,
            });
        }
        let second_start = offset.max(once);
        if second_start < offset + len {
            out.push(MmapSegment {
                file_off: self.data_off as u64 + (second_start - once),
                len: (offset + len - second_start) as usize,
            });
        }
        Ok(out)
    }
}
