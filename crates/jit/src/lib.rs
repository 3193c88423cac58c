//! bpfjet's LLVM JIT: verified eBPF bytecode lifted to LLVM IR, optimized
//! with LLVM 19's `default<O3>` pipeline for the host CPU, and loaded as
//! native code by a small ELF loader of our own.
//!
//! ```text
//! Program::new (load checks, lddw resolution)
//!   -> analysis (functions, blocks, frame-pointer provenance)
//!   -> lift (one LLVM function per BPF function)
//!   -> pipeline (verify, optimize, emit an object)   <- skipped on a cache hit
//!   -> loader (map, relocate, protect)
//!   -> JitProgram::run (trampolines connect helpers, callbacks, tail calls)
//! ```
//!
//! Helpers are the runtime's own [`bpfjet_runtime::Helper`]s, reached through
//! one trampoline, so they are written once for both engines.

mod analysis;
mod aot;
mod bindings;
mod cache;
mod error;
mod fused;
mod graph_natives;
mod lift;
mod loader;
mod natives;
mod object;
mod options;
mod pipeline;
mod program;
mod thread_maps;
mod tracing;
mod trampoline;

pub use aot::{source_hash, AotArtifact, AotError, AotMap, AotProgram, AOT_FORMAT_VERSION};
pub use bindings::{Bindings, CtxConstant, ThreadMapBinding};
pub use error::JitError;
pub use fused::FusedPair;
pub use object::{CompiledPrograms, JitObject, ObjectError, XdpBench, XdpEngine};
pub use options::{CacheMode, CpuTarget, JitOptions, OptLevel};
pub use program::{llvm_compilations, CompileStats, DumpStage, JitProgram};
pub use tracing::{
    dump_fused_pair, dump_tracing, load_tracing, load_tracing_fused, load_tracing_with,
    FusedOutcome, TracingJit,
};
