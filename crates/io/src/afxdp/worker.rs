//! The AF_XDP worker loop: one socket, one queue, one thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::exception::{PacketTx, PassTap};
use super::xsk::XskSocket;
use crate::run::{
    thread_cpu_time, Egress, EgressCopy, FrameMut, FrameProgram, LocalCounts, RedirectTarget,
    TargetTally, Verdict, WorkerCounters, WorkerReport, WorkerResult,
};
use crate::OutputRoute;

/// Idle wait for RX in the sleeping (non-busy-poll) mode: short enough for
/// a stop request to be seen promptly.
const POLL_TIMEOUT_MS: i32 = 50;

/// Room in front of a gathered multi-buffer frame (`XDP_PACKET_HEADROOM`).
const JUMBO_HEADROOM: usize = 256;
/// Room after it: a multi-buffer frame grows at most by its last
/// fragment's page.
const JUMBO_TAILROOM: usize = 4096;

/// A multi-buffer frame being gathered from a chain of RX descriptors
/// (`XDP_PKT_CONTD` on all but the last), and the UMEM frames it came in.
#[derive(Default)]
struct Jumbo {
    buf: Vec<u8>,
    len: usize,
    chunks: Vec<u64>,
    /// A descriptor of the chain pointed outside the UMEM: the frame is
    /// dropped when the chain ends.
    broken: bool,
}

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
    jumbo: Jumbo,
    /// A frame's egress copies, while they are sent.
    copies: Vec<EgressCopy>,
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
            jumbo: Jumbo::default(),
            copies: Vec::new(),
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
        let mut targets = TargetTally::default();
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
            let mut frames = 0u64;
            self.program.begin_batch();
            for k in 0..n {
                let desc = self.sock.rx.peek(k);
                let contd = desc.options & libc::XDP_PKT_CONTD != 0;
                if contd || !self.jumbo.chunks.is_empty() || self.jumbo.broken {
                    // A multi-buffer frame: gathered, then run when its
                    // last descriptor arrives (possibly in a later batch).
                    self.gather(desc);
                    if !contd {
                        frames += 1;
                        tx_queued += self.run_jumbo(&mut counts, &mut first_fault, &mut targets);
                    }
                    continue;
                }
                frames += 1;
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
                    targets.add(t);
                }
                if verdict.copies().is_some() {
                    tx_queued += self.send_copies(&mut counts);
                    self.free.push(chunk);
                    continue;
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
            self.program.end_batch();
            self.sock.rx.release(n);
            if tx_queued > 0 {
                self.sock.tx.submit();
                if !self.need_wakeup || self.sock.tx.needs_wakeup() {
                    self.sock.kick_tx();
                }
            }
            counts.packets += frames;
            counts.batches += 1;
            counters.publish(&counts);
            if counts.batches.is_multiple_of(1024) {
                counters.set_cpu_ns((thread_cpu_time() - cpu_start).as_nanos() as u64);
            }
        }
        for chunk in self.jumbo.chunks.drain(..) {
            self.free.push(chunk);
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
            redirect_targets: targets.finish(),
            cpu,
            ring_drops,
        };
        (report, Ok(()), warning)
    }
}

impl XskWorker {
    /// Appends one descriptor of a multi-buffer chain to the frame being
    /// gathered; its UMEM frame is held until the frame has run.
    fn gather(&mut self, desc: libc::xdp_desc) {
        let Some((frame, off)) = self.sock.umem.frame_mut(desc.addr) else {
            self.jumbo.broken = true;
            return;
        };
        let piece = &frame[off..off + desc.len as usize];
        let j = &mut self.jumbo;
        let need = JUMBO_HEADROOM + j.len + piece.len() + JUMBO_TAILROOM;
        if j.buf.len() < need {
            j.buf.resize(need, 0);
        }
        j.buf[JUMBO_HEADROOM + j.len..JUMBO_HEADROOM + j.len + piece.len()].copy_from_slice(piece);
        j.len += piece.len();
        j.chunks.push(desc.addr - off as u64);
    }

