//! One worker: the batch loop on one thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::stats::{thread_cpu_time, LocalCounts, TargetTally, WorkerCounters};
use super::{EgressCopy, FrameProgram, Output, RedirectTarget, Verdict};
use crate::{BufferLayout, IoError, OutputRoute, PacketBatch, PacketSource, DEFAULT_BATCH_SIZE};

/// The thread's CPU time is a syscall to read; refresh it this often.
const CPU_TIME_EVERY_BATCHES: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Packets per batch.
    pub batch_size: usize,
    pub layout: BufferLayout,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            batch_size: DEFAULT_BATCH_SIZE,
            layout: BufferLayout::default(),
        }
    }
}

/// What one worker did, at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    pub packets: u64,
    pub bytes: u64,
    pub actions: [u64; 5],
    pub drops: u64,
    pub faults: u64,
    /// The first fault's message, if any.
    pub first_fault: Option<String>,
    /// Redirected packets per target.
    pub redirect_targets: HashMap<RedirectTarget, u64>,
    /// CPU time of the worker thread while it ran the loop.
    pub cpu: Duration,
    /// Frames the kernel dropped before the worker saw them (AF_XDP: no
    /// fill-ring frame, RX ring full); 0 for pcap and generator.
    pub ring_drops: u64,
}

impl WorkerReport {
    pub fn action(&self, route: OutputRoute) -> u64 {
        self.actions[route.index()]
    }

    /// Adds another worker's report to this one.
    pub fn merge(&mut self, o: &WorkerReport) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        for (a, b) in self.actions.iter_mut().zip(o.actions) {
            *a += b;
        }
        self.drops += o.drops;
        self.faults += o.faults;
        if self.first_fault.is_none() {
            self.first_fault.clone_from(&o.first_fault);
        }
        for (t, n) in &o.redirect_targets {
            *self.redirect_targets.entry(*t).or_default() += n;
        }
        self.cpu += o.cpu;
        self.ring_drops += o.ring_drops;
    }

    /// Redirect targets by packet count, most first.
    pub fn top_redirect_targets(&self, n: usize) -> Vec<(RedirectTarget, u64)> {
        let mut v: Vec<_> = self
            .redirect_targets
            .iter()
            .map(|(t, c)| (*t, *c))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

/// Runs `program` over `source` until it is exhausted or `stop` is set,
/// routing survivors to `output` and publishing totals in `counters` after
/// every batch.
///
/// A program fault counts as `XDP_ABORTED` and the loop goes on; a source
/// or output error ends the loop and is returned together with the report
/// of what was processed before it.
pub fn run_worker<S, P, O>(
    source: &mut S,
    program: &mut P,
    output: &mut O,
    counters: &WorkerCounters,
    stop: &AtomicBool,
    options: &WorkerOptions,
) -> (WorkerReport, Result<(), IoError>)
where
    S: PacketSource + ?Sized,
    P: FrameProgram + ?Sized,
    O: Output + ?Sized,
{
    let cpu_start = thread_cpu_time();
    let mut batch = PacketBatch::with_layout(options.batch_size, options.layout);
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(batch.capacity());
    let mut copies: Vec<EgressCopy> = Vec::new();
    let mut counts = LocalCounts::default();
    let mut first_fault = None;
    let mut targets = TargetTally::default();
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        program.at_batch_boundary();
        match source.next_batch(&mut batch) {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        verdicts.clear();
        program.recycle(&mut copies);
        program.begin_batch();
        for pkt in batch.packets_mut() {
            let verdict = match program.run_packet(pkt) {
                Ok(mut v) => {
                    if v.copies().is_some() {
                        let n = program.take_copies(&mut copies);
                        v.set_copies(n);
                    }
                    v
                }
                Err(fault) => {
                    counts.faults += 1;
                    first_fault.get_or_insert(fault.0);
                    Verdict::ABORTED
                }
            };
            counts.actions[verdict.route.index()] += 1;
            counts.bytes += pkt.len() as u64;
            if let Some(target) = verdict.redirect {
                targets.add(target);
            }
            verdicts.push(verdict);
        }
        program.end_batch();
        counts.packets += batch.len() as u64;
        counts.batches += 1;
        let emitted = output.emit(&batch, &verdicts, &copies);
        match emitted {
            Ok(dropped) => counts.drops += dropped,
            Err(e) => {
                counters.publish(&counts);
                break Err(e);
            }
        }
        counters.publish(&counts);
        if counts.batches.is_multiple_of(CPU_TIME_EVERY_BATCHES) {
            counters.set_cpu_ns((thread_cpu_time() - cpu_start).as_nanos() as u64);
        }
    };
    let result = result.and(output.finish());
    let cpu = thread_cpu_time().saturating_sub(cpu_start);
    counters.publish(&counts);
    counters.set_cpu_ns(cpu.as_nanos() as u64);
    let report = WorkerReport {
        packets: counts.packets,
        bytes: counts.bytes,
        actions: counts.actions,
        drops: counts.drops,
        faults: counts.faults,
        first_fault,
        redirect_targets: targets.finish(),
        cpu,
        ring_drops: 0,
    };
    (report, result)
}
