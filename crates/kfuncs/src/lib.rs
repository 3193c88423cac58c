//! bpfjet's NF library: kfuncs for network functions, after eNetSTL
//! (EuroSys'25) — bit scans, SIMD search in bucket arrays, key compare,
//! hardware CRC32C, multi-hash fused with count-min / Bloom updates and a
//! random pool of geometric counts for sampled updates, node memory for
//! linked structures (skip lists, lists, trees) —
//! under bpfjet's own names (`include/bpfjet_kfuncs.h`) and under the
//! names and signatures of eNetSTL's kernel module.
//!
//! Each kfunc is declared once in [`catalog`]: name, C declaration,
//! verifier prototype, program types, native implementation and inline
//! form. The verifier takes the prototypes, the interpreter calls the
//! natives, the JIT calls the natives directly or compiles the inline form.
//!
//! The natives take the vector paths (AVX2, SSE4.2) when the CPU has them,
//! detected once ([`cpu::features`]); the scalar paths give identical
//! results (property-tested).
//!
//! No LLVM here: the inline forms are descriptions ([`catalog::Inline`])
//! the JIT lowers to IR.

pub mod bits;
pub mod bktlist;
pub mod catalog;
pub mod cpu;
pub mod enetstl;
pub mod enetstl_ptr;
pub mod errno;
mod geo_log2;
pub mod graph;
pub mod hash;
pub mod iter_num;
pub mod multihash;
mod node_kfuncs;
pub mod nodes;
pub mod random;
pub mod search;
pub mod signature;

pub use catalog::{
    by_name, by_symbol, verifier_protos, BktOp, Inline, Kfunc, Lanes, NativeFn, Origin, PtrOp,
    KFUNCS,
};
pub use cpu::{features, CpuFeatures};
pub use enetstl_ptr::{module_type, MODULE_TYPES};
