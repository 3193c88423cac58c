//! Hot replace: swapping every worker's program between batches.
//!
//! A [`ProgramSwitch`] hands each worker a [`SwitchableProgram`]. To swap,
//! the control side stages one new runner per worker and bumps a
//! generation counter; each worker checks the counter at its batch
//! boundary (one relaxed-cost atomic load), takes its new runner there and
//! acknowledges the generation. A batch therefore runs entirely on one
//! program, and the control side knows when no worker runs the old one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{EgressCopy, FrameMut, FrameProgram, ProgramFault, Verdict};

type Runner = Box<dyn FrameProgram + Send>;

/// What a worker whose loop has ended reports as its generation: it runs
/// no program, so no swap waits for it.
pub const RETIRED: u64 = u64::MAX;

struct Shared {
    /// The newest published generation (0: the initial program).
    generation: AtomicU64,
    /// Per worker: the runner staged for the newest generation.
    staged: Mutex<Vec<Option<Runner>>>,
    /// Per worker: the generation it runs ([`RETIRED`] once it ended).
    adopted: Vec<AtomicU64>,
}

/// The control side of a pool's programs.
#[derive(Clone)]
pub struct ProgramSwitch {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProgramSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramSwitch")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

/// Why a swap did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchError {
    /// Not one runner per worker.
    WrongCount { expected: usize, got: usize },
    /// Workers that had not reached a batch boundary in time (stopped or
    /// stuck); they switch at their next boundary if they run again.
    Timeout { pending: Vec<usize> },
}

impl std::fmt::Display for SwitchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SwitchError::WrongCount { expected, got } => {
                write!(f, "{got} runner(s) staged for {expected} worker(s)")
            }
            SwitchError::Timeout { pending } => write!(
                f,
                "worker(s) {pending:?} did not reach a batch boundary in time"
            ),
        }
    }
}

impl std::error::Error for SwitchError {}

impl ProgramSwitch {
    /// A switch for `workers` workers, all at generation 0.
    pub fn new(workers: usize) -> ProgramSwitch {
        ProgramSwitch {
            shared: Arc::new(Shared {
                generation: AtomicU64::new(0),
                staged: Mutex::new((0..workers).map(|_| None).collect()),
                adopted: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            }),
        }
    }

    pub fn workers(&self) -> usize {
        self.shared.adopted.len()
    }

    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// The generation each worker runs.
    pub fn adopted(&self) -> Vec<u64> {
        self.shared
            .adopted
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .collect()
    }

