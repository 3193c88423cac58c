//! Reading a kernel ring buffer map back through its mmap (consumer page,
//! producer page, data twice — the layout libbpf's consumer maps), without
//! consuming it: what bpfjet's own rings report with
//! `Map::ringbuf_snapshot`, for differential tests.

use crate::error::{Errno, KernelError};
use crate::object::KernelObject;
use bpfjet_maps::{ringbuf::read_window, RingbufSnapshot};
use libbpf_sys as sys;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// A read-only mapping, unmapped on drop.
struct Mapping(*mut libc::c_void, usize);

impl Mapping {
    fn new(fd: i32, len: usize, offset: usize, map: &str) -> Result<Mapping, KernelError> {
        // SAFETY: a fresh read-only shared mapping of the map fd; checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(KernelError::MapAccess {
                map: map.to_string(),
                what: "mmap of the ring buffer",
                errno: Errno(io::Error::last_os_error()),
            });
        }
        Ok(Mapping(p, len))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.0, self.1) };
    }
}

impl KernelObject {
    /// The records of ring buffer `name` between the consumer and the
    /// producer position, with their raw headers.
    pub fn ringbuf_snapshot(&self, name: &str) -> Result<RingbufSnapshot, KernelError> {
        let map = self.map(name)?;
        if map.info.map_type != sys::BPF_MAP_TYPE_RINGBUF {
            return Err(KernelError::MapAccess {
                map: name.to_string(),
                what: "ring buffer snapshot (not a RINGBUF)",
                errno: Errno(io::Error::from_raw_os_error(libc::EINVAL)),
            });
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let size = map.info.max_entries as usize;
        let cons_page = Mapping::new(map.fd, page, 0, name)?;
        let rest = Mapping::new(map.fd, page + 2 * size, page, name)?;
        // SAFETY: both pages are mapped; positions are 8-aligned u64s.
        let (cons, prod) = unsafe {
            (
                (*(cons_page.0 as *const AtomicU64)).load(Ordering::Acquire),
                (*(rest.0 as *const AtomicU64)).load(Ordering::Acquire),
            )
        };
        // SAFETY: data and its second copy follow the producer page; the
        // test-run that produced them has finished.
        let records =
            unsafe { read_window((rest.0 as *const u8).add(page), size as u64 - 1, cons, prod) };
        Ok(RingbufSnapshot {
            ring_size: size as u64,
            consumer_pos: cons,
            producer_pos: prod,
            records,
        })
    }

    /// Names of the object's ring buffer maps.
    pub fn ringbuf_names(&self) -> Vec<String> {
        self.maps()
            .iter()
            .filter(|m| m.info.map_type == sys::BPF_MAP_TYPE_RINGBUF)
            .map(|m| m.name.clone())
            .collect()
    }
}
