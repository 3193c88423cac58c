//! Consumers of a RINGBUF map in any process: busy-polling, blocking on
//! the ring's futex word, or woken through an epoll-able eventfd.

use super::{futex, RingBuf, RingbufStats};
use crate::error::MapError;
use crate::map::Map;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Reads a RINGBUF map. One consumer per ring at a time, as in the kernel.
pub struct RingbufConsumer {
    map: Arc<Map>,
}

impl RingbufConsumer {
    pub fn new(map: Arc<Map>) -> Result<Self, MapError> {
        if map.ringbuf().is_none() || map.map_type() == crate::MapType::UserRingbuf {
            return Err(MapError::Invalid(
                "not a ring buffer (a user ring buffer is drained by programs)",
            ));
        }
        Ok(RingbufConsumer { map })
    }

    fn ring(&self) -> &RingBuf {
        // Checked in `new`.
        self.map.ringbuf().expect("a ring buffer map")
    }

    /// Busy-poll style: hand every committed record (up to the first one
    /// still being written) to `f`, skipping discarded ones; returns how
    /// many, 0 at once when there is nothing.
    pub fn poll(&mut self, f: impl FnMut(&[u8])) -> usize {
        self.ring().consume(f)
    }

    /// Blocking: like [`poll`](Self::poll), but when there is nothing yet,
    /// sleep on the ring's futex until a producer wakes it (the kernel's
    /// wake-up rule: the consumer had caught up, or `BPF_RB_FORCE_WAKEUP`)
    /// or `timeout` passes (None: no limit). Returns the records consumed
    /// (0 only on timeout).
    pub fn poll_blocking(&mut self, mut f: impl FnMut(&[u8]), timeout: Option<Duration>) -> usize {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let n = self.ring().consume(&mut f);
            if n > 0 {
                return n;
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return 0,
                },
                None => None,
            };
            let ring = self.ring();
            ring.waiters().fetch_add(1, Ordering::SeqCst);
            // Pairs with the fence in `commit`: either the producer sees a
            // waiter and wakes, or this check sees its record.
            fence(Ordering::SeqCst);
            let seq = ring.wake_seq().load(Ordering::SeqCst);
            if !ring.record_ready() {
                futex::wait(ring.wake_seq(), seq, left);
            }
            ring.waiters().fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Batching: consume what is committed, then — whether or not there
    /// was anything — sleep until the ring fills to its batch watermark (an
    /// eighth of the ring), a producer forces a wake-up, or `linger`
    /// passes, and consume again. Returns the records consumed.
    ///
    /// Unlike [`poll_blocking`](Self::poll_blocking) (the kernel's rule: a
    /// wake-up whenever the consumer had caught up), a steady stream of
    /// records costs producers one futex wake per batch instead of one per
    /// record, and the consumer one wake-up per batch or per `linger`.
    /// The price is latency: a record waits up to `linger` before it is
    /// read. In backpressure mode a producer that finds the ring full wakes
    /// the consumer at once.
    pub fn poll_batched(&mut self, mut f: impl FnMut(&[u8]), linger: Duration) -> usize {
        let mut n = self.ring().consume(&mut f);
        let ring = self.ring();
        let watermark = super::batch_watermark(ring.size());
        ring.batch_waiters().fetch_add(1, Ordering::SeqCst);
        // Pairs with the fence in `commit`: either the producer sees a
        // batching waiter (and wakes it at the watermark), or this check
        // sees the fill.
        fence(Ordering::SeqCst);
        let seq = ring.batch_seq().load(Ordering::SeqCst);
        if ring.fill() < watermark {
            futex::wait(ring.batch_seq(), seq, Some(linger));
        }
        ring.batch_waiters().fetch_sub(1, Ordering::SeqCst);
        n += self.ring().consume(&mut f);
        n
    }

    /// An eventfd that becomes readable on the ring's wake-ups, for epoll
    /// loops. Call [`WakeupFd::rearm`] before each wait.
    pub fn wakeup_fd(&self) -> io::Result<WakeupFd> {
        WakeupFd::new(self.map.clone())
    }

    /// produced / consumed / dropped / discarded, live.
    pub fn stats(&self) -> RingbufStats {
        self.ring().stats()
    }
}

/// What a [`WakeupFd`] watches: a futex word bumped on every wake-up, and
/// whether a consumer would make progress now.
trait WakeSource: Send + Sync {
    fn wake_seq(&self) -> &AtomicU32;
    fn ready(&self) -> bool;
    /// A count of sleeping consumers the producers look at before they
    /// wake (a ring buffer's); None: producers always wake.
    fn waiters(&self) -> Option<&AtomicU32>;
    /// Whether readiness is "writable" (a USER_RINGBUF with room: the
    /// kernel's `EPOLLOUT`) rather than "readable".
    fn writable(&self) -> bool {
        false
    }
}

/// A ring buffer map.
struct RingbufSource(Arc<Map>);

