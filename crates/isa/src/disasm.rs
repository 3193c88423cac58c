//! Disassembler. The default syntax is close to llvm-objdump's BPF output
//! (`r0 = 1`, `if r1 != r0 goto +3`), because that is what people compare
//! against when they read compiler output; [`format_insn_asm`] prints the
//! conformance-suite syntax that [`crate::asm::assemble`] reads back.

mod asm_syntax;

pub use asm_syntax::{disassemble_asm, format_insn_asm};

use crate::insn::*;

/// Format one instruction in the readable syntax. With `pc`, jumps and local
/// calls also show the absolute slot they go to (`goto +3 <LBB_7>`).
pub fn format_insn(insn: &Insn, pc: Option<usize>) -> String {
    format_insn_with(insn, pc, &|_| None)
}

/// Like [`format_insn`], with helper calls named by `names` (for example
/// `call bpf_map_lookup_elem`) when it knows the id.
pub fn format_insn_with(
    insn: &Insn,
    pc: Option<usize>,
    names: &dyn Fn(i32) -> Option<&'static str>,
) -> String {
    let target = |off: i64| match pc {
        Some(pc) => format!(" <LBB_{}>", pc as i64 + 1 + off),
        None => String::new(),
    };
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
            format!("r{dst} = {name}{bits} r{dst}")
        }
        Insn::LdDw { kind, dst, imm } => {
            let (low, high) = (imm as u32, (imm >> 32) as u32);
            let hi = |always: bool| {
                if always || high != 0 {
                    format!("+{high}")
                } else {
                    String::new()
                }
            };
            match kind {
                LdDwKind::Imm => format!("r{dst} = {imm:#x} ll"),
                LdDwKind::MapFd => format!("r{dst} = map[{low}]{}", hi(false)),
                LdDwKind::MapValue => format!("r{dst} = map_value[{low}]{}", hi(true)),
                LdDwKind::MapIdx => format!("r{dst} = map_idx[{low}]{}", hi(false)),
                LdDwKind::MapIdxValue => format!("r{dst} = map_idx_value[{low}]{}", hi(true)),
                LdDwKind::BtfId => format!("r{dst} = btf_id[{low}]{}", hi(false)),
                LdDwKind::Func => {
                    let off = low as i32 as i64;
                    let extra = if high != 0 {
                        format!(" (hi {high})")
                    } else {
                        String::new()
                    };
                    format!("r{dst} = func {off:+}{}{extra}", target(off))
                }
            }
        }
        Insn::LdDwTail => "<lddw second slot>".to_string(),
        Insn::LdPacket {
            size,
            indirect,
            imm,
        } => match indirect {
            Some(r) => format!(
                "r0 = *({} *)skb[{}]",
                unsigned(size),
                address(r, imm as i64)
            ),
            None => format!("r0 = *({} *)skb[{imm}]", unsigned(size)),
        },
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let ty = if sign_extend {
                signed(size)
            } else {
                unsigned(size)
            };
            format!("r{dst} = *({ty} *)({})", address(src, off as i64))
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => {
            let value = match src {
                Operand::Reg(r) => format!("r{r}"),
                Operand::Imm(i) => i.to_string(),
            };
            format!(
                "*({} *)({}) = {value}",
                unsigned(size),
                address(dst, off as i64)
            )
        }
        Insn::Atomic {
            width,
            op,
            fetch,
            dst,
            src,
            off,
        } => atomic(width, op, fetch, dst, src, off),
        // As llvm-objdump prints them: w registers below 64 bits.
        Insn::LoadAcquire {
            size,
            dst,
            src,
            off,
        } => format!(
            "{}{dst} = load_acquire(({} *)({}))",
            if size == Size::DW { "r" } else { "w" },
            unsigned(size),
            address(src, off as i64)
        ),
        Insn::StoreRelease {
            size,
            dst,
            off,
            src,
        } => format!(
            "store_release(({} *)({}), {}{src})",
            unsigned(size),
            address(dst, off as i64),
            if size == Size::DW { "r" } else { "w" },
        ),
        Insn::Ja { off } => {
            let name = if i16::try_from(off).is_ok() {
                "goto"
            } else {
                "gotol"
            };
            format!("{name} {off:+}{}", target(off as i64))
        }
        Insn::Jmp {
            width,
            op,
            dst,
            src,
            off,
        } => {
            let sym = match op {
                JmpOp::Jeq => "==",
                JmpOp::Jne => "!=",
                JmpOp::Jgt => ">",
                JmpOp::Jge => ">=",
                JmpOp::Jlt => "<",
                JmpOp::Jle => "<=",
                JmpOp::Jsgt => "s>",
                JmpOp::Jsge => "s>=",
                JmpOp::Jslt => "s<",
                JmpOp::Jsle => "s<=",
                JmpOp::Jset => "&",
            };
            format!(
                "if {} {sym} {} goto {off:+}{}",
                reg(width, dst),
                operand(width, src),
                target(off as i64)
            )
        }
        Insn::Call(CallTarget::Helper(id)) => match names(id) {
            Some(name) => format!("call {name}"),
            None => format!("call {id}"),
        },
        Insn::Call(CallTarget::Local(off)) => {
            format!("call local {off:+}{}", target(off as i64))
        }
        Insn::Call(CallTarget::Kfunc(id)) => format!("call kfunc {id}"),
        Insn::CallReg { reg } => format!("callx r{reg}"),
        Insn::MayGoto { off } => format!("may_goto {off:+}{}", target(off as i64)),
        Insn::Exit => "exit".to_string(),
    }
}

