//! Pairwise fusion of tracing programs ("Pairwise BPF programs should be
//! optimized together", eBPF'25): an entry and an exit program attached to
//! the same function often hand a value from one to the other through a hash
//! map keyed by the thread — fsdist's timestamp, funclatency's start time, a
//! bytes-per-call tracer's argument. When bpfjet runs both in the traced
//! process it can keep that value in the thread instead of the map.
//!
//! This crate decides *whether* that is allowed, from the programs' code
//! alone ([`summary`]: what each program does with each map and with which
//! key; [`pair`]: which maps of an entry/exit pair are pure hand-offs and
//! why the others are not). A map is a hand-off only if internalising it
//! cannot change what anyone observes:
//!
//! - the entry only updates it and the exit only looks it up and deletes it,
//!   always with the same key, derived from the calling thread
//!   (`bpf_get_current_pid_tgid()` or its low half; the high half is the
//!   process id, shared by every thread, and is refused);
//! - no other program uses it, and it is not pinned or named by the caller
//!   as visible to a control plane;
//! - it is a plain or LRU hash map (a per-CPU map would lose the value when
//!   the thread changes CPU between entry and exit, which the fused code
//!   would not reproduce).
//!
//! The analysis is a forward data-flow over the linked program
//! ([`bpfjet_obj::Program::insns`]) that tracks where the thread id lives in
//! registers and on the stack and which map each map helper is called with.
//! Anything it cannot follow (a map pointer stored or passed to another
//! helper, a key it cannot name, a bpf-to-bpf call or a tail call) makes the
//! map ineligible, never eligible.

pub mod pair;
pub mod plan;
pub mod summary;

pub use pair::{analyse_pair, analyse_pair_sharing, Handoff, PairReport, Refusal};
pub use plan::{pairs, plan, FusionPlan, InternalMap};
pub use summary::{summarise, MapOp, MapUse, ProgramSummary, ThreadKey};
