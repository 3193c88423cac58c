//! The four single-producer/single-consumer rings an AF_XDP socket shares
//! with the kernel, mapped from the socket.
//!
//! Each ring is a power-of-two array plus a producer and a consumer index
//! that only ever grow (wrapping at 2^32); the side that owns an index
//! publishes it with a release store after writing or reading entries,
//! and reads the other side's with an acquire load.

use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

/// A mapped ring of `T` (u64 addresses for fill/completion, `xdp_desc` for
/// RX/TX).
pub struct Ring<T> {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    size: u32,
    /// Our cached copy of the index we own, and of the other side's.
    cached_own: u32,
    cached_other: u32,
    _t: PhantomData<T>,
}

// SAFETY: the mapping belongs to this ring alone on the user side; the
// kernel is the only other party.
unsafe impl<T> Send for Ring<T> {}

impl<T> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("size", &self.size).finish()
    }
}

/// Whether we produce into the ring (fill, TX) or consume from it
/// (completion, RX).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Producer,
    Consumer,
}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `fd` at page offset `pgoff` with the kernel's
    /// offsets `off`.
    pub fn map(
        fd: libc::c_int,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
        side: Side,
    ) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: mapping a socket's ring at the offsets the kernel gave.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let at = |o: u64| (map as usize + o as usize) as *const AtomicU32;
        let mut ring = Ring {
            map,
            map_len,
            producer: at(off.producer),
            consumer: at(off.consumer),
            flags: at(off.flags),
            descs: (map as usize + off.desc as usize) as *mut T,
            mask: size - 1,
            size,
            cached_own: 0,
            cached_other: 0,
            _t: PhantomData,
        };
        // SAFETY: the index words are inside the mapping.
        unsafe {
            match side {
                Side::Producer => {
                    ring.cached_own = (*ring.producer).load(Ordering::Relaxed);
                    ring.cached_other = (*ring.consumer).load(Ordering::Acquire);
                }
                Side::Consumer => {
                    ring.cached_own = (*ring.consumer).load(Ordering::Relaxed);
                    ring.cached_other = (*ring.producer).load(Ordering::Acquire);
                }
            }
        }
        Ok(ring)
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// The kernel asks to be woken (XDP_RING_NEED_WAKEUP).
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: the flags word is inside the mapping.
        unsafe { (*self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 }
    }

    /// Producer: free slots (up to `want`), refreshing the consumer index
    /// only when the cached view is short.
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.cached_own.wrapping_sub(self.cached_other);
        if free >= want {
            return free;
        }
        // SAFETY: inside the mapping.
        self.cached_other = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.size - self.cached_own.wrapping_sub(self.cached_other)
    }

    /// Producer: writes `item` at the next free slot (the caller checked
    /// [`Ring::free`]); published by [`Ring::submit`].
    pub fn push(&mut self, item: T) {
        let i = (self.cached_own & self.mask) as usize;
        // SAFETY: i < size, inside the descriptor array.
        unsafe { self.descs.add(i).write(item) };
        self.cached_own = self.cached_own.wrapping_add(1);
    }

    /// Producer: makes the pushed entries visible to the kernel.
    pub fn submit(&mut self) {
        // SAFETY: inside the mapping.
        unsafe { (*self.producer).store(self.cached_own, Ordering::Release) };
    }

    /// Consumer: entries ready (up to `max`).
    pub fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_other.wrapping_sub(self.cached_own);
        if n == 0 {
            // SAFETY: inside the mapping.
            self.cached_other = unsafe { (*self.producer).load(Ordering::Acquire) };
            n = self.cached_other.wrapping_sub(self.cached_own);
        }
        n.min(max)
    }

    /// Consumer: the `k`-th ready entry (k < [`Ring::available`]).
    pub fn peek(&self, k: u32) -> T {
        let i = (self.cached_own.wrapping_add(k) & self.mask) as usize;
        // SAFETY: i < size.
        unsafe { self.descs.add(i).read() }
    }

    /// Consumer: gives `n` read entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.cached_own = self.cached_own.wrapping_add(n);
        // SAFETY: inside the mapping.
        unsafe { (*self.consumer).store(self.cached_own, Ordering::Release) };
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping what `map` mapped.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}
