//! Property tests over generated instructions: every variant, every field
//! range the decoder accepts.
//!
//! - encode → decode is the identity on single instructions (any offsets);
//! - on whole programs (jump targets made valid): encode → decode and
//!   conformance printer → assemble are the identity, and the readable printer
//!   answers for every slot;
//! - arbitrary bytes never make the decoder panic, and whatever it accepts
//!   survives the same round trips.

use bpfjet_isa::decode::{decode_bytes, decode_insn, decode_program};
use bpfjet_isa::disasm::{disassemble, disassemble_asm, format_insn, format_insn_asm};
use bpfjet_isa::encode::{encode_insn, encode_program, to_bytes};
use bpfjet_isa::*;
use proptest::prelude::*;
use proptest::sample::{select, Index};

fn reg() -> impl Strategy<Value = Reg> {
    0u8..=10
}

/// Writable registers: r10 is the read-only frame pointer.
fn dst() -> impl Strategy<Value = Reg> {
    0u8..=9
}

fn width() -> impl Strategy<Value = Width> {
    select(vec![Width::W32, Width::W64])
}

fn size() -> impl Strategy<Value = Size> {
    select(vec![Size::B, Size::H, Size::W, Size::DW])
}

fn operand() -> impl Strategy<Value = Operand> {
    prop_oneof![
        reg().prop_map(Operand::Reg),
        any::<i32>().prop_map(Operand::Imm)
    ]
}

fn alu() -> impl Strategy<Value = Insn> {
    use AluOp::*;
    let plain = select(vec![
        Add, Sub, Mul, Div, SDiv, Or, And, Lsh, Rsh, Mod, SMod, Xor, Mov, Arsh,
    ]);
    let movsx = select(vec![
        (Width::W32, 8u8),
        (Width::W32, 16),
        (Width::W64, 8),
        (Width::W64, 16),
        (Width::W64, 32),
    ]);
    prop_oneof![
        (width(), plain, dst(), operand()).prop_map(|(width, op, dst, src)| Insn::Alu {
            width,
            op,
            dst,
            src
        }),
        (width(), dst()).prop_map(|(width, dst)| Insn::Alu {
            width,
            op: Neg,
            dst,
            src: Operand::Imm(0)
        }),
        (movsx, dst(), reg()).prop_map(|((width, bits), dst, src)| Insn::Alu {
            width,
            op: MovSx(bits),
            dst,
            src: Operand::Reg(src)
        }),
    ]
}

fn memory() -> impl Strategy<Value = Insn> {
    let atomic_op = select(vec![
        (AtomicOp::Add, false),
        (AtomicOp::Or, false),
        (AtomicOp::And, false),
        (AtomicOp::Xor, false),
        (AtomicOp::Add, true),
        (AtomicOp::Or, true),
        (AtomicOp::And, true),
        (AtomicOp::Xor, true),
        (AtomicOp::Xchg, true),
        (AtomicOp::CmpXchg, true),
    ]);
    prop_oneof![
        (size(), any::<bool>(), dst(), reg(), any::<i16>()).prop_map(
            |(size, sx, dst, src, off)| Insn::Load {
                size,
                // There is no sign-extending 64-bit load.
                sign_extend: sx && size != Size::DW,
                dst,
                src,
                off
            }
        ),
        (size(), reg(), any::<i16>(), operand()).prop_map(|(size, dst, off, src)| Insn::Store {
            size,
            dst,
            off,
            src
        }),
        (width(), atomic_op, reg(), reg(), any::<i16>()).prop_map(
            |(width, (op, fetch), dst, src, off)| Insn::Atomic {
                width,
                op,
                fetch,
                dst,
                // A fetching atomic (other than cmpxchg, which writes r0)
                // writes src back, so src = r10 is invalid.
                src: if fetch && op != AtomicOp::CmpXchg && src == 10 {
                    9
                } else {
                    src
                },
                off
            }
        ),
        (size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| {
            Insn::LoadAcquire {
                size,
                // Its destination is written: never r10.
                dst: if dst == 10 { 9 } else { dst },
                src,
                off,
            }
        }),
        (size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| {
            Insn::StoreRelease {
                size,
                dst,
                off,
                src,
            }
        }),
        (
            select(vec![Size::B, Size::H, Size::W]),
            proptest::option::of(reg()),
            any::<i32>()
        )
            .prop_map(|(size, indirect, imm)| Insn::LdPacket {
                size,
                indirect,
                imm
            }),
    ]
}

