//! A perf event ring with the kernel's mmap layout, in a file every
//! process of an instance can map: what a control plane under `bpfjet
//! exec` reads as the `PERF_COUNT_SW_BPF_OUTPUT` event of one CPU (libbpf's
//! `perf_buffer`, bcc's perf reader, bpftrace's `printf`), and what
//! `bpf_perf_event_output` writes into when the PERF_EVENT_ARRAY's element
//! for that CPU is bound to it ([`crate::Map::bind_perf_rings`]).
//!
//! Layout (`struct perf_event_mmap_page`, then the data pages): the
//! consumer reads `data_head` (offset 1024) and writes `data_tail` (1032);
//! records are `struct perf_event_header` + body, 8-byte aligned, wrapping
//! byte-wise around the data area. A sample is `PERF_RECORD_SAMPLE` with
//! `PERF_SAMPLE_RAW`: a u32 size, then the data padded so that the size
//! word and the data end on 8 bytes, as the kernel pads it. A full ring
//! loses the sample; the losses are reported in a `PERF_RECORD_LOST` before
//! the next sample that fits, as the kernel does.
//!
//! The consumer's `sample_type` may ask for more than `PERF_SAMPLE_RAW`
//! ([`SampleFormat`]): `PERF_SAMPLE_TID` (the writer's pid and tid),
//! `TIME` (the event's clock: `CLOCK_MONOTONIC`, the kernel's `local_clock`
//! counterpart, or the attr's `clockid`), `CPU` and `PERIOD` (1), written
//! in the kernel's order before the raw data.
//!
//! bpfjet's own words live in the page's reserved area (offsets 512..552),
//! which consumers never read: a lock for producers (several threads and
//! processes may write one CPU's ring), a futex word bumped on every
//! write, which a consumer's epoll bridge waits on, and the sample format.

use crate::shm::page_size;
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;
const LOCK: usize = 512;
const LOST: usize = 520;
const WAKE_SEQ: usize = 528;
const SAMPLE_TYPE: usize = 536;
const CLOCK: usize = 544;
/// `PERF_RECORD_LOST`, `PERF_RECORD_SAMPLE`.
const RECORD_LOST: u32 = 2;
const RECORD_SAMPLE: u32 = 9;
const HEADER: usize = 8;
const LOST_RECORD: usize = HEADER + 16;

/// `PERF_SAMPLE_TID`, `TIME`, `CPU`, `PERIOD`, `RAW`.
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;

/// What the consumer's event asked each sample to carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleFormat {
    /// `PERF_SAMPLE_RAW` and any of TID, TIME, CPU, PERIOD.
    pub sample_type: u64,
    /// The clock of `PERF_SAMPLE_TIME` (`attr.clockid` with
    /// `use_clockid`; `CLOCK_MONOTONIC` otherwise).
    pub clockid: i32,
}

impl SampleFormat {
    /// The sample types bpfjet writes.
    pub const SUPPORTED: u64 =
        PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW;

    /// Raw data alone (libbpf's `perf_buffer`, bcc, bpftrace).
    pub const RAW: SampleFormat = SampleFormat {
        sample_type: PERF_SAMPLE_RAW,
        clockid: libc::CLOCK_MONOTONIC,
    };
}

/// One mapped ring.
pub struct PerfRing {
    base: *mut u8,
    len: usize,
    data: usize,
}

// SAFETY: the mapping is shared memory accessed through atomics and the
// producers' lock; the pointer is valid until drop.
unsafe impl Send for PerfRing {}
unsafe impl Sync for PerfRing {}

impl std::fmt::Debug for PerfRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfRing")
            .field("data_size", &self.data)
            .finish()
    }
}

