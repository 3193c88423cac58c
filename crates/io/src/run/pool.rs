//! One thread per CPU slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{
    run_worker, FrameProgram, Output, RunStats, WorkerCounters, WorkerOptions, WorkerReport,
};
use crate::{IoError, PacketSource};

/// What one worker thread runs.
pub struct WorkerSetup {
    pub source: Box<dyn PacketSource + Send>,
    /// Owns the worker's CPU slot and engine scratch state.
    pub program: Box<dyn FrameProgram + Send>,
    pub output: Box<dyn Output + Send>,
    /// Pin the thread to this CPU (best effort: a failure is reported in
    /// [`WorkerPool::warnings`], not fatal).
    pub pin_cpu: Option<usize>,
    pub options: WorkerOptions,
}

impl std::fmt::Debug for WorkerSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerSetup")
            .field("pin_cpu", &self.pin_cpu)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What a worker thread returns: its report, how its loop ended, and a
/// warning (a failed CPU pinning) if any.
pub type WorkerResult = (WorkerReport, Result<(), IoError>, Option<String>);

/// A worker thread's body for [`WorkerPool::spawn_jobs`].
pub type WorkerJob = Box<dyn FnOnce(&WorkerCounters, &AtomicBool) -> WorkerResult + Send>;

/// Running workers, their live counters and a shared stop flag.
#[derive(Debug)]
pub struct WorkerPool {
    stats: RunStats,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<WorkerResult>>,
}

impl WorkerPool {
    /// Starts one named thread (`bpfjet-w<i>`) per setup; worker `i`
    /// publishes in `stats().worker(i)`. `stop` ends every worker at its
    /// next batch boundary.
    pub fn spawn(setups: Vec<WorkerSetup>, stop: Arc<AtomicBool>) -> Result<WorkerPool, IoError> {
        let jobs = setups
            .into_iter()
            .map(|mut setup| {
                Box::new(move |counters: &WorkerCounters, stop: &AtomicBool| {
                    let warning = setup.pin_cpu.and_then(|cpu| pin_to_cpu(cpu).err());
                    let (report, result) = run_worker(
                        &mut setup.source,
                        &mut setup.program,
                        &mut setup.output,
                        counters,
                        stop,
                        &setup.options,
                    );
                    (report, result, warning)
                }) as WorkerJob
            })
            .collect();
        WorkerPool::spawn_jobs(jobs, stop)
    }

    /// Starts one thread per job: the way a data plane with its own loop
    /// (AF_XDP) shares the pool's counters, stop flag and join logic.
    pub fn spawn_jobs(jobs: Vec<WorkerJob>, stop: Arc<AtomicBool>) -> Result<WorkerPool, IoError> {
        let stats = RunStats::new(jobs.len());
        let mut handles = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.into_iter().enumerate() {
            let stats = stats.clone();
            let stop_flag = Arc::clone(&stop);
            let spawned = std::thread::Builder::new()
                .name(format!("bpfjet-w{i}"))
                .spawn(move || job(stats.worker(i), &stop_flag));
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    stop.store(true, Ordering::Relaxed);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(IoError::Spawn { source });
                }
            }
        }
        Ok(WorkerPool {
            stats,
            stop,
            handles,
        })
    }

    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// Asks every worker to stop after its current batch.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether every worker has returned.
    pub fn is_finished(&self) -> bool {
        self.handles.iter().all(JoinHandle::is_finished)
    }

    /// Waits for every worker; returns the merged report, the per-worker
    /// reports, the first error and any warnings (failed pinning).
    pub fn join(self) -> PoolOutcome {
        let mut outcome = PoolOutcome::default();
        for (i, h) in self.handles.into_iter().enumerate() {
            match h.join() {
                Ok((report, result, warning)) => {
                    outcome.total.merge(&report);
                    outcome.workers.push(report);
                    if let Err(e) = result {
                        outcome.errors.push(format!("worker {i}: {e}"));
                    }
                    outcome.warnings.extend(warning);
                }
                Err(_) => {
                    outcome.workers.push(WorkerReport::default());
                    outcome.errors.push(format!("worker {i} panicked"));
                }
            }
        }
        outcome
    }
}

/// How a pool ended.
#[derive(Debug, Default)]
pub struct PoolOutcome {
    pub total: WorkerReport,
    pub workers: Vec<WorkerReport>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks via the
    // caller-side check below; sched_setaffinity(0) targets this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!("cannot pin to CPU {cpu}: beyond CPU_SETSIZE"));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
