//! Tracing programs (kprobe-type uprobes/uretprobes/USDT, syscalls
//! tracepoints, raw `sys_enter`/`sys_exit` tracepoints) run inside the
//! traced process: the API the attach layer calls on every hit.
//!
//! # How to use it
//!
//! ```no_run
//! use bpfjet_runtime::tracing::{ProbeSite, PtRegs, TracingObject, TracingOptions};
//! use bpfjet_obj::{ProgKind, ProbeTarget};
//!
//! // 1. Load: maps created as `bpfjet run` does, every tracing program
//! //    verified by bpfjet's verifier (a rejection is an error here).
//! //    For native code use `bpfjet_jit::load_tracing(&obj, &opts, &jit_opts)`
//! //    instead: same type, programs compiled by the JIT.
//! let obj = bpfjet_obj::load_file("tool.bpf.o")?;
//! let tracing = TracingObject::load(&obj, &TracingOptions::default())?;
//!
//! // 2. Attach: each program's kind is the workspace's one program type,
//! //    with the section's parsed target.
//! for (id, p) in tracing.programs().iter().enumerate() {
//!     match p.kind() {
//!         ProgKind::Probe(probe) => {
//!             // probe.flavor (Uprobe, Uretprobe, UprobeMulti, Usdt, ...),
//!             // probe.target (ProbeTarget::User { path, symbol, offset }, ...)
//!             if let ProbeTarget::User { path, symbol, offset } = &probe.target {
//!                 println!("{id}: {path}:{symbol}+{offset}");
//!             }
//!         }
//!         ProgKind::Tracepoint { category, name } => println!("{category}/{name}"),
//!         ProgKind::RawTracepoint { name } => println!("raw {name}"),
//!         _ => {}
//!     }
//!     // The attach point must provide the context bytes the program reads
//!     // (the kernel's attach-time `max_ctx_offset` check).
//!     p.check_ctx_size(p.attach_ctx_size()?)?;
//! }
//!
//! // 3. On every hit, from any thread of the traced process:
//! let mut regs = PtRegs::with_args(&[1, 2, 3]);
//! regs.ip = 0x401000;
//! let site = ProbeSite { func_ip: 0x401000, cookie: 0, regs: 0, ret_at_sp: false };
//! let r0 = tracing.run_regs(0, &mut regs, &site);
//! # let _ = r0;
//!
//! // 4. At exit: maps (STATE.json format) and counters.
//! let dump = tracing.loaded().dump_state();
//! # let _ = dump;
//! println!("missed {} runs", tracing.missed_runs());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Entries: [`TracingObject::run_regs`] (probes: fill the argument
//! registers, `sp`, `bp`, `ip` at entry; `ax` with the return value for a
//! return probe), [`TracingObject::run_sys_enter`] /
//! [`TracingObject::run_sys_exit`] (syscalls tracepoints: [`SysEnterCtx`],
//! [`SysExitCtx`]), [`TracingObject::run_raw_syscall`] (raw tracepoints:
//! [`RawSyscallArgs`], `args[0]` the address of the syscall's [`PtRegs`]),
//! or the unchecked [`TracingObject::run`] on a raw context pointer. A run
//! returns the program's r0; a run that faults returns 0 and is counted
//! ([`TracingObject::faults`]).
//!
//! # Threads, CPUs, recursion
//!
//! `TracingObject` is `Send + Sync`; runs take no global lock. Each thread
//! keeps its own run state (stack, per-run bookkeeping) per object, made on
//! its first run. Per-CPU semantics: a run leases one of the object's CPU
//! slots for its duration ([`slots`](self) documentation): the slot is
//! `bpf_get_smp_processor_id()` and the per-CPU map index, and no two runs
//! hold the same slot at once, so per-CPU values are race-free as in the
//! kernel. A probe hit while the same thread is already running a program
//! of the object (a probed function called from a helper, a signal
//! handler) is skipped and counted ([`TracingObject::missed_runs`]), as
//! the kernel's recursion protection does.
//!
//! Helpers: the base set plus the tracing helpers
//! ([`crate::tracing_helpers`]); `bpf_get_current_pid_tgid` and friends
//! describe the calling thread; `bpf_probe_read_user*` never fault the
//! process (`-EFAULT` and a zeroed buffer); `bpf_probe_read_kernel*` read
//! only the hit's "kernel" objects — the context record and the registers
//! of the hit ([`TracingEnv::is_kernel_memory`]) — and return `-EFAULT`
//! for any other address.

pub mod cgroup;
mod context;
pub(crate) mod current;
mod env;
mod link_watch;
mod object;
mod slots;
pub mod task_view;
pub(crate) mod thread_maps;
mod trace_ring;
pub(crate) mod user_mem;
pub mod xdp_events;

pub use context::{PerfEventData, PtRegs, RawSyscallArgs, SysEnterCtx, SysExitCtx};
pub use env::{ProbeSite, TracingEnv};
pub use link_watch::bump_link_generation;
pub use object::{
    keep_thread_runs_at_exit, load_maps_and_programs, running_here, HalfRun, NativeEntry, PairRun,
    ProgId, TracingObject, TracingOptions, TracingProgram,
};
pub use thread_maps::{
    slot_layout, thread_map_delete, thread_map_lookup, thread_map_update, ThreadMap, ThreadMapSpec,
    THREAD_MAP_DELETE, THREAD_MAP_LOOKUP, THREAD_MAP_UPDATE,
};
pub use trace_ring::{TraceLoss, TraceRing, TRACE_RING_BYTES};
pub use user_mem::BadAddress;

pub use current::{forked_child, ids_changed};

/// The calling thread's `(tgid, tid)` as `bpf_get_current_pid_tgid` sees it.
#[inline]
pub fn current_tgid_tid() -> (u32, u32) {
    current::tgid_tid()
}

/// Fault-safe read of the process's own memory, as `bpf_probe_read_user`
/// does it: `Err` (and `dst` zeroed) when `addr` is not readable.
pub fn probe_read_user(addr: u64, dst: &mut [u8]) -> Result<(), BadAddress> {
    user_mem::read(addr, dst)
}
