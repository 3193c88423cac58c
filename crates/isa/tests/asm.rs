//! The assembler: what each spelling assembles to, and where errors point.

use bpfjet_isa::asm::{assemble, assemble_bytes, AsmErrorKind};
use bpfjet_isa::*;

/// Assemble a single instruction followed by `exit` (so jumps have a target)
/// and return the first instruction.
fn one(line: &str) -> Insn {
    let prog =
        assemble(&format!("{line}\nexit\nexit\nexit\n")).unwrap_or_else(|e| panic!("{line}: {e}"));
    prog[0]
}

fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> Insn {
    Insn::Alu {
        width,
        op,
        dst,
        src,
    }
}

fn jmp(width: Width, op: JmpOp, dst: Reg, src: Operand, off: i16) -> Insn {
    Insn::Jmp {
        width,
        op,
        dst,
        src,
        off,
    }
}

fn atomic(width: Width, op: AtomicOp, fetch: bool) -> Insn {
    Insn::Atomic {
        width,
        op,
        fetch,
        dst: 10,
        src: 1,
        off: -8,
    }
}

#[test]
fn alu_spellings() {
    use AluOp::*;
    use Width::*;
    let ops = [
        ("add", Add),
        ("sub", Sub),
        ("mul", Mul),
        ("div", Div),
        ("sdiv", SDiv),
        ("mod", Mod),
        ("smod", SMod),
        ("or", Or),
        ("and", And),
        ("lsh", Lsh),
        ("rsh", Rsh),
        ("arsh", Arsh),
        ("xor", Xor),
        ("mov", Mov),
    ];
    for (name, op) in ops {
        assert_eq!(
            one(&format!("{name} %r1, %r2")),
            alu(W64, op, 1, Operand::Reg(2))
        );
        assert_eq!(
            one(&format!("{name}32 %r1, -7")),
            alu(W32, op, 1, Operand::Imm(-7))
        );
    }
    assert_eq!(one("neg %r3"), alu(W64, Neg, 3, Operand::Imm(0)));
    assert_eq!(one("neg32 %r3"), alu(W32, Neg, 3, Operand::Imm(0)));
    assert_eq!(
        one("mov32 %r0, 0xffffffff"),
        alu(W32, Mov, 0, Operand::Imm(-1))
    );
    assert_eq!(
        one("mov %r0, 0x80000000"),
        alu(W64, Mov, 0, Operand::Imm(i32::MIN))
    );
    for (name, width, bits) in [
        ("movsx832", W32, 8),
        ("movsx1632", W32, 16),
        ("movsx864", W64, 8),
        ("movsx1664", W64, 16),
        ("movsx3264", W64, 32),
    ] {
        assert_eq!(
            one(&format!("{name} %r4, %r3")),
            alu(width, MovSx(bits), 4, Operand::Reg(3))
        );
    }
}

#[test]
fn byte_order_spellings() {
    for (prefix, order) in [
        ("le", ByteOrder::ToLe),
        ("be", ByteOrder::ToBe),
        ("bswap", ByteOrder::Swap),
        ("swap", ByteOrder::Swap),
    ] {
        for bits in [16u8, 32, 64] {
            assert_eq!(
                one(&format!("{prefix}{bits} %r2")),
                Insn::Endian {
                    order,
                    bits,
                    dst: 2
                }
            );
        }
    }
}

