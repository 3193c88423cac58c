//! CPU slots for tracing runs.
//!
//! The kernel runs a tracing program with migration disabled, and per-CPU
//! maps rely on it: no two programs touch the same CPU's value at once, so
//! a plain read-modify-write of a per-CPU counter is race-free. In user
//! space any number of threads of the traced process may hit a probe at
//! once and a thread may be preempted mid-run, so "the CPU we run on"
//! (`sched_getcpu()`) alone would let two runs share a value.
//!
//! A run therefore *leases* a slot: it takes slot `sched_getcpu()` if free
//! (one compare-and-swap on that slot's own cache line), else any free
//! slot, else spins (yielding) until one frees — at most `ncpus` runs
//! proceed at once, like the kernel's at most one program per CPU. While
//! leased, the slot is the run's `bpf_get_smp_processor_id()` and its
//! per-CPU map index. No global lock is taken; with no more concurrently
//! running threads than slots, the preferred slot is nearly always free.
//!
//! The slots are one table for every process that runs the object's
//! programs on its maps, as the kernel's CPUs are: a shared mapping that
//! forked children inherit, and for a traced tree a shared-memory object
//! of its instance (`/dev/shm/bpfjet.<instance>.cpuslots`) that the
//! programs the tree executes open. A slot holds its leaser's thread and
//! process ids; a leaser that died holding one (a process killed during a
//! run) is found when the table is full and its slot freed.

use std::sync::atomic::{AtomicU64, Ordering};

/// One slot per cache line: 0 when free, else the leasing thread as
/// `tgid << 32 | tid`.
#[repr(C, align(64))]
struct Slot(AtomicU64);

pub(crate) struct CpuSlots {
    slots: *const Slot,
    n: usize,
}

// SAFETY: the table is shared memory used only through atomics; the
// mapping lives as long as the value.
unsafe impl Send for CpuSlots {}
unsafe impl Sync for CpuSlots {}

impl Drop for CpuSlots {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of this length.
        unsafe { libc::munmap(self.slots as *mut libc::c_void, self.len()) };
    }
}

/// A leased slot; released on drop.
pub(crate) struct Lease<'a> {
    slots: &'a CpuSlots,
    pub cpu: u32,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.slots
            .slot(self.cpu as usize)
            .store(0, Ordering::Release);
    }
}

fn shm_name(instance: &str) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(format!("/bpfjet.{instance}.cpuslots"))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

impl CpuSlots {
    /// A table of `ncpus` slots shared with forked children only.
    pub(crate) fn new(ncpus: usize) -> CpuSlots {
        let n = ncpus.max(1);
        Self::map(-1, n).expect("mapping the CPU slot table")
    }

    /// The table of instance `instance`: created (`create`) by the
    /// process that publishes it, else opened.
    pub(crate) fn named(instance: &str, ncpus: usize, create: bool) -> std::io::Result<CpuSlots> {
        let n = ncpus.max(1);
        let name = shm_name(instance)?;
        let flags = if create {
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC
        } else {
            libc::O_RDWR | libc::O_CLOEXEC
        };
        // SAFETY: a NUL-terminated name; the fd is closed on every path.
        unsafe {
            let fd = libc::shm_open(name.as_ptr(), flags, 0o600);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let len = n * std::mem::size_of::<Slot>();
            if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            let mut st: libc::stat = std::mem::zeroed();
            if !create && (libc::fstat(fd, &mut st) != 0 || (st.st_size as usize) < len) {
                libc::close(fd);
                return Err(std::io::Error::other(
                    "the instance's CPU slot table is smaller than this object's",
                ));
            }
            let table = Self::map(fd, n);
            libc::close(fd);
            table
        }
    }

