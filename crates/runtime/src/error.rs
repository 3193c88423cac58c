//! Why a program cannot be loaded, and why a run was aborted.
//!
//! Errors a *program* can handle (a failed map update, a missing tail-call
//! target) are not here: helpers report those to the program as negative errno
//! values, like the kernel. A [`Fault`] is what the kernel would have prevented
//! with its verifier; it aborts the whole run.

use bpfjet_isa::LdDwKind;
use std::fmt;
use thiserror::Error;

/// The kind of memory access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    /// A read-modify-write (atomic instructions): needs a writable region.
    Atomic,
}

impl Access {
    /// Whether this access changes memory, and so needs a writable region.
    pub fn writes(self) -> bool {
        !matches!(self, Access::Read)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic read-modify-write",
        })
    }
}

/// A program the interpreter refuses to load. `pc` is the slot index.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LoadError {
    #[error("program is empty")]
    Empty,
    #[error("insn {pc}: legacy packet load (ld_abs/ld_ind) is not supported for XDP")]
    LegacyPacketLoad { pc: usize },
    #[error(
        "insn {pc}: lddw of kind {kind:?} must be relocated to a map-index form by the loader"
    )]
    UnrelocatedLdDw { pc: usize, kind: LdDwKind },
    #[error("insn {pc}: call to unknown helper {id}")]
    UnknownHelper { pc: usize, id: i32 },
    #[error("insn {pc}: call to unknown kfunc {id}")]
    UnknownKfunc { pc: usize, id: i32 },
    #[error("insn {pc}: map index {index} is out of range ({count} maps bound)")]
    MapIndexOutOfRange { pc: usize, index: u32, count: usize },
    #[error(
        "insn {pc}: lddw of a map has {upper:#x} in its second slot's imm, which must be 0 \
         (the kernel refuses it: unrecognized bpf_ld_imm64 insn)"
    )]
    MapRefUpperHalf { pc: usize, upper: u32 },
    #[error("insn {pc}: map {index} has no value area to point into")]
    MapHasNoValue { pc: usize, index: u32 },
    #[error("insn {pc}: offset {offset} is past the end of map {index}'s value ({len} bytes)")]
    MapValueOffsetOutOfRange {
        pc: usize,
        index: u32,
        offset: u32,
        len: u64,
    },
    #[error("insn {pc}: invalid register r{reg}")]
    BadRegister { pc: usize, reg: u8 },
    #[error("insn {pc}: writes the read-only frame pointer r10")]
    WritesFramePointer { pc: usize },
    #[error("insn {pc}: {what} target {target} is outside the program or inside an lddw")]
    BadTarget {
        pc: usize,
        target: i64,
        what: &'static str,
    },
    #[error("insn {pc}: lddw is not followed by its second slot")]
    BrokenLdDw { pc: usize },
    #[error("insn {pc}: second slot of an lddw without its first")]
    StrayLdDwTail { pc: usize },
    #[error("insn {pc}: {what}")]
    InvalidInsn { pc: usize, what: &'static str },
}

/// Why a run was aborted. `pc` is the slot of the instruction that faulted
/// (for a fault raised by a helper, the slot of the call).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Fault {
    #[error("insn {pc}: out-of-bounds {access} of {size} bytes at {addr:#x}")]
    OutOfBounds {
        pc: usize,
        addr: u64,
        size: u64,
        access: Access,
    },
    #[error("insn {pc}: misaligned atomic access of {size} bytes at {addr:#x}")]
    Misaligned { pc: usize, addr: u64, size: u64 },
    #[error("insn {pc}: call depth would exceed {max} frames")]
    CallDepthExceeded { pc: usize, max: usize },
    #[error("insn {pc}: instruction budget of {budget} exhausted")]
    BudgetExceeded { pc: usize, budget: u64 },
    #[error("insn {pc}: call to unknown helper {id:#x}")]
    UnknownHelper { pc: usize, id: u64 },
    #[error("insn {pc}: {target:#x} is not the entry of a subprogram")]
    BadSubprogram { pc: usize, target: u64 },
    #[error("insn {pc}: execution left the program or reached a non-executable slot")]
    BadPc { pc: usize },
    #[error("insn {pc}: helper {helper} aborted the run: {reason}")]
    Helper {
        pc: usize,
        helper: &'static str,
        reason: String,
    },
}

impl Fault {
    /// The slot of the faulting instruction.
    pub fn pc(&self) -> usize {
        match *self {
            Fault::OutOfBounds { pc, .. }
            | Fault::Misaligned { pc, .. }
            | Fault::CallDepthExceeded { pc, .. }
            | Fault::BudgetExceeded { pc, .. }
            | Fault::UnknownHelper { pc, .. }
            | Fault::BadSubprogram { pc, .. }
            | Fault::BadPc { pc }
            | Fault::Helper { pc, .. } => pc,
        }
    }
}

/// Why a tail-call request was refused. The requesting helper turns this into
/// the program-visible result (the kernel's `bpf_tail_call` simply falls
/// through to the next instruction).
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum TailCallError {
    #[error("tail-call limit of {0} reached")]
    LimitReached(u32),
    #[error("no program at index {0} of the program table")]
    NoSuchProgram(u32),
    #[error("target needs bounds checking but the caller runs on the verified fast path")]
    NeedsBoundsChecking,
    #[error("a tail call was already requested by this helper call")]
    AlreadyRequested,
}

impl TailCallError {
    /// The errno a `bpf_tail_call` helper would report for this refusal.
    pub fn errno(self) -> u64 {
        match self {
            TailCallError::LimitReached(_) => crate::errno::E2BIG,
            TailCallError::NoSuchProgram(_) => crate::errno::ENOENT,
            TailCallError::NeedsBoundsChecking | TailCallError::AlreadyRequested => {
                crate::errno::EINVAL
            }
        }
    }
}