#[test]
fn memory_spellings() {
    let load = |size, sign_extend, off| Insn::Load {
        size,
        sign_extend,
        dst: 0,
        src: 1,
        off,
    };
    assert_eq!(one("ldxb %r0, [%r1+2]"), load(Size::B, false, 2));
    assert_eq!(one("ldxh %r0, [%r1]"), load(Size::H, false, 0));
    assert_eq!(one("ldxw %r0, [%r1-4]"), load(Size::W, false, -4));
    assert_eq!(one("ldxdw %r0, [%r1+0x10]"), load(Size::DW, false, 16));
    assert_eq!(one("ldxsb %r0, [%r1-1]"), load(Size::B, true, -1));
    assert_eq!(one("ldxsh %r0, [%r1 - 2]"), load(Size::H, true, -2));
    assert_eq!(one("ldxsw %r0, [ %r1 + 4 ]"), load(Size::W, true, 4));
    let store = |size, src| Insn::Store {
        size,
        dst: 10,
        off: -8,
        src,
    };
    assert_eq!(
        one("stb [%r10-8], 0x11"),
        store(Size::B, Operand::Imm(0x11))
    );
    assert_eq!(one("sth [%r10-8], -1"), store(Size::H, Operand::Imm(-1)));
    assert_eq!(
        one("stw [%r10-8], 0xffffffff"),
        store(Size::W, Operand::Imm(-1))
    );
    assert_eq!(one("stdw [%r10-8], 5"), store(Size::DW, Operand::Imm(5)));
    assert_eq!(one("stxb [%r10-8], %r2"), store(Size::B, Operand::Reg(2)));
    assert_eq!(one("stxh [%r10-8], %r2"), store(Size::H, Operand::Reg(2)));
    assert_eq!(one("stxw [%r10-8], %r2"), store(Size::W, Operand::Reg(2)));
    assert_eq!(one("stxdw [%r10-8], %r2"), store(Size::DW, Operand::Reg(2)));
    assert_eq!(
        one("ldabsh 12"),
        Insn::LdPacket {
            size: Size::H,
            indirect: None,
            imm: 12
        }
    );
    assert_eq!(
        one("ldindw %r6, -4"),
        Insn::LdPacket {
            size: Size::W,
            indirect: Some(6),
            imm: -4
        }
    );
}

#[test]
fn atomic_spellings() {
    use AtomicOp::*;
    use Width::*;
    for (name, op) in [("add", Add), ("or", Or), ("and", And), ("xor", Xor)] {
        assert_eq!(
            one(&format!("lock {name} [%r10-8], %r1")),
            atomic(W64, op, false)
        );
        assert_eq!(
            one(&format!("lock {name}32 [%r10-8], %r1")),
            atomic(W32, op, false)
        );
        assert_eq!(
            one(&format!("lock fetch {name} [%r10-8], %r1")),
            atomic(W64, op, true)
        );
        assert_eq!(
            one(&format!("lock fetch {name}32 [%r10-8], %r1")),
            atomic(W32, op, true)
        );
    }
    assert_eq!(one("lock xchg [%r10-8], %r1"), atomic(W64, Xchg, true));
    assert_eq!(one("lock xchg32 [%r10-8], %r1"), atomic(W32, Xchg, true));
    assert_eq!(
        one("lock fetch xchg [%r10-8], %r1"),
        atomic(W64, Xchg, true)
    );
    assert_eq!(
        one("lock cmpxchg [%r10-8], %r1"),
        atomic(W64, CmpXchg, true)
    );
    assert_eq!(
        one("lock cmpxchg32 [%r10-8], %r1"),
        atomic(W32, CmpXchg, true)
    );
}

#[test]
fn jump_spellings() {
    use JmpOp::*;
    use Width::*;
    let ops = [
        ("jeq", Jeq),
        ("jne", Jne),
        ("jgt", Jgt),
        ("jge", Jge),
        ("jlt", Jlt),
        ("jle", Jle),
        ("jsgt", Jsgt),
        ("jsge", Jsge),
        ("jslt", Jslt),
        ("jsle", Jsle),
        ("jset", Jset),
    ];
    for (name, op) in ops {
        assert_eq!(
            one(&format!("{name} %r1, %r2, +1")),
            jmp(W64, op, 1, Operand::Reg(2), 1)
        );
        assert_eq!(
            one(&format!("{name}32 %r1, 0x7f, +2")),
            jmp(W32, op, 1, Operand::Imm(127), 2)
        );
    }
    assert_eq!(one("ja +2"), Insn::Ja { off: 2 });
    assert_eq!(one("ja32 +1"), Insn::Ja { off: 1 });
    assert_eq!(one("gotol +0"), Insn::Ja { off: 0 });
    let prog = assemble("top:\nmov %r0, 0\njeq %r0, 0, top\nja top\nexit").unwrap();
    assert_eq!(prog[1], jmp(W64, Jeq, 0, Operand::Imm(0), -2));
    assert_eq!(prog[2], Insn::Ja { off: -3 });
}

