//! RINGBUF: the kernel's BPF ring buffer layout, in shared memory.
//!
//! Pages after the map header: a control page (the kernel's `struct
//! bpf_ringbuf` head: producer spinlock, pending position, plus bpfjet's
//! wake-up words, counters and backpressure setting), the consumer page
//! (`consumer_pos`), the producer page (`producer_pos`), then
//! `max_entries` bytes of data, mapped twice in a row so that a record
//! wrapping around the end is contiguous. Each record has the kernel's
//! 8-byte header: `len` with BUSY (bit 31) and DISCARD (bit 30), then the
//! page offset of the header from the control page (the kernel's `pg_off`,
//! from which a commit finds its ring). Records are 8-byte aligned.
//!
//! Producers (any thread of any process mapping the object) serialise
//! reservations with the spinlock; commits are lock-free; a consumer reads
//! up to the first BUSY record. Wake-ups follow the kernel: a commit wakes
//! the consumer when the consumer has caught up to that record, always
//! with `BPF_RB_FORCE_WAKEUP`, never with `BPF_RB_NO_WAKEUP`; a wake-up is
//! a futex wake on a word of the control page (cross-process), which the
//! blocking consumer sleeps on and the eventfd bridge turns into an
//! epoll-able fd ([`consumer`]).
//!
//! Backpressure (bpfjet only, opt-in per map): a reservation that finds
//! the ring full waits for the consumer instead of failing, as long as the
//! consumer keeps moving; see [`Backpressure`].

mod consumer;
pub(crate) mod futex;
mod kernel_mmap;
mod user;

pub use consumer::{RingbufConsumer, WakeupFd};
pub use kernel_mmap::MmapSegment;
pub use user::{UserPeek, UserRingbufProducer, BPF_MAX_USER_RINGBUF_SAMPLES, DYNPTR_MAX_SIZE};

use crate::error::MapError;
use crate::header::{Geometry, LAYOUT_WORDS};
use crate::sync::SpinGuard;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const BPF_RINGBUF_BUSY_BIT: u32 = 1 << 31;
pub const BPF_RINGBUF_DISCARD_BIT: u32 = 1 << 30;
pub const BPF_RINGBUF_HDR_SZ: u32 = 8;
/// `bpf_ringbuf_submit/discard/output` flags.
pub const BPF_RB_NO_WAKEUP: u64 = 1;
pub const BPF_RB_FORCE_WAKEUP: u64 = 2;
/// `bpf_ringbuf_query` flags.
pub const BPF_RB_AVAIL_DATA: u64 = 0;
pub const BPF_RB_RING_SIZE: u64 = 1;
pub const BPF_RB_CONS_POS: u64 = 2;
pub const BPF_RB_PROD_POS: u64 = 3;
const RINGBUF_MAX_RECORD_SZ: u64 = (u32::MAX / 4) as u64;

/// `map_extra` bit of a RINGBUF asking for backpressure (bpfjet only: the
/// kernel refuses a RINGBUF with a non-zero `map_extra`).
pub const BPFJET_RINGBUF_BACKPRESSURE: u64 = 1;
/// `map_extra` bits 32..63: the stall limit in milliseconds (0: default).
pub const BPFJET_RINGBUF_STALL_MS_SHIFT: u32 = 32;
/// How long a producer waits for a consumer that does not move.
pub const DEFAULT_STALL_LIMIT: Duration = Duration::from_millis(100);
/// A producer waiting for room re-checks at least this often, for consumers
/// that do not signal (libbpf's, which only moves `consumer_pos`).
const ROOM_RECHECK: Duration = Duration::from_micros(200);
/// A consumer in backpressure mode wakes waiting producers every this many
/// records, and at the end of each poll.
const ROOM_SIGNAL_EVERY: usize = 16;
/// Room checks a producer spins through before it sleeps.
const ROOM_SPINS: u32 = 1000;

