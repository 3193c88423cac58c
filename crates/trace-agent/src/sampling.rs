//! `perf_event` programs (libbpf-tools' `profile`, `SEC("perf_event")`)
//! on samples of the traced process's CPU time.
//!
//! The kernel runs such a program on a `cpu-clock` event's overflow with
//! `struct bpf_perf_event_data`: the interrupted registers, the sample
//! period, the address (0 for this event). Here each thread of the process
//! is sampled every 1/F seconds of its own CPU time
//! (`bpfjet_probe::sampler`), which is what a per-CPU `cpu-clock` event at
//! F Hz samples of this process; the programs run in the sampled thread,
//! so `bpf_get_current_pid_tgid`, `bpf_get_current_comm` and
//! `bpf_get_stackid(ctx, map, BPF_F_USER_STACK)` answer for it.
//!
//! A thread is made ready before its timer starts (its run state, its
//! program guard): the signal handler allocates nothing. Threads: the one
//! that starts the agent, every thread created with `pthread_create`
//! afterwards (threads.rs), a forked child's thread.

use crate::{alive, attach::regs_view};
use bpfjet_probe::regs::PtRegs;
use bpfjet_probe::sampler;
use bpfjet_runtime::tracing::{PerfEventData, ProbeSite, TracingObject};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static OBJECT: OnceLock<&'static TracingObject> = OnceLock::new();
/// Samples that landed in the agent's own work or an unready thread.
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Starts sampling every `period` ns of CPU time with `programs` (ids in
/// `object`) run on each sample, and arms the calling thread.
pub(crate) fn start(
    object: &'static TracingObject,
    programs: Vec<usize>,
    period: u64,
) -> Result<(), String> {
    let period = period.max(1);
    let handler: bpfjet_probe::ProbeHandler = Box::new(move |regs: &mut PtRegs| {
        // Not in the agent's own work (it may hold the locks a program
        // takes), nor in a thread whose guard is not armed (arming may
        // allocate), nor inside another program's run: skipped, counted.
        match alive::can_run() {
            // A program run interrupted (a system call's, whose hook does
            // not hold the probe guard) would skip this one.
            Some(armed) if armed.is_armed() && !bpfjet_runtime::tracing::running_here() => {}
            _ => {
                SKIPPED.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let mut data = PerfEventData {
            regs: *regs_view(regs),
            sample_period: period,
            addr: 0,
        };
        let site = ProbeSite {
            func_ip: 0,
            cookie: 0,
            regs: regs as *const PtRegs as u64,
            ret_at_sp: false,
        };
        for &id in &programs {
            object.run_perf_event(id, &mut data, &site);
        }
    });
    sampler::install(period, handler).map_err(|e| format!("perf_event sampling: {e}"))?;
    let _ = OBJECT.set(object);
    arm_current_thread();
    Ok(())
}

/// Whether `perf_event` programs are sampling.
pub(crate) fn active() -> bool {
    sampler::active()
}

/// Makes the calling thread ready and starts its timer (nothing when not
/// sampling).
pub(crate) fn arm_current_thread() {
    let Some(object) = OBJECT.get() else {
        return;
    };
    // The agent's own work: the system calls it makes (the timer's, the
    // run state's allocation) are not the traced program's.
    alive::agent_work(|| {
        object.prepare_thread();
        alive::prepare_thread();
        if let Err(e) = sampler::arm_current_thread() {
            eprintln!("bpfjet trace: a thread is not sampled: {e}");
        }
    });
}

/// In a forked child: its thread gets a timer of its own.
pub(crate) fn forked_child() {
    if active() {
        sampler::forget_parent_timers();
        SKIPPED.store(0, Ordering::Relaxed);
        arm_current_thread();
    }
}

/// No more samples (the report is being written).
pub(crate) fn stop() {
    sampler::stop();
}

/// The report's `"perf_event"`: frequency, samples taken (the programs
/// ran), samples skipped (the thread was in another of bpfjet's handlers
/// or in the agent's own work).
pub(crate) fn report() -> Option<serde_json::Value> {
    active().then(|| {
        serde_json::json!({
            "frequency": 1_000_000_000 / sampler::period_ns().max(1),
            "samples": sampler::samples() - SKIPPED.load(Ordering::Relaxed),
            "missed": sampler::missed() + SKIPPED.load(Ordering::Relaxed),
        })
    })
}