#[test]
fn may_goto_assembles_and_encodes_as_the_kernel_defines_it() {
    assert_eq!(one("may_goto +2"), Insn::MayGoto { off: 2 });
    let prog = assemble("top:\nmov %r0, 0\nmay_goto out\nja top\nout:\nexit").unwrap();
    assert_eq!(prog[1], Insn::MayGoto { off: 1 });
    assert_eq!(format_insn(&prog[1], Some(1)), "may_goto +1 <LBB_3>");
    assert_eq!(format_insn_asm(&prog[1], 1), "may_goto +1");
    // BPF_JMP | BPF_JCOND | BPF_K, src_reg BPF_MAY_GOTO (0), dst and imm 0.
    let bytes = assemble_bytes("exit\nmay_goto -2\nexit").unwrap();
    assert_eq!(&bytes[8..16], &[0xe5, 0x00, 0xfe, 0xff, 0, 0, 0, 0]);
    assert_eq!(
        assemble(&bpfjet_isa::disasm::disassemble_asm(&prog)).unwrap(),
        prog,
        "the conformance syntax reads back"
    );
}

#[test]
fn far_jumps_need_ja32() {
    let body = "mov %r0, 0\n".repeat(40_000);
    let prog = assemble(&format!("ja32 end\n{body}end:\nexit\n")).unwrap();
    assert_eq!(prog[0], Insn::Ja { off: 40_000 });
    let bytes = assemble_bytes(&format!("gotol +40000\n{body}exit\n")).unwrap();
    assert_eq!(bytes[0], 0x06, "encoded as the JMP32-class gotol");
    assert_eq!(i32::from_le_bytes(bytes[4..8].try_into().unwrap()), 40_000);
    let err = assemble(&format!("ja end\n{body}end:\nexit\n")).unwrap_err();
    assert_eq!(err.line, 1);
    assert_eq!(
        err.kind,
        AsmErrorKind::OffsetOutOfRange {
            value: 40_000,
            bits: 16
        }
    );
}

#[test]
fn call_spellings() {
    assert_eq!(one("call 5"), Insn::Call(CallTarget::Helper(5)));
    assert_eq!(one("call helper 6"), Insn::Call(CallTarget::Helper(6)));
    assert_eq!(one("call kfunc 77"), Insn::Call(CallTarget::Kfunc(77)));
    assert_eq!(one("call runtime 78"), Insn::Call(CallTarget::Kfunc(78)));
    assert_eq!(one("call local +1"), Insn::Call(CallTarget::Local(1)));
    assert_eq!(one("call %r2"), Insn::CallReg { reg: 2 });
    assert_eq!(one("callx %r3"), Insn::CallReg { reg: 3 });
    let prog = assemble("call local f\nexit\nf:\nmov %r0, 1\nexit").unwrap();
    assert_eq!(prog[0], Insn::Call(CallTarget::Local(1)));
}