/// Opt-in backpressure of one ring: a full ring makes a producer wait for
/// the consumer instead of dropping the record.
///
/// A producer never waits forever: it waits while the consumer position
/// moves; when it has not moved for `stall_limit` (no consumer, a consumer
/// that stopped, or a record that will never be committed in front of it)
/// the reservation fails (NULL, counted as dropped) and the ring is marked
/// stalled at that consumer position: further reservations that find the
/// ring full fail at once, without waiting, until the consumer moves again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backpressure {
    pub stall_limit: Duration,
}

impl Backpressure {
    /// The setting a RINGBUF's `map_extra` asks for; Err for bits bpfjet
    /// does not know.
    pub fn from_map_extra(extra: u64) -> Result<Option<Backpressure>, MapError> {
        let known = BPFJET_RINGBUF_BACKPRESSURE | (u64::from(u32::MAX) << 32);
        if extra & !known != 0 {
            return Err(MapError::Invalid(
                "ringbuf map_extra: only bit 0 (backpressure) and bits 32-63 (stall ms)",
            ));
        }
        if extra & BPFJET_RINGBUF_BACKPRESSURE == 0 {
            return Ok(None);
        }
        let ms = extra >> BPFJET_RINGBUF_STALL_MS_SHIFT;
        Ok(Some(Backpressure {
            stall_limit: if ms == 0 {
                DEFAULT_STALL_LIMIT
            } else {
                Duration::from_millis(ms)
            },
        }))
    }
}

/// Per-ring counters, in records. Exact once producers and consumer are
/// idle; read live, each may lag by the records being written or read at
/// that moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingbufStats {
    /// Records submitted (reserved and not discarded, or output).
    pub produced: u64,
    /// Submitted records the consumer has moved past.
    pub consumed: u64,
    /// Reservations and outputs that failed for lack of room.
    pub dropped: u64,
    /// Records discarded by the program.
    pub discarded: u64,
    /// Reserved records not committed yet.
    pub in_flight: u64,
}

/// The ring's records between the consumer and the producer position, as
/// the consumer would see them (for dumps and differential tests).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingbufSnapshot {
    pub ring_size: u64,
    pub consumer_pos: u64,
    pub producer_pos: u64,
    pub records: Vec<RingRecord>,
}

/// One record: its raw header words and its bytes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RingRecord {
    /// `len` with the BUSY and DISCARD bits.
    pub header_len: u32,
    pub pg_off: u32,
    /// Hex in JSON, like STATE.json values.
    #[serde(serialize_with = "hex")]
    pub data: Vec<u8>,
}

fn hex<S: serde::Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::state::to_hex(data))
}

/// Read the records of a ring in kernel layout: `data` is the first of the
/// two data mappings of `mask + 1` bytes each.
///
/// # Safety
/// `data..data + 2 * (mask + 1)` must be readable, and no producer may
/// reuse `[cons, prod)` while this runs.
pub unsafe fn read_window(data: *const u8, mask: u64, cons: u64, prod: u64) -> Vec<RingRecord> {
    let mut out = Vec::new();
    let mut pos = cons;
    while pos < prod {
        let hdr = data.add((pos & mask) as usize);
        let header_len = (*(hdr as *const AtomicU32)).load(Ordering::Acquire);
        let pg_off = (*(hdr.add(4) as *const AtomicU32)).load(Ordering::Relaxed);
        let size = (header_len & !(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) as usize;
        let data = if header_len & BPF_RINGBUF_BUSY_BIT != 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(hdr.add(BPF_RINGBUF_HDR_SZ as usize), size).to_vec()
        };
        out.push(RingRecord {
            header_len,
            pg_off,
            data,
        });
        pos += record_span(size as u64);
    }
    out
}

/// Bytes a record of `size` takes in the ring: header plus data, 8-aligned.
fn record_span(size: u64) -> u64 {
    (size + BPF_RINGBUF_HDR_SZ as u64).div_ceil(8) * 8
}