fn lddw() -> impl Strategy<Value = Insn> {
    use LdDwKind::*;
    let kind = select(vec![Imm, MapFd, MapValue, BtfId, Func, MapIdx, MapIdxValue]);
    (kind, dst(), any::<u64>()).prop_map(|(kind, dst, imm)| Insn::LdDw { kind, dst, imm })
}

/// Control flow, with offsets anywhere in their field's range.
fn control() -> impl Strategy<Value = Insn> {
    use JmpOp::*;
    let op = select(vec![
        Jeq, Jne, Jgt, Jge, Jlt, Jle, Jsgt, Jsge, Jslt, Jsle, Jset,
    ]);
    prop_oneof![
        (width(), op, reg(), operand(), any::<i16>()).prop_map(|(width, op, dst, src, off)| {
            Insn::Jmp {
                width,
                op,
                dst,
                src,
                off,
            }
        }),
        any::<i32>().prop_map(|off| Insn::Ja { off }),
        any::<i16>().prop_map(|off| Insn::MayGoto { off }),
        any::<i32>().prop_map(|id| Insn::Call(CallTarget::Helper(id))),
        any::<i32>().prop_map(|id| Insn::Call(CallTarget::Kfunc(id))),
        any::<i32>().prop_map(|off| Insn::Call(CallTarget::Local(off))),
        reg().prop_map(|reg| Insn::CallReg { reg }),
        Just(Insn::Exit),
    ]
}

fn insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        alu(),
        (
            select(vec![ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap]),
            select(vec![16u8, 32, 64]),
            dst()
        )
            .prop_map(|(order, bits, dst)| Insn::Endian { order, bits, dst }),
        memory(),
        lddw(),
        control(),
    ]
}

/// Point a jump-like instruction at slot `target`.
fn retarget(insn: &mut Insn, pc: usize, target: usize) {
    let off = target as i64 - pc as i64 - 1;
    match insn {
        Insn::Jmp { off: o, .. } | Insn::MayGoto { off: o } => *o = off as i16,
        Insn::Ja { off: o } => *o = off as i32,
        Insn::Call(CallTarget::Local(o)) => *o = off as i32,
        Insn::LdDw {
            kind: LdDwKind::Func,
            imm,
            ..
        } => *imm = (*imm & !0xffff_ffff) | (off as i32 as u32 as u64),
        _ => {}
    }
}

/// A valid program in slot form: every jump, local call and function pointer
/// lands on an instruction (never on the second slot of an `lddw`).
fn program() -> impl Strategy<Value = Vec<Insn>> {
    prop::collection::vec((insn(), any::<Index>()), 1..48).prop_map(|items| {
        let mut prog = Vec::new();
        for (insn, _) in &items {
            prog.push(*insn);
            if insn.slots() == 2 {
                prog.push(Insn::LdDwTail);
            }
        }
        let starts: Vec<usize> = (0..prog.len())
            .filter(|&pc| prog[pc] != Insn::LdDwTail)
            .collect();
        for (&pc, (_, pick)) in starts.iter().zip(&items) {
            retarget(&mut prog[pc], pc, starts[pick.index(starts.len())]);
        }
        prog
    })
}

