//! Opcode field constants (RFC 9669 §3–§5). Kept as plain constants so that the
//! decoder, encoder and the engines all speak the same numbers.

// Instruction classes (low 3 bits).
pub const CLASS_LD: u8 = 0x00;
pub const CLASS_LDX: u8 = 0x01;
pub const CLASS_ST: u8 = 0x02;
pub const CLASS_STX: u8 = 0x03;
pub const CLASS_ALU: u8 = 0x04;
pub const CLASS_JMP: u8 = 0x05;
pub const CLASS_JMP32: u8 = 0x06;
pub const CLASS_ALU64: u8 = 0x07;

// Source bit for ALU/JMP.
pub const SRC_K: u8 = 0x00;
pub const SRC_X: u8 = 0x08;

// ALU operations (high 4 bits).
pub const ALU_ADD: u8 = 0x00;
pub const ALU_SUB: u8 = 0x10;
pub const ALU_MUL: u8 = 0x20;
pub const ALU_DIV: u8 = 0x30;
pub const ALU_OR: u8 = 0x40;
pub const ALU_AND: u8 = 0x50;
pub const ALU_LSH: u8 = 0x60;
pub const ALU_RSH: u8 = 0x70;
pub const ALU_NEG: u8 = 0x80;
pub const ALU_MOD: u8 = 0x90;
pub const ALU_XOR: u8 = 0xa0;
pub const ALU_MOV: u8 = 0xb0;
pub const ALU_ARSH: u8 = 0xc0;
pub const ALU_END: u8 = 0xd0;

// Jump operations (high 4 bits).
pub const JMP_JA: u8 = 0x00;
pub const JMP_JEQ: u8 = 0x10;
pub const JMP_JGT: u8 = 0x20;
pub const JMP_JGE: u8 = 0x30;
pub const JMP_JSET: u8 = 0x40;
pub const JMP_JNE: u8 = 0x50;
pub const JMP_JSGT: u8 = 0x60;
pub const JMP_JSGE: u8 = 0x70;
pub const JMP_CALL: u8 = 0x80;
pub const JMP_EXIT: u8 = 0x90;
pub const JMP_JLT: u8 = 0xa0;
pub const JMP_JLE: u8 = 0xb0;
pub const JMP_JSLT: u8 = 0xc0;
pub const JMP_JSLE: u8 = 0xd0;
/// `BPF_JCOND`: a conditional jump whose condition is not a comparison;
/// its only kind is `may_goto` (src_reg [`JCOND_MAY_GOTO`]).
pub const JMP_JCOND: u8 = 0xe0;
pub const JCOND_MAY_GOTO: u8 = 0;
/// The opcode byte of `may_goto`.
pub const MAY_GOTO: u8 = CLASS_JMP | JMP_JCOND | SRC_K;

// Load/store size (bits 3–4).
pub const SIZE_W: u8 = 0x00;
pub const SIZE_H: u8 = 0x08;
pub const SIZE_B: u8 = 0x10;
pub const SIZE_DW: u8 = 0x18;

// Load/store mode (bits 5–7).
pub const MODE_IMM: u8 = 0x00;
pub const MODE_ABS: u8 = 0x20;
pub const MODE_IND: u8 = 0x40;
pub const MODE_MEM: u8 = 0x60;
pub const MODE_MEMSX: u8 = 0x80;
pub const MODE_ATOMIC: u8 = 0xc0;

// Atomic operations (in imm).
pub const ATOMIC_FETCH: i32 = 0x01;
pub const ATOMIC_ADD: i32 = 0x00;
pub const ATOMIC_OR: i32 = 0x40;
pub const ATOMIC_AND: i32 = 0x50;
pub const ATOMIC_XOR: i32 = 0xa0;
pub const ATOMIC_XCHG: i32 = 0xe0 | ATOMIC_FETCH;
pub const ATOMIC_CMPXCHG: i32 = 0xf0 | ATOMIC_FETCH;
/// `load_acquire` and `store_release` (kernel 6.15+), all four sizes.
pub const ATOMIC_LOAD_ACQ: i32 = 0x100;
pub const ATOMIC_STORE_REL: i32 = 0x110;

// Pseudo sources of lddw (src_reg field).
pub const PSEUDO_IMM64: u8 = 0;
pub const PSEUDO_MAP_FD: u8 = 1;
pub const PSEUDO_MAP_VALUE: u8 = 2;
pub const PSEUDO_BTF_ID: u8 = 3;
pub const PSEUDO_FUNC: u8 = 4;
pub const PSEUDO_MAP_IDX: u8 = 5;
pub const PSEUDO_MAP_IDX_VALUE: u8 = 6;

// Call kinds (src_reg field of a call).
pub const CALL_HELPER: u8 = 0;
pub const CALL_LOCAL: u8 = 1;
pub const CALL_KFUNC: u8 = 2;

pub const LDDW: u8 = CLASS_LD | MODE_IMM | SIZE_DW;
