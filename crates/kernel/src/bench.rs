//! The kernel side of `bpfjet bench`: timed `BPF_PROG_TEST_RUN` runs and the
//! fresh-packet wrapper.
//!
//! With `repeat`, the kernel runs a program again and again on one buffer
//! without resetting it, so a program that rewrites the packet measures a
//! different path from the second run on. [`FreshWrapper`] loads
//! `examples/bench/fresh_wrapper.c`: an XDP program that, on every run,
//! moves the packet's head and tail back, copies the original bytes over it
//! and tail-calls the program under test (slot 0 of its PROG_ARRAY). The
//! harness measures the wrapper with an empty target and subtracts that.
//!
//! Times are the kernel's own: the mean per run it measures around its run
//! loop. Wall-clock time around the syscall is no use for `repeat > 1`: the
//! kernel then swaps the program into the XDP dispatcher and back (text
//! patching, an RCU grace period), tens of milliseconds per call whatever
//! the run count.

use crate::error::{Errno, KernelError};
use crate::object::KernelObject;
use crate::test_run::{test_run_fd, TestRunOptions, TestRunResult};
use std::os::fd::RawFd;
use std::path::Path;
use std::time::Instant;

/// The largest packet the wrapper can restore (its map value's byte array).
pub const FRESH_MAX_PACKET: usize = 3840;
/// Bytes before the packet in the wrapper's map value: length, padding and
/// the recorded head position (0 = not recorded yet).
const ORIGINAL_HEADER: usize = 16;
const WRAPPER_PROGRAM: &str = "fresh_wrapper";

/// A timed test run.
#[derive(Clone, Debug)]
pub struct TimedRun {
    /// Nanoseconds per run: the kernel's figure (a mean it truncates to
    /// whole nanoseconds) plus 0.5, the middle of its 1-ns bucket.
    pub ns_per_run: f64,
    /// Wall-clock nanoseconds of the whole call per run (syscall, frame
    /// set-up and dispatcher update included).
    pub wall_ns_per_run: f64,
    pub result: TestRunResult,
}

/// Run `prog_fd` `iters` times on `data` (the kernel's repeated buffer) and
/// time it.
pub fn time_test_run(
    prog_fd: RawFd,
    data: &[u8],
    iters: u32,
    cpu: Option<usize>,
) -> Result<TimedRun, KernelError> {
    let opts = TestRunOptions {
        repeat: iters.max(1),
        cpu,
        xdp_context: None,
    };
    let start = Instant::now();
    let result = test_run_fd(prog_fd, data, &opts)?;
    let wall = start.elapsed().as_nanos() as f64;
    Ok(TimedRun {
        ns_per_run: f64::from(result.duration_ns) + 0.5,
        wall_ns_per_run: wall / f64::from(iters.max(1)),
        result,
    })
}

/// The fresh-packet wrapper, loaded into the kernel.
pub struct FreshWrapper {
    object: KernelObject,
    prog_fd: RawFd,
    original_fd: RawFd,
    target_fd: RawFd,
}

impl std::fmt::Debug for FreshWrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshWrapper")
            .field("object", &self.object.path())
            .finish_non_exhaustive()
    }
}

fn update(fd: RawFd, map: &str, key: &[u8], value: &[u8]) -> Result<(), KernelError> {
    // SAFETY: key and value are live buffers of the map's key and value
    // sizes (checked by the callers against the wrapper's definitions).
    let ret = unsafe {
        libbpf_sys::bpf_map_update_elem(fd, key.as_ptr().cast(), value.as_ptr().cast(), 0)
    };
    if ret < 0 {
        return Err(KernelError::MapAccess {
            map: map.to_string(),
            what: "update",
            errno: Errno::from_ret(ret),
        });
    }
    Ok(())
}

impl FreshWrapper {
    /// Load the wrapper object (`build/examples/bench/fresh_wrapper.o`).
    pub fn open(path: impl AsRef<Path>) -> Result<FreshWrapper, KernelError> {
        let object = KernelObject::open(path)?;
        let prog_fd = object.prog_fd(WRAPPER_PROGRAM)?;
        let original_fd = object.map("original")?.fd;
        let target_fd = object.map("target")?.fd;
        Ok(FreshWrapper {
            object,
            prog_fd,
            original_fd,
            target_fd,
        })
    }

    /// The wrapper program: run this to run the target on fresh packets.
    pub fn prog_fd(&self) -> RawFd {
        self.prog_fd
    }

    /// Make `prog_fd` (an XDP program) the program the wrapper tail-calls.
    pub fn set_target(&self, prog_fd: RawFd) -> Result<(), KernelError> {
        update(
            self.target_fd,
            "target",
            &0u32.to_ne_bytes(),
            &(prog_fd as u32).to_ne_bytes(),
        )
    }

    /// Store the original packet; the next test run records where its
    /// frame puts it (so call this before every timed run).
    pub fn set_packet(&self, packet: &[u8]) -> Result<(), KernelError> {
        if packet.is_empty() || packet.len() > FRESH_MAX_PACKET {
            return Err(KernelError::BadEntry {
                map: "original".into(),
                entry: 0,
                why: format!(
                    "the fresh-packet wrapper restores packets of 1..={FRESH_MAX_PACKET} bytes, \
                     not {}",
                    packet.len()
                ),
            });
        }
        let mut value = vec![0u8; ORIGINAL_HEADER + FRESH_MAX_PACKET];
        value[..4].copy_from_slice(&(packet.len() as u32).to_ne_bytes());
        value[ORIGINAL_HEADER..ORIGINAL_HEADER + packet.len()].copy_from_slice(packet);
        update(self.original_fd, "original", &0u32.to_ne_bytes(), &value)
    }

    /// `iters` runs of the target, each on the original packet, timed.
    pub fn time(
        &self,
        packet: &[u8],
        iters: u32,
        cpu: Option<usize>,
    ) -> Result<TimedRun, KernelError> {
        self.set_packet(packet)?;
        time_test_run(self.prog_fd, packet, iters, cpu)
    }
}

/// CPU time of the calling thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`):
/// for timing userspace engines comparably to the kernel's test-run timer,
/// which pauses while the thread is rescheduled.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
