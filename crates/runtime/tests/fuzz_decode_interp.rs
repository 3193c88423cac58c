//! The `decode_interp` fuzz target's property on stable Rust: any bytes that
//! decode either fail to load or run bounds-checked to an exit or a fault.

use bpfjet_isa::opcode::*;
use bpfjet_isa::RawInsn;
use bpfjet_runtime::fuzzing::decode_and_run;
use proptest::prelude::*;

/// Opcodes the decoder accepts, so that most generated programs decode and
/// the interpreter (not just the decoder) gets exercised.
fn opcodes() -> Vec<u8> {
    let mut codes = vec![
        LDDW,
        CLASS_JMP | JMP_EXIT,
        CLASS_JMP | JMP_CALL,
        CLASS_JMP | JMP_CALL | SRC_X,
    ];
    for class in [CLASS_ALU, CLASS_ALU64] {
        for op in (0..=0xd0).step_by(0x10) {
            codes.push(class | op as u8 | SRC_K);
            codes.push(class | op as u8 | SRC_X);
        }
    }
    for class in [CLASS_JMP, CLASS_JMP32] {
        for op in [
            0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0xa0, 0xb0, 0xc0, 0xd0,
        ] {
            codes.push(class | op | SRC_K);
            codes.push(class | op | SRC_X);
        }
    }
    for size in [SIZE_B, SIZE_H, SIZE_W, SIZE_DW] {
        codes.push(CLASS_LDX | MODE_MEM | size);
        codes.push(CLASS_LDX | MODE_MEMSX | size);
        codes.push(CLASS_ST | MODE_MEM | size);
        codes.push(CLASS_STX | MODE_MEM | size);
        codes.push(CLASS_STX | MODE_ATOMIC | size);
    }
    codes
}

/// One instruction (one or two slots) with its fields made consistent with its
/// opcode most of the time, so that programs usually decode.
fn insn() -> impl Strategy<Value = Vec<u8>> {
    let codes = opcodes();
    (
        prop::sample::select(codes),
        0u8..=10,
        0u8..=10,
        prop_oneof![-4i16..4, -520i16..64, any::<i16>()],
        prop_oneof![-8i32..64, any::<i32>()],
        any::<u32>(),
        0u8..8,
    )
        .prop_map(|(code, dst, src, off, imm, choice, fix)| {
            let mut raw = RawInsn {
                code,
                dst,
                src,
                off,
                imm,
            };
            // One time in eight keep the raw fields to exercise refusals.
            if fix != 0 {
                make_plausible(&mut raw, choice);
            }
            let mut bytes = raw.to_bytes().to_vec();
            if code == LDDW {
                bytes.extend_from_slice(
                    &RawInsn {
                        imm: choice as i32,
                        ..RawInsn::default()
                    }
                    .to_bytes(),
                );
            }
            bytes
        })
}

fn pick<T: Copy>(choice: u32, options: &[T]) -> T {
    options[choice as usize % options.len()]
}

fn make_plausible(raw: &mut RawInsn, choice: u32) {
    let class = raw.code & 0x07;
    let register_source = raw.code & SRC_X != 0;
    match class {
        CLASS_ALU | CLASS_ALU64 => {
            raw.dst = raw.dst.min(9);
            raw.off = match raw.code & 0xf0 {
                ALU_DIV | ALU_MOD => pick(choice, &[0, 1]),
                ALU_MOV => pick(choice, &[0, 0, 8, 16, 32]),
                _ => 0,
            };
            if raw.code & 0xf0 == ALU_END {
                raw.imm = pick(choice, &[16, 32, 64]);
                raw.src = 0;
            } else if register_source {
                raw.imm = 0;
            } else {
                raw.src = 0;
            }
        }
        CLASS_JMP | CLASS_JMP32 => match raw.code & 0xf0 {
            JMP_EXIT => {
                *raw = RawInsn {
                    code: raw.code,
                    ..RawInsn::default()
                }
            }
            JMP_CALL if register_source => {
                raw.src = 0;
                raw.off = 0;
                raw.imm = 0;
            }
            JMP_CALL => {
                *raw = RawInsn {
                    code: raw.code,
                    imm: pick(choice, &[5, 12, 181]),
                    ..RawInsn::default()
                }
            }
            JMP_JA => {
                raw.dst = 0;
                raw.src = 0;
                raw.off %= 4;
                raw.imm = 0;
                if class == CLASS_JMP32 {
                    raw.imm = i32::from(raw.off);
                    raw.off = 0;
                }
            }
            _ => {
                raw.off %= 6;
                if register_source {
                    raw.imm = 0;
                } else {
                    raw.src = 0;
                }
            }
        },
        CLASS_LD => {
            raw.dst = raw.dst.min(9);
            raw.src = pick(choice, &[0, 0, 0, 4]);
            raw.off = 0;
            if raw.src == 4 {
                raw.imm %= 4;
            }
        }
        CLASS_LDX => {
            raw.dst = raw.dst.min(9);
            raw.imm = 0;
        }
        CLASS_ST => raw.src = 0,
        _ if raw.code & 0xe0 == MODE_ATOMIC => {
            raw.code = (raw.code & !0x18) | pick(choice, &[SIZE_W, SIZE_DW]);
            raw.imm = pick(
                choice >> 1,
                &[0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xa0, 0xa1, 0xe1, 0xf1],
            );
            raw.src = raw.src.min(9);
        }
        _ => raw.imm = 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn plausible_programs_never_crash(insns in prop::collection::vec(insn(), 1..24)) {
        let mut bytes: Vec<u8> = insns.concat();
        // Often end with an exit so that straight-line programs complete.
        bytes.extend_from_slice(&[CLASS_JMP | JMP_EXIT, 0, 0, 0, 0, 0, 0, 0]);
        let _ = decode_and_run(&bytes);
    }

    #[test]
    fn random_bytes_never_crash(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode_and_run(&bytes);
    }
}

#[test]
fn the_property_covers_runs_that_exit_and_fault() {
    // A sanity check that the harness really runs programs.
    let exit0 = [0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(decode_and_run(&exit0), Some(Ok(0)));
    let loop_forever = [0x05, 0, 0xff, 0xff, 0, 0, 0, 0];
    assert!(matches!(
        decode_and_run(&loop_forever),
        Some(Err(bpfjet_runtime::Fault::BudgetExceeded { .. }))
    ));
}