#[test]
fn lddw_spellings() {
    let prog =
        assemble("lddw %r1, 0xFFFFFFFFFFFFFFFF\nlddw %r2, -2\nlddw %r3, 2147483648\nexit").unwrap();
    let lddw = |dst, imm| Insn::LdDw {
        kind: LdDwKind::Imm,
        dst,
        imm,
    };
    assert_eq!(
        prog,
        vec![
            lddw(1, u64::MAX),
            Insn::LdDwTail,
            lddw(2, -2i64 as u64),
            Insn::LdDwTail,
            lddw(3, 1 << 31),
            Insn::LdDwTail,
            Insn::Exit
        ]
    );
    let pseudo = |kind, imm| Insn::LdDw { kind, dst: 1, imm };
    assert_eq!(one("lddw %r1, map_fd 3"), pseudo(LdDwKind::MapFd, 3));
    assert_eq!(
        one("lddw %r1, map_value 3, 16"),
        pseudo(LdDwKind::MapValue, 3 | 16 << 32)
    );
    assert_eq!(one("lddw %r1, btf_id 9"), pseudo(LdDwKind::BtfId, 9));
    assert_eq!(one("lddw %r1, map_idx 0"), pseudo(LdDwKind::MapIdx, 0));
    assert_eq!(
        one("lddw %r1, map_idx_value 1, 8"),
        pseudo(LdDwKind::MapIdxValue, 1 | 8 << 32)
    );
    // The function pointer is relative to the slot after the lddw's first slot.
    let prog = assemble("lddw %r1, func f\nexit\nf:\nexit").unwrap();
    assert_eq!(prog[0], pseudo(LdDwKind::Func, 2));
}

#[test]
fn labels_comments_and_layout() {
    let text = "# leading comment\n\n  mov %r0, 0   # trailing comment\nL1: L2: add %r0, 1\n\tjne %r0, 3, L1 \nexit\n";
    let prog = assemble(text).unwrap();
    assert_eq!(prog.len(), 4);
    assert_eq!(prog[2], jmp(Width::W64, JmpOp::Jne, 0, Operand::Imm(3), -2));
    // Without a label of that name, `exit` is the first exit instruction.
    let prog = assemble("jeq %r1, 0, exit\nmov %r0, 1\nexit\nmov %r0, 2\nexit").unwrap();
    assert_eq!(prog[0], jmp(Width::W64, JmpOp::Jeq, 1, Operand::Imm(0), 1));
    // An explicit `exit:` label wins.
    let prog = assemble("jeq %r1, 0, exit\nexit\nexit:\nexit").unwrap();
    assert_eq!(prog[0], jmp(Width::W64, JmpOp::Jeq, 1, Operand::Imm(0), 1));
}

#[test]
fn bytes_are_little_endian_slots() {
    let bytes = assemble_bytes("mov32 %r0, 1\nexit").unwrap();
    assert_eq!(
        bytes,
        [0xb4, 0x00, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0]
    );
    let bytes = assemble_bytes("stxdw [%r10-8], %r1\ncall %r2\nexit").unwrap();
    assert_eq!(&bytes[..8], &[0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0]);
    assert_eq!(
        &bytes[8..16],
        &[0x8d, 0x02, 0, 0, 0, 0, 0, 0],
        "callx keeps the register in dst"
    );
}

/// Each error names the right line (1-based, comments and blanks counted).
#[test]
fn errors_carry_line_numbers() {
    use AsmErrorKind as K;
    let cases: Vec<(&str, usize, K)> = vec![
        (
            "mov %r0, 0\n\nfoo %r0\nexit",
            3,
            K::UnknownMnemonic("foo".into()),
        ),
        ("# c\nmov 1, %r0\nexit", 2, K::ExpectedRegister("1".into())),
        (
            "mov %r0, 0\nmov %r12, 1\nexit",
            2,
            K::RegisterOutOfRange("%r12".into()),
        ),
        (
            "mov %r0, 0\nja nowhere\nexit",
            2,
            K::UndefinedLabel("nowhere".into()),
        ),
        (
            "mov %r0, 0\nexit\njeq %r0, 0, missing",
            3,
            K::UndefinedLabel("missing".into()),
        ),
        (
            "ldxw %r0, [%r1+40000]\nexit",
            1,
            K::OffsetOutOfRange {
                value: 40000,
                bits: 16,
            },
        ),
        (
            "mov %r0, 0\n\njne %r0, 1, +40000\nexit",
            3,
            K::OffsetOutOfRange {
                value: 40000,
                bits: 16,
            },
        ),
        (
            "mov %r0, 0x100000000\nexit",
            1,
            K::ImmediateOutOfRange {
                text: "0x100000000".into(),
                bits: 32,
            },
        ),
        (
            "mov %r0, zero\nexit",
            1,
            K::ExpectedImmediate("zero".into()),
        ),
        ("exit\nldxw %r0, %r1\n", 2, K::ExpectedMemory("%r1".into())),
        (
            "exit\njeq %r0, 0, %r1\n",
            2,
            K::ExpectedTarget("%r1".into()),
        ),
        (
            "mov %r0, 1, 2\nexit",
            1,
            K::OperandCount {
                mnemonic: "mov".into(),
                expected: "2",
                found: 3,
            },
        ),
        (
            "exit %r0",
            1,
            K::OperandCount {
                mnemonic: "exit".into(),
                expected: "0",
                found: 1,
            },
        ),
        (
            "x:\nexit\nx:\nexit",
            3,
            K::DuplicateLabel {
                name: "x".into(),
                first_line: 1,
            },
        ),
        ("9lives:\nexit", 1, K::BadLabel("9lives".into())),
        (
            "exit\nlock nand [%r10-8], %r1",
            2,
            K::UnknownMnemonic("lock nand".into()),
        ),
        ("le8 %r1\nexit", 1, K::UnknownMnemonic("le8".into())),
        ("# nothing\n\n", 0, K::Empty),
    ];
    for (text, line, kind) in cases {
        let err = assemble(text).expect_err(text);
        assert_eq!((err.line, &err.kind), (line, &kind), "{text:?}: {err}");
        if line > 0 {
            assert_eq!(
                err.text,
                text.lines().nth(line - 1).unwrap().trim_end(),
                "{text:?}"
            );
        }
    }
}

