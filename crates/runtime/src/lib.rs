//! bpfjet runtime: executes validated eBPF programs.
//!
//! The [`Program`] type is a loaded program (lddw relocations resolved, helper
//! and kfunc calls bound to their registries); [`Program::run`] executes it on
//! the reference interpreter with per-run scratch state kept in a reusable
//! [`RunState`]. Two memory modes exist (see [`MemoryMode`]): *verified*
//! (raw loads and stores, trusting the verifier's proof) and *bounds-checked*
//! (every access is checked against a list of known [`Region`]s, so an
//! unverified program faults instead of corrupting the host).
//!
//! Helpers and kfuncs share one calling convention ([`Helper`]): they receive a
//! [`HelperCtx`] (re-entry into the interpreter for callbacks, tail calls, the
//! caller's opaque per-run context, memory checks) and r1–r5.
//!
//! On top of the interpreter sits the kernel-compatible layer: the kernel's
//! helpers ([`xdp_helpers`], `helpers/`), the XDP frame and context with the
//! load-time `xdp_md` rewrite ([`xdp`]), whole-object loading with maps and
//! tail calls ([`LoadedObject`]), the kernel's `BPF_PROG_TEST_RUN`
//! ([`LoadedObject::test_run`]) and STATE.json dumps in the kernel engine's
//! format ([`LoadedObject::dump_state`]).

pub mod cpu_exclusion;
pub mod deployment;
mod dump;
pub mod env;
pub mod errno;
mod error;
pub mod fuzzing;
pub mod graph_kfuncs;
mod helper_ctx;
mod helpers;
mod initial_exec;
mod interp;
pub mod kfuncs;
mod load;
mod loader;
mod program;
mod region;
mod runtime_error;
mod state;
mod test_run;
mod timers;
pub mod tracing;
pub mod worker;
pub mod xdp;

pub use deployment::DeploymentObject;
pub use dump::FOREIGN_PROGRAM_PREFIX;
pub use env::{run_env, run_env_ref, ObjectMaps, RunEnv, XdpEnv};
pub use error::{Access, Fault, LoadError, TailCallError};
pub use helper_ctx::{CallbackRunner, HelperCtx};
pub use helpers::fib::{self, Fib, FibTable};
pub use helpers::{
    check_map_use, clock_ns, csum_diff, dynptr_direct, helpers_for, ids as helper_ids,
    kernel_helper_name, map_use, redirect_target, strncmp, tracing_helpers, xdp_helpers,
    BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS,
};
pub use helpers::{Helper, HelperFn, HelperRegistry};
pub use loader::{possible_cpus, LoadedObject, ObjectOptions, VerifiedForm};
pub use program::{LoadOptions, MapBinding, MemoryMode, Program, VerifiedProof};
pub use region::Region;
pub use runtime_error::RuntimeError;
pub use state::{RunState, FRAME_STRIDE, MAX_CALL_DEPTH, MAX_TAIL_CALLS, STACK_SIZE};
pub use test_run::{TestRunOptions, TestRunResult, LOOPBACK_IFINDEX};
pub use timers::{set_async_runner, AsyncRunner};
