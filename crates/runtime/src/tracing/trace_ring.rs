//! Where a tracing object's `bpf_trace_printk` lines wait for the report:
//! one byte ring, allocated when the object is loaded, that a program's
//! run writes without allocating.
//!
//! Why not a `Vec<String>`: a tracing program can run inside the traced
//! process's allocator (a system-call hook of `malloc`'s own `mmap`, `brk`
//! or `madvise`, or a SIGSYS handler that interrupted it), where a heap
//! allocation may wait forever on the arena lock its own thread holds.
//!
//! A record is a u16 length and the line's bytes, wrapping at the end of
//! the buffer. When a line does not fit, or the object's line limit is
//! reached, the oldest lines go (the report keeps the last ones, as
//! before). Writers take a flag, not a mutex: a run that finds the flag
//! held — another thread writing, or the run's own thread interrupted by a
//! signal in the middle of a write — tries a bounded number of times and
//! then drops its line, rather than wait for a holder that may never run
//! again. Both losses are counted ([`TraceLoss`]) for the report.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of line text the ring holds (the lines of a report that printed
/// them all at the kernel's 1,024-byte maximum: 255 of them).
pub const TRACE_RING_BYTES: usize = 256 << 10;
/// How many times a writer looks at a held flag before it drops its line.
const TRIES: u32 = 4096;

struct Inner {
    buf: Box<[u8]>,
    /// Offset of the oldest record.
    head: usize,
    /// Bytes in use (records and their headers).
    used: usize,
    /// Records in the ring.
    lines: usize,
}

/// The ring of one tracing object.
pub struct TraceRing {
    busy: AtomicBool,
    inner: UnsafeCell<Inner>,
    limit: usize,
    /// Lines given up behind a held flag.
    busy_drops: AtomicU64,
    /// Lines pushed out by newer ones (the ring's bytes or line limit).
    pushed_out: AtomicU64,
}

/// Lines a ring lost since the last [`TraceRing::take`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceLoss {
    /// Given up because the ring was held too long (another thread
    /// writing, or this one interrupted mid-line).
    pub busy: u64,
    /// Written, then pushed out by newer lines before the report read them.
    pub pushed_out: u64,
}

impl TraceLoss {
    /// Both counts.
    pub fn total(&self) -> u64 {
        self.busy + self.pushed_out
    }

    /// Adds another ring's (or process's) counts.
    pub fn add(&mut self, other: TraceLoss) {
        self.busy += other.busy;
        self.pushed_out += other.pushed_out;
    }
}

// SAFETY: `inner` is only touched by the holder of `busy`.
unsafe impl Sync for TraceRing {}
// SAFETY: as above; the buffer is plain bytes.
unsafe impl Send for TraceRing {}

/// Held flag; released when dropped.
struct Held<'a>(&'a TraceRing);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl TraceRing {
    /// A ring keeping at most `limit` lines in `bytes` bytes.
    pub fn new(limit: usize, bytes: usize) -> TraceRing {
        TraceRing {
            busy: AtomicBool::new(false),
            inner: UnsafeCell::new(Inner {
                buf: vec![0; bytes.max(4)].into_boxed_slice(),
                head: 0,
                used: 0,
                lines: 0,
            }),
            limit,
            busy_drops: AtomicU64::new(0),
            pushed_out: AtomicU64::new(0),
        }
    }