    /// The table of instance `instance`, created by whichever process
    /// comes first: the processes running a control plane's programs
    /// (`bpfjet trace --instance`) start in any order, none of them owns
    /// it. A table shorter than this object's is grown (new slots free).
    pub(crate) fn shared(instance: &str, ncpus: usize) -> std::io::Result<CpuSlots> {
        let n = ncpus.max(1);
        let name = shm_name(instance)?;
        // SAFETY: a NUL-terminated name; the fd is closed on every path.
        unsafe {
            let fd = libc::shm_open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let len = n * std::mem::size_of::<Slot>();
            let mut st: libc::stat = std::mem::zeroed();
            // Growing only: a concurrent creator's ftruncate to the same
            // length changes nothing, and no one shrinks a table in use.
            if libc::fstat(fd, &mut st) != 0
                || ((st.st_size as usize) < len && libc::ftruncate(fd, len as libc::off_t) != 0)
            {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            let table = Self::map(fd, n);
            libc::close(fd);
            table
        }
    }

    fn map(fd: i32, n: usize) -> std::io::Result<CpuSlots> {
        let len = n * std::mem::size_of::<Slot>();
        let flags = if fd < 0 {
            libc::MAP_SHARED | libc::MAP_ANONYMOUS
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: a fresh mapping; zero-filled (free slots) when new.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(CpuSlots {
            slots: p as *const Slot,
            n,
        })
    }

    fn len(&self) -> usize {
        self.n * std::mem::size_of::<Slot>()
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.n);
        // SAFETY: `i` is below the table's length; the mapping lives as
        // long as `self`.
        unsafe { &(*self.slots.add(i)).0 }
    }

    fn try_take(&self, i: usize, mine: u64) -> bool {
        let slot = self.slot(i);
        slot.load(Ordering::Relaxed) == 0
            && slot
                .compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Frees the slots whose leasers no longer exist.
    #[cold]
    fn free_dead_holders(&self) {
        for i in 0..self.n {
            let held = self.slot(i).load(Ordering::Relaxed);
            if held == 0 {
                continue;
            }
            let (tgid, tid) = ((held >> 32) as i32, held as u32 as i32);
            // SAFETY: signal 0 only checks that the thread exists.
            let r = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, 0) };
            if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                let _ = self
                    .slot(i)
                    .compare_exchange(held, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn lease(&self) -> Lease<'_> {
        let n = self.n;
        // SAFETY: sched_getcpu has no preconditions; -1 on failure.
        let here = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0);
        // No division on the way (a `div` per try was a visible share of
        // a run's set-up): the CPU is nearly always below the slot count.
        let preferred = if here < n { here } else { here % n };
        let (tgid, tid) = super::current::tgid_tid();
        let mine = (u64::from(tgid) << 32) | u64::from(tid);
        let mut spins = 0u32;
        loop {
            for k in 0..n {
                let mut i = preferred + k;
                if i >= n {
                    i -= n;
                }
                if self.try_take(i, mine) {
                    return Lease {
                        slots: self,
                        cpu: i as u32,
                    };
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                if spins.is_multiple_of(1024) {
                    self.free_dead_holders();
                }
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_exclusive_and_released() {
        let slots = CpuSlots::new(2);
        let a = slots.lease();
        let b = slots.lease();
        assert_ne!(a.cpu, b.cpu);
        let cpu = a.cpu;
        drop(a);
        let c = slots.lease();
        assert_eq!(c.cpu, cpu);
    }

    #[test]
    fn a_slot_held_by_a_thread_that_is_gone_is_freed() {
        let slots = CpuSlots::new(1);
        // A leaser that no longer exists: a thread id no process has.
        let gone = std::thread::spawn(|| unsafe { libc::gettid() } as u64)
            .join()
            .unwrap();
        let tgid = u64::from(std::process::id());
        slots.slot(0).store(tgid << 32 | gone, Ordering::Relaxed);
        let lease = slots.lease();
        assert_eq!(lease.cpu, 0);
    }

    #[test]
    fn a_forked_child_waits_for_its_parents_lease() {
        let slots = CpuSlots::new(1);
        let held = slots.lease();
        // SAFETY: the child only leases, writes one byte and exits.
        let (r, w) = {
            let mut fds = [0; 2];
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            (fds[0], fds[1])
        };
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            super::super::current::forked_child();
            let _l = slots.lease();
            unsafe {
                libc::write(w, b"x".as_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        // The child cannot have its lease while the parent holds the slot.
        let mut fds = libc::pollfd {
            fd: r,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(unsafe { libc::poll(&mut fds, 1, 200) }, 0, "leased twice");
        drop(held);
        assert_eq!(
            unsafe { libc::poll(&mut fds, 1, 10_000) },
            1,
            "never leased"
        );
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0);
    }
}
