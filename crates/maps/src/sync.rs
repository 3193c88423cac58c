//! Synchronisation primitives that live inside shared memory.
//!
//! Everything here is a plain atomic word so that it works across processes
//! without process-shared initialisation (unlike pthread mutexes): a zeroed
//! page is a valid unlocked state.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Spin until the lock word goes 0 → 1. Yields after a while so that a
/// preempted holder on a 2-core machine gets to run.
#[inline]
pub(crate) fn spin_lock(word: &AtomicU32) {
    let mut spins = 0u32;
    loop {
        if word
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        while word.load(Ordering::Relaxed) != 0 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(128) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[inline]
pub(crate) fn spin_unlock(word: &AtomicU32) {
    word.store(0, Ordering::Release);
}

/// RAII guard over a lock word in shared memory.
pub(crate) struct SpinGuard<'a>(&'a AtomicU32);

impl<'a> SpinGuard<'a> {
    #[inline]
    pub(crate) fn lock(word: &'a AtomicU32) -> Self {
        spin_lock(word);
        SpinGuard(word)
    }
}

impl Drop for SpinGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        spin_unlock(self.0);
    }
}

/// `bpf_spin_lock(lock)` for the runtime: the 4-byte `struct bpf_spin_lock`
/// inside a map value uses the same protocol as the control plane's
/// `BPF_F_LOCK` updates, so both exclude each other.
///
/// # Safety
/// `lock` must point to a live, 4-byte aligned `bpf_spin_lock` in map memory.
pub unsafe fn bpf_spin_lock(lock: *mut u8) {
    spin_lock(&*(lock as *const AtomicU32));
}

/// `bpf_spin_unlock(lock)`.
///
/// # Safety
/// As for [`bpf_spin_lock`], and the caller must hold the lock.
pub unsafe fn bpf_spin_unlock(lock: *mut u8) {
    spin_unlock(&*(lock as *const AtomicU32));
}

/// Copy `src` into shared memory at `dst`. Aligned 8-byte words are stored
/// with single 64-bit stores so that a concurrent reader never sees a torn
/// word (the kernel gives the same guarantee for arrays); values longer
/// than a word may tear between words, as in the kernel.
///
/// # Safety
/// `dst..dst+src.len()` must be valid map memory.
#[inline]
pub(crate) unsafe fn write_shared(dst: *mut u8, src: &[u8]) {
    let mut i = 0;
    if (dst as usize).is_multiple_of(8) {
        while i + 8 <= src.len() {
            let w = u64::from_ne_bytes(src[i..i + 8].try_into().unwrap_or([0; 8]));
            (*(dst.add(i) as *const AtomicU64)).store(w, Ordering::Relaxed);
            i += 8;
        }
    }
    while i < src.len() {
        (*(dst.add(i) as *const AtomicU8)).store(src[i], Ordering::Relaxed);
        i += 1;
    }
}

/// Copy from shared memory at `src` into `dst`, word-wise like [`write_shared`].
///
/// # Safety
/// `src..src+dst.len()` must be valid map memory.
#[inline]
pub(crate) unsafe fn read_shared(src: *const u8, dst: &mut [u8]) {
    let mut i = 0;
    if (src as usize).is_multiple_of(8) {
        while i + 8 <= dst.len() {
            let w = (*(src.add(i) as *const AtomicU64)).load(Ordering::Relaxed);
            dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
            i += 8;
        }
    }
    while i < dst.len() {
        dst[i] = (*(src.add(i) as *const AtomicU8)).load(Ordering::Relaxed);
        i += 1;
    }
}

/// Zero `len` bytes of shared memory.
///
/// # Safety
/// `dst..dst+len` must be valid map memory.
pub(crate) unsafe fn zero_shared(dst: *mut u8, len: usize) {
    let mut i = 0;
    if (dst as usize).is_multiple_of(8) {
        while i + 8 <= len {
            (*(dst.add(i) as *const AtomicU64)).store(0, Ordering::Relaxed);
            i += 8;
        }
    }
    while i < len {
        (*(dst.add(i) as *const AtomicU8)).store(0, Ordering::Relaxed);
        i += 1;
    }
}

/// Where a value's `struct bpf_spin_lock` sits, if it has one. Value copies
/// skip those 4 bytes (the kernel never copies a lock in or out of a map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ValueLock(pub Option<u32>);

impl ValueLock {
    /// Copy a user value into map memory, leaving the lock word alone; with
    /// `locked`, do it while holding the value's lock (`BPF_F_LOCK`).
    ///
    /// # Safety
    /// `dst` must point to a live value of `src.len()` bytes.
    pub(crate) unsafe fn store(self, dst: *mut u8, src: &[u8], locked: bool) {
        match self.0 {
            None => write_shared(dst, src),
            Some(off) => {
                let off = off as usize;
                let lock = &*(dst.add(off) as *const AtomicU32);
                if locked {
                    spin_lock(lock);
                }
                write_shared(dst, &src[..off]);
                write_shared(dst.add(off + 4), &src[off + 4..]);
                if locked {
                    spin_unlock(lock);
                }
            }
        }
    }

    /// [`ValueLock::store`] that also leaves the byte ranges `keep`
    /// (`(offset, size)`) alone: a hash map's `BPF_F_LOCK` update writes in
    /// place with the kernel's `copy_map_value_locked`, which copies around
    /// the value's special fields, so a timer, kptr or graph root there
    /// survives the update.
    ///
    /// # Safety
    /// `dst` must point to a live value of `src.len()` bytes.
    pub(crate) unsafe fn store_keeping(
        self,
        dst: *mut u8,
        src: &[u8],
        keep: &[(u32, u32)],
        locked: bool,
    ) {
        if keep.is_empty() {
            return self.store(dst, src, locked);
        }
        let lock = self
            .0
            .map(|off| &*(dst.add(off as usize) as *const AtomicU32));
        if locked {
            if let Some(l) = lock {
                spin_lock(l);
            }
        }
        let mut skip: Vec<(usize, usize)> = keep
            .iter()
            .map(|&(off, len)| (off as usize, off as usize + len as usize))
            .chain(self.0.map(|off| (off as usize, off as usize + 4)))
            .collect();
        skip.sort_unstable();
        let mut at = 0;
        for (start, end) in skip {
            let start = start.min(src.len());
            if start > at {
                write_shared(dst.add(at), &src[at..start]);
            }
            at = at.max(end.min(src.len()));
        }
        if at < src.len() {
            write_shared(dst.add(at), &src[at..]);
        }
        if locked {
            if let Some(l) = lock {
                spin_unlock(l);
            }
        }
    }

    /// Copy a value out of map memory; the lock word reads as zero.
    ///
    /// # Safety
    /// `src` must point to a live value of `dst.len()` bytes.
    pub(crate) unsafe fn load(self, src: *const u8, dst: &mut [u8], locked: bool) {
        match self.0 {
            None => read_shared(src, dst),
            Some(off) => {
                let off = off as usize;
                let lock = &*(src.add(off) as *const AtomicU32);
                if locked {
                    spin_lock(lock);
                }
                read_shared(src, dst);
                if locked {
                    spin_unlock(lock);
                }
                dst[off..off + 4].fill(0);
            }
        }
    }
}
