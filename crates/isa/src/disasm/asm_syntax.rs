//! The conformance-suite syntax printer. Its one contract: whatever it prints,
//! [`crate::asm::assemble`] reads back to the same instruction. Offsets are
//! printed as signed numbers (`+3`, `-2`) rather than labels so that a single
//! line stands on its own.

use crate::insn::*;

/// Format one instruction in the assembler syntax of the conformance suite.
/// `pc` is the slot index; it is only used to annotate the second slot of an
/// `lddw`, which prints as a comment (the assembler ignores it and recreates
/// the slot from the `lddw` line).
pub fn format_insn_asm(insn: &Insn, pc: usize) -> String {
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => alu(width, op, dst, src),
        Insn::Endian { order, bits, dst } => {
            let name = match order {
                ByteOrder::ToLe => "le",
                ByteOrder::ToBe => "be",
                ByteOrder::Swap => "bswap",
            };
            format!("{name}{bits} %r{dst}")
        }
        Insn::LdDw { kind, dst, imm } => lddw(kind, dst, imm),
        Insn::LdDwTail => format!("# slot {pc}: second half of lddw"),
        Insn::LdPacket {
            size,
            indirect,
            imm,
        } => match indirect {
            Some(r) => format!("ldind{} %r{r}, {imm}", suffix(size)),
            None => format!("ldabs{} {imm}", suffix(size)),
        },
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let s = if sign_extend { "s" } else { "" };
            format!("ldx{s}{} %r{dst}, {}", suffix(size), memory(src, off))
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => match src {
            Operand::Reg(r) => format!("stx{} {}, %r{r}", suffix(size), memory(dst, off)),
            Operand::Imm(i) => format!("st{} {}, {i}", suffix(size), memory(dst, off)),
        },
        Insn::LoadAcquire {
            size,
            dst,
            src,
            off,
        } => format!("ldacq{} %r{dst}, {}", suffix(size), memory(src, off)),
        Insn::StoreRelease {
            size,
            dst,
            off,
            src,
        } => format!("strel{} {}, %r{src}", suffix(size), memory(dst, off)),
        Insn::Atomic {
            width,
            op,
            fetch,
            dst,
            src,
            off,
        } => {
            let name = match op {
                AtomicOp::Add => "add",
                AtomicOp::Or => "or",
                AtomicOp::And => "and",
                AtomicOp::Xor => "xor",
                AtomicOp::Xchg => "xchg",
                AtomicOp::CmpXchg => "cmpxchg",
            };
            // xchg and cmpxchg always fetch; the suite does not spell it.
            let fetch = if fetch && !matches!(op, AtomicOp::Xchg | AtomicOp::CmpXchg) {
                "fetch "
            } else {
                ""
            };
            format!(
                "lock {fetch}{name}{} {}, %r{src}",
                width_suffix(width),
                memory(dst, off)
            )
        }
        Insn::Ja { off } => {
            // `ja` has a 16-bit offset field; farther jumps need `ja32` (gotol).
            let name = if i16::try_from(off).is_ok() {
                "ja"
            } else {
                "ja32"
            };
            format!("{name} {off:+}")
        }
        Insn::Jmp {
            width,
            op,
            dst,
            src,
            off,
        } => {
            let name = match op {
                JmpOp::Jeq => "jeq",
                JmpOp::Jne => "jne",
                JmpOp::Jgt => "jgt",
                JmpOp::Jge => "jge",
                JmpOp::Jlt => "jlt",
                JmpOp::Jle => "jle",
                JmpOp::Jsgt => "jsgt",
                JmpOp::Jsge => "jsge",
                JmpOp::Jslt => "jslt",
                JmpOp::Jsle => "jsle",
                JmpOp::Jset => "jset",
            };
            format!(
                "{name}{} %r{dst}, {}, {off:+}",
                width_suffix(width),
                operand(src)
            )
        }
        Insn::Call(CallTarget::Helper(id)) => format!("call {id}"),
        Insn::Call(CallTarget::Local(off)) => format!("call local {off:+}"),
        Insn::Call(CallTarget::Kfunc(id)) => format!("call kfunc {id}"),
        Insn::CallReg { reg } => format!("call %r{reg}"),
        Insn::MayGoto { off } => format!("may_goto {off:+}"),
        Insn::Exit => "exit".to_string(),
    }
}

/// A whole program in the conformance syntax, one instruction per line, that
/// [`crate::asm::assemble`] turns back into the same program.
pub fn disassemble_asm(insns: &[Insn]) -> String {
    let mut out = String::new();
    for (pc, insn) in insns.iter().enumerate() {
        if *insn != Insn::LdDwTail {
            out.push_str(&format_insn_asm(insn, pc));
            out.push('\n');
        }
    }
    out
}

fn width_suffix(width: Width) -> &'static str {
    match width {
        Width::W64 => "",
        Width::W32 => "32",
    }
}

fn suffix(size: Size) -> &'static str {
    match size {
        Size::B => "b",
        Size::H => "h",
        Size::W => "w",
        Size::DW => "dw",
    }
}

fn operand(src: Operand) -> String {
    match src {
        Operand::Reg(r) => format!("%r{r}"),
        Operand::Imm(i) => i.to_string(),
    }
}

fn memory(base: Reg, off: i16) -> String {
    format!("[%r{base}{off:+}]")
}

fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> String {
    let w = width_suffix(width);
    let name = match op {
        AluOp::Neg => return format!("neg{w} %r{dst}"),
        AluOp::MovSx(bits) => {
            let to = match width {
                Width::W64 => 64,
                Width::W32 => 32,
            };
            return format!("movsx{bits}{to} %r{dst}, {}", operand(src));
        }
        AluOp::Add => "add",
        AluOp::Sub => "sub",
        AluOp::Mul => "mul",
        AluOp::Div => "div",
        AluOp::SDiv => "sdiv",
        AluOp::Mod => "mod",
        AluOp::SMod => "smod",
        AluOp::Or => "or",
        AluOp::And => "and",
        AluOp::Lsh => "lsh",
        AluOp::Rsh => "rsh",
        AluOp::Arsh => "arsh",
        AluOp::Xor => "xor",
        AluOp::Mov => "mov",
    };
    format!("{name}{w} %r{dst}, {}", operand(src))
}

fn lddw(kind: LdDwKind, dst: Reg, imm: u64) -> String {
    let (low, high) = (imm as u32, (imm >> 32) as u32);
    let name = match kind {
        LdDwKind::Imm => return format!("lddw %r{dst}, {imm:#x}"),
        LdDwKind::Func => {
            let tail = if high != 0 {
                format!(", {high}")
            } else {
                String::new()
            };
            return format!("lddw %r{dst}, func {:+}{tail}", low as i32);
        }
        LdDwKind::MapFd => "map_fd",
        LdDwKind::MapValue => "map_value",
        LdDwKind::BtfId => "btf_id",
        LdDwKind::MapIdx => "map_idx",
        LdDwKind::MapIdxValue => "map_idx_value",
    };
    let always_high = matches!(kind, LdDwKind::MapValue | LdDwKind::MapIdxValue);
    if always_high || high != 0 {
        format!("lddw %r{dst}, {name} {low}, {high}")
    } else {
        format!("lddw %r{dst}, {name} {low}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance_syntax() {
        let cases: Vec<(Insn, &str)> = vec![
            (
                Insn::Jmp {
                    width: Width::W64,
                    op: JmpOp::Jne,
                    dst: 1,
                    src: Operand::Reg(0),
                    off: 3,
                },
                "jne %r1, %r0, +3",
            ),
            (
                Insn::Jmp {
                    width: Width::W32,
                    op: JmpOp::Jset,
                    dst: 1,
                    src: Operand::Imm(-1),
                    off: -2,
                },
                "jset32 %r1, -1, -2",
            ),
            (
                Insn::Alu {
                    width: Width::W32,
                    op: AluOp::MovSx(8),
                    dst: 2,
                    src: Operand::Reg(1),
                },
                "movsx832 %r2, %r1",
            ),
            (
                Insn::Alu {
                    width: Width::W32,
                    op: AluOp::Neg,
                    dst: 2,
                    src: Operand::Imm(0),
                },
                "neg32 %r2",
            ),
            (
                Insn::Load {
                    size: Size::DW,
                    sign_extend: false,
                    dst: 0,
                    src: 1,
                    off: 0,
                },
                "ldxdw %r0, [%r1+0]",
            ),
            (
                Insn::Load {
                    size: Size::H,
                    sign_extend: true,
                    dst: 0,
                    src: 10,
                    off: -2,
                },
                "ldxsh %r0, [%r10-2]",
            ),
            (
                Insn::Store {
                    size: Size::W,
                    dst: 10,
                    off: -4,
                    src: Operand::Imm(5),
                },
                "stw [%r10-4], 5",
            ),
            (
                Insn::Atomic {
                    width: Width::W32,
                    op: AtomicOp::Add,
                    fetch: true,
                    dst: 10,
                    src: 1,
                    off: -8,
                },
                "lock fetch add32 [%r10-8], %r1",
            ),
            (
                Insn::Atomic {
                    width: Width::W64,
                    op: AtomicOp::CmpXchg,
                    fetch: true,
                    dst: 10,
                    src: 1,
                    off: -8,
                },
                "lock cmpxchg [%r10-8], %r1",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::Imm,
                    dst: 0,
                    imm: u64::MAX,
                },
                "lddw %r0, 0xffffffffffffffff",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::MapValue,
                    dst: 1,
                    imm: 3 | (16 << 32),
                },
                "lddw %r1, map_value 3, 16",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::Func,
                    dst: 1,
                    imm: (-2i32) as u32 as u64,
                },
                "lddw %r1, func -2",
            ),
            (Insn::Ja { off: 70000 }, "ja32 +70000"),
            (Insn::Ja { off: -1 }, "ja -1"),
            (Insn::Call(CallTarget::Helper(5)), "call 5"),
            (Insn::Call(CallTarget::Local(-7)), "call local -7"),
            (Insn::CallReg { reg: 2 }, "call %r2"),
            (
                Insn::LdPacket {
                    size: Size::W,
                    indirect: Some(3),
                    imm: 8,
                },
                "ldindw %r3, 8",
            ),
            (Insn::LdDwTail, "# slot 4: second half of lddw"),
        ];
        for (insn, want) in cases {
            assert_eq!(format_insn_asm(&insn, 4), want, "{insn:?}");
        }
    }
}
