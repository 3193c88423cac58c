//! bpfjet maps: every map type in shared memory, plus the STATE.json format.
//!
//! - [`Map`]: one map, data-plane operations (`lookup` returning pointers
//!   into shared memory, `update`, `delete`, `push`/`pop`/`peek`, ring
//!   buffer and perf output) and control-plane operations (`lookup_copy`,
//!   `update_elem`, `get_next_key`, `entries`, `apply_state`, `dump`).
//! - [`Instance`]: the maps of one running object, published in
//!   `/dev/shm/bpfjet.<instance>.*` for control planes in other processes.
//! - [`MapError::errno`]: the kernel errno of every failure.
pub mod deployment;
pub mod spec;
pub mod state;

mod array;
mod bloom;
mod error;
mod fd_array;
mod hash_fn;
mod hashtab;
mod header;
mod instance;
mod kernel_view;
mod lpm;
mod lru;
mod map;
mod perf_event;
mod perf_ring;
mod queue_stack;
mod registry;
pub mod ringbuf;
mod shm;
mod state_io;
pub mod sync;
mod validate;

pub use array::Slots;
pub use error::MapError;
pub use hash_fn::{hash_bytes, key_hash, HASH_SEED};
pub use instance::Instance;
pub use kernel_view::KERNEL_VIEW_BYTES;
pub use map::{ArrayLayout, Map, MapEntry, MapOptions, PerfEventConsumer};
pub use perf_event::{PerfEvent, PerfbufStats, BPF_F_CURRENT_CPU, BPF_F_INDEX_MASK};
pub use perf_ring::{PerfRing, SampleFormat};
pub use registry::{MapInfo, REGISTRY_CAPACITY};
pub use ringbuf::{
    Backpressure, MmapSegment, RingRecord, RingbufConsumer, RingbufSnapshot, RingbufStats,
    UserRingbufProducer, WakeupFd,
};
pub use shm::page_size;
pub use spec::{MapSpec, MapType};
pub use state_io::{
    inner_spec, split_entry_program, ApplyError, InstanceResolver, StateResolver,
    FOREIGN_PROGRAM_PREFIX,
};
pub use validate::check_creatable;
