//! Decoder validation: each malformed encoding is rejected with the precise
//! error, never a panic and never a different complaint.

use bpfjet_isa::decode::{decode_bytes, decode_program};
use bpfjet_isa::encode::to_bytes;
use bpfjet_isa::opcode::*;
use bpfjet_isa::{DecodeError, RawInsn};

fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

const EXIT: RawInsn = RawInsn {
    code: CLASS_JMP | JMP_EXIT,
    dst: 0,
    src: 0,
    off: 0,
    imm: 0,
};
const MOV64_IMM: u8 = CLASS_ALU64 | ALU_MOV | SRC_K;
const MOV64_REG: u8 = CLASS_ALU64 | ALU_MOV | SRC_X;

fn field(pc: usize, what: &str) -> DecodeError {
    DecodeError::BadField {
        pc,
        what: what.to_string(),
    }
}

#[test]
fn malformed_programs_give_precise_errors() {
    let cases: Vec<(&str, Vec<RawInsn>, DecodeError)> = vec![
        ("empty program", vec![], DecodeError::Empty),
        (
            "unknown ALU opcode",
            vec![raw(0xf7, 0, 0, 0, 0), EXIT],
            DecodeError::BadOpcode { pc: 0, code: 0xf7 },
        ),
        (
            "LD class with a 32-bit immediate mode",
            vec![EXIT, raw(0x00, 0, 0, 0, 0)],
            DecodeError::BadOpcode { pc: 1, code: 0x00 },
        ),
        (
            "may_goto with an imm (the kernel: invalid may_goto imm 1)",
            vec![raw(CLASS_JMP | JMP_JCOND, 0, 0, 0, 1), EXIT],
            field(
                0,
                "invalid may_goto (src r0, dst r0, imm 1): only src 0 with dst and imm clear is defined",
            ),
        ),
        (
            "a JCOND kind other than may_goto",
            vec![raw(CLASS_JMP | JMP_JCOND, 0, 1, 0, 0), EXIT],
            field(
                0,
                "invalid may_goto (src r1, dst r0, imm 0): only src 0 with dst and imm clear is defined",
            ),
        ),
        (
            "may_goto in the JMP32 class",
            vec![raw(CLASS_JMP32 | JMP_JCOND, 0, 0, 0, 0), EXIT],
            DecodeError::BadOpcode {
                pc: 0,
                code: CLASS_JMP32 | JMP_JCOND,
            },
        ),
        (
            "call in the JMP32 class",
            vec![raw(CLASS_JMP32 | JMP_CALL, 0, 0, 0, 1), EXIT],
            DecodeError::BadOpcode {
                pc: 0,
                code: CLASS_JMP32 | JMP_CALL,
            },
        ),
        (
            "ldxdw with sign extension",
            vec![raw(CLASS_LDX | MODE_MEMSX | SIZE_DW, 0, 1, 0, 0), EXIT],
            DecodeError::BadOpcode {
                pc: 0,
                code: CLASS_LDX | MODE_MEMSX | SIZE_DW,
            },
        ),
        (
            "destination register 11",
            vec![raw(MOV64_IMM, 11, 0, 0, 1), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 11,
                what: "destination must be r0-r9",
            },
        ),
        (
            "source register 11",
            vec![raw(MOV64_REG, 0, 11, 0, 0), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 11,
                what: "source",
            },
        ),
        (
            "store base register 15",
            vec![raw(CLASS_STX | MODE_MEM | SIZE_W, 15, 1, 0, 0), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 15,
                what: "store base",
            },
        ),
        (
            "write to the frame pointer",
            vec![raw(MOV64_IMM, 10, 0, 0, 1), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 10,
                what: "destination must be r0-r9",
            },
        ),
        (
            "load into the frame pointer",
            vec![raw(CLASS_LDX | MODE_MEM | SIZE_DW, 10, 1, 0, 0), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 10,
                what: "destination must be r0-r9",
            },
        ),
        (
            "truncated lddw",
            vec![EXIT, raw(LDDW, 0, 0, 0, 1)],
            DecodeError::TruncatedLdDw { pc: 1 },
        ),
        (
            "lddw second slot with an opcode",
            vec![raw(LDDW, 0, 0, 0, 1), EXIT],
            field(1, "second slot of lddw must be zero except imm"),
        ),
        (
            "lddw with unknown pseudo source",
            vec![raw(LDDW, 0, 7, 0, 1), raw(0, 0, 0, 0, 0), EXIT],
            field(0, "lddw with unknown pseudo source 7"),
        ),
        (
            "jump past the end",
            vec![raw(CLASS_JMP | JMP_JA, 0, 0, 5, 0), EXIT],
            DecodeError::JumpOutOfRange {
                pc: 0,
                target: 6,
                len: 2,
            },
        ),
        (
            "jump before the start",
            vec![EXIT, raw(CLASS_JMP | JMP_JEQ, 1, 0, -3, 0)],
            DecodeError::JumpOutOfRange {
                pc: 1,
                target: -1,
                len: 2,
            },
        ),
        (
            "jump to the slot just past the end",
            vec![raw(CLASS_JMP32 | JMP_JA, 0, 0, 0, 1), EXIT],
            DecodeError::JumpOutOfRange {
                pc: 0,
                target: 2,
                len: 2,
            },
        ),
        (
            "jump into the second slot of an lddw",
            vec![
                raw(CLASS_JMP | JMP_JA, 0, 0, 1, 0),
                raw(LDDW, 0, 0, 0, 1),
                raw(0, 0, 0, 0, 0),
                EXIT,
            ],
            DecodeError::JumpIntoLdDw {
                pc: 0,
                target_of: 1,
            },
        ),
        (
            "local call out of range",
            vec![raw(CLASS_JMP | JMP_CALL, 0, CALL_LOCAL, 0, 7), EXIT],
            DecodeError::CallOutOfRange { pc: 0, target: 8 },
        ),
        (
            "byte swap of 8 bits",
            vec![raw(CLASS_ALU | ALU_END | SRC_X, 1, 0, 0, 8), EXIT],
            field(0, "byte swap width must be 16, 32 or 64, not 8"),
        ),
        (
            "register-source bswap",
            vec![raw(CLASS_ALU64 | ALU_END | SRC_X, 1, 0, 0, 16), EXIT],
            DecodeError::BadOpcode {
                pc: 0,
                code: CLASS_ALU64 | ALU_END | SRC_X,
            },
        ),
        (
            "division offset 2",
            vec![raw(CLASS_ALU64 | ALU_DIV | SRC_X, 1, 2, 2, 0), EXIT],
            field(0, "division offset must be 0 or 1, not 2"),
        ),
        (
            "modulo offset -1",
            vec![raw(CLASS_ALU | ALU_MOD | SRC_K, 1, 0, -1, 3), EXIT],
            field(0, "division offset must be 0 or 1, not -1"),
        ),
        (
            "movsx offset 4",
            vec![raw(MOV64_REG, 1, 2, 4, 0), EXIT],
            field(0, "mov offset must be 0, 8, 16 or 32, not 4"),
        ),
        (
            "32-bit movsx from 32 bits",
            vec![raw(CLASS_ALU | ALU_MOV | SRC_X, 1, 2, 32, 0), EXIT],
            field(0, "movsx from 32 bits requires the ALU64 class"),
        ),
        (
            "movsx with an immediate",
            vec![raw(MOV64_IMM, 1, 0, 8, 5), EXIT],
            field(0, "movsx takes a source register, not an immediate"),
        ),
        (
            "neg with an immediate",
            vec![raw(CLASS_ALU64 | ALU_NEG, 1, 0, 0, 5), EXIT],
            field(0, "neg with nonzero imm"),
        ),
        (
            "add with an offset",
            vec![raw(CLASS_ALU64 | ALU_ADD, 1, 0, 3, 5), EXIT],
            field(0, "nonzero offset 3 on an ALU instruction"),
        ),
        (
            "8-bit atomic",
            vec![raw(CLASS_STX | MODE_ATOMIC | SIZE_B, 10, 1, -8, 0), EXIT],
            field(0, "atomic operations are 32 or 64 bits only"),
        ),
        (
            "load_acquire into r10",
            vec![
                raw(CLASS_STX | MODE_ATOMIC | SIZE_W, 10, 1, 0, 0x100),
                EXIT,
            ],
            DecodeError::BadRegister {
                pc: 0,
                reg: 10,
                what: "load_acquire would write r10",
            },
        ),
        (
            "an ordered access with the fetch bit",
            vec![
                raw(CLASS_STX | MODE_ATOMIC | SIZE_B, 1, 2, 0, 0x101),
                EXIT,
            ],
            field(0, "atomic operations are 32 or 64 bits only"),
        ),
        (
            "xchg without the fetch bit",
            vec![
                raw(CLASS_STX | MODE_ATOMIC | SIZE_DW, 10, 1, -8, 0xe0),
                EXIT,
            ],
            field(0, "unknown atomic operation 0xe0"),
        ),
        (
            "exit with an immediate",
            vec![raw(CLASS_JMP | JMP_EXIT, 0, 0, 0, 1)],
            field(0, "exit with nonzero fields"),
        ),
        (
            "ldabs with a destination",
            vec![raw(CLASS_LD | MODE_ABS | SIZE_W, 1, 0, 0, 4), EXIT],
            field(0, "legacy packet load with reserved fields set"),
        ),
        (
            "callx through register 11 in imm",
            vec![raw(CLASS_JMP | JMP_CALL | SRC_X, 0, 0, 0, 11), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 11,
                what: "callx target",
            },
        ),
        (
            "callx with a huge imm",
            vec![raw(CLASS_JMP | JMP_CALL | SRC_X, 0, 0, 0, 0x102), EXIT],
            DecodeError::BadRegister {
                pc: 0,
                reg: 255,
                what: "callx target",
            },
        ),
    ];
    for (name, slots, want) in cases {
        assert_eq!(decode_program(&slots), Err(want.clone()), "{name}");
        // The byte path reports the same error.
        assert_eq!(decode_bytes(&to_bytes(&slots)), Err(want), "{name} (bytes)");
    }
}

