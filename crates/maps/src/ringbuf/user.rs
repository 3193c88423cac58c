//! USER_RINGBUF: the RINGBUF layout with the roles swapped. User space
//! produces (it maps the producer page and the data read-write, the
//! consumer page read-only) and programs consume with
//! `bpf_user_ringbuf_drain`.
//!
//! The consumer side follows the kernel's `__bpf_user_ringbuf_peek`,
//! `__bpf_user_ringbuf_sample_release` and `bpf_user_ringbuf_drain`: the
//! producer is untrusted, so every record is checked against the producer
//! position and the ring size before a program sees it; one drain at a time
//! (a busy word in the control page, shared by every process: a second
//! drainer gets `-EBUSY`); a BUSY record ends the drain as an empty ring
//! does; a DISCARDed one is skipped (its consumer position released) and
//! counts towards the per-call limit but not in the result. A drain that
//! moved the consumer wakes waiting producers (unless `BPF_RB_NO_WAKEUP`;
//! always with `BPF_RB_FORCE_WAKEUP`): a futex wake on the control page's
//! `wake_seq`, which [`UserRingbufProducer::reserve_blocking`] sleeps on
//! and the eventfd bridge of an epoll registration ([`super::WakeupFd`],
//! writable while the ring has room, as the kernel's `ringbuf_map_poll_user`)
//! watches.
//!
//! [`UserRingbufProducer`] is libbpf's `user_ring_buffer__*` in process:
//! reserve (`E2BIG`, `ENOSPC`), submit, discard, reserve_blocking. Like
//! libbpf's it is for one producer thread at a time.

use super::{
    futex, record_span, wake_caught_up, RingBuf, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP,
    BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ,
};
use crate::error::MapError;
use crate::map::Map;
use crate::spec::MapType;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kernel's `BPF_MAX_USER_RINGBUF_SAMPLES`: records one drain call
/// looks at, at most (discarded ones included).
pub const BPF_MAX_USER_RINGBUF_SAMPLES: u64 = 128 * 1024;
/// The largest sample a dynptr can describe (`DYNPTR_MAX_SIZE`).
pub const DYNPTR_MAX_SIZE: u32 = (1 << 24) - 1;

/// What the kernel's `__bpf_user_ringbuf_peek` finds at the consumer
/// position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserPeek {
    /// A submitted record: its bytes (contiguous thanks to the mirror;
    /// the kernel lets the program write them).
    Sample { data: *mut u8, size: u32 },
    /// A discarded record, already released (the kernel's `-EAGAIN`).
    Discarded,
    /// Nothing to read: the ring is empty or the next record is still
    /// BUSY (the kernel's `-ENODATA`).
    Empty,
    /// A malformed ring: the kernel's errno (`EINVAL`: producer position
    /// not 8-aligned, or a record longer than the producer advertised;
    /// `E2BIG`: a record longer than the ring or than a dynptr).
    Error(i32),
}

