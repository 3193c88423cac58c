//! The run loop: packets from a [`PacketSource`](crate::PacketSource) in
//! batches, an XDP program run on every frame in place, the verdicts
//! counted and the surviving packets routed to an [`Output`].
//!
//! The loop does not know which engine runs the program: anything that
//! implements [`FrameProgram`] (the runtime's interpreter or JIT behind an
//! adapter, a closure in a test) will do. One [`WorkerPool`] thread runs
//! per CPU slot; each owns its program runner (and with it its per-CPU map
//! slot) and publishes its counters in [`RunStats`] once per batch, so a
//! status line can be read from another thread without slowing the loop.

mod output;
mod pool;
mod program;
mod runtime;
mod shared;
pub mod signal;
mod stats;
mod switch;
pub mod top;
mod verdict;
mod worker;

pub use output::{NullOutput, Output, SplitOutput};
pub use pool::{pin_to_cpu, PoolOutcome, WorkerJob, WorkerPool, WorkerResult, WorkerSetup};
pub use program::{FnProgram, FrameMut, FrameProgram, ProgramFault};
pub use runtime::EventedRunner;
pub use shared::SharedSource;
pub use signal::StopSignal;
pub use stats::{
    process_cpu_time, thread_cpu_time, LocalCounts, RunStats, StatsSnapshot, TargetTally,
    WorkerCounters,
};
pub use switch::{ProgramSwitch, SwitchError, SwitchableProgram, RETIRED};
pub use top::{TopOutput, TopTable};
pub use verdict::{Egress, EgressCopy, RedirectTarget, Verdict};
pub use worker::{run_worker, WorkerOptions, WorkerReport};