/// Every opcode byte that decodes for at least one choice of the other fields.
fn known_opcodes() -> Vec<u8> {
    let zero = RawInsn::default();
    (0..=255u8)
        .filter(|&code| {
            [(0i16, 16i32), (1, 0), (8, 0), (0, 0xe1), (0, 1)]
                .iter()
                .any(|&(off, imm)| {
                    [(0u8, 0u8), (1, 2), (0, 1)].iter().any(|&(dst, src)| {
                        let raw = RawInsn {
                            code,
                            dst,
                            src,
                            off,
                            imm,
                        };
                        decode_insn(0, &raw, Some(&zero)).is_ok()
                    })
                })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn encode_then_decode_is_identity(insn in insn()) {
        let mut slots = Vec::new();
        encode_insn(&insn, &mut slots);
        prop_assert_eq!(slots.len(), insn.slots());
        let back = decode_insn(0, &slots[0], slots.get(1));
        prop_assert_eq!(back, Ok(insn));
        // Through the byte image too.
        let bytes = to_bytes(&slots);
        let reparsed = bpfjet_isa::decode::parse_slots(&bytes).unwrap();
        prop_assert_eq!(reparsed, slots);
    }

    #[test]
    fn every_instruction_prints(insn in insn(), pc in 0usize..100_000) {
        prop_assert!(!format_insn(&insn, Some(pc)).is_empty());
        prop_assert!(!format_insn(&insn, None).is_empty());
        prop_assert!(!format_insn_asm(&insn, pc).is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn programs_survive_encode_and_decode(prog in program()) {
        prop_assert_eq!(decode_program(&encode_program(&prog)), Ok(prog));
    }

    #[test]
    fn programs_survive_print_and_assemble(prog in program()) {
        let text = disassemble_asm(&prog);
        let back = assemble(&text);
        prop_assert_eq!(back, Ok(prog.clone()), "text:\n{}", text);
        let listing = disassemble(&prog);
        let tails = prog.iter().filter(|i| **i == Insn::LdDwTail).count();
        prop_assert_eq!(listing.lines().count(), prog.len() - tails);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(prog) = decode_bytes(&bytes) {
            prop_assert_eq!(decode_program(&encode_program(&prog)), Ok(prog.clone()));
            prop_assert_eq!(assemble(&disassemble_asm(&prog)), Ok(prog.clone()));
            let _ = disassemble(&prog);
        }
    }

    /// Slots built from opcodes the decoder knows, with small fields, decode
    /// far more often than random bytes, so the accept path is exercised too.
    #[test]
    fn plausible_slots_never_panic(
        slots in prop::collection::vec(
            (select(known_opcodes()), 0u8..12, 0u8..12, -3i16..3, prop_oneof![
                Just(0i32), Just(1), Just(16), Just(64), Just(0xe1), Just(0xf1), Just(0x100),
                Just(0x110), any::<i32>()
            ]),
            1..6,
        )
    ) {
        let raws: Vec<RawInsn> = slots
            .iter()
            .map(|&(code, dst, src, off, imm)| RawInsn { code, dst, src, off, imm })
            .collect();
        if let Ok(prog) = decode_program(&raws) {
            prop_assert_eq!(decode_program(&encode_program(&prog)), Ok(prog.clone()));
            prop_assert_eq!(assemble(&disassemble_asm(&prog)), Ok(prog.clone()));
        }
    }

    /// `decode_for_load` defers only slots `decode_program` refuses, with
    /// the very error `decode_insn` gives for that slot, and agrees with it
    /// everywhere else; a program it refuses `decode_program` refuses too.
    /// After `trap_invalid` the program is well formed.
    #[test]
    fn load_decoding_defers_exactly_the_malformed_slots(
        slots in prop::collection::vec(
            (select(known_opcodes()), 0u8..12, 0u8..12, -3i16..3, prop_oneof![
                Just(0i32), Just(1), Just(16), Just(64), Just(0xe1), Just(0xf1), Just(0x100),
                Just(0x110), any::<i32>()
            ]),
            1..6,
        )
    ) {
        let raws: Vec<RawInsn> = slots
            .iter()
            .map(|&(code, dst, src, off, imm)| RawInsn { code, dst, src, off, imm })
            .collect();
        match (decode_for_load(&raws), decode_program(&raws)) {
            (Ok(d), Ok(prog)) => {
                prop_assert!(d.invalid.is_empty());
                prop_assert_eq!(d.insns, prog);
            }
            (Ok(mut d), Err(_)) => {
                prop_assert!(!d.invalid.is_empty());
                for (&pc, e) in &d.invalid {
                    prop_assert_eq!(Err(e.clone()), decode_insn(pc, &raws[pc], raws.get(pc + 1)));
                }
                d.trap_invalid();
                prop_assert_eq!(decode_program(&encode_program(&d.insns)), Ok(d.insns.clone()));
            }
            (Err(_), Err(_)) => {}
            (Err(e), Ok(_)) => prop_assert!(false, "decode_for_load refused a valid program: {e}"),
        }
    }
}
