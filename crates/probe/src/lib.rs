//! In-process attach machinery for tracing programs.
//!
//! bpfjet runs tracing programs inside the traced process. This crate finds
//! where to attach (`PATH:SYMBOL[+OFF]` against the ELF files the process has
//! loaded), patches a function's entry with a jump to a trampoline that saves
//! the registers into a kernel-layout [`PtRegs`] and calls a handler
//! ([`uprobe`]), hooks returns through a per-thread shadow stack, and
//! intercepts the process's own system calls with Syscall User Dispatch
//! ([`syscalls`]). It knows nothing about BPF: handlers are plain Rust
//! closures, so the trace agent plugs programs in and tests plug in counters.

pub mod breakpoint;
mod call_through;
pub use call_through::{set_pair_hooks, PairCall, PairHook};
mod claims;
mod code_alloc;
pub mod error;
pub mod exempt_copy;
pub mod fast_syscalls;
pub mod inject;
pub mod ksyscall;
pub mod multi;
mod patch;
pub mod regs;
mod relocate;
pub mod sampler;
mod shadow;
mod signal_handlers;
pub mod symbols;
pub mod syscall_table;
pub mod syscalls;
mod thread;
mod trampoline;
pub mod unwind;
pub mod uprobe;
pub mod usdt;
mod wrappers;

pub use error::ProbeError;
pub use regs::PtRegs;
pub use symbols::{LoadedObject, ResolvedSymbol, UprobeTarget};
pub use uprobe::{attach, Attachment, ProbeHandler};
