//! Typed instructions → bytes. Exact inverse of `decode` for valid programs.

use crate::insn::*;
use crate::opcode::*;

fn size_bits(size: Size) -> u8 {
    match size {
        Size::B => SIZE_B,
        Size::H => SIZE_H,
        Size::W => SIZE_W,
        Size::DW => SIZE_DW,
    }
}

fn alu_bits(op: AluOp) -> (u8, i16) {
    match op {
        AluOp::Add => (ALU_ADD, 0),
        AluOp::Sub => (ALU_SUB, 0),
        AluOp::Mul => (ALU_MUL, 0),
        AluOp::Div => (ALU_DIV, 0),
        AluOp::SDiv => (ALU_DIV, 1),
        AluOp::Or => (ALU_OR, 0),
        AluOp::And => (ALU_AND, 0),
        AluOp::Lsh => (ALU_LSH, 0),
        AluOp::Rsh => (ALU_RSH, 0),
        AluOp::Neg => (ALU_NEG, 0),
        AluOp::Mod => (ALU_MOD, 0),
        AluOp::SMod => (ALU_MOD, 1),
        AluOp::Xor => (ALU_XOR, 0),
        AluOp::Mov => (ALU_MOV, 0),
        AluOp::MovSx(bits) => (ALU_MOV, bits as i16),
        AluOp::Arsh => (ALU_ARSH, 0),
    }
}

pub fn jmp_bits(op: JmpOp) -> u8 {
    match op {
        JmpOp::Jeq => JMP_JEQ,
        JmpOp::Jgt => JMP_JGT,
        JmpOp::Jge => JMP_JGE,
        JmpOp::Jset => JMP_JSET,
        JmpOp::Jne => JMP_JNE,
        JmpOp::Jsgt => JMP_JSGT,
        JmpOp::Jsge => JMP_JSGE,
        JmpOp::Jlt => JMP_JLT,
        JmpOp::Jle => JMP_JLE,
        JmpOp::Jslt => JMP_JSLT,
        JmpOp::Jsle => JMP_JSLE,
    }
}

fn ld_kind_bits(kind: LdDwKind) -> u8 {
    match kind {
        LdDwKind::Imm => PSEUDO_IMM64,
        LdDwKind::MapFd => PSEUDO_MAP_FD,
        LdDwKind::MapValue => PSEUDO_MAP_VALUE,
        LdDwKind::BtfId => PSEUDO_BTF_ID,
        LdDwKind::Func => PSEUDO_FUNC,
        LdDwKind::MapIdx => PSEUDO_MAP_IDX,
        LdDwKind::MapIdxValue => PSEUDO_MAP_IDX_VALUE,
    }
}

fn operand(src: Operand) -> (u8, u8, i32) {
    match src {
        Operand::Reg(r) => (SRC_X, r, 0),
        Operand::Imm(i) => (SRC_K, 0, i),
    }
}

