//! The run set-up of a fused pair (pairwise fusion's compiled rung,
//! docs/TRACING.md "Pairwise fusion"): an engine that compiled an entry and
//! an exit program into one native function runs each half inside a
//! [`HalfRun`], which holds exactly what [`TracingObject::run`] holds for
//! one program — this thread's run state (so a run nested in a signal
//! handler is missed, as the kernel's recursion rule says), a CPU slot, the
//! per-run context — and nothing across the traced call between the halves:
//! a blocking `read` holds no slot, and a handler calling a traced function
//! while the call blocks runs its programs as it would unfused. The two
//! halves of one call share only the look-up of the thread's run state
//! ([`PairRun`]).
//!
//! A child of `object` so that it shares the thread's run states with
//! [`TracingObject::run`] without widening their visibility.

use super::{run_cache, Running, ThreadRun, TracingObject, TracingProgram};
use crate::error::Fault;
use crate::state::RunState;
use crate::tracing::env::{ProbeSite, TracingEnv};
use crate::tracing::slots::Lease;
use crate::tracing::ProgId;
use bpfjet_obj::ProgType;
use std::sync::atomic::Ordering;

/// One half of a fused pair under way: this thread's "run under way" flag
/// held, its run state for the object, a CPU slot leased when the object
/// can observe its CPU, the run begun. [`HalfRun::finish`] ends it.
pub struct HalfRun<'a> {
    object: &'a TracingObject,
    prog: &'a TracingProgram,
    run: &'a mut ThreadRun,
    lease: Option<Lease<'a>>,
    _running: Running<'static>,
}

/// What both halves of one activation of a fused pair share: this
/// thread's run state for the object, found by the first half that
/// begins and reused by the second (one run-cache look-up per pair). Only
/// the look-up is shared: each half still takes and gives back the
/// thread's "run under way" flag and, for an object that observes its
/// CPU, its own CPU slot, so nothing is held across the traced call.
pub struct PairRun<'a> {
    object: &'a TracingObject,
    /// Null until a half found it.
    run: *mut ThreadRun,
}

impl TracingObject {
    /// The shared part of one activation of a fused pair (nothing taken
    /// yet).
    #[inline]
    pub fn pair_run(&self) -> PairRun<'_> {
        PairRun {
            object: self,
            run: std::ptr::null_mut(),
        }
    }

    /// Begin a run of `prog` (one half of a fused pair) on the context at
    /// `ctx`, as [`TracingObject::run`] begins one; `None` (counted as a
    /// missed run) when a run of this thread is under way.
    ///
    /// # Safety
    /// As [`PairRun::begin_half`].
    #[inline]
    pub unsafe fn begin_half(
        &self,
        prog: ProgId,
        ctx: *mut u8,
        site: &ProbeSite,
    ) -> Option<HalfRun<'_>> {
        // SAFETY: the caller's.
        unsafe { self.pair_run().begin_half(prog, ctx, site) }
    }
}

impl<'a> PairRun<'a> {
    /// Begin a run of `prog` (one half of the pair) on the context at
    /// `ctx`, as [`TracingObject::run`] begins one; `None` (counted as a
    /// missed run) when a run of this thread is under way.
    ///
    /// # Safety
    /// As [`TracingObject::run`]: `ctx` stays valid until
    /// [`HalfRun::finish`], laid out as `prog`'s type expects and at least
    /// [`TracingProgram::ctx_bytes`] long; the [`HalfRun`] is finished on
    /// this thread, the thread this `PairRun` was made on.
    #[inline]
    pub unsafe fn begin_half(
        &mut self,
        prog: ProgId,
        ctx: *mut u8,
        site: &ProbeSite,
    ) -> Option<HalfRun<'a>> {
        let object = self.object;
        let p = object.programs.get(prog)?;
        let cache = run_cache();
        // A run of this thread is under way (a signal handler's call inside
        // a program, ...): missed, as in `TracingObject::run`.
        if cache.running.replace(true) {
            object.missed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let running = Running(&cache.running);
        if self.run.is_null() {
            // SAFETY: `running` is held until the half is finished on
            // this thread: nothing else uses the run list meanwhile, and
            // the run state (boxed) stays until the object or the thread
            // goes — neither can happen between the halves of one call on
            // this thread, so the second half reuses the pointer.
            match unsafe { cache.get(object.uid, || object.thread_run()) } {
                Some(run) => self.run = run,
                None => {
                    // The thread is exiting: skipped, counted.
                    object.missed.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        // SAFETY: as above; no other reference to the run state is live
        // while `running` is held (a run nested between the halves ended
        // before the second half begins).
        let run = unsafe { &mut *self.run };
        let lease = object.cpu_bound.then(|| object.slots.lease());
        if let Some(lease) = &lease {
            run.env.run.set_cpu(lease.cpu);
        }
        run.env
            .begin(ctx as u64, p.ctx_len, p.prog_type == ProgType::Kprobe, site);
        run.state.begin_run();
        Some(HalfRun {
            object,
            prog: p,
            run,
            lease,
            _running: running,
        })
    }
}

impl HalfRun<'_> {
    /// The run state and per-run context the half's code runs with.
    #[inline]
    pub fn state_env(&mut self) -> (&mut RunState, &mut TracingEnv) {
        (&mut self.run.state, &mut self.run.env)
    }

    /// The CPU slot of the run (0 when the object leases none: it cannot
    /// observe its CPU).
    #[inline]
    pub fn cpu(&self) -> u32 {
        self.lease.as_ref().map_or(0, |l| l.cpu)
    }

    /// End the half with the code's outcome: the run ended, leftovers
    /// released, the slot and the thread's run state given back, trace
    /// lines kept, a fault counted (r0 then reads as 0, as for an unfused
    /// run). Returns r0.
    #[inline]
    pub fn finish(self, result: Result<u64, Fault>) -> u64 {
        let HalfRun {
            object,
            prog,
            run,
            lease,
            _running,
        } = self;
        run.state.end_run();
        let _ = run.env.run.release_leftovers();
        drop(lease);
        // The thread's "run under way" flag is cleared when `_running`
        // goes, at the end of this function.
        object.end_run(prog, result)
    }
}
