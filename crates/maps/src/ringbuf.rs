//! RINGBUF: the kernel's BPF ring buffer layout, in shared memory.
//!
//! Pages after the header: a control page (producer spinlock, pending
//! position), the consumer page (`consumer_pos`), the producer page
//! (`producer_pos`), then `max_entries` bytes of data, mapped twice in a row
//! so that a record wrapping around the end is contiguous. Each record has
//! the kernel's 8-byte header: `len` with BUSY (bit 31) and DISCARD (bit 30)
//! flags, then the record's page offset from the object start. Producers
//! serialise reservations with the spinlock; commits are lock-free; a
//! consumer (any process) reads up to the first BUSY record.

use crate::error::MapError;
use crate::header::{Geometry, LAYOUT_WORDS};
use crate::sync::SpinGuard;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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

#[repr(C)]
struct Ctl {
    lock: AtomicU32,
    _pad: u32,
    /// First record not yet committed; guards reservations against a
    /// consumer position moved too far by a buggy consumer.
    pending_pos: AtomicU64,
}

pub(crate) struct RingBuf {
    base: *mut u8,
    ctl: *const Ctl,
    cons: *const AtomicU64,
    prod: *const AtomicU64,
    data: *mut u8,
    mask: u64,
    page: usize,
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
            base,
            ctl: base.add(l[0] as usize) as *const Ctl,
            cons: base.add(l[1] as usize) as *const AtomicU64,
            prod: base.add(l[2] as usize) as *const AtomicU64,
            data: base.add(l[3] as usize),
            mask: g.max_entries as u64 - 1,
            page: g.page,
        }
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

    /// `bpf_ringbuf_reserve`: NULL (None) when flags are set, the record is
    /// too large, or the ring has no room.
    pub(crate) fn reserve(&self, size: u64, flags: u64) -> Option<*mut u8> {
        if flags != 0 || size > RINGBUF_MAX_RECORD_SZ {
            return None;
        }
        let len = (size + BPF_RINGBUF_HDR_SZ as u64).div_ceil(8) * 8;
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
            pend +=
                ((l & !BPF_RINGBUF_DISCARD_BIT) as u64 + BPF_RINGBUF_HDR_SZ as u64).div_ceil(8) * 8;
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
            let pg_off = ((hdr as usize - self.base as usize) / self.page) as u32;
            (*(hdr.add(4) as *const AtomicU32)).store(pg_off, Ordering::Relaxed);
            (*(hdr as *const AtomicU32))
                .store(size as u32 | BPF_RINGBUF_BUSY_BIT, Ordering::Relaxed);
        }
        self.prod().store(new_prod, Ordering::Release);
        // SAFETY: as above.
        Some(unsafe { self.data.add(off + BPF_RINGBUF_HDR_SZ as usize) })
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
            commit(p, false);
        }
        Ok(())
    }

    /// `bpf_ringbuf_query`.
    pub(crate) fn query(&self, flags: u64) -> u64 {
        let cons = self.cons().load(Ordering::Acquire);
        let prod = self.prod().load(Ordering::Acquire);
        match flags {
            BPF_RB_AVAIL_DATA => prod.wrapping_sub(cons),
            BPF_RB_RING_SIZE => self.mask + 1,
            BPF_RB_CONS_POS => cons,
            BPF_RB_PROD_POS => prod,
            _ => 0,
        }
    }

    /// Consume every committed record up to the first busy one.
    pub(crate) fn consume(&self, mut f: impl FnMut(&[u8])) -> usize {
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
            cons += (size as u64 + BPF_RINGBUF_HDR_SZ as u64).div_ceil(8) * 8;
            self.cons().store(cons, Ordering::Release);
        }
        n
    }
}

/// `bpf_ringbuf_submit` / `bpf_ringbuf_discard`: needs only the record
/// pointer, like the kernel helpers (which find the ring from the page
/// offset in the header; bpfjet has no wakeups, so it needs nothing else).
///
/// # Safety
/// `sample` must be a pointer returned by a reservation that has not been
/// committed yet.
pub unsafe fn commit(sample: *mut u8, discard: bool) {
    let hdr = &*(sample.sub(BPF_RINGBUF_HDR_SZ as usize) as *const AtomicU32);
    let cur = hdr.load(Ordering::Relaxed);
    let mut new = cur & !BPF_RINGBUF_BUSY_BIT;
    if discard {
        new |= BPF_RINGBUF_DISCARD_BIT;
    }
    hdr.swap(new, Ordering::AcqRel);
}