/// Encode one instruction into its slot(s) (two for `lddw`, none for the
/// `lddw` tail marker).
pub fn encode_insn(insn: &Insn, out: &mut Vec<RawInsn>) {
    let raw = |code, dst, src, off, imm| RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    };
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            let class = if width == Width::W64 {
                CLASS_ALU64
            } else {
                CLASS_ALU
            };
            let (opb, off) = alu_bits(op);
            let (sbit, sreg, imm) = operand(src);
            out.push(raw(class | opb | sbit, dst, sreg, off, imm));
        }
        Insn::Endian { order, bits, dst } => {
            let code = match order {
                ByteOrder::ToLe => CLASS_ALU | ALU_END | SRC_K,
                ByteOrder::ToBe => CLASS_ALU | ALU_END | SRC_X,
                ByteOrder::Swap => CLASS_ALU64 | ALU_END | SRC_K,
            };
            out.push(raw(code, dst, 0, 0, bits as i32));
        }
        Insn::LdDw { kind, dst, imm } => {
            out.push(raw(LDDW, dst, ld_kind_bits(kind), 0, imm as u32 as i32));
            out.push(raw(0, 0, 0, 0, (imm >> 32) as u32 as i32));
        }
        Insn::LdDwTail => {}
        Insn::LdPacket {
            size,
            indirect,
            imm,
        } => {
            let (mode, src) = match indirect {
                Some(r) => (MODE_IND, r),
                None => (MODE_ABS, 0),
            };
            out.push(raw(CLASS_LD | mode | size_bits(size), 0, src, 0, imm));
        }
        Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        } => {
            let mode = if sign_extend { MODE_MEMSX } else { MODE_MEM };
            out.push(raw(CLASS_LDX | mode | size_bits(size), dst, src, off, 0));
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => match src {
            Operand::Reg(r) => {
                out.push(raw(CLASS_STX | MODE_MEM | size_bits(size), dst, r, off, 0))
            }
            Operand::Imm(i) => out.push(raw(CLASS_ST | MODE_MEM | size_bits(size), dst, 0, off, i)),
        },
        Insn::Atomic {
            width,
            op,
            fetch,
            dst,
            src,
            off,
        } => {
            let size = if width == Width::W64 { SIZE_DW } else { SIZE_W };
            let base = match op {
                AtomicOp::Add => ATOMIC_ADD,
                AtomicOp::Or => ATOMIC_OR,
                AtomicOp::And => ATOMIC_AND,
                AtomicOp::Xor => ATOMIC_XOR,
                AtomicOp::Xchg => ATOMIC_XCHG,
                AtomicOp::CmpXchg => ATOMIC_CMPXCHG,
            };
            let imm = if fetch { base | ATOMIC_FETCH } else { base };
            out.push(raw(CLASS_STX | MODE_ATOMIC | size, dst, src, off, imm));
        }
        Insn::LoadAcquire {
            size,
            dst,
            src,
            off,
        } => out.push(raw(
            CLASS_STX | MODE_ATOMIC | size_bits(size),
            dst,
            src,
            off,
            ATOMIC_LOAD_ACQ,
        )),
        Insn::StoreRelease {
            size,
            dst,
            off,
            src,
        } => out.push(raw(
            CLASS_STX | MODE_ATOMIC | size_bits(size),
            dst,
            src,
            off,
            ATOMIC_STORE_REL,
        )),
        Insn::Ja { off } => {
            if let Ok(o) = i16::try_from(off) {
                out.push(raw(CLASS_JMP | JMP_JA, 0, 0, o, 0));
            } else {
                out.push(raw(CLASS_JMP32 | JMP_JA, 0, 0, 0, off));
            }
        }
        Insn::Jmp {
            width,
            op,
            dst,
            src,
            off,
        } => {
            let class = if width == Width::W64 {
                CLASS_JMP
            } else {
                CLASS_JMP32
            };
            let (sbit, sreg, imm) = operand(src);
            out.push(raw(class | jmp_bits(op) | sbit, dst, sreg, off, imm));
        }
        Insn::Call(target) => {
            let (src, imm) = match target {
                CallTarget::Helper(id) => (CALL_HELPER, id),
                CallTarget::Local(off) => (CALL_LOCAL, off),
                CallTarget::Kfunc(id) => (CALL_KFUNC, id),
            };
            out.push(raw(CLASS_JMP | JMP_CALL, 0, src, 0, imm));
        }
        Insn::CallReg { reg } => out.push(raw(CLASS_JMP | JMP_CALL | SRC_X, reg, 0, 0, 0)),
        Insn::MayGoto { off } => out.push(raw(MAY_GOTO, 0, JCOND_MAY_GOTO, off, 0)),
        Insn::Exit => out.push(raw(CLASS_JMP | JMP_EXIT, 0, 0, 0, 0)),
    }
}

/// Encode a typed program (as produced by `decode_program`) back to slots.
pub fn encode_program(insns: &[Insn]) -> Vec<RawInsn> {
    let mut out = Vec::with_capacity(insns.len());
    for i in insns {
        encode_insn(i, &mut out);
    }
    out
}

/// Encode to the byte image.
pub fn to_bytes(slots: &[RawInsn]) -> Vec<u8> {
    slots.iter().flat_map(|s| s.to_bytes()).collect()
}