impl PerfRing {
    /// Size the ring file to `len` bytes (one control page and a power of
    /// two of data pages, what the consumer maps) and initialise its
    /// control page; the consumer then maps the file itself. A ring
    /// already sized keeps its contents (a second mapping).
    pub fn prepare(file: &File, len: usize, format: SampleFormat) -> io::Result<()> {
        let page = page_size();
        let pages = len / page;
        if !len.is_multiple_of(page) || pages < 2 || !(pages - 1).is_power_of_two() {
            // The kernel's rule for a perf event's mapping.
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let have = file.metadata()?.len() as usize;
        if have >= len {
            return Ok(());
        }
        file.set_len(len as u64)?;
        let ring = PerfRing::map(file, len)?;
        ring.word(SAMPLE_TYPE)
            .store(format.sample_type, Ordering::Relaxed);
        ring.word(CLOCK)
            .store(format.clockid as i64 as u64, Ordering::Relaxed);
        ring.word(DATA_OFFSET).store(page as u64, Ordering::Relaxed);
        ring.word(DATA_SIZE)
            .store((len - page) as u64, Ordering::Release);
        Ok(())
    }

    /// Map the ring file at `path` (prepared by its consumer).
    pub fn open(path: &Path) -> io::Result<PerfRing> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)?;
        let len = file.metadata()?.len() as usize;
        if len < 2 * page_size() {
            return Err(io::Error::other(
                "the perf ring has not been mapped by its consumer yet",
            ));
        }
        PerfRing::map(&file, len)
    }

    fn map(file: &File, len: usize) -> io::Result<PerfRing> {
        // SAFETY: a fresh shared mapping of the whole file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PerfRing {
            base: p.cast(),
            len,
            data: len - page_size(),
        })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: an aligned u64 of the control page, live while mapped.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// Bumped on every record written; consumers futex-wait on it.
    pub fn wake_seq(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 of the control page's reserved area.
        unsafe { &*(self.base.add(WAKE_SEQ) as *const AtomicU32) }
    }

    fn lock(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*(self.base.add(LOCK) as *const AtomicU32) }
    }

    /// Whether a record waits for the consumer.
    pub fn readable(&self) -> bool {
        self.word(DATA_HEAD).load(Ordering::Acquire) != self.word(DATA_TAIL).load(Ordering::Acquire)
    }

    fn put(&self, pos: u64, src: &[u8]) {
        let start = pos as usize & (self.data - 1);
        let first = src.len().min(self.data - start);
        // SAFETY: both pieces lie in the data area; the producer holding
        // the lock owns [head, head + len) until it publishes head.
        unsafe {
            let data = self.base.add(page_size());
            std::ptr::copy_nonoverlapping(src.as_ptr(), data.add(start), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), data, src.len() - first);
        }
    }

    /// Write one sample of the concatenation of `parts`; false when the
    /// ring had no room (the sample is lost and counted).
    pub fn output(&self, parts: &[&[u8]], cpu: u32) -> bool {
        let size: usize = parts.iter().map(|p| p.len()).sum();
        // The fields before the raw data, in the kernel's order.
        let sample_type = self.word(SAMPLE_TYPE).load(Ordering::Relaxed);
        let mut fields = [0u8; 32];
        let mut n = 0;
        let mut field = |bytes: &[u8]| {
            fields[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        };
        if sample_type & PERF_SAMPLE_TID != 0 {
            // SAFETY: getpid and gettid have no preconditions.
            let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
            field(&(pid as u32).to_ne_bytes());
            field(&(tid as u32).to_ne_bytes());
        }
        if sample_type & PERF_SAMPLE_TIME != 0 {
            let clock = self.word(CLOCK).load(Ordering::Relaxed) as i64 as i32;
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec to fill.
            unsafe { libc::clock_gettime(clock, &mut ts) };
            let ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
            field(&ns.to_ne_bytes());
        }
        if sample_type & PERF_SAMPLE_CPU != 0 {
            field(&cpu.to_ne_bytes());
            field(&0u32.to_ne_bytes());
        }
        if sample_type & PERF_SAMPLE_PERIOD != 0 {
            field(&1u64.to_ne_bytes());
        }
        let fields = &fields[..n];
        // u32 size + data, padded to 8 bytes, after the header and fields.
        let raw = (size + 4).div_ceil(8) * 8 - 4;
        let total = HEADER + fields.len() + 4 + raw;
        let _guard = crate::sync::SpinGuard::lock(self.lock());
        let head = self.word(DATA_HEAD).load(Ordering::Relaxed);
        let tail = self.word(DATA_TAIL).load(Ordering::Acquire);
        let free = self.data as u64 - (head - tail);
        let lost = self.word(LOST).load(Ordering::Relaxed);
        let need = total as u64 + if lost > 0 { LOST_RECORD as u64 } else { 0 };
        // The kernel cannot carry a sample of 64 KiB or more: its u16 size.
        if total > u16::MAX as usize || need > free {
            self.word(LOST).store(lost + 1, Ordering::Relaxed);
            return false;
        }
        let mut at = head;
        if lost > 0 {
            let mut rec = [0u8; LOST_RECORD];
            rec[0..4].copy_from_slice(&RECORD_LOST.to_ne_bytes());
            rec[6..8].copy_from_slice(&(LOST_RECORD as u16).to_ne_bytes());
            rec[16..24].copy_from_slice(&lost.to_ne_bytes());
            self.put(at, &rec);
            at += LOST_RECORD as u64;
            self.word(LOST).store(0, Ordering::Relaxed);
        }
        let mut hdr = [0u8; HEADER];
        hdr[0..4].copy_from_slice(&RECORD_SAMPLE.to_ne_bytes());
        hdr[6..8].copy_from_slice(&(total as u16).to_ne_bytes());
        self.put(at, &hdr);
        self.put(at + HEADER as u64, fields);
        let mut p = at + (HEADER + fields.len()) as u64;
        self.put(p, &(raw as u32).to_ne_bytes());
        p += 4;
        for part in parts {
            self.put(p, part);
            p += part.len() as u64;
        }
        // The padding reads as zeros, as the kernel's.
        self.put(p, &[0u8; 8][..raw - size]);
        self.word(DATA_HEAD)
            .store(at + (total as u64), Ordering::Release);
        self.wake_seq().fetch_add(1, Ordering::SeqCst);
        crate::ringbuf::futex::wake_all(self.wake_seq());
        true
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read records as libbpf's perf_buffer does: (type, body) pairs.
    fn drain(ring: &PerfRing) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let head = ring.word(DATA_HEAD).load(Ordering::Acquire);
        let mut tail = ring.word(DATA_TAIL).load(Ordering::Relaxed);
        let data = ring.data;
        let read = |pos: u64, n: usize| -> Vec<u8> {
            (0..n)
                .map(|i| {
                    // SAFETY: inside the data area.
                    unsafe {
                        *ring
                            .base
                            .add(page_size() + ((pos as usize + i) & (data - 1)))
                    }
                })
                .collect()
        };
        while tail < head {
            let h = read(tail, 8);
            let ty = u32::from_ne_bytes(h[0..4].try_into().unwrap());
            let size = u16::from_ne_bytes(h[6..8].try_into().unwrap()) as usize;
            out.push((ty, read(tail + 8, size - 8)));
            tail += size as u64;
        }
        ring.word(DATA_TAIL).store(tail, Ordering::Release);
        out
    }

    #[test]
    fn samples_lost_records_and_wrapping() {
        let page = page_size();
        let dir = std::env::temp_dir().join(format!("bpfjet-perf-ring-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&dir)
            .unwrap();
        assert!(PerfRing::prepare(&file, 4 * page, SampleFormat::RAW).is_err());
        PerfRing::prepare(&file, 2 * page, SampleFormat::RAW).unwrap();
        let ring = PerfRing::open(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        // 5 bytes: size word 4 + 5 = 9, padded to 16: raw size 12.
        assert!(ring.output(&[b"ab", b"cde"], 0));
        let recs = drain(&ring);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].0, RECORD_SAMPLE);
        assert_eq!(u32::from_ne_bytes(recs[0].1[0..4].try_into().unwrap()), 12);
        assert_eq!(&recs[0].1[4..16], b"abcde\0\0\0\0\0\0\0");
        // Fill the ring: the next sample is lost, then reported.
        let big = vec![7u8; 1000];
        let mut written = 0;
        while ring.output(&[&big], 0) {
            written += 1;
        }
        assert!(!ring.output(&[&big], 0));
        assert_eq!(drain(&ring).len(), written);
        assert!(ring.output(&[b"x"], 0));
        let recs = drain(&ring);
        assert_eq!(recs[0].0, RECORD_LOST);
        assert_eq!(u64::from_ne_bytes(recs[0].1[8..16].try_into().unwrap()), 2);
        assert_eq!(recs[1].0, RECORD_SAMPLE);
        // Records crossing the end of the data area read back whole.
        for i in 0..50u8 {
            assert!(ring.output(&[&[i; 100]], 0));
            let recs = drain(&ring);
            assert_eq!(&recs[0].1[4..104], &[i; 100][..]);
        }
    }
}
