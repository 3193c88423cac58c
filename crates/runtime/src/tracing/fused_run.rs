//! The run set-up of a fused pair (pairwise fusion's compiled rung,
//! docs/TRACING.md "Pairwise fusion"): an engine that compiled an entry and
//! an exit program into one native function runs each half inside a
//! [`HalfRun`], which holds exactly what [`TracingObject::run`] holds for
//! one program — this thread's run state (so a run nested in a signal
//! handler is missed, as the kernel's recursion rule says), a CPU slot, the
//! per-run context — and nothing across the traced call between the halves:
//! a blocking `read` holds no slot, and a handler calling a traced function
//! while the call blocks runs its programs as it would unfused.
//!
//! A child of `object` so that it shares the thread's run states with
//! [`TracingObject::run`] without widening their visibility.

use super::{ThreadRun, TracingObject, TracingProgram, THREAD_RUNS};
use crate::error::Fault;
use crate::state::RunState;
use crate::tracing::env::{ProbeSite, TracingEnv};
use crate::tracing::slots::Lease;
use crate::tracing::ProgId;
use bpfjet_obj::ProgType;
use std::cell::{RefCell, RefMut};
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

/// One half of a fused pair under way: this thread's run state borrowed, a
/// CPU slot leased, the run begun. [`HalfRun::finish`] ends it.
pub struct HalfRun<'a> {
    object: &'a TracingObject,
    prog: &'a TracingProgram,
    runs: RefMut<'a, Vec<ThreadRun>>,
    index: usize,
    lease: Lease<'a>,
}

impl TracingObject {
    /// Begin a run of `prog` (one half of a fused pair) on the context at
    /// `ctx`, as [`TracingObject::run`] begins one; `None` (counted as a
    /// missed run) when a run of this thread is under way.
    ///
    /// # Safety
    /// As [`TracingObject::run`]: `ctx` stays valid until
    /// [`HalfRun::finish`], laid out as `prog`'s type expects and at least
    /// [`TracingProgram::ctx_bytes`] long; the [`HalfRun`] is finished on
    /// this thread.
    pub unsafe fn begin_half(
        &self,
        prog: ProgId,
        ctx: *mut u8,
        site: &ProbeSite,
    ) -> Option<HalfRun<'_>> {
        let p = self.programs.get(prog)?;
        // The cell lives as long as this thread, which outlives the half
        // (finished on this thread, per the contract).
        let cell: *const RefCell<Vec<ThreadRun>> = THREAD_RUNS.with(|r| r as *const _);
        // SAFETY: see above.
        let cell = unsafe { &*cell };
        let Ok(mut runs) = cell.try_borrow_mut() else {
            self.missed.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let index = match runs.iter().position(|r| r.object == self.uid) {
            Some(i) => i,
            None => {
                runs.push(self.thread_run());
                runs.len() - 1
            }
        };
        let lease = self.slots.lease();
        let run = &mut runs[index];
        run.env.run.set_cpu(lease.cpu);
        run.env
            .begin(ctx as u64, p.ctx_len, p.prog_type == ProgType::Kprobe, site);
        run.state.begin_run();
        Some(HalfRun {
            object: self,
            prog: p,
            runs,
            index,
            lease,
        })
    }
}

impl HalfRun<'_> {
    /// The run state and per-run context the half's code runs with.
    pub fn state_env(&mut self) -> (&mut RunState, &mut TracingEnv) {
        let run = &mut self.runs[self.index];
        (&mut run.state, &mut run.env)
    }

    /// The CPU slot of the run.
    pub fn cpu(&self) -> u32 {
        self.lease.cpu
    }

    /// End the half with the code's outcome: the run ended, leftovers
    /// released, the slot and the thread's run state given back, trace
    /// lines kept, a fault counted (r0 then reads as 0, as for an unfused
    /// run). Returns r0.
    pub fn finish(self, result: Result<u64, Fault>) -> u64 {
        let HalfRun {
            object,
            prog,
            mut runs,
            index,
            lease,
        } = self;
        let run = &mut runs[index];
        run.state.end_run();
        let _ = run.env.run.release_leftovers();
        drop(lease);
        if !run.env.run.trace.is_empty() {
            object.keep_trace(run.env.run.take_trace_log());
        }
        drop(runs);
        match result {
            Ok(r0) => r0,
            Err(fault) => {
                object.faults.fetch_add(1, Ordering::Relaxed);
                *object
                    .last_fault
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some(format!("program {}: {fault}", prog.name));
                0
            }
        }
    }
}
