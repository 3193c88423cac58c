//! The AF_XDP worker loop: one socket, one queue, one thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::exception::{PacketTx, PassTap};
use super::xsk::XskSocket;
use crate::run::{
    thread_cpu_time, FrameMut, FrameProgram, LocalCounts, RedirectTarget, Verdict, WorkerCounters,
    WorkerReport, WorkerResult,
};
use crate::OutputRoute;

/// Idle wait for RX in the sleeping (non-busy-poll) mode: short enough for
/// a stop request to be seen promptly.
const POLL_TIMEOUT_MS: i32 = 50;

/// One queue's data plane.
pub struct XskWorker {
    pub sock: XskSocket,
    /// UMEM frames owned by user space (neither on the fill ring nor in
    /// flight on RX/TX).
    free: Vec<u64>,
    pub program: Box<dyn FrameProgram + Send>,
    pub tap: Arc<PassTap>,
    pub packet_tx: PacketTx,
    pub ifindex: u32,
    pub batch: u32,
    pub busy_poll: bool,
    pub need_wakeup: bool,
    pub pin_cpu: Option<usize>,
}

impl XskWorker {
    pub fn new(
        sock: XskSocket,
        program: Box<dyn FrameProgram + Send>,
        tap: Arc<PassTap>,
        packet_tx: PacketTx,
        ifindex: u32,
        batch: u32,
    ) -> XskWorker {
        let size = u64::from(sock.umem.frame_size);
        let free = (0..u64::from(sock.umem.frames)).map(|i| i * size).collect();
        let mut w = XskWorker {
            sock,
            free,
            program,
            tap,
            packet_tx,
            ifindex,
            batch: batch.max(1),
            busy_poll: false,
            need_wakeup: true,
            pin_cpu: None,
        };
        // The fill ring must hold frames before the socket is steered to,
        // or the first packets find nowhere to land.
        w.refill();
        w
    }

    fn refill(&mut self) {
        let want = self.free.len() as u32;
        let n = self.sock.fill.free(want).min(want);
        for _ in 0..n {
            if let Some(addr) = self.free.pop() {
                self.sock.fill.push(addr);
            }
        }
        if n > 0 {
            self.sock.fill.submit();
        }
    }

    fn reap_completions(&mut self) {
        let n = self.sock.completion.available(self.sock.completion.size());
        for k in 0..n {
            self.free.push(self.sock.completion.peek(k));
        }
        if n > 0 {
            self.sock.completion.release(n);
        }
    }

    /// Runs until `stop`.
    pub fn run(mut self, counters: &WorkerCounters, stop: &AtomicBool) -> WorkerResult {
        let warning = self
            .pin_cpu
            .and_then(|cpu| crate::run::pin_to_cpu(cpu).err());
        let cpu_start = thread_cpu_time();
        let mut counts = LocalCounts::default();
        let mut first_fault = None;
        let mut targets: HashMap<RedirectTarget, u64> = HashMap::new();
        let own_ifindex = self.ifindex;
        let queue = self.sock.queue;
        let mut idle_rounds = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // Also on idle rounds, so a hot replace completes without traffic.
            self.program.at_batch_boundary();
            self.reap_completions();
            self.refill();
            if self.need_wakeup && self.sock.fill.needs_wakeup() {
                self.sock.kick_rx();
            }
            let n = self.sock.rx.available(self.batch);
            if n == 0 {
                if self.busy_poll {
                    self.sock.kick_rx();
                } else {
                    self.sock.wait_rx(POLL_TIMEOUT_MS);
                }
                idle_rounds += 1;
                if idle_rounds.is_multiple_of(64) {
                    counters.set_cpu_ns((thread_cpu_time() - cpu_start).as_nanos() as u64);
                }
                continue;
            }
            let mut tx_queued = 0u32;
            for k in 0..n {
                let desc = self.sock.rx.peek(k);
                let Some((frame, off)) = self.sock.umem.frame_mut(desc.addr) else {
                    counts.drops += 1;
                    continue;
                };
                let chunk = desc.addr - off as u64;
                let mut fm = FrameMut {
                    buf: frame,
                    data_start: off,
                    data_end: off + desc.len as usize,
                    ingress_ifindex: own_ifindex,
                    rx_queue: queue,
                };
                let verdict = match self.program.run(&mut fm) {
                    Ok(v) => v,
                    Err(fault) => {
                        counts.faults += 1;
                        first_fault.get_or_insert(fault.0);
                        Verdict::ABORTED
                    }
                };
                let (start, end) = (fm.data_start, fm.data_end);
                counts.actions[verdict.route.index()] += 1;
                counts.bytes += (end - start) as u64;
                if let Some(t) = verdict.redirect {
                    *targets.entry(t).or_default() += 1;
                }
                let transmit_here = match (verdict.route, verdict.redirect) {
                    (OutputRoute::Tx, _) => true,
                    (OutputRoute::Redirect, Some(RedirectTarget::Ifindex(i))) => i == own_ifindex,
                    _ => false,
                };
                if transmit_here {
                    if self.sock.tx.free(1) >= 1 {
                        self.sock.tx.push(libc::xdp_desc {
                            addr: chunk + start as u64,
                            len: (end - start) as u32,
                            options: 0,
                        });
                        tx_queued += 1;
                    } else {
                        counts.drops += 1;
                        self.free.push(chunk);
                    }
                    continue;
                }
                let data = &fm.buf[start..end];
                let delivered = match (verdict.route, verdict.redirect) {
                    (OutputRoute::Pass, _) => self.tap.inject(data),
                    (OutputRoute::Redirect, Some(RedirectTarget::Ifindex(i))) => {
                        self.packet_tx.send(i, data).is_ok()
                    }
                    // No user-space consumer behind an XSKMAP/CPUMAP target.
                    (OutputRoute::Redirect, _) => false,
                    _ => true,
                };
                if !delivered {
                    counts.drops += 1;
                }
                self.free.push(chunk);
            }
            self.sock.rx.release(n);
            if tx_queued > 0 {
                self.sock.tx.submit();
                if !self.need_wakeup || self.sock.tx.needs_wakeup() {
                    self.sock.kick_tx();
                }
            }
            counts.packets += u64::from(n);
            counts.batches += 1;
            counters.publish(&counts);
            if counts.batches.is_multiple_of(1024) {
                counters.set_cpu_ns((thread_cpu_time() - cpu_start).as_nanos() as u64);
            }
        }
        let cpu = thread_cpu_time().saturating_sub(cpu_start);
        let ring_drops = self.sock.kernel_drops();
        counters.publish(&counts);
        counters.set_cpu_ns(cpu.as_nanos() as u64);
        let report = WorkerReport {
            packets: counts.packets,
            bytes: counts.bytes,
            actions: counts.actions,
            drops: counts.drops,
            faults: counts.faults,
            first_fault,
            redirect_targets: targets,
            cpu,
            ring_drops,
        };
        (report, Ok(()), warning)
    }
}
