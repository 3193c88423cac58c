//! The Linux side of bpfjet: the kernel as semantic oracle and performance
//! anchor. Loads an unmodified BPF object into the running kernel with libbpf,
//! applies a STATE.json map state, runs programs with `BPF_PROG_TEST_RUN`
//! and dumps the maps back as STATE.json.
//!
//! ```no_run
//! use bpfjet_kernel::{KernelObject, LoadOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = bpfjet_maps::state::load_state("STATE.json".as_ref())?;
//! let obj = KernelObject::open_with(
//!     "xdp_lb.o",
//!     &LoadOptions { state: Some(&state), ..LoadOptions::default() },
//! )?;
//! let run = obj.test_run("xdp_lb", &[0u8; 64], 1, Some(0))?;
//! println!("{} {:?}", run.retval, obj.dump_maps()?);
//! # Ok(()) }
//! ```
//!
//! # Map names
//!
//! A map is named as in its C source. Global data maps are named by their ELF
//! section: `.rodata`, `.data`, `.bss`, `.rodata.<x>`, `.data.<x>` (libbpf's
//! own names such as `xdp_lb.rodata` are accepted as input too).
//!
//! # Applying state
//!
//! - `value`: the value; for a per-CPU map, the same value in every possible CPU's slot.
//! - `values`: per-CPU maps only, exactly one per possible CPU ([`possible_cpus`]).
//! - `prog`: a PROG_ARRAY entry's program (C function name) of the same
//!   object; or, next to `value`, the program of a DEVMAP, DEVMAP_HASH or
//!   CPUMAP entry with 8-byte values (`struct bpf_devmap_val` /
//!   `bpf_cpumap_val`), whose `value` is then the 4-byte ifindex (qsize)
//!   alone (or 8 bytes with a zero program slot); the kernel refuses a
//!   program not loaded as `xdp/devmap` (`xdp/cpumap`).
//! - `inner`: ARRAY_OF_MAPS / HASH_OF_MAPS only; a new map of that spec is
//!   created, filled with its `entries`, and inserted (it must be compatible
//!   with the outer map's template, as the kernel checks).
//! - Global data maps have one entry, key `00000000`, the whole section image
//!   as `value`. `.rodata` is frozen by libbpf right after creation, so its
//!   state is written into the object before the load: pass the state to
//!   [`KernelObject::open_with`]. [`KernelObject::apply_state`] on a loaded
//!   object accepts `.rodata` entries only when they equal the current contents.
//! - Errors name the map and the entry index ([`KernelError`]).
//!
//! # Dump format (the userspace engines must produce the same)
//!
//! [`KernelObject::dump_maps`] returns one STATE.json map per map of the object:
//!
//! - Keys and values are lowercase hex without spaces.
//! - ARRAY, PERCPU_ARRAY and global data (`.data`, `.bss`, `.rodata*`): every
//!   index `0..max_entries`, in index order, key = the index as 4 little-endian bytes.
//! - HASH, LRU_HASH, PERCPU_HASH, LRU_PERCPU_HASH, LPM_TRIE, DEVMAP,
//!   DEVMAP_HASH, CPUMAP: the present keys, sorted by key bytes (equivalently,
//!   by their hex text).
//! - Per-CPU maps: always `values`, one per possible CPU (CPU 0 first),
//!   each exactly `value_size` bytes; never `value`.
//! - PROG_ARRAY: occupied indices only, in index order, as `prog` = the C
//!   name of the program; a program that is not part of the object (only
//!   possible when written from outside) shows as `#id:<kernel prog id>`.
//! - DEVMAP, DEVMAP_HASH and CPUMAP with 8-byte values: `value` is the
//!   4-byte ifindex (qsize) and `prog` the entry's program when it has one
//!   (`#id:<id>` for one not of the object).
//! - ARRAY_OF_MAPS (occupied indices, in index order) and HASH_OF_MAPS (keys
//!   sorted): `inner` with `type` (bpftool's name), `key_size`, `value_size`,
//!   `max_entries`, `flags` (the inner map's `map_flags`) and its `entries`
//!   dumped by these same rules, recursively.
//! - Omitted entirely (no key in the dump): `.kconfig` (host configuration,
//!   not program state); RINGBUF and USER_RINGBUF (streams, not key/value
//!   state); PERF_EVENT_ARRAY (perf event fds); QUEUE and STACK (only readable
//!   by popping, which would change them); BLOOM_FILTER (no keys to list);
//!   XSKMAP, SOCKMAP, SOCKHASH, REUSEPORT_SOCKARRAY (sockets); every other
//!   type not listed above.
//!
//! # Privileges
//!
//! Everything here needs root (or CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN).
//! Test suites call [`kernel_available`] first and skip loudly on `Err`.

mod available;
pub mod bench;
mod cpu;
mod deployment;
mod dump;
mod error;
mod libbpf_log;
mod map_kind;
mod object;
pub mod raw_load;
mod ringbuf;
mod state;
mod sys;
mod test_run;

pub use available::kernel_available;
pub use cpu::{current_cpu, CpuPin};
pub use deployment::{is_incompatible_tail_target, KernelDeployment};
pub use dump::FOREIGN_PROGRAM_PREFIX;
pub use error::{EntryPart, Errno, KernelError};
pub use object::{KernelMap, KernelObject, KernelProgram, LoadOptions, ProgTypeOverride};
pub use sys::{possible_cpus, MapInfo};
pub use test_run::{test_run_fd, TestRunOptions, TestRunResult, XdpContext};
