//! Counters a running pool publishes for status lines and summaries.
//!
//! Each worker owns one [`WorkerCounters`] on its own cache lines and
//! stores its running totals there once per batch (plain stores of values
//! only it writes), so readers never contend with the data plane.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::OutputRoute;

/// One worker's totals. Written only by its worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    actions: [AtomicU64; 5],
    /// Packets the output could not take (a full TX ring, a failed write).
    drops: AtomicU64,
    /// Program runs that faulted (counted as ABORTED too).
    faults: AtomicU64,
    batches: AtomicU64,
    /// CPU time of the worker thread, refreshed now and then.
    cpu_ns: AtomicU64,
}

/// Redirected packets per target, counted per packet as the run of the
/// last target, folded into the table when the target changes: a hash
/// per redirected packet cost a fifth of a plain redirect's time.
#[derive(Debug, Default)]
pub struct TargetTally {
    table: std::collections::HashMap<super::RedirectTarget, u64>,
    last: Option<(super::RedirectTarget, u64)>,
}

impl TargetTally {
    #[inline]
    pub fn add(&mut self, target: super::RedirectTarget) {
        match &mut self.last {
            Some((last, n)) if *last == target => *n += 1,
            _ => {
                self.fold();
                self.last = Some((target, 1));
            }
        }
    }

    fn fold(&mut self) {
        if let Some((t, n)) = self.last.take() {
            *self.table.entry(t).or_default() += n;
        }
    }

    /// Every target's count.
    pub fn finish(mut self) -> std::collections::HashMap<super::RedirectTarget, u64> {
        self.fold();
        self.table
    }
}

/// The worker's private running totals, published with
/// [`WorkerCounters::publish`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LocalCounts {
    pub packets: u64,
    pub bytes: u64,
    pub actions: [u64; 5],
    pub drops: u64,
    pub faults: u64,
    pub batches: u64,
}

impl WorkerCounters {
    pub fn publish(&self, c: &LocalCounts) {
        let r = Ordering::Relaxed;
        self.packets.store(c.packets, r);
        self.bytes.store(c.bytes, r);
        for (slot, n) in self.actions.iter().zip(c.actions) {
            slot.store(n, r);
        }
        self.drops.store(c.drops, r);
        self.faults.store(c.faults, r);
        self.batches.store(c.batches, Ordering::Release);
    }

    pub fn set_cpu_ns(&self, ns: u64) {
        self.cpu_ns.store(ns, Ordering::Relaxed);
    }

    fn snapshot(&self) -> StatsSnapshot {
        let r = Ordering::Relaxed;
        let batches = self.batches.load(Ordering::Acquire);
        let mut actions = [0; 5];
        for (a, slot) in actions.iter_mut().zip(&self.actions) {
            *a = slot.load(r);
        }
        StatsSnapshot {
            packets: self.packets.load(r),
            bytes: self.bytes.load(r),
            actions,
            drops: self.drops.load(r),
            faults: self.faults.load(r),
            batches,
            cpu: Duration::from_nanos(self.cpu_ns.load(r)),
        }
    }
}

/// The counters of every worker of one run.
#[derive(Debug, Clone)]
pub struct RunStats {
    workers: Arc<[WorkerCounters]>,
}

impl RunStats {
    pub fn new(workers: usize) -> RunStats {
        RunStats {
            workers: (0..workers.max(1))
                .map(|_| WorkerCounters::default())
                .collect(),
        }
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Worker `i`'s counters; panics past [`RunStats::workers`] (a
    /// programming error of the pool, not bad input).
    pub fn worker(&self, i: usize) -> &WorkerCounters {
        &self.workers[i]
    }

    /// Worker `i`'s totals.
    pub fn worker_snapshot(&self, i: usize) -> Option<StatsSnapshot> {
        self.workers.get(i).map(WorkerCounters::snapshot)
    }

    /// Totals over every worker.
    pub fn snapshot(&self) -> StatsSnapshot {
        self.workers
            .iter()
            .map(WorkerCounters::snapshot)
            .fold(StatsSnapshot::default(), |acc, s| acc.plus(&s))
    }
}

/// Totals at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub packets: u64,
    pub bytes: u64,
    /// By [`OutputRoute::index`].
    pub actions: [u64; 5],
    pub drops: u64,
    pub faults: u64,
    pub batches: u64,
    /// CPU time of the workers (as last refreshed by them).
    pub cpu: Duration,
}

impl StatsSnapshot {
    pub fn action(&self, route: OutputRoute) -> u64 {
        self.actions[route.index()]
    }

    pub fn plus(&self, o: &StatsSnapshot) -> StatsSnapshot {
        let mut actions = self.actions;
        for (a, b) in actions.iter_mut().zip(o.actions) {
            *a += b;
        }
        StatsSnapshot {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            actions,
            drops: self.drops + o.drops,
            faults: self.faults + o.faults,
            batches: self.batches + o.batches,
            cpu: self.cpu + o.cpu,
        }
    }

    /// What happened between `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        let mut actions = self.actions;
        for (a, b) in actions.iter_mut().zip(earlier.actions) {
            *a = a.saturating_sub(b);
        }
        StatsSnapshot {
            packets: self.packets.saturating_sub(earlier.packets),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            actions,
            drops: self.drops.saturating_sub(earlier.drops),
            faults: self.faults.saturating_sub(earlier.faults),
            batches: self.batches.saturating_sub(earlier.batches),
            cpu: self.cpu.saturating_sub(earlier.cpu),
        }
    }
}

/// CPU time the calling thread has used.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock id is a constant the
    // kernel always knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the whole process (every thread).
pub fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `thread_cpu_time`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_tally_counts_every_redirect_whatever_the_order() {
        use crate::run::RedirectTarget::{Broadcast, Ifindex};
        let order = [
            Ifindex(2),
            Ifindex(2),
            Broadcast,
            Ifindex(2),
            Ifindex(3),
            Ifindex(3),
            Broadcast,
        ];
        let mut t = TargetTally::default();
        for x in order {
            t.add(x);
        }
        let got = t.finish();
        assert_eq!(got.len(), 3);
        assert_eq!(got[&Ifindex(2)], 3);
        assert_eq!(got[&Ifindex(3)], 2);
        assert_eq!(got[&Broadcast], 2);
        assert!(TargetTally::default().finish().is_empty());
    }

    #[test]
    fn snapshot_sums_workers() {
        let stats = RunStats::new(2);
        let mut a = LocalCounts {
            packets: 3,
            ..LocalCounts::default()
        };
        a.actions[OutputRoute::Drop.index()] = 3;
        stats.worker(0).publish(&a);
        let mut b = LocalCounts {
            packets: 2,
            faults: 1,
            ..LocalCounts::default()
        };
        b.actions[OutputRoute::Aborted.index()] = 1;
        b.actions[OutputRoute::Tx.index()] = 1;
        stats.worker(1).publish(&b);
        let s = stats.snapshot();
        assert_eq!(s.packets, 5);
        assert_eq!(s.action(OutputRoute::Drop), 3);
        assert_eq!(s.action(OutputRoute::Tx), 1);
        assert_eq!(s.faults, 1);
        let d = s.since(&stats.worker_snapshot(0).unwrap());
        assert_eq!(d.packets, 2);
        assert_eq!(d.action(OutputRoute::Drop), 0);
    }
}