    fn try_hold(&self, tries: u32) -> Option<Held<'_>> {
        for _ in 0..tries {
            if self
                .busy
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Held(self));
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Keep `line` (at most `u16::MAX` bytes are kept of it). Allocates
    /// nothing and never blocks.
    pub fn push(&self, line: &[u8]) {
        if self.limit == 0 {
            return;
        }
        let Some(_held) = self.try_hold(TRIES) else {
            self.busy_drops.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // SAFETY: the flag is held.
        let r = unsafe { &mut *self.inner.get() };
        let cap = r.buf.len();
        let line = &line[..line.len().min(usize::from(u16::MAX)).min(cap - 2)];
        let need = 2 + line.len();
        while r.lines > 0 && (r.used + need > cap || r.lines >= self.limit) {
            let len = usize::from(u16::from_ne_bytes([
                r.buf[r.head],
                r.buf[(r.head + 1) % cap],
            ]));
            r.head = (r.head + 2 + len) % cap;
            // Saturating: after a stolen flag (`take`) a late writer may
            // have left the counts off; never a panic in a handler.
            r.used = r.used.saturating_sub(2 + len);
            r.lines -= 1;
            self.pushed_out.fetch_add(1, Ordering::Relaxed);
        }
        let mut at = (r.head + r.used.min(cap)) % cap;
        for &b in (line.len() as u16).to_ne_bytes().iter().chain(line) {
            r.buf[at] = b;
            at = (at + 1) % cap;
        }
        r.used += need;
        r.lines += 1;
    }

    /// Every line kept since the last call, oldest first, and how many
    /// were lost since then (waits for a writer to finish; not for a signal
    /// handler). A flag held for a whole second belongs to a thread that
    /// stopped in the middle of a line (killed, or frozen in a handler):
    /// the lines are read anyway, so the report is never stuck behind it.
    pub fn take(&self) -> (Vec<String>, TraceLoss) {
        let started = std::time::Instant::now();
        let _held = loop {
            if let Some(h) = self.try_hold(TRIES) {
                break h;
            }
            if started.elapsed() > std::time::Duration::from_secs(1) {
                break Held(self);
            }
            std::thread::yield_now();
        };
        // SAFETY: the flag is held.
        let r = unsafe { &mut *self.inner.get() };
        let cap = r.buf.len();
        let mut out = Vec::with_capacity(r.lines);
        let mut at = r.head;
        for _ in 0..r.lines {
            let len = usize::from(u16::from_ne_bytes([r.buf[at], r.buf[(at + 1) % cap]]));
            let bytes: Vec<u8> = (0..len).map(|i| r.buf[(at + 2 + i) % cap]).collect();
            out.push(String::from_utf8_lossy(&bytes).into_owned());
            at = (at + 2 + len) % cap;
        }
        r.head = 0;
        r.used = 0;
        r.lines = 0;
        let loss = TraceLoss {
            busy: self.busy_drops.swap(0, Ordering::Relaxed),
            pushed_out: self.pushed_out.swap(0, Ordering::Relaxed),
        };
        (out, loss)
    }

    /// Forget every line if the ring is free now (a forked child, where a
    /// writer that held it at the fork never lets it go). Async-signal-safe.
    pub fn clear_if_free(&self) {
        if let Some(_held) = self.try_hold(1) {
            // SAFETY: the flag is held.
            let r = unsafe { &mut *self.inner.get() };
            r.head = 0;
            r.used = 0;
            r.lines = 0;
            self.busy_drops.store(0, Ordering::Relaxed);
            self.pushed_out.store(0, Ordering::Relaxed);
        }
    }

    /// Forget every line and free the ring, held or not: in a forked
    /// child, where a thread of the parent that held it at the fork does
    /// not exist (the child's one thread was in `fork`, not writing), so
    /// the flag would stay held and the report's [`TraceRing::take`] wait
    /// forever. Async-signal-safe.
    pub fn reset_in_forked_child(&self) {
        // SAFETY: the child has one thread, this one, and it holds no
        // borrow of the ring.
        let r = unsafe { &mut *self.inner.get() };
        r.head = 0;
        r.used = 0;
        r.lines = 0;
        self.busy_drops.store(0, Ordering::Relaxed);
        self.pushed_out.store(0, Ordering::Relaxed);
        self.busy.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(r: &TraceRing) -> Vec<String> {
        r.take().0
    }

    #[test]
    fn keeps_lines_in_order_and_drops_the_oldest() {
        let r = TraceRing::new(3, 64);
        for l in ["a", "bb", "ccc", "dddd"] {
            r.push(l.as_bytes());
        }
        let lost = TraceLoss {
            busy: 0,
            pushed_out: 1,
        };
        assert_eq!(
            r.take(),
            (vec!["bb".to_string(), "ccc".into(), "dddd".into()], lost)
        );
        assert_eq!(r.take(), (vec![], TraceLoss::default()));
    }

    #[test]
    fn wraps_around_the_buffer_end() {
        let r = TraceRing::new(100, 16);
        for i in 0..20u8 {
            let line = [b'a' + i; 5];
            r.push(&line);
        }
        // 7 bytes a record, 16 bytes: the last two fit.
        assert_eq!(lines(&r), vec!["sssss", "ttttt"]);
        r.push(b"xy");
        assert_eq!(lines(&r), vec!["xy"]);
    }

    #[test]
    fn a_line_longer_than_the_ring_is_cut() {
        let r = TraceRing::new(10, 8);
        r.push(b"0123456789");
        assert_eq!(lines(&r), vec!["012345"]);
    }

    #[test]
    fn a_forked_child_frees_a_ring_its_parents_thread_held() {
        let r = TraceRing::new(10, 64);
        r.push(b"parent's");
        std::mem::forget(r.try_hold(1).unwrap());
        r.clear_if_free();
        r.reset_in_forked_child();
        r.push(b"child's");
        assert_eq!(
            r.take(),
            (vec!["child's".to_string()], TraceLoss::default())
        );
    }

    #[test]
    fn a_held_ring_drops_the_line_instead_of_waiting() {
        let r = TraceRing::new(10, 64);
        let held = r.try_hold(1).unwrap();
        r.push(b"lost");
        drop(held);
        r.push(b"kept");
        let lost = TraceLoss {
            busy: 1,
            pushed_out: 0,
        };
        assert_eq!(r.take(), (vec!["kept".to_string()], lost));
    }
}