impl RingBuf {
    /// `__bpf_user_ringbuf_peek`. The caller holds the drain lock.
    pub(crate) fn user_peek(&self) -> UserPeek {
        let prod = self.prod().load(Ordering::Acquire);
        if !prod.is_multiple_of(8) {
            return UserPeek::Error(libc::EINVAL);
        }
        let cons = self.cons().load(Ordering::Acquire);
        if cons >= prod {
            return UserPeek::Empty;
        }
        let hdr_len = self.hdr_len(cons).load(Ordering::Acquire);
        let bits = hdr_len & (BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
        let size = hdr_len & !bits;
        let total = record_span(u64::from(size));
        if total > prod - cons {
            return UserPeek::Error(libc::EINVAL);
        }
        if total > self.size() || size > DYNPTR_MAX_SIZE {
            return UserPeek::Error(libc::E2BIG);
        }
        if bits & BPF_RINGBUF_DISCARD_BIT != 0 {
            self.cons().store(cons + total, Ordering::Release);
            return UserPeek::Discarded;
        }
        if bits & BPF_RINGBUF_BUSY_BIT != 0 {
            return UserPeek::Empty;
        }
        let off = ((cons + u64::from(BPF_RINGBUF_HDR_SZ)) & self.mask) as usize;
        UserPeek::Sample {
            // SAFETY: off < size; the record continues into the mirror.
            data: unsafe { self.data.add(off) },
            size,
        }
    }

    /// `__bpf_user_ringbuf_sample_release`: the consumer moves past the
    /// record of `size` bytes (release: the producer may reuse its room).
    pub(crate) fn user_release(&self, size: u32) {
        let cons = self.cons().load(Ordering::Relaxed);
        self.cons()
            .store(cons + record_span(u64::from(size)), Ordering::Release);
    }

    /// Take the drain lock (the kernel's `rb->busy`); false when another
    /// drain holds it.
    pub(crate) fn user_drain_lock(&self) -> bool {
        self.ctl()
            .drain_busy
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cfg(test)]
    pub(crate) fn drain_lock_free(&self) -> bool {
        self.ctl().drain_busy.load(Ordering::Relaxed) == 0
    }

    /// Drop the drain lock, then wake producers as the kernel does:
    /// always with `BPF_RB_FORCE_WAKEUP`, after any record (discarded ones
    /// included) unless `BPF_RB_NO_WAKEUP`.
    pub(crate) fn user_drain_unlock(&self, flags: u64, looked_at: u64) {
        let ctl = self.ctl();
        ctl.drain_busy.store(0, Ordering::Release);
        if flags & BPF_RB_FORCE_WAKEUP != 0 || (flags & BPF_RB_NO_WAKEUP == 0 && looked_at > 0) {
            // Pairs with the fence of a producer going to sleep.
            fence(Ordering::SeqCst);
            wake_caught_up(ctl);
        }
    }

    /// The kernel's `ringbuf_map_poll_user`: writable while the unconsumed
    /// bytes are fewer than the ring holds.
    pub(crate) fn has_room(&self) -> bool {
        let cons = self.cons().load(Ordering::Acquire);
        let prod = self.prod().load(Ordering::Acquire);
        prod.wrapping_sub(cons) < self.size()
    }

    /// libbpf's `user_ring_buffer__reserve`.
    pub(crate) fn user_reserve(&self, size: u32) -> Result<*mut u8, MapError> {
        if size & (BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT) != 0 {
            return Err(MapError::TooBig);
        }
        let cons = self.cons().load(Ordering::Acquire);
        let prod = self.prod().load(Ordering::Acquire);
        let total = record_span(u64::from(size));
        if total > self.size() {
            return Err(MapError::TooBig);
        }
        if self.size().saturating_sub(prod.wrapping_sub(cons)) < total {
            return Err(MapError::NoSpace);
        }
        let off = (prod & self.mask) as usize;
        // SAFETY: the header lies in the data area (8-aligned).
        unsafe {
            let hdr = self.data.add(off);
            (*(hdr.add(4) as *const AtomicU32)).store(0, Ordering::Relaxed);
            (*(hdr as *const AtomicU32)).store(size | BPF_RINGBUF_BUSY_BIT, Ordering::Relaxed);
        }
        self.prod().store(prod + total, Ordering::Release);
        let off = ((prod + u64::from(BPF_RINGBUF_HDR_SZ)) & self.mask) as usize;
        // SAFETY: as above; the sample continues into the mirror.
        Ok(unsafe { self.data.add(off) })
    }

    /// libbpf's `user_ringbuf_commit`: clear BUSY (set DISCARD) in the
    /// header in front of `sample`.
    ///
    /// # Safety
    /// `sample` must come from [`RingBuf::user_reserve`] on this ring and
    /// not be committed yet.
    pub(crate) unsafe fn user_commit(&self, sample: *mut u8, discard: bool) {
        let rel = sample as usize - self.data as usize;
        let hdr_pos =
            (self.size() as usize + rel - BPF_RINGBUF_HDR_SZ as usize) & self.mask as usize;
        let len = &*(self.data.add(hdr_pos) as *const AtomicU32);
        let mut new = len.load(Ordering::Relaxed) & !BPF_RINGBUF_BUSY_BIT;
        if discard {
            new |= BPF_RINGBUF_DISCARD_BIT;
        }
        len.swap(new, Ordering::AcqRel);
    }
}

impl Map {
    fn user_ring(&self) -> Result<&RingBuf, MapError> {
        match self.ringbuf() {
            Some(r) if self.map_type() == MapType::UserRingbuf => Ok(r),
            _ => Err(MapError::Invalid("not a user ring buffer")),
        }
    }

