//! bpfjet maps: every map type in shared memory, plus the STATE.json format.
pub mod spec;
pub mod state;

pub use spec::{MapSpec, MapType};
