//! PERF_EVENT_ARRAY: one ring of records per index (per CPU), each with a
//! counter of records lost because the ring was full — the data a perf
//! buffer reader sees as samples and PERF_RECORD_LOST.
//!
//! Record format: `u32 total_size` (header included, multiple of 8), `u32
//! data_size`, then the data. Head and tail are free-running byte counts;
//! records wrap byte-wise around the end of the ring.

use crate::error::MapError;
use crate::header::{Geometry, LAYOUT_WORDS};
use crate::sync::SpinGuard;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `BPF_F_INDEX_MASK` / `BPF_F_CURRENT_CPU` of `bpf_perf_event_output`.
pub const BPF_F_INDEX_MASK: u64 = 0xffff_ffff;
pub const BPF_F_CURRENT_CPU: u64 = BPF_F_INDEX_MASK;
const REC_HDR: usize = 8;
const CTL_BYTES: usize = 64;

#[repr(C)]
struct RingCtl {
    lock: AtomicU32,
    _pad: u32,
    head: AtomicU64,
    tail: AtomicU64,
    lost: AtomicU64,
    /// Records written (the samples a consumer will see); within the
    /// control block's padding, so the layout's size is unchanged.
    produced: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<RingCtl>() <= CTL_BYTES);

/// A perf event array's counters over all its rings, in records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfbufStats {
    /// Samples written by `bpf_perf_event_output`.
    pub produced: u64,
    /// Samples the consumer read.
    pub consumed: u64,
    /// Samples lost (PERF_RECORD_LOST): the ring was full, or the record
    /// larger than the ring.
    pub dropped: u64,
}

/// What a perf buffer consumer receives.
#[derive(Debug, PartialEq, Eq)]
pub enum PerfEvent<'a> {
    /// A record written by `bpf_perf_event_output` on ring `cpu`.
    Sample { cpu: u32, data: &'a [u8] },
    /// `count` records were dropped on ring `cpu` since the last report.
    Lost { cpu: u32, count: u64 },
}

pub(crate) struct PerfEventArray {
    rings: *mut u8,
    ring_bytes: usize,
    entries: u32,
}

impl PerfEventArray {
    pub(crate) fn layout(
        g: &Geometry,
        data_off: usize,
        ring_bytes: usize,
    ) -> (usize, [u64; LAYOUT_WORDS]) {
        let ring_bytes = ring_bytes.max(64).next_power_of_two();
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64;
        l[1] = ring_bytes as u64;
        ((CTL_BYTES + ring_bytes) * g.max_entries as usize, l)
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        PerfEventArray {
            rings: base.add(l[0] as usize),
            ring_bytes: l[1] as usize,
            entries: g.max_entries,
        }
    }

    fn ctl(&self, i: u32) -> &RingCtl {
        // SAFETY: i < entries.
        unsafe { &*(self.rings.add(i as usize * (CTL_BYTES + self.ring_bytes)) as *const RingCtl) }
    }

    fn data(&self, i: u32) -> *mut u8 {
        // SAFETY: i < entries.
        unsafe {
            self.rings
                .add(i as usize * (CTL_BYTES + self.ring_bytes) + CTL_BYTES)
        }
    }

    /// Copy `src` into ring `i` at free-running position `pos`, wrapping.
    fn put(&self, i: u32, pos: u64, src: &[u8]) {
        let data = self.data(i);
        let mask = self.ring_bytes - 1;
        let start = pos as usize & mask;
        let first = src.len().min(self.ring_bytes - start);
        // SAFETY: both pieces lie inside ring i's data area; the producer
        // owns [head, head+len) until it publishes head.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), data.add(start), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), data, src.len() - first);
        }
    }

    fn get(&self, i: u32, pos: u64, dst: &mut [u8]) {
        let data = self.data(i);
        let mask = self.ring_bytes - 1;
        let start = pos as usize & mask;
        let first = dst.len().min(self.ring_bytes - start);
        // SAFETY: as in `put`; the consumer owns [tail, head).
        unsafe {
            std::ptr::copy_nonoverlapping(data.add(start), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, dst.as_mut_ptr().add(first), dst.len() - first);
        }
    }

    /// `bpf_perf_event_output(ctx, map, flags, data, size)`; `parts` are
    /// concatenated (XDP appends packet bytes after the program's data).
    pub(crate) fn output(&self, flags: u64, parts: &[&[u8]], cpu: u32) -> Result<(), MapError> {
        if flags & !BPF_F_INDEX_MASK != 0 {
            return Err(MapError::Invalid("perf event output flags"));
        }
        let index = match flags & BPF_F_INDEX_MASK {
            BPF_F_CURRENT_CPU => cpu,
            i => i as u32,
        };
        if index >= self.entries {
            return Err(MapError::TooBig);
        }
        let size: usize = parts.iter().map(|p| p.len()).sum();
        let total = (REC_HDR + size).div_ceil(8) * 8;
        let c = self.ctl(index);
        let _g = SpinGuard::lock(&c.lock);
        let head = c.head.load(Ordering::Relaxed);
        let tail = c.tail.load(Ordering::Acquire);
        if total > self.ring_bytes || head + total as u64 - tail > self.ring_bytes as u64 {
            c.lost.fetch_add(1, Ordering::Relaxed);
            return Err(MapError::NoSpace);
        }
        let mut hdr = [0u8; REC_HDR];
        hdr[..4].copy_from_slice(&(total as u32).to_ne_bytes());
        hdr[4..].copy_from_slice(&(size as u32).to_ne_bytes());
        self.put(index, head, &hdr);
        let mut at = head + REC_HDR as u64;
        for p in parts {
            self.put(index, at, p);
            at += p.len() as u64;
        }
        c.produced.fetch_add(1, Ordering::Relaxed);
        c.head.store(head + total as u64, Ordering::Release);
        Ok(())
    }

    /// Read everything available on every ring, reporting losses first.
    pub(crate) fn consume(&self, seen_lost: &mut [u64], mut f: impl FnMut(PerfEvent<'_>)) -> usize {
        let mut n = 0;
        let mut buf = Vec::new();
        for i in 0..self.entries {
            let c = self.ctl(i);
            let lost = c.lost.load(Ordering::Relaxed);
            if let Some(seen) = seen_lost.get_mut(i as usize) {
                if lost > *seen {
                    f(PerfEvent::Lost {
                        cpu: i,
                        count: lost - *seen,
                    });
                    *seen = lost;
                }
            }
            let head = c.head.load(Ordering::Acquire);
            let mut tail = c.tail.load(Ordering::Relaxed);
            while tail < head {
                let mut hdr = [0u8; REC_HDR];
                self.get(i, tail, &mut hdr);
                let total = u32::from_ne_bytes(hdr[..4].try_into().unwrap_or([0; 4])) as u64;
                let size = u32::from_ne_bytes(hdr[4..].try_into().unwrap_or([0; 4])) as usize;
                if total < REC_HDR as u64 || tail + total > head || size + REC_HDR > total as usize
                {
                    // Corrupted ring (only a misbehaving writer can do
                    // this): drop what is left rather than loop.
                    tail = head;
                    break;
                }
                buf.resize(size, 0);
                self.get(i, tail + REC_HDR as u64, &mut buf);
                f(PerfEvent::Sample { cpu: i, data: &buf });
                n += 1;
                tail += total;
            }
            c.tail.store(tail, Ordering::Release);
        }
        n
    }

    /// Samples written to every ring so far.
    pub(crate) fn produced(&self) -> u64 {
        (0..self.entries)
            .map(|i| self.ctl(i).produced.load(Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn entries(&self) -> u32 {
        self.entries
    }
}
