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

pub mod errno;
mod error;
pub mod fuzzing;
mod helper_ctx;
mod helpers;
mod interp;
mod load;
mod program;
mod region;
mod state;

pub use error::{Access, Fault, LoadError, TailCallError};
pub use helper_ctx::HelperCtx;
pub use helpers::{Helper, HelperFn, HelperRegistry};
pub use program::{LoadOptions, MapBinding, MemoryMode, Program, VerifiedProof};
pub use region::Region;
pub use state::{RunState, FRAME_STRIDE, MAX_CALL_DEPTH, MAX_TAIL_CALLS, STACK_SIZE};
