//! QUEUE (FIFO) and STACK (LIFO): a ring of `max_entries + 1` value slots
//! under one spinlock, as in the kernel. Pushing with `BPF_EXIST` onto a
//! full map drops the oldest element to make room.

use crate::error::MapError;
use crate::header::{round_up, Geometry, LAYOUT_WORDS};
use crate::spec::{update, MapType};
use crate::sync::{read_shared, write_shared, SpinGuard};
use std::sync::atomic::{AtomicU32, Ordering};

#[repr(C)]
struct Ctl {
    lock: AtomicU32,
    /// Next slot to push into.
    head: AtomicU32,
    /// Oldest element.
    tail: AtomicU32,
}

pub(crate) struct QueueStack {
    ctl: *const Ctl,
    slots: *mut u8,
    stride: usize,
    size: u32,
    value_size: usize,
    lifo: bool,
}

impl QueueStack {
    pub(crate) fn layout(g: &Geometry, data_off: usize) -> (usize, [u64; LAYOUT_WORDS]) {
        let stride = g.value_stride();
        let slots = round_up(data_off + 64, 64);
        let mut l = [0u64; LAYOUT_WORDS];
        l[0] = data_off as u64;
        l[1] = slots as u64;
        l[2] = stride as u64;
        (slots - data_off + stride * (g.max_entries as usize + 1), l)
    }

    /// # Safety
    /// `base` must be the start of a mapped map object with this layout.
    pub(crate) unsafe fn attach(base: *mut u8, g: &Geometry, l: &[u64; LAYOUT_WORDS]) -> Self {
        QueueStack {
            ctl: base.add(l[0] as usize) as *const Ctl,
            slots: base.add(l[1] as usize),
            stride: l[2] as usize,
            size: g.max_entries + 1,
            value_size: g.value_size as usize,
            lifo: g.map_type == MapType::Stack,
        }
    }

    fn ctl(&self) -> &Ctl {
        // SAFETY: the control block is inside the mapping.
        unsafe { &*self.ctl }
    }

    fn slot(&self, i: u32) -> *mut u8 {
        // SAFETY: i < size.
        unsafe { self.slots.add(i as usize * self.stride) }
    }

    pub(crate) fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags & update::NOEXIST != 0 || flags > update::EXIST {
            return Err(MapError::Invalid("push flags"));
        }
        if value.len() != self.value_size {
            return Err(MapError::Invalid("value size mismatch"));
        }
        let c = self.ctl();
        let _g = SpinGuard::lock(&c.lock);
        let head = c.head.load(Ordering::Relaxed);
        let tail = c.tail.load(Ordering::Relaxed);
        if (head + 1) % self.size == tail {
            if flags & update::EXIST == 0 {
                return Err(MapError::TooBig);
            }
            // Full and asked to overwrite: forget the oldest element.
            c.tail.store((tail + 1) % self.size, Ordering::Relaxed);
        }
        // SAFETY: head < size.
        unsafe { write_shared(self.slot(head), value) };
        c.head.store((head + 1) % self.size, Ordering::Relaxed);
        Ok(())
    }

    /// Copy the next element into `out`; remove it unless `peek`.
    pub(crate) fn take(&self, out: &mut [u8], peek: bool) -> Result<(), MapError> {
        if out.len() < self.value_size {
            return Err(MapError::Invalid("buffer smaller than value"));
        }
        let c = self.ctl();
        let _g = SpinGuard::lock(&c.lock);
        let head = c.head.load(Ordering::Relaxed);
        let tail = c.tail.load(Ordering::Relaxed);
        if head == tail {
            return Err(MapError::NotFound);
        }
        let at = if self.lifo {
            (head + self.size - 1) % self.size
        } else {
            tail
        };
        // SAFETY: at < size.
        unsafe { read_shared(self.slot(at), &mut out[..self.value_size]) };
        if !peek {
            if self.lifo {
                c.head.store(at, Ordering::Relaxed);
            } else {
                c.tail.store((tail + 1) % self.size, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Elements from the next to be popped to the last (for dumps).
    pub(crate) fn snapshot(&self) -> Vec<Vec<u8>> {
        let c = self.ctl();
        let _g = SpinGuard::lock(&c.lock);
        let head = c.head.load(Ordering::Relaxed);
        let tail = c.tail.load(Ordering::Relaxed);
        let n = (head + self.size - tail) % self.size;
        let mut out = Vec::with_capacity(n as usize);
        for k in 0..n {
            let i = if self.lifo {
                (head + self.size - 1 - k) % self.size
            } else {
                (tail + k) % self.size
            };
            let mut v = vec![0; self.value_size];
            // SAFETY: i < size.
            unsafe { read_shared(self.slot(i), &mut v) };
            out.push(v);
        }
        out
    }
}
