//! bpfjet as a `bpf()` backend: the commands a control plane issues,
//! served by bpfjet's own maps, verifier, loader and interpreter.
//!
//! Objects live in a namespace shared by every process of one instance
//! ([`Namespace`]): maps in the instance's shared memory (the same objects
//! `bpfjet map` reads), programs and BTF as records in the instance's run
//! directory, pins as files mapping a bpffs path to an object. A process
//! holds an object through a real file descriptor opened on that object's
//! file, so `dup`, `fork`, `SCM_RIGHTS` and `/proc/self/fd` keep working:
//! an fd this process has not seen is recognised by the file it names.

pub mod attach;
mod backend;
mod fds;
mod freplace;
mod holders;
mod kernel_ids;
mod kernel_objects;
mod kfunc_calls;
mod links;
mod map_moves;
mod maps;
mod namespace;
mod objects;
mod perf_events;
mod perf_timers;
mod pid_attach;
mod pin_files;
mod probe_links;
mod prog_btf;
mod progs;
mod redirect_progs;
mod tail_calls;
mod task_fd_query;
mod tp_btf;
mod tracing_test_run;
mod uprobe_multi;
mod user;
mod xdp;

pub use backend::BpfjetBackend;
pub use namespace::{Namespace, ObjRef};
pub use perf_events::{bind_perf_arrays, perf_bindings, ProbePoint};
pub use pid_attach::ATTACH_RUNNING_ENV;
pub use probe_links::{
    links_generation, traced_object, xdp_event_object, ProbeLink, TracedObject, TracedProgram,
};
pub use tp_btf::prog_facts;
pub use xdp::{data_plane_program, XdpRequest};