    /// Runs the program on the gathered multi-buffer frame and sends it
    /// where the verdict says: back out of this queue as a chain of TX
    /// descriptors (`XDP_PKT_CONTD`), to the TAP, or to another interface.
    /// Returns the TX descriptors queued.
    fn run_jumbo(
        &mut self,
        counts: &mut LocalCounts,
        first_fault: &mut Option<String>,
        targets: &mut TargetTally,
    ) -> u32 {
        let mut j = std::mem::take(&mut self.jumbo);
        let mut queued = 0;
        if j.broken {
            counts.drops += 1;
        } else {
            let mut fm = FrameMut {
                buf: &mut j.buf,
                data_start: JUMBO_HEADROOM,
                data_end: JUMBO_HEADROOM + j.len,
                ingress_ifindex: self.ifindex,
                rx_queue: self.sock.queue,
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
                targets.add(t);
            }
            let data = &j.buf[start..end];
            let delivered = match (verdict.route, verdict.redirect) {
                _ if verdict.copies().is_some() => {
                    queued = self.send_copies(counts);
                    true
                }
                (OutputRoute::Tx, _) => {
                    queued = self.transmit_chain(data, &mut j.chunks);
                    queued > 0
                }
                (OutputRoute::Redirect, Some(RedirectTarget::Ifindex(i))) if i == self.ifindex => {
                    queued = self.transmit_chain(data, &mut j.chunks);
                    queued > 0
                }
                (OutputRoute::Pass, _) => self.tap.inject(data),
                (OutputRoute::Redirect, Some(RedirectTarget::Ifindex(i))) => {
                    self.packet_tx.send(i, data).is_ok()
                }
                (OutputRoute::Redirect, _) => false,
                _ => true,
            };
            if !delivered {
                counts.drops += 1;
            }
        }
        self.free.append(&mut j.chunks);
        j.len = 0;
        j.broken = false;
        self.jumbo = j;
        queued
    }

    /// Sends the last frame's egress copies (a devmap broadcast, what a
    /// devmap entry's program passed, a CPUMAP redirect): out of this queue
    /// when the copy's interface is this one, else to that interface; to
    /// the TAP for the stack. A copy that cannot be sent is a drop.
    /// Returns the TX descriptors queued.
    fn send_copies(&mut self, counts: &mut LocalCounts) -> u32 {
        let mut copies = std::mem::take(&mut self.copies);
        copies.clear();
        self.program.take_copies(&mut copies);
        let mut queued = 0;
        for c in &copies {
            let sent = match c.to {
                Egress::Ifindex(i) if i == self.ifindex => {
                    let q = self.transmit_chain(&c.data, &mut Vec::new());
                    queued += q;
                    q > 0
                }
                Egress::Ifindex(i) => self.packet_tx.send(i, &c.data).is_ok(),
                // A CPUMAP redirect: up the stack, as XDP_PASS.
                Egress::Stack => self.tap.inject(&c.data),
            };
            if !sent {
                counts.drops += 1;
            }
        }
        self.program.recycle(&mut copies);
        self.copies = copies;
        queued
    }

    /// Queues `data` on the TX ring as a chain of UMEM frames, taken from
    /// `chunks` (the frame's own RX frames) and then the free list; all but
    /// the last descriptor carry `XDP_PKT_CONTD`. Returns the descriptors
    /// queued: 0 when the ring or the UMEM has no room for the whole chain.
    fn transmit_chain(&mut self, data: &[u8], chunks: &mut Vec<u64>) -> u32 {
        let size = self.sock.umem.frame_size as usize;
        let pieces = data.len().div_ceil(size).max(1);
        if self.sock.tx.free(pieces as u32) < pieces as u32
            || chunks.len() + self.free.len() < pieces
        {
            return 0;
        }
        while chunks.len() < pieces {
            let Some(c) = self.free.pop() else {
                return 0;
            };
            chunks.push(c);
        }
        // Every frame the worker owns lies inside the UMEM (it hands out
        // no other addresses); checked before anything is queued.
        if chunks[..pieces]
            .iter()
            .any(|&c| self.sock.umem.frame_mut(c).is_none())
        {
            return 0;
        }
        for (i, piece) in data.chunks(size).enumerate() {
            let chunk = chunks[i];
            if let Some((frame, _)) = self.sock.umem.frame_mut(chunk) {
                frame[..piece.len()].copy_from_slice(piece);
            }
            self.sock.tx.push(libc::xdp_desc {
                addr: chunk,
                len: piece.len() as u32,
                options: if i + 1 < pieces {
                    libc::XDP_PKT_CONTD
                } else {
                    0
                },
            });
        }
        // The queued frames come back through the completion ring.
        chunks.drain(..pieces);
        pieces as u32
    }
}