    /// `bpf_user_ringbuf_drain` with `f` as the program's callback: `f`
    /// gets each submitted sample (address and size, valid during the call
    /// only) and returns the callback's r0 (0 goes on, anything else
    /// stops). Returns the helper's r0: the number of samples handed to
    /// `f`, or a negative errno (`-EINVAL` for flags, `-EBUSY` when another
    /// drain runs, the kernel's errno for a malformed record — samples
    /// before it stay consumed). An error of `f` (a faulting callback)
    /// ends the drain with its sample not consumed.
    pub fn user_ringbuf_drain<E>(
        &self,
        flags: u64,
        mut f: impl FnMut(*mut u8, u32) -> Result<u64, E>,
    ) -> Result<i64, E> {
        let Ok(ring) = self.user_ring() else {
            return Ok(-i64::from(libc::EINVAL));
        };
        if flags & !(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) != 0 {
            return Ok(-i64::from(libc::EINVAL));
        }
        if !ring.user_drain_lock() {
            return Ok(-i64::from(libc::EBUSY));
        }
        let (mut looked_at, mut discarded) = (0u64, 0u64);
        let mut ret = 0u64;
        let mut out = None;
        while looked_at < BPF_MAX_USER_RINGBUF_SAMPLES && ret == 0 {
            match ring.user_peek() {
                UserPeek::Empty => break,
                UserPeek::Discarded => discarded += 1,
                UserPeek::Error(e) => {
                    out = Some(-i64::from(e));
                    break;
                }
                UserPeek::Sample { data, size } => match f(data, size) {
                    Ok(r) => {
                        ret = r;
                        ring.user_release(size);
                    }
                    Err(e) => {
                        ring.user_drain_unlock(BPF_RB_NO_WAKEUP, looked_at);
                        return Err(e);
                    }
                },
            }
            looked_at += 1;
        }
        ring.user_drain_unlock(flags, looked_at);
        Ok(out.unwrap_or((looked_at - discarded) as i64))
    }

    /// Whether a user ring buffer has room (the kernel's `EPOLLOUT`).
    pub fn user_ringbuf_has_room(&self) -> bool {
        self.user_ring().is_ok_and(|r| r.has_room())
    }
}

/// A producer of a USER_RINGBUF map in this process, with libbpf's
/// `user_ring_buffer__*` semantics. One producer thread at a time (as
/// libbpf's); drains may run anywhere.
pub struct UserRingbufProducer {
    map: Arc<Map>,
}

impl UserRingbufProducer {
    pub fn new(map: Arc<Map>) -> Result<Self, MapError> {
        map.user_ring()?;
        Ok(UserRingbufProducer { map })
    }

    fn ring(&self) -> &RingBuf {
        self.map.user_ring().expect("checked in new")
    }

    /// `user_ring_buffer__reserve`: `size` writable bytes (E2BIG for a
    /// size with the header bits or a record larger than the ring, ENOSPC
    /// when there is no room now). The record stays BUSY — a drain stops
    /// in front of it — until [`submit`](Self::submit) or
    /// [`discard`](Self::discard).
    pub fn reserve(&mut self, size: u32) -> Result<&mut [u8], MapError> {
        let p = self.ring().user_reserve(size)?;
        // SAFETY: `size` bytes reserved for this producer alone.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, size as usize) })
    }

    /// `user_ring_buffer__reserve_blocking`: wait up to `timeout` (None:
    /// forever) for room, woken by drains; ENOSPC (or E2BIG) as
    /// [`reserve`](Self::reserve) once it passes.
    pub fn reserve_blocking(
        &mut self,
        size: u32,
        timeout: Option<Duration>,
    ) -> Result<&mut [u8], MapError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let ring = self.ring();
        let p = loop {
            let ctl = ring.ctl();
            ctl.waiters.fetch_add(1, Ordering::SeqCst);
            // Pairs with the fence in `user_drain_unlock`.
            fence(Ordering::SeqCst);
            let seq = ctl.wake_seq.load(Ordering::SeqCst);
            let r = ring.user_reserve(size);
            let wait = match (&r, deadline) {
                (Err(MapError::NoSpace), None) => Some(None),
                (Err(MapError::NoSpace), Some(d)) => d
                    .checked_duration_since(Instant::now())
                    .filter(|l| !l.is_zero())
                    .map(Some),
                _ => None,
            };
            if let Some(left) = wait {
                futex::wait(&ctl.wake_seq, seq, left);
            }
            ctl.waiters.fetch_sub(1, Ordering::SeqCst);
            if wait.is_none() {
                break r?;
            }
        };
        // SAFETY: as in `reserve`.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, size as usize) })
    }