/// The whole program, one instruction per line prefixed with its slot index
/// (`   3: r0 = 1`); the second slot of an `lddw` is skipped, so the indices
/// jump by two after it, as jump offsets count them.
pub fn disassemble(insns: &[Insn]) -> String {
    disassemble_with(insns, &|_| None)
}

/// [`disassemble`] with helper names.
pub fn disassemble_with(insns: &[Insn], names: &dyn Fn(i32) -> Option<&'static str>) -> String {
    let mut out = String::new();
    for (pc, insn) in insns.iter().enumerate() {
        if *insn != Insn::LdDwTail {
            out.push_str(&format!(
                "{pc:4}: {}\n",
                format_insn_with(insn, Some(pc), names)
            ));
        }
    }
    out
}

fn reg(width: Width, r: Reg) -> String {
    match width {
        Width::W64 => format!("r{r}"),
        Width::W32 => format!("w{r}"),
    }
}

fn operand(width: Width, src: Operand) -> String {
    match src {
        Operand::Reg(r) => reg(width, r),
        Operand::Imm(i) => i.to_string(),
    }
}

fn unsigned(size: Size) -> &'static str {
    match size {
        Size::B => "u8",
        Size::H => "u16",
        Size::W => "u32",
        Size::DW => "u64",
    }
}

fn signed(size: Size) -> &'static str {
    match size {
        Size::B => "s8",
        Size::H => "s16",
        Size::W => "s32",
        Size::DW => "s64",
    }
}

/// `r1 + 4` / `r10 - 8`; the offset is widened first so that `-32768` prints.
fn address(base: Reg, off: i64) -> String {
    if off < 0 {
        format!("r{base} - {}", -off)
    } else {
        format!("r{base} + {off}")
    }
}

fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> String {
    let d = reg(width, dst);
    let s = operand(width, src);
    let sym = match op {
        AluOp::Mov => return format!("{d} = {s}"),
        AluOp::Neg => return format!("{d} = -{d}"),
        AluOp::MovSx(bits) => return format!("{d} = (s{bits}){s}"),
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div => "/=",
        AluOp::SDiv => "s/=",
        AluOp::Mod => "%=",
        AluOp::SMod => "s%=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Xor => "^=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Arsh => "s>>=",
    };
    format!("{d} {sym} {s}")
}

