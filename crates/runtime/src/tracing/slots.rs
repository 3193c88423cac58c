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

use std::sync::atomic::{AtomicU64, Ordering};

/// One slot per cache line: 0 when free, else the fork generation of the
/// process that leased it, plus one. After a `fork` the child is a new
/// generation, so slots held by parent threads that do not exist in the
/// child count as free there instead of blocking it forever.
#[repr(align(64))]
struct Slot(AtomicU64);

pub(crate) struct CpuSlots {
    slots: Box<[Slot]>,
}

/// A leased slot; released on drop.
pub(crate) struct Lease<'a> {
    slots: &'a CpuSlots,
    pub cpu: u32,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.slots.slots[self.cpu as usize]
            .0
            .store(0, Ordering::Release);
    }
}

impl CpuSlots {
    pub(crate) fn new(ncpus: usize) -> CpuSlots {
        CpuSlots {
            slots: (0..ncpus.max(1)).map(|_| Slot(AtomicU64::new(0))).collect(),
        }
    }

    fn try_take(&self, i: usize, mine: u64) -> bool {
        let slot = &self.slots[i].0;
        let held = slot.load(Ordering::Relaxed);
        // Held in this process: busy. Free, or held by a thread of a parent
        // process (an older generation): take it.
        if held == mine {
            return false;
        }
        slot.compare_exchange(held, mine, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    pub(crate) fn lease(&self) -> Lease<'_> {
        let n = self.slots.len();
        // SAFETY: sched_getcpu has no preconditions; -1 on failure.
        let here = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0);
        // No division on the way (a `div` per try was a visible share of
        // a run's set-up): the CPU is nearly always below the slot count.
        let preferred = if here < n { here } else { here % n };
        let mine = super::current::fork_generation() + 1;
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
    fn slots_held_before_a_fork_are_free_after_it() {
        let slots = CpuSlots::new(1);
        // A slot leased by a parent generation, as a thread that does not
        // exist in a forked child leaves it.
        let parent = super::super::current::fork_generation();
        slots.slots[0]
            .0
            .store(parent + 1 + 1_000, Ordering::Relaxed);
        let lease = slots.lease();
        assert_eq!(lease.cpu, 0);
    }
}
