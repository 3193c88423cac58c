//! The eBPF instruction set as specified by RFC 9669 (cpu v1–v4).
//!
//! A program is a sequence of 8-byte *slots*. [`RawInsn`] is one slot exactly as
//! encoded; [`Insn`] is its typed meaning. `lddw` occupies two slots: the typed
//! program keeps a [`Insn::LdDwTail`] marker in the second slot so that jump
//! offsets (which count slots) index the typed program directly.

pub mod asm;
pub mod conformance;
pub mod decode;
pub mod deferred;
pub mod disasm;
pub mod encode;
pub mod insn;
pub mod opcode;

pub use asm::{assemble, assemble_bytes, AsmError, AsmErrorKind};
pub use decode::{decode_bytes, decode_program, DecodeError};
pub use deferred::{decode_for_load, Decoded};
pub use disasm::{disassemble, format_insn, format_insn_asm};
pub use encode::encode_program;
pub use insn::*;