#[test]
fn byte_images_that_are_not_whole_slots() {
    for len in [1, 7, 12, 20] {
        assert_eq!(
            decode_bytes(&vec![0x95; len]),
            Err(DecodeError::TruncatedProgram(len)),
            "{len} bytes"
        );
    }
}

#[test]
fn errors_name_their_slot() {
    assert_eq!(DecodeError::TruncatedLdDw { pc: 4 }.pc(), Some(4));
    assert_eq!(DecodeError::Empty.pc(), None);
    assert_eq!(DecodeError::TruncatedProgram(12).pc(), None);
    assert_eq!(
        DecodeError::BadRegister {
            pc: 0,
            reg: 10,
            what: "destination must be r0-r9"
        }
        .to_string(),
        "insn 0: invalid register r10 (destination must be r0-r9)"
    );
}

/// Every one of the 2^8 opcodes with assorted fields: the decoder must answer
/// (accept or reject), never panic.
#[test]
fn no_opcode_panics() {
    for code in 0..=255u8 {
        for &(dst, src, off, imm) in &[
            (0, 0, 0, 0),
            (1, 2, 1, 16),
            (10, 10, -1, -1),
            (15, 15, 8, 64),
        ] {
            let slots = [raw(code, dst, src, off, imm), raw(0, 0, 0, 0, 0), EXIT];
            let _ = decode_program(&slots);
            let _ = decode_program(&slots[..1]);
        }
    }
}

#[test]
fn exit_offset_is_not_a_reserved_field() {
    // The kernel's "BPF_EXIT uses reserved fields" checks the source bit,
    // dst, src and imm, not the offset: such an exit loads there.
    let prog = decode_program(&[raw(CLASS_JMP | JMP_EXIT, 0, 0, -4, 0)]).unwrap();
    assert_eq!(prog, vec![bpfjet_isa::Insn::Exit]);
}
