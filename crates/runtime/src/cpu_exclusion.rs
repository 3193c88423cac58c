//! One runner per CPU slot at a time, between the data plane and the timer
//! service.
//!
//! The kernel never runs two BPF programs on one CPU at once, and per-CPU
//! map values rely on it: a program's plain read-modify-write of its CPU's
//! value cannot lose an update. A `bpf_timer` callback runs on the CPU that
//! armed the timer (in softirq, between that CPU's program runs), so it
//! shares the per-CPU values of the programs that run there. bpfjet runs
//! callbacks on its timer thread with the arming run's CPU slot; without
//! exclusion a callback could run while a worker, a test run or a
//! benchmark uses the same slot, and their per-CPU updates could race.
//!
//! A runner of a program whose maps hold timers therefore *holds* its CPU
//! slot: a data-plane worker for each batch (one uncontended
//! compare-and-swap per batch), a test run or a benchmark for its call; the
//! timer service holds the slot for each callback and, finding it busy,
//! puts the expiry back and retries shortly, so a program waiting in
//! `bpf_timer_cancel` for a callback never waits on its own slot. Programs
//! without timers take no hold: nothing else runs on their slots.
//!
//! The table is per process, as the timers are (timers.rs). Holds nest on
//! one thread (a hold of a slot the thread already holds is a no-op).

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Slots are folded onto this many locks: two slots sharing one only wait
/// for each other, never run together by mistake.
const LOCKS: usize = 256;

/// A ticket lock: holders are served in the order they came, so neither a
/// worker taking its slot batch after batch nor a timer re-arming itself
/// with no delay can starve the other.
#[repr(align(64))]
struct Lock {
    next: AtomicU32,
    serving: AtomicU32,
}

static HELD: [Lock; LOCKS] = [const {
    Lock {
        next: AtomicU32::new(0),
        serving: AtomicU32::new(0),
    }
}; LOCKS];

thread_local! {
    /// The lock this thread holds, if any (index + 1; 0 for none).
    static MINE: Cell<usize> = const { Cell::new(0) };
}

/// A held CPU slot, released on drop.
#[must_use = "the slot is released when the hold is dropped"]
pub struct CpuHold {
    /// The lock taken, or `None` for a nested (no-op) hold.
    taken: Option<usize>,
    /// What `MINE` was before (a thread holding two slots' locks).
    prev: usize,
}

impl Drop for CpuHold {
    fn drop(&mut self) {
        if let Some(i) = self.taken {
            MINE.with(|m| m.set(self.prev));
            let lock = &HELD[i];
            // Only the holder moves `serving`.
            let now = lock.serving.load(Ordering::Relaxed);
            lock.serving.store(now.wrapping_add(1), Ordering::Release);
        }
    }
}

fn index(cpu: u32) -> usize {
    cpu as usize % LOCKS
}

fn held(i: usize, prev: usize) -> CpuHold {
    MINE.with(|m| m.set(i + 1));
    CpuHold {
        taken: Some(i),
        prev,
    }
}

/// Hold `cpu`'s slot, waiting (in arrival order) while others hold it.
pub fn hold(cpu: u32) -> CpuHold {
    let i = index(cpu);
    let prev = MINE.with(Cell::get);
    if prev == i + 1 {
        return CpuHold { taken: None, prev };
    }
    let lock = &HELD[i];
    let ticket = lock.next.fetch_add(1, Ordering::Relaxed);
    let mut spins = 0u32;
    while lock.serving.load(Ordering::Acquire) != ticket {
        spins += 1;
        if spins < 128 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    held(i, prev)
}

/// Hold `cpu`'s slot if nobody holds it or waits for it.
pub fn try_hold(cpu: u32) -> Option<CpuHold> {
    let i = index(cpu);
    let prev = MINE.with(Cell::get);
    if prev == i + 1 {
        return Some(CpuHold { taken: None, prev });
    }
    let lock = &HELD[i];
    let serving = lock.serving.load(Ordering::Acquire);
    lock.next
        .compare_exchange(
            serving,
            serving.wrapping_add(1),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok()
        .then(|| held(i, prev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn holds_exclude_and_nest() {
        let a = hold(3);
        let nested = hold(3);
        drop(nested);
        // Still held by this thread: another thread cannot take it.
        let other = std::thread::spawn(|| try_hold(3).is_some()).join().unwrap();
        assert!(!other, "slot 3 is held");
        drop(a);
        let other = std::thread::spawn(|| try_hold(3).is_some()).join().unwrap();
        assert!(other, "slot 3 is free again");
    }

    #[test]
    fn a_plain_read_modify_write_under_holds_loses_nothing() {
        let counter = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let _h = hold(7);
                        // Not an atomic add: a load and a store, as a
                        // program's per-CPU update.
                        let v = c.load(Ordering::Relaxed);
                        c.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 80_000);
    }
}