/// Encodings the decoder refuses are reported at the line that wrote them.
#[test]
fn validation_errors_point_at_their_line() {
    let cases = [
        (
            "mov %r0, 0\n\nmov %r10, 1\nexit",
            3,
            DecodeError::BadRegister {
                pc: 1,
                reg: 10,
                what: "destination must be r0-r9",
            },
        ),
        (
            "mov %r0, 0\nja +5\nexit",
            2,
            DecodeError::JumpOutOfRange {
                pc: 1,
                target: 7,
                len: 3,
            },
        ),
        (
            "ja +1\nlddw %r0, 1\nexit",
            1,
            DecodeError::JumpIntoLdDw {
                pc: 0,
                target_of: 1,
            },
        ),
        (
            "lddw %r1, 5\nmov %r0, 1\ncall local -9\nexit",
            3,
            DecodeError::CallOutOfRange { pc: 3, target: -5 },
        ),
    ];
    for (text, line, want) in cases {
        let err = assemble(text).expect_err(text);
        assert_eq!(err.line, line, "{text:?}: {err}");
        assert_eq!(err.kind, AsmErrorKind::Invalid(want), "{text:?}");
    }
}

#[test]
fn error_messages_read_well() {
    let err = assemble("mov %r0, 0\nfoo %r0, 1\nexit").unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 2: unknown mnemonic 'foo': `foo %r0, 1`"
    );
    let err = assemble("ja x\nexit").unwrap_err();
    assert_eq!(err.to_string(), "line 1: undefined label 'x': `ja x`");
    assert_eq!(assemble("").unwrap_err().to_string(), "program is empty");
}

/// Garbage in, error out: never a panic.
#[test]
fn hostile_input_does_not_panic() {
    let junk = [
        "[",
        "]",
        ",,,",
        "lock",
        "lock fetch",
        "call",
        "call local",
        "lddw",
        "lddw %r1,",
        "lddw %r1, func",
        "lddw %r1, map_value",
        "ldxw %r0, [",
        "ldxw %r0, []",
        "stw [%r1+], 1",
        "mov %r, 1",
        "mov %r-1, 1",
        "jeq",
        ":",
        "::",
        "a:b",
        "mov %r0, --1",
        "mov %r0, 0x-1",
        "ja -99999999999999999999999",
        "mov %r0, 99999999999999999999999999999999999999999999",
        "\u{feff}exit",
        "é:",
        "exit\u{0}",
    ];
    for j in junk {
        let _ = assemble(j);
        let _ = assemble(&format!("{j}\nexit"));
    }
}
