//! Test-only support shared by every bpfjet crate (a dev-dependency only,
//! never published): one way to find clang and one flag set to compile the
//! tests' C programs for BPF, each object compiled once per test process;
//! the typed instruction builder tests write programs with; the packets
//! tests feed them; loud skips ([`report_skip`]).

pub mod clang;
pub mod insn;
pub mod packet;
pub mod rng;
pub mod skip;

pub use clang::{clang, compile_c, Compile};
pub use rng::xorshift;
pub use skip::report_skip;