    /// `user_ring_buffer__submit`.
    ///
    /// # Safety
    /// `sample` must be a reservation of this producer not yet submitted
    /// or discarded.
    pub unsafe fn submit(&mut self, sample: *mut u8) {
        self.ring().user_commit(sample, false)
    }

    /// `user_ring_buffer__discard`.
    ///
    /// # Safety
    /// As for [`submit`](Self::submit).
    pub unsafe fn discard(&mut self, sample: *mut u8) {
        self.ring().user_commit(sample, true)
    }

    /// Reserve, copy `data` in, submit (ENOSPC/E2BIG as `reserve`).
    pub fn push(&mut self, data: &[u8]) -> Result<(), MapError> {
        let size = u32::try_from(data.len()).map_err(|_| MapError::TooBig)?;
        let s = self.reserve(size)?;
        s.copy_from_slice(data);
        let p = s.as_mut_ptr();
        // SAFETY: reserved just above.
        unsafe { self.submit(p) };
        Ok(())
    }

    /// The consumer and producer positions (for tests and dumps).
    pub fn positions(&self) -> (u64, u64) {
        let r = self.ring();
        (
            r.cons().load(Ordering::Acquire),
            r.prod().load(Ordering::Acquire),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::MapOptions;
    use crate::spec::MapSpec;

    /// A user ring whose producer page and headers the test writes by hand,
    /// as a misbehaving producer would.
    fn ring(size: u32) -> Map {
        let spec = MapSpec::new("u", MapType::UserRingbuf, 0, 0, size);
        Map::create_anonymous(&spec, &MapOptions::default()).unwrap()
    }

    fn set(m: &Map, prod: u64, hdr_at: u64, len: u32) {
        let r = m.ringbuf().unwrap();
        r.hdr_len(hdr_at).store(len, Ordering::Release);
        r.prod().store(prod, Ordering::Release);
    }

    fn drain(m: &Map) -> i64 {
        m.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(0)).unwrap()
    }

    #[test]
    fn malformed_records_get_the_kernels_errnos() {
        let page = crate::shm::page_size() as u32;
        let m = ring(page);
        // Producer position not 8-aligned.
        set(&m, 12, 0, 4);
        assert_eq!(drain(&m), -i64::from(libc::EINVAL));
        // A record longer than the producer advertised.
        set(&m, 16, 0, 9);
        assert_eq!(drain(&m), -i64::from(libc::EINVAL));
        // Longer than the ring (the producer claims two rings' worth).
        set(&m, 2 * u64::from(page), 0, page);
        assert_eq!(drain(&m), -i64::from(libc::E2BIG));
        // The consumer did not move on any of them.
        assert_eq!(m.ringbuf().unwrap().cons().load(Ordering::Relaxed), 0);
        // A good record, then a bad one: the first stays consumed, the
        // result is the error.
        set(&m, 16, 0, 3);
        m.ringbuf()
            .unwrap()
            .hdr_len(16)
            .store(100, Ordering::Relaxed);
        m.ringbuf().unwrap().prod().store(32, Ordering::Release);
        assert_eq!(drain(&m), -i64::from(libc::EINVAL));
        assert_eq!(m.ringbuf().unwrap().cons().load(Ordering::Relaxed), 16);
        // DISCARD with BUSY is a discard (checked first, as the kernel).
        m.ringbuf().unwrap().hdr_len(16).store(
            8 | BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT,
            Ordering::Relaxed,
        );
        assert_eq!(drain(&m), 0);
        assert_eq!(m.ringbuf().unwrap().cons().load(Ordering::Relaxed), 32);
        assert!(m.ringbuf().unwrap().drain_lock_free());
    }
}