/// The control page: the kernel keeps its lock and pending position here;
/// bpfjet adds wake-up words, counters and the backpressure setting.
#[repr(C)]
struct Ctl {
    lock: AtomicU32,
    /// Bumped on every wake-up; blocking consumers futex-wait on it.
    wake_seq: AtomicU32,
    /// Consumers sleeping on `wake_seq` (or bridging it to an eventfd).
    waiters: AtomicU32,
    /// Bumped by a consumer that made room while producers wait.
    room_seq: AtomicU32,
    /// Producers waiting for room (backpressure).
    room_waiters: AtomicU32,
    /// Batching consumers asleep on `batch_seq` that want a wake-up only
    /// once the ring holds [`batch_watermark`] bytes (or on
    /// `BPF_RB_FORCE_WAKEUP`); they wake by themselves after a short
    /// linger otherwise ([`RingbufConsumer::poll_batched`]).
    batch_waiters: AtomicU32,
    /// Ring size - 1, for commits that know only the record.
    mask: u64,
    /// First record not yet committed; guards reservations against a
    /// consumer position moved too far by a buggy consumer.
    pending_pos: AtomicU64,
    /// Successful reservations (under the lock).
    reserved: AtomicU64,
    /// Failed reservations for lack of room (under the lock).
    dropped: AtomicU64,
    /// Backpressure stall limit in ns; 0 = drop when full (the kernel's way).
    backpressure_ns: AtomicU64,
    /// consumer_pos + 1 at which producers gave up waiting; 0 = none.
    stalled_at: AtomicU64,
    /// Discards, on their own cache line: commits update it without the lock.
    discarded: Padded,
    /// Bumped on the wake-ups batching consumers sleep for (watermark,
    /// forced, a producer waiting for room); they futex-wait on it, not on
    /// `wake_seq`, which the kernel's per-record rule bumps on every
    /// record committed to a drained ring.
    batch_seq: AtomicU32,
    /// USER_RINGBUF: 1 while a `bpf_user_ringbuf_drain` runs (the kernel's
    /// `rb->busy`), in every process.
    drain_busy: AtomicU32,
}

#[repr(C, align(64))]
struct Padded(AtomicU64);

pub(crate) struct RingBuf {
    ctl: *const Ctl,
    cons: *const AtomicU64,
    prod: *const AtomicU64,
    data: *mut u8,
    mask: u64,
    page: usize,
    /// Object offsets of the consumer page and the data (kernel mmap layout).
    cons_off: usize,
    data_off: usize,
}

impl RingBuf {
    /// Returns (bytes after `data_off`, words, data offset) — the data area
    /// must end the object, since its mirror is mapped right behind it.
    pub(crate) fn layout(g: &Geometry, data_off: usize) -> (usize, [u64; LAYOUT_WORDS]) {
        let p = g.page;
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64; // control page
        l[1] = (data_off + p) as u64; // consumer page
        l[2] = (data_off + 2 * p) as u64; // producer page
        l[3] = (data_off + 3 * p) as u64; // data
        (3 * p + g.max_entries as usize, l)
    }

