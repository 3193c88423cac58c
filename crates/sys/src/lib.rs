//! The `bpf()` system call as typed commands.
//!
//! One entry point for every consumer: the raw `(cmd, attr, size)` triple a
//! program passes to `bpf()` is decoded by [`decode`] into a [`Command`]
//! (applying the kernel's `attr` size rules), and a [`Backend`] executes it.
//! Two backends exist: bpfjet's (in the `bpfjet-preload` crate) and the
//! running kernel's ([`KernelBackend`], the raw system call), so tests can
//! drive one command sequence through both and compare.
//!
//! Commands carry the caller's buffers as addresses, exactly as the kernel
//! receives them: a backend reads and writes the caller's memory.

mod attr;
mod backend;
mod command;
mod errno;
mod info;
mod kernel;

pub use attr::{decode, encode, outputs, read_back, write_back, ATTR_SIZE};
pub use backend::Backend;
pub use command::{
    BtfLoad, Cmd, Command, GetFdById, GetInfo, GetNextId, IdKind, MapBatch, MapCreate, MapElem,
    ObjPath, ProgLoad, TaskFdQuery, TestRun,
};
pub use errno::Errno;
pub use info::{BtfInfo, MapInfo, ProgInfo};
pub use kernel::KernelBackend;