    /// Wraps worker `slot`'s initial runner.
    ///
    /// # Panics
    /// If `slot` is not below [`ProgramSwitch::workers`].
    pub fn wrap(&self, slot: usize, initial: Runner) -> SwitchableProgram {
        assert!(slot < self.workers(), "worker slot {slot} out of range");
        SwitchableProgram {
            current: initial,
            slot,
            seen: self.generation(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Stages `runners` (one per worker, in slot order) as a new generation
    /// and returns it. Runners of an older generation that a worker never
    /// took are replaced.
    pub fn publish(&self, runners: Vec<Runner>) -> Result<u64, SwitchError> {
        if runners.len() != self.workers() {
            return Err(SwitchError::WrongCount {
                expected: self.workers(),
                got: runners.len(),
            });
        }
        let mut staged = self
            .shared
            .staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (slot, r) in staged.iter_mut().zip(runners) {
            *slot = Some(r);
        }
        // Bumped under the lock, so a worker that sees the new generation
        // finds its runner staged.
        let generation = self.shared.generation.fetch_add(1, Ordering::AcqRel) + 1;
        Ok(generation)
    }

    /// The workers that neither run `generation` (or a newer one) nor
    /// have ended: empty once a swap is complete. Does not wait.
    pub fn pending(&self, generation: u64) -> Vec<usize> {
        self.adopted()
            .iter()
            .enumerate()
            .filter(|(_, g)| **g < generation)
            .map(|(i, _)| i)
            .collect()
    }

    /// Waits until every worker runs `generation` (or a newer one) or has
    /// ended.
    pub fn wait_adopted(&self, generation: u64, timeout: Duration) -> Result<(), SwitchError> {
        let deadline = Instant::now() + timeout;
        loop {
            let pending = self.pending(generation);
            if pending.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SwitchError::Timeout { pending });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A worker's program that can be replaced between batches.
pub struct SwitchableProgram {
    current: Runner,
    slot: usize,
    seen: u64,
    shared: Arc<Shared>,
}

impl FrameProgram for SwitchableProgram {
    #[inline]
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        self.current.run(frame)
    }

    #[inline]
    fn take_copies(&mut self, out: &mut Vec<EgressCopy>) -> u32 {
        self.current.take_copies(out)
    }

    fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        self.current.recycle(sent);
    }

    #[inline]
    fn at_batch_boundary(&mut self) {
        let generation = self.shared.generation.load(Ordering::Acquire);
        if generation != self.seen {
            let staged = self
                .shared
                .staged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)[self.slot]
                .take();
            if let Some(new) = staged {
                // The old runner is dropped here, on the worker thread,
                // after its last batch.
                self.current = new;
            }
            self.seen = generation;
            self.shared.adopted[self.slot].store(generation, Ordering::Release);
        }
        self.current.at_batch_boundary();
    }

    #[inline]
    fn begin_batch(&mut self) {
        self.current.begin_batch();
    }

    #[inline]
    fn end_batch(&mut self) {
        self.current.end_batch();
    }
}

impl Drop for SwitchableProgram {
    fn drop(&mut self) {
        self.shared.adopted[self.slot].store(RETIRED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::FnProgram;
    use crate::OutputRoute;

    fn fixed(v: Verdict) -> Runner {
        Box::new(FnProgram(move |_: &mut FrameMut<'_>| Ok(v)))
    }

    fn run_one(p: &mut SwitchableProgram) -> OutputRoute {
        let mut buf = [0u8; 64];
        let mut frame = FrameMut {
            buf: &mut buf,
            data_start: 0,
            data_end: 64,
            ingress_ifindex: 1,
            rx_queue: 0,
        };
        p.run(&mut frame).unwrap().route
    }

    #[test]
    fn swaps_only_at_a_batch_boundary() {
        let switch = ProgramSwitch::new(2);
        let mut w0 = switch.wrap(0, fixed(Verdict::DROP));
        let mut w1 = switch.wrap(1, fixed(Verdict::DROP));
        let generation = switch
            .publish(vec![fixed(Verdict::PASS), fixed(Verdict::PASS)])
            .unwrap();
        assert_eq!(generation, 1);
        // Mid-batch: still the old program.
        assert_eq!(run_one(&mut w0), OutputRoute::Drop);
        assert!(switch.wait_adopted(1, Duration::from_millis(5)).is_err());
        w0.at_batch_boundary();
        assert_eq!(run_one(&mut w0), OutputRoute::Pass);
        assert_eq!(
            switch.wait_adopted(1, Duration::from_millis(5)),
            Err(SwitchError::Timeout { pending: vec![1] })
        );
        w1.at_batch_boundary();
        assert_eq!(run_one(&mut w1), OutputRoute::Pass);
        switch.wait_adopted(1, Duration::from_millis(5)).unwrap();
        assert_eq!(switch.adopted(), vec![1, 1]);
    }

    #[test]
    fn a_worker_that_missed_a_generation_takes_the_newest() {
        let switch = ProgramSwitch::new(1);
        let mut w = switch.wrap(0, fixed(Verdict::DROP));
        switch.publish(vec![fixed(Verdict::PASS)]).unwrap();
        switch.publish(vec![fixed(Verdict::TX)]).unwrap();
        w.at_batch_boundary();
        assert_eq!(run_one(&mut w), OutputRoute::Tx);
        assert_eq!(switch.adopted(), vec![2]);
    }

    #[test]
    fn an_ended_worker_does_not_hold_up_a_swap() {
        let switch = ProgramSwitch::new(2);
        let mut w0 = switch.wrap(0, fixed(Verdict::DROP));
        let w1 = switch.wrap(1, fixed(Verdict::DROP));
        drop(w1);
        let generation = switch
            .publish(vec![fixed(Verdict::PASS), fixed(Verdict::PASS)])
            .unwrap();
        w0.at_batch_boundary();
        switch
            .wait_adopted(generation, Duration::from_millis(5))
            .unwrap();
        assert_eq!(switch.adopted(), vec![1, RETIRED]);
    }

    #[test]
    fn refuses_the_wrong_number_of_runners() {
        let switch = ProgramSwitch::new(2);
        assert_eq!(
            switch.publish(vec![fixed(Verdict::PASS)]),
            Err(SwitchError::WrongCount {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(switch.generation(), 0);
    }
}