    /// The mirror mapping for a ring buffer object: its data area again.
    pub(crate) fn mirror(g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> crate::shm::Mirror {
        crate::shm::Mirror {
            offset: l[3] as usize,
            len: g.max_entries as usize,
        }
    }

    /// # Safety
    /// `base` must be the start of a mapped ring object with this layout,
    /// including the mirror.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        RingBuf {
            ctl: base.add(l[0] as usize) as *const Ctl,
            cons: base.add(l[1] as usize) as *const AtomicU64,
            prod: base.add(l[2] as usize) as *const AtomicU64,
            data: base.add(l[3] as usize),
            mask: g.max_entries as u64 - 1,
            page: g.page,
            cons_off: l[1] as usize,
            data_off: l[3] as usize,
        }
    }

    /// First-time setup of a new (zeroed) ring.
    pub(crate) fn init(&self, backpressure: Option<Backpressure>) {
        // SAFETY: the object is not shared yet; `mask` is written once here.
        unsafe { (*(self.ctl as *mut Ctl)).mask = self.mask };
        self.set_backpressure(backpressure);
    }

    fn ctl(&self) -> &Ctl {
        // SAFETY: inside the mapping.
        unsafe { &*self.ctl }
    }
    fn cons(&self) -> &AtomicU64 {
        // SAFETY: inside the mapping.
        unsafe { &*self.cons }
    }
    fn prod(&self) -> &AtomicU64 {
        // SAFETY: inside the mapping.
        unsafe { &*self.prod }
    }

    fn hdr_len(&self, pos: u64) -> &AtomicU32 {
        // SAFETY: (pos & mask) < size; the header is 8-aligned.
        unsafe { &*(self.data.add((pos & self.mask) as usize) as *const AtomicU32) }
    }

    pub(crate) fn size(&self) -> u64 {
        self.mask + 1
    }

    pub(crate) fn set_backpressure(&self, bp: Option<Backpressure>) {
        let ns = bp.map_or(0, |b| {
            b.stall_limit.as_nanos().clamp(1, u64::MAX as u128) as u64
        });
        self.ctl().backpressure_ns.store(ns, Ordering::Relaxed);
        self.ctl().stalled_at.store(0, Ordering::Relaxed);
    }

    pub(crate) fn backpressure(&self) -> Option<Backpressure> {
        match self.ctl().backpressure_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Backpressure {
                stall_limit: Duration::from_nanos(ns),
            }),
        }
    }

    /// `bpf_ringbuf_reserve`: NULL (None) when flags are set, the record is
    /// too large, or the ring has no room (after waiting for the consumer,
    /// in backpressure mode). Failures for lack of room count as dropped.
    pub(crate) fn reserve(&self, size: u64, flags: u64) -> Option<*mut u8> {
        if flags != 0 {
            return None;
        }
        let ctl = self.ctl();
        if size > RINGBUF_MAX_RECORD_SZ {
            ctl.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let len = record_span(size);
        let mut wait: Option<(u64, Instant)> = None;
        loop {
            if let Some(p) = self.try_reserve(size, len) {
                return Some(p);
            }
            if !self.wait_for_room(len, &mut wait) {
                ctl.dropped.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
    }

    /// One reservation attempt, as the kernel's `__bpf_ringbuf_reserve`.
    fn try_reserve(&self, size: u64, len: u64) -> Option<*mut u8> {
        let cons_pos = self.cons().load(Ordering::Acquire);
        let ctl = self.ctl();
        let _g = SpinGuard::lock(&ctl.lock);
        let prod_pos = self.prod().load(Ordering::Relaxed);
        let mut pend = ctl.pending_pos.load(Ordering::Relaxed);
        while pend < prod_pos {
            let l = self.hdr_len(pend).load(Ordering::Acquire);
            if l & BPF_RINGBUF_BUSY_BIT != 0 {
                break;
            }
            pend += record_span((l & !BPF_RINGBUF_DISCARD_BIT) as u64);
        }
        ctl.pending_pos.store(pend, Ordering::Relaxed);
        let new_prod = prod_pos + len;
        if new_prod.wrapping_sub(cons_pos) > self.mask || new_prod - pend > self.mask {
            return None;
        }
        let off = (prod_pos & self.mask) as usize;
        // SAFETY: the header and the record lie in data + mirror.
        unsafe {
            let hdr = self.data.add(off);
            let pg_off = ((hdr as usize - self.ctl as usize) / self.page) as u32;
            (*(hdr.add(4) as *const AtomicU32)).store(pg_off, Ordering::Relaxed);
            (*(hdr as *const AtomicU32))
                .store(size as u32 | BPF_RINGBUF_BUSY_BIT, Ordering::Relaxed);
        }
        ctl.reserved
            .store(ctl.reserved.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.prod().store(new_prod, Ordering::Release);
        // SAFETY: as above.
        Some(unsafe { self.data.add(off + BPF_RINGBUF_HDR_SZ as usize) })
    }

    /// Backpressure: wait a little for the consumer to make room for `len`
    /// bytes. False when the ring drops instead (drop mode, a record that
    /// can never fit, or a consumer that has not moved for the stall limit).
    /// `wait` carries the consumer position last seen and since when.
    fn wait_for_room(&self, len: u64, wait: &mut Option<(u64, Instant)>) -> bool {
        let ctl = self.ctl();
        let limit = ctl.backpressure_ns.load(Ordering::Relaxed);
        if limit == 0 || len > self.mask {
            return false;
        }
        let cons = self.cons().load(Ordering::Acquire);
        if ctl.stalled_at.load(Ordering::Relaxed) == cons + 1 {
            return false;
        }
        let now = Instant::now();
        let (seen, since) = wait.get_or_insert((cons, now));
        if *seen != cons {
            (*seen, *since) = (cons, now);
        } else if now.duration_since(*since) >= Duration::from_nanos(limit) {
            ctl.stalled_at.store(cons + 1, Ordering::Relaxed);
            return false;
        }
        let no_room = || {
            let prod = self.prod().load(Ordering::Acquire);
            prod + len - self.cons().load(Ordering::Acquire) > self.mask
        };
        // A busy consumer frees room within microseconds: spin a little
        // before paying for a sleep and a wake-up.
        for _ in 0..ROOM_SPINS {
            if !no_room() {
                // Room behind the consumer (maybe not yet committed in
                // front of it: another producer is finishing a record).
                std::hint::spin_loop();
                return true;
            }
            std::hint::spin_loop();
        }
        // The ring is full: a batching consumer asleep in its linger must
        // not keep the producer waiting for it.
        if ctl.batch_waiters.load(Ordering::SeqCst) > 0 {
            wake(ctl);
        }
        ctl.room_waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let seq = ctl.room_seq.load(Ordering::SeqCst);
        if no_room() {
            futex::wait(&ctl.room_seq, seq, Some(ROOM_RECHECK));
        } else {
            std::thread::yield_now();
        }
        ctl.room_waiters.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// `bpf_ringbuf_output`: reserve, copy, submit.
    pub(crate) fn output(&self, data: &[u8], flags: u64) -> Result<(), MapError> {
        if flags & !(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) != 0 {
            return Err(MapError::Invalid("ringbuf output flags"));
        }
        let p = self.reserve(data.len() as u64, 0).ok_or(MapError::Again)?;
        // SAFETY: p has data.len() reserved bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len());
            commit(p, flags, false);
        }
        Ok(())
    }

    /// `bpf_ringbuf_query`.
    pub(crate) fn query(&self, flags: u64) -> u64 {
        match flags {
            BPF_RB_AVAIL_DATA => {
                let cons = self.cons().load(Ordering::Acquire);
                let prod = self.prod().load(Ordering::Acquire);
                prod.wrapping_sub(cons)
            }
            BPF_RB_RING_SIZE => self.mask + 1,
            BPF_RB_CONS_POS => self.cons().load(Ordering::Acquire),
            BPF_RB_PROD_POS => self.prod().load(Ordering::Acquire),
            _ => 0,
        }
    }

    /// Whether the record at the consumer position is committed (submitted
    /// or discarded), i.e. a consumer would make progress now.
    pub(crate) fn record_ready(&self) -> bool {
        let cons = self.cons().load(Ordering::Acquire);
        cons < self.prod().load(Ordering::Acquire)
            && self.hdr_len(cons).load(Ordering::Acquire) & BPF_RINGBUF_BUSY_BIT == 0
    }

    /// Consume every committed record up to the first busy one.
    pub(crate) fn consume(&self, mut f: impl FnMut(&[u8])) -> usize {
        let ctl = self.ctl();
        let signal_room = ctl.backpressure_ns.load(Ordering::Relaxed) != 0;
        let mut cons = self.cons().load(Ordering::Acquire);
        let mut n = 0;
        loop {
            let prod = self.prod().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let l = self.hdr_len(cons).load(Ordering::Acquire);
            if l & BPF_RINGBUF_BUSY_BIT != 0 {
                break;
            }
            let size = (l & !BPF_RINGBUF_DISCARD_BIT) as usize;
            if l & BPF_RINGBUF_DISCARD_BIT == 0 {
                let off = (cons & self.mask) as usize + BPF_RINGBUF_HDR_SZ as usize;
                // SAFETY: a committed record of `size` bytes; the mirror
                // makes it contiguous even across the end.
                let rec = unsafe { std::slice::from_raw_parts(self.data.add(off), size) };
                f(rec);
                n += 1;
            }
            cons += record_span(size as u64);
            self.cons().store(cons, Ordering::Release);
            if signal_room && n % ROOM_SIGNAL_EVERY == 0 {
                self.signal_room();
            }
        }
        if signal_room {
            self.signal_room();
        }
        n
    }

    /// Wake producers sleeping for room. Pairs with the fence in
    /// `wait_for_room`: a producer that saw no room either sees the new
    /// consumer position or is woken.
    fn signal_room(&self) {
        let ctl = self.ctl();
        fence(Ordering::SeqCst);
        if ctl.room_waiters.load(Ordering::Relaxed) > 0 {
            ctl.room_seq.fetch_add(1, Ordering::SeqCst);
            futex::wake_all(&ctl.room_seq);
        }
    }

    /// Counters; the records between consumer and producer are walked with
    /// reservations held off, so the window is not reused meanwhile.
    pub(crate) fn stats(&self) -> RingbufStats {
        let ctl = self.ctl();
        let _g = SpinGuard::lock(&ctl.lock);
        let reserved = ctl.reserved.load(Ordering::Relaxed);
        let dropped = ctl.dropped.load(Ordering::Relaxed);
        let prod = self.prod().load(Ordering::Acquire);
        let cons = self.cons().load(Ordering::Acquire).min(prod);
        let (mut in_flight, mut waiting) = (0, 0);
        // SAFETY: data + mirror are mapped; the lock keeps producers out.
        for r in unsafe { read_window(self.data, self.mask, cons, prod) } {
            if r.header_len & BPF_RINGBUF_BUSY_BIT != 0 {
                in_flight += 1;
            } else if r.header_len & BPF_RINGBUF_DISCARD_BIT == 0 {
                waiting += 1;
            }
        }
        let discarded = ctl.discarded.0.load(Ordering::Acquire);
        let produced = reserved.saturating_sub(discarded + in_flight);
        RingbufStats {
            produced,
            consumed: produced.saturating_sub(waiting),
            dropped,
            discarded,
            in_flight,
        }
    }

    /// The records a consumer would read now, without consuming them.
    pub(crate) fn snapshot(&self) -> RingbufSnapshot {
        let _g = SpinGuard::lock(&self.ctl().lock);
        let prod = self.prod().load(Ordering::Acquire);
        let cons = self.cons().load(Ordering::Acquire).min(prod);
        RingbufSnapshot {
            ring_size: self.mask + 1,
            consumer_pos: cons,
            producer_pos: prod,
            // SAFETY: as in `stats`.
            records: unsafe { read_window(self.data, self.mask, cons, prod) },
        }
    }

    fn wake_seq(&self) -> &AtomicU32 {
        &self.ctl().wake_seq
    }

    fn waiters(&self) -> &AtomicU32 {
        &self.ctl().waiters
    }

    fn batch_waiters(&self) -> &AtomicU32 {
        &self.ctl().batch_waiters
    }

    fn batch_seq(&self) -> &AtomicU32 {
        &self.ctl().batch_seq
    }

    /// Unconsumed bytes (committed or not).
    fn fill(&self) -> u64 {
        let prod = self.prod().load(Ordering::Acquire);
        prod.wrapping_sub(self.cons().load(Ordering::Acquire))
    }
}

/// Wake the ring's consumers (blocking ones, eventfd bridges, batching
/// ones).
fn wake(ctl: &Ctl) {
    wake_caught_up(ctl);
    ctl.batch_seq.fetch_add(1, Ordering::SeqCst);
    if ctl.batch_waiters.load(Ordering::SeqCst) > 0 {
        futex::wake_all(&ctl.batch_seq);
    }
}

/// A wake-up by the kernel's rule (the consumer had caught up): for
/// consumers that sleep until any record (blocking ones, eventfd bridges);
/// batching consumers wait for their watermark instead.
fn wake_caught_up(ctl: &Ctl) {
    ctl.wake_seq.fetch_add(1, Ordering::SeqCst);
    if ctl.waiters.load(Ordering::SeqCst) > 0 {
        futex::wake_all(&ctl.wake_seq);
    }
}

/// Bytes of unconsumed data at which a commit wakes a batching consumer:
/// an eighth of the ring, so that the consumer has the other seven eighths
/// of headroom while it gets a CPU.
pub(crate) fn batch_watermark(ring_size: u64) -> u64 {
    (ring_size / 8).max(u64::from(BPF_RINGBUF_HDR_SZ))
}

/// `bpf_ringbuf_submit` / `bpf_ringbuf_discard`: needs only the record
/// pointer, like the kernel helpers, which find the ring from the page
/// offset in the header. `flags` are the wake-up flags.
///
/// # Safety
/// `sample` must be a pointer returned by a reservation that has not been
/// committed yet, in a ring mapped in this process.
pub unsafe fn commit(sample: *mut u8, flags: u64, discard: bool) {
    let hdr = sample.sub(BPF_RINGBUF_HDR_SZ as usize);
    let len = &*(hdr as *const AtomicU32);
    let pg_off = (*(hdr.add(4) as *const AtomicU32)).load(Ordering::Relaxed) as usize;
    let page = crate::shm::page_size();
    let ctl_addr = (hdr as usize & !(page - 1)) - pg_off * page;
    let ctl = &*(ctl_addr as *const Ctl);
    let mut new = len.load(Ordering::Relaxed) & !BPF_RINGBUF_BUSY_BIT;
    if discard {
        new |= BPF_RINGBUF_DISCARD_BIT;
        ctl.discarded.0.fetch_add(1, Ordering::Relaxed);
    }
    len.swap(new, Ordering::AcqRel);
    // Pairs with the fence of a consumer going to sleep (`consumer`).
    fence(Ordering::SeqCst);
    let data_addr = ctl_addr + 3 * page;
    let rec_pos = (hdr as usize - data_addr) as u64;
    let cons = &*((ctl_addr + page) as *const AtomicU64);
    let cons_pos = cons.load(Ordering::Acquire) & ctl.mask;
    if flags & BPF_RB_FORCE_WAKEUP != 0 {
        wake(ctl);
        return;
    }
    if flags & BPF_RB_NO_WAKEUP != 0 {
        return;
    }
    if cons_pos == rec_pos {
        // The kernel's rule, for consumers that sleep until any record.
        wake_caught_up(ctl);
    }
    if ctl.batch_waiters.load(Ordering::Relaxed) > 0 {
        // A batching consumer sleeps: wake it only once the ring has filled
        // to the watermark, so that a steady stream of records costs one
        // wake-up per batch instead of one per record.
        let prod = (*((ctl_addr + 2 * page) as *const AtomicU64)).load(Ordering::Acquire);
        let fill = prod.wrapping_sub(cons.load(Ordering::Acquire));
        if fill >= batch_watermark(ctl.mask + 1) {
            wake(ctl);
        }
    }
}
