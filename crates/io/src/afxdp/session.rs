//! Building and tearing down an AF_XDP data plane on one interface.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::exception::{PacketTx, PassTap};
use super::iface::Interface;
use super::kern::KernelSteering;
use super::worker::XskWorker;
use super::xsk::XskSocket;
use super::{AfXdpError, IfaceSpec, XskConfig};
use crate::run::{FrameProgram, WorkerJob, WorkerPool};

/// Makes the program runner of worker `i` for (ifindex, queue).
pub type MakeProgram<'a> =
    dyn Fn(usize, u32, u32) -> Result<Box<dyn FrameProgram + Send>, String> + 'a;

/// A running AF_XDP data plane.
#[derive(Debug)]
pub struct Session {
    pool: WorkerPool,
    teardown: Teardown,
    describe: String,
}

/// What must be undone when the run ends; dropping it detaches the kernel
/// program, stops the TAP forwarder and removes the TAP.
pub struct Teardown {
    stop: Arc<AtomicBool>,
    tap_thread: Option<JoinHandle<()>>,
    tap_egress: Arc<AtomicU64>,
    steering: Option<KernelSteering>,
    tap: Option<Arc<PassTap>>,
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown").finish_non_exhaustive()
    }
}

impl Teardown {
    /// Frames the stack sent out of the TAP and bpfjet put on the wire.
    pub fn tap_egress_packets(&self) -> u64 {
        self.tap_egress.load(Ordering::Relaxed)
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        // Detach first, so traffic goes back to the kernel at once.
        drop(self.steering.take());
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.tap_thread.take() {
            let _ = h.join();
        }
        drop(self.tap.take());
    }
}

impl Session {
    /// Checks the interface and queues, attaches the kernel program, opens
    /// and registers one socket per queue, creates the PASS TAP and starts
    /// one worker per queue. On any failure everything set up so far is
    /// undone before the error returns.
    pub fn start(
        spec: &IfaceSpec,
        cfg: &XskConfig,
        make_program: &MakeProgram<'_>,
        pin: bool,
        batch: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<Session, AfXdpError> {
        cfg.validate()?;
        let iface = Interface::lookup(&spec.name)?;
        iface.check_queues(&spec.queues)?;
        let mut teardown = Teardown {
            stop: Arc::new(AtomicBool::new(false)),
            tap_thread: None,
            tap_egress: Arc::new(AtomicU64::new(0)),
            steering: None,
            tap: None,
        };
        let tap = Arc::new(PassTap::create(&iface.name, iface.mac, iface.mtu)?);
        teardown.tap = Some(Arc::clone(&tap));
        let steering = KernelSteering::attach(
            cfg.kern_obj.as_deref(),
            &iface.name,
            iface.ifindex,
            cfg.attach,
            cfg.multi_buffer,
        )?;
        let attach_mode = steering.mode;
        let mut workers = Vec::with_capacity(spec.queues.len());
        let mut zero_copy = Vec::new();
        for (i, &queue) in spec.queues.iter().enumerate() {
            let sock = XskSocket::open(iface.ifindex, &iface.name, queue, cfg)?;
            zero_copy.push(sock.zero_copy);
            let program = make_program(i, iface.ifindex, queue).map_err(AfXdpError::Program)?;
            let packet_tx = PacketTx::new().map_err(|source| AfXdpError::Sys {
                what: "AF_PACKET socket",
                iface: iface.name.clone(),
                queue,
                source,
            })?;
            let mut w = XskWorker::new(
                sock,
                program,
                Arc::clone(&tap),
                packet_tx,
                iface.ifindex,
                batch as u32,
            );
            w.busy_poll = cfg.busy_poll;
            w.need_wakeup = cfg.need_wakeup;
            w.pin_cpu = pin.then_some(queue as usize);
            steering.register(queue, w.sock.raw_fd())?;
            workers.push(w);
        }
        teardown.steering = Some(steering);
        let (thread, egress) = tap
            .spawn_egress(iface.ifindex, Arc::clone(&teardown.stop))
            .map_err(|source| AfXdpError::Sys {
                what: "TAP forwarder thread",
                iface: iface.name.clone(),
                queue: 0,
                source,
            })?;
        teardown.tap_thread = Some(thread);
        teardown.tap_egress = egress;
        let jobs: Vec<WorkerJob> = workers
            .into_iter()
            .map(|w| Box::new(move |c: &_, s: &_| w.run(c, s)) as WorkerJob)
            .collect();
        let pool =
            WorkerPool::spawn_jobs(jobs, stop).map_err(|e| AfXdpError::Config(e.to_string()))?;
        let modes = if zero_copy.iter().all(|z| *z) {
            "zero-copy"
        } else if zero_copy.iter().any(|z| *z) {
            "mixed zero-copy/copy"
        } else {
            "copy mode"
        };
        let describe = format!(
            "AF_XDP {} queues {:?} ({modes}, kernel program {attach_mode}, {}, PASS via TAP {})",
            iface.name,
            spec.queues,
            if cfg.busy_poll {
                "busy-poll"
            } else if cfg.need_wakeup {
                "need-wakeup"
            } else {
                "always-wake"
            },
            tap.name
        );
        Ok(Session {
            pool,
            teardown,
            describe,
        })
    }

    /// One line for the summary: interface, queues, modes.
    pub fn describe(&self) -> String {
        self.describe.clone()
    }

    /// The worker pool (to watch and join) and what to undo afterwards.
    pub fn into_parts(self) -> (WorkerPool, Teardown) {
        (self.pool, self.teardown)
    }
}