fn atomic(width: Width, op: AtomicOp, fetch: bool, dst: Reg, src: Reg, off: i16) -> String {
    // llvm's names: xchg_64 / xchg32_32, cmpxchg_64 / cmpxchg32_32.
    let (ty, suffix) = match width {
        Width::W64 => ("u64", "_64"),
        Width::W32 => ("u32", "32_32"),
    };
    let addr = address(dst, off as i64);
    let s = reg(width, src);
    let name = match op {
        AtomicOp::Add => "add",
        AtomicOp::Or => "or",
        AtomicOp::And => "and",
        AtomicOp::Xor => "xor",
        AtomicOp::Xchg => return format!("{s} = xchg{suffix}({addr}, {s})"),
        AtomicOp::CmpXchg => {
            return format!(
                "{} = cmpxchg{suffix}({addr}, {}, {s})",
                reg(width, 0),
                reg(width, 0)
            )
        }
    };
    if fetch {
        format!("{s} = atomic_fetch_{name}(({ty} *)({addr}), {s})")
    } else {
        let sym = match op {
            AtomicOp::Add => "+=",
            AtomicOp::Or => "|=",
            AtomicOp::And => "&=",
            _ => "^=",
        };
        format!("lock *({ty} *)({addr}) {sym} {s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alu64(op: AluOp, dst: Reg, src: Operand) -> Insn {
        Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src,
        }
    }

    #[test]
    fn readable_syntax() {
        let cases: Vec<(Insn, Option<usize>, &str)> = vec![
            (alu64(AluOp::Mov, 0, Operand::Imm(1)), None, "r0 = 1"),
            (
                Insn::Alu {
                    width: Width::W32,
                    op: AluOp::Add,
                    dst: 0,
                    src: Operand::Reg(1),
                },
                None,
                "w0 += w1",
            ),
            (alu64(AluOp::SDiv, 1, Operand::Reg(2)), None, "r1 s/= r2"),
            (alu64(AluOp::SMod, 1, Operand::Reg(2)), None, "r1 s%= r2"),
            (alu64(AluOp::Arsh, 1, Operand::Imm(-3)), None, "r1 s>>= -3"),
            (alu64(AluOp::Neg, 4, Operand::Imm(0)), None, "r4 = -r4"),
            (
                alu64(AluOp::MovSx(8), 1, Operand::Reg(2)),
                None,
                "r1 = (s8)r2",
            ),
            (
                Insn::Alu {
                    width: Width::W32,
                    op: AluOp::MovSx(16),
                    dst: 1,
                    src: Operand::Reg(2),
                },
                None,
                "w1 = (s16)w2",
            ),
            (
                Insn::Endian {
                    order: ByteOrder::ToBe,
                    bits: 16,
                    dst: 1,
                },
                None,
                "r1 = be16 r1",
            ),
            (
                Insn::Endian {
                    order: ByteOrder::Swap,
                    bits: 64,
                    dst: 1,
                },
                None,
                "r1 = bswap64 r1",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::Imm,
                    dst: 0,
                    imm: 0x123,
                },
                None,
                "r0 = 0x123 ll",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::MapFd,
                    dst: 1,
                    imm: 3,
                },
                None,
                "r1 = map[3]",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::MapValue,
                    dst: 1,
                    imm: 3 | (16 << 32),
                },
                None,
                "r1 = map_value[3]+16",
            ),
            (
                Insn::LdDw {
                    kind: LdDwKind::Func,
                    dst: 2,
                    imm: 5,
                },
                Some(1),
                "r2 = func +5 <LBB_7>",
            ),
            (
                Insn::Load {
                    size: Size::W,
                    sign_extend: false,
                    dst: 1,
                    src: 2,
                    off: 4,
                },
                None,
                "r1 = *(u32 *)(r2 + 4)",
            ),
            (
                Insn::Load {
                    size: Size::B,
                    sign_extend: true,
                    dst: 1,
                    src: 10,
                    off: i16::MIN,
                },
                None,
                "r1 = *(s8 *)(r10 - 32768)",
            ),
            (
                Insn::Store {
                    size: Size::DW,
                    dst: 10,
                    off: -8,
                    src: Operand::Reg(1),
                },
                None,
                "*(u64 *)(r10 - 8) = r1",
            ),
            (
                Insn::Store {
                    size: Size::H,
                    dst: 1,
                    off: 2,
                    src: Operand::Imm(7),
                },
                None,
                "*(u16 *)(r1 + 2) = 7",
            ),
            (
                Insn::Atomic {
                    width: Width::W64,
                    op: AtomicOp::Add,
                    fetch: false,
                    dst: 1,
                    src: 2,
                    off: 0,
                },
                None,
                "lock *(u64 *)(r1 + 0) += r2",
            ),
            (
                Insn::Atomic {
                    width: Width::W64,
                    op: AtomicOp::Add,
                    fetch: true,
                    dst: 1,
                    src: 0,
                    off: 0,
                },
                None,
                "r0 = atomic_fetch_add((u64 *)(r1 + 0), r0)",
            ),
            (
                Insn::Atomic {
                    width: Width::W32,
                    op: AtomicOp::Xchg,
                    fetch: true,
                    dst: 10,
                    src: 1,
                    off: -4,
                },
                None,
                "w1 = xchg32_32(r10 - 4, w1)",
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
                None,
                "r0 = cmpxchg_64(r10 - 8, r0, r1)",
            ),
            (
                Insn::Jmp {
                    width: Width::W64,
                    op: JmpOp::Jne,
                    dst: 1,
                    src: Operand::Reg(0),
                    off: 3,
                },
                Some(3),
                "if r1 != r0 goto +3 <LBB_7>",
            ),
            (
                Insn::Jmp {
                    width: Width::W32,
                    op: JmpOp::Jsle,
                    dst: 1,
                    src: Operand::Imm(-5),
                    off: -2,
                },
                None,
                "if w1 s<= -5 goto -2",
            ),
            (Insn::Ja { off: 3 }, None, "goto +3"),
            (Insn::Ja { off: 70000 }, None, "gotol +70000"),
            (Insn::Call(CallTarget::Helper(1)), None, "call 1"),
            (Insn::Call(CallTarget::Local(5)), None, "call local +5"),
            (Insn::Call(CallTarget::Kfunc(9)), None, "call kfunc 9"),
            (Insn::CallReg { reg: 2 }, None, "callx r2"),
            (Insn::Exit, Some(0), "exit"),
            (
                Insn::LdPacket {
                    size: Size::H,
                    indirect: Some(1),
                    imm: -4,
                },
                None,
                "r0 = *(u16 *)skb[r1 - 4]",
            ),
            (
                Insn::LdPacket {
                    size: Size::B,
                    indirect: None,
                    imm: 12,
                },
                None,
                "r0 = *(u8 *)skb[12]",
            ),
        ];
        for (insn, pc, want) in cases {
            assert_eq!(format_insn(&insn, pc), want, "{insn:?}");
        }
    }

    #[test]
    fn helper_names() {
        let names = |id: i32| (id == 1).then_some("bpf_map_lookup_elem");
        let call = |id| Insn::Call(CallTarget::Helper(id));
        assert_eq!(
            format_insn_with(&call(1), None, &names),
            "call bpf_map_lookup_elem"
        );
        assert_eq!(format_insn_with(&call(2), None, &names), "call 2");
    }

    #[test]
    fn listing_skips_lddw_tail() {
        let prog = [
            Insn::LdDw {
                kind: LdDwKind::Imm,
                dst: 0,
                imm: 1,
            },
            Insn::LdDwTail,
            Insn::Exit,
        ];
        assert_eq!(disassemble(&prog), "   0: r0 = 0x1 ll\n   2: exit\n");
    }
}
