//! Why a program could not be compiled.

use thiserror::Error;

/// A compile failure. Never a panic: bad input and LLVM failures end up here.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JitError {
    /// The runtime's load checks rejected the program.
    #[error("load: {0}")]
    Load(#[from] bpfjet_runtime::LoadError),
    /// The JIT emits no bounds checks, so it only accepts programs loaded on
    /// the verified path (`LoadOptions::verified`).
    #[error("the JIT runs only verified programs (load options use bounds checking)")]
    NotVerified,
    /// A program shape the JIT does not handle (the verifier would reject
    /// it too): a jump out of its function, code falling into the next one.
    #[error("insn {pc}: {what}")]
    Unsupported { pc: usize, what: String },
    /// The host or requested target cannot be used.
    #[error("target: {0}")]
    Target(String),
    /// Building the IR failed (an internal error, reported instead of a panic).
    #[error("building IR for {function}: {message}")]
    Build { function: String, message: String },
    /// The generated IR failed LLVM's verifier.
    #[error("LLVM rejected the IR of {function}: {message}")]
    Verify { function: String, message: String },
    /// The optimization pipeline failed.
    #[error("optimization pipeline: {0}")]
    Pipeline(String),
    /// Machine-code generation failed.
    #[error("code generation: {0}")]
    Codegen(String),
    /// The object file could not be loaded into memory.
    #[error("loading native code: {0}")]
    Loader(String),
}