impl WakeSource for RingbufSource {
    fn wake_seq(&self) -> &AtomicU32 {
        self.0
            .ringbuf()
            .expect("checked at WakeupFd::new")
            .wake_seq()
    }
    fn ready(&self) -> bool {
        if self.writable() {
            return self.0.user_ringbuf_has_room();
        }
        self.0.ringbuf().is_some_and(|r| r.record_ready())
    }
    fn waiters(&self) -> Option<&AtomicU32> {
        self.0.ringbuf().map(|r| r.waiters())
    }
    fn writable(&self) -> bool {
        self.0.map_type() == crate::MapType::UserRingbuf
    }
}

impl WakeSource for crate::PerfRing {
    fn wake_seq(&self) -> &AtomicU32 {
        crate::PerfRing::wake_seq(self)
    }
    fn ready(&self) -> bool {
        self.readable()
    }
    fn waiters(&self) -> Option<&AtomicU32> {
        None
    }
}

/// An eventfd signalled on every wake-up of a ring, by a thread of this
/// process sleeping on the ring's futex word (producers may be other
/// processes, which cannot write to this process's eventfd). The kernel's
/// ring fd is level-triggered (readable while data is available);
/// [`rearm`](Self::rearm) gives the same: it clears the eventfd, then
/// signals it again if a record is waiting. For ring buffers and for the
/// perf rings of a control plane's perf events ([`crate::PerfRing`]).
///
/// A USER_RINGBUF's fd is the other way round: writable (`EPOLLOUT`) while
/// the ring has room, woken by drains. Its eventfd then stands for
/// "writable" by its counter: 0 is writable, `u64::MAX - 1` (where an
/// eventfd stops accepting writes) is not; see [`signals_writable`]
/// (Self::signals_writable).
pub struct WakeupFd {
    source: Arc<dyn WakeSource>,
    efd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl WakeupFd {
    pub fn new(map: Arc<Map>) -> io::Result<WakeupFd> {
        if map.ringbuf().is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Self::watch(Arc::new(RingbufSource(map)))
    }

    /// The same for a perf ring: readable while a record waits.
    pub fn for_perf_ring(ring: Arc<crate::PerfRing>) -> io::Result<WakeupFd> {
        Self::watch(ring)
    }

    fn watch(source: Arc<dyn WakeSource>) -> io::Result<WakeupFd> {
        // SAFETY: plain eventfd creation; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        let efd = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let stop = Arc::new(AtomicBool::new(false));
        let (src, e, s) = (source.clone(), efd.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("bpfjet-ringbuf-wake".into())
            .spawn(move || bridge(&*src, &e, &s))?;
        let w = WakeupFd {
            source,
            efd,
            stop,
            thread: Some(thread),
        };
        w.rearm();
        Ok(w)
    }

    pub fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// Whether the eventfd signals by becoming writable (`EPOLLOUT`, a
    /// USER_RINGBUF: register it for `EPOLLOUT`, never `EPOLLIN`) rather
    /// than readable.
    pub fn signals_writable(&self) -> bool {
        self.source.writable()
    }

    /// Clear the eventfd, then signal it again if a consumer (producer, for
    /// a USER_RINGBUF) would make progress now (in that order, so a wake-up
    /// in between is not lost).
    pub fn rearm(&self) {
        if self.source.writable() {
            // Not writable: the counter at its maximum (fails harmlessly
            // with EAGAIN when it already is).
            let full = u64::MAX - 1;
            // SAFETY: writing 8 bytes to our non-blocking eventfd.
            unsafe { libc::write(self.fd(), (&full as *const u64).cast(), 8) };
        } else {
            clear(&self.efd);
        }
        if self.source.ready() {
            self.signal();
        }
    }

    fn signal(&self) {
        if self.source.writable() {
            clear(&self.efd);
        } else {
            signal(&self.efd);
        }
    }
}

fn clear(efd: &OwnedFd) {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes from our non-blocking eventfd.
    unsafe { libc::read(efd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}

impl Drop for WakeupFd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.source.wake_seq().fetch_add(1, Ordering::SeqCst);
        futex::wake_all(self.source.wake_seq());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn signal(efd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writing 8 bytes to our eventfd.
    unsafe { libc::write(efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// The bridge thread: every wake-up of the ring becomes an eventfd signal
/// (readable; for a USER_RINGBUF with room, writable).
fn bridge(source: &dyn WakeSource, efd: &OwnedFd, stop: &AtomicBool) {
    if let Some(w) = source.waiters() {
        w.fetch_add(1, Ordering::SeqCst);
    }
    loop {
        let seq = source.wake_seq().load(Ordering::SeqCst);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        futex::wait(source.wake_seq(), seq, None);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if !source.writable() {
            signal(efd);
        } else if source.ready() {
            // Writable again: a drain made room.
            clear(efd);
        }
    }
    if let Some(w) = source.waiters() {
        w.fetch_sub(1, Ordering::SeqCst);
    }
}
