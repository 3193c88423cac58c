//! Bytes → typed instructions, with validation of every field the ISA constrains.

use crate::insn::*;
use crate::opcode::*;
use thiserror::Error;

/// Why a program's encoding is malformed. `pc` is the slot index.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("program length {0} is not a multiple of 8 bytes")]
    TruncatedProgram(usize),
    #[error("program is empty")]
    Empty,
    #[error("insn {pc}: unknown opcode {code:#04x}")]
    BadOpcode { pc: usize, code: u8 },
    #[error("insn {pc}: invalid register r{reg} ({what})")]
    BadRegister {
        pc: usize,
        reg: u8,
        what: &'static str,
    },
    #[error("insn {pc}: {what}")]
    BadField { pc: usize, what: String },
    #[error("insn {pc}: lddw is truncated (missing second slot)")]
    TruncatedLdDw { pc: usize },
    #[error("insn {pc}: jump to {target} is out of range (program has {len} slots)")]
    JumpOutOfRange { pc: usize, target: i64, len: usize },
    #[error("insn {pc}: jump into the middle of the lddw at {target_of}")]
    JumpIntoLdDw { pc: usize, target_of: usize },
    #[error("insn {pc}: call to local function at {target} is out of range")]
    CallOutOfRange { pc: usize, target: i64 },
}

impl DecodeError {
    /// The slot the error is about, when it concerns one instruction. The
    /// assembler uses it to point back at the offending source line.
    pub fn pc(&self) -> Option<usize> {
        match *self {
            DecodeError::TruncatedProgram(_) | DecodeError::Empty => None,
            DecodeError::BadOpcode { pc, .. }
            | DecodeError::BadRegister { pc, .. }
            | DecodeError::BadField { pc, .. }
            | DecodeError::TruncatedLdDw { pc }
            | DecodeError::JumpOutOfRange { pc, .. }
            | DecodeError::JumpIntoLdDw { pc, .. }
            | DecodeError::CallOutOfRange { pc, .. } => Some(pc),
        }
    }
}

fn check_reg(pc: usize, reg: u8, what: &'static str) -> Result<Reg, DecodeError> {
    if reg > 10 {
        Err(DecodeError::BadRegister { pc, reg, what })
    } else {
        Ok(reg)
    }
}

/// A writable destination: r0–r9.
fn check_dst(pc: usize, reg: u8) -> Result<Reg, DecodeError> {
    if reg >= 10 {
        Err(DecodeError::BadRegister {
            pc,
            reg,
            what: "destination must be r0-r9",
        })
    } else {
        Ok(reg)
    }
}

fn bad(pc: usize, what: impl Into<String>) -> DecodeError {
    DecodeError::BadField {
        pc,
        what: what.into(),
    }
}

fn size_of(code: u8) -> Size {
    match code & 0x18 {
        SIZE_W => Size::W,
        SIZE_H => Size::H,
        SIZE_B => Size::B,
        _ => Size::DW,
    }
}

fn alu_op(pc: usize, raw: &RawInsn) -> Result<AluOp, DecodeError> {
    let op = raw.code & 0xf0;
    let off = raw.off;
    let plain = |op: AluOp| {
        if off != 0 {
            Err(bad(
                pc,
                format!("nonzero offset {off} on an ALU instruction"),
            ))
        } else {
            Ok(op)
        }
    };
    match op {
        ALU_ADD => plain(AluOp::Add),
        ALU_SUB => plain(AluOp::Sub),
        ALU_MUL => plain(AluOp::Mul),
        ALU_DIV | ALU_MOD => match off {
            0 => Ok(if op == ALU_DIV {
                AluOp::Div
            } else {
                AluOp::Mod
            }),
            1 => Ok(if op == ALU_DIV {
                AluOp::SDiv
            } else {
                AluOp::SMod
            }),
            _ => Err(bad(
                pc,
                format!("division offset must be 0 or 1, not {off}"),
            )),
        },
        ALU_OR => plain(AluOp::Or),
        ALU_AND => plain(AluOp::And),
        ALU_LSH => plain(AluOp::Lsh),
        ALU_RSH => plain(AluOp::Rsh),
        ALU_NEG => plain(AluOp::Neg),
        ALU_XOR => plain(AluOp::Xor),
        ALU_MOV => match off {
            0 => Ok(AluOp::Mov),
            8 | 16 | 32 => Ok(AluOp::MovSx(off as u8)),
            _ => Err(bad(
                pc,
                format!("mov offset must be 0, 8, 16 or 32, not {off}"),
            )),
        },
        ALU_ARSH => plain(AluOp::Arsh),
        _ => Err(DecodeError::BadOpcode { pc, code: raw.code }),
    }
}

fn jmp_op(op: u8) -> Option<JmpOp> {
    Some(match op {
        JMP_JEQ => JmpOp::Jeq,
        JMP_JGT => JmpOp::Jgt,
        JMP_JGE => JmpOp::Jge,
        JMP_JSET => JmpOp::Jset,
        JMP_JNE => JmpOp::Jne,
        JMP_JSGT => JmpOp::Jsgt,
        JMP_JSGE => JmpOp::Jsge,
        JMP_JLT => JmpOp::Jlt,
        JMP_JLE => JmpOp::Jle,
        JMP_JSLT => JmpOp::Jslt,
        JMP_JSLE => JmpOp::Jsle,
        _ => return None,
    })
}

/// Decode one slot. `next` is the following slot, needed by `lddw`.
pub fn decode_insn(pc: usize, raw: &RawInsn, next: Option<&RawInsn>) -> Result<Insn, DecodeError> {
    let class = raw.code & 0x07;
    match class {
        CLASS_ALU | CLASS_ALU64 => {
            let width = if class == CLASS_ALU64 {
                Width::W64
            } else {
                Width::W32
            };
            let dst = check_dst(pc, raw.dst)?;
            if raw.code & 0xf0 == ALU_END {
                let order = match (class, raw.code & SRC_X) {
                    (CLASS_ALU, SRC_K) => ByteOrder::ToLe,
                    (CLASS_ALU, _) => ByteOrder::ToBe,
                    (_, SRC_K) => ByteOrder::Swap,
                    _ => return Err(DecodeError::BadOpcode { pc, code: raw.code }),
                };
                if !matches!(raw.imm, 16 | 32 | 64) {
                    return Err(bad(
                        pc,
                        format!("byte swap width must be 16, 32 or 64, not {}", raw.imm),
                    ));
                }
                if raw.src != 0 || raw.off != 0 {
                    return Err(bad(pc, "byte swap with nonzero src or offset"));
                }
                return Ok(Insn::Endian {
                    order,
                    bits: raw.imm as u8,
                    dst,
                });
            }
            let op = alu_op(pc, raw)?;
            let src = if raw.code & SRC_X != 0 {
                if op == AluOp::Neg {
                    return Err(bad(pc, "neg takes no source register"));
                }
                if raw.imm != 0 {
                    return Err(bad(pc, "register-source ALU instruction with nonzero imm"));
                }
                Operand::Reg(check_reg(pc, raw.src, "source")?)
            } else {
                if raw.src != 0 {
                    return Err(bad(
                        pc,
                        "immediate ALU instruction with nonzero src register",
                    ));
                }
                // Like the kernel: neg has no operand, and sign-extending moves
                // exist only in register form.
                if op == AluOp::Neg && raw.imm != 0 {
                    return Err(bad(pc, "neg with nonzero imm"));
                }
                if let AluOp::MovSx(_) = op {
                    return Err(bad(pc, "movsx takes a source register, not an immediate"));
                }
                Operand::Imm(raw.imm)
            };
            if let AluOp::MovSx(32) = op {
                if width == Width::W32 {
                    return Err(bad(pc, "movsx from 32 bits requires the ALU64 class"));
                }
            }
            Ok(Insn::Alu {
                width,
                op,
                dst,
                src,
            })
        }
        CLASS_JMP | CLASS_JMP32 => {
            let op = raw.code & 0xf0;
            let width = if class == CLASS_JMP {
                Width::W64
            } else {
                Width::W32
            };
            match op {
                JMP_JA => {
                    if raw.code & SRC_X != 0 || raw.dst != 0 || raw.src != 0 {
                        return Err(DecodeError::BadOpcode { pc, code: raw.code });
                    }
                    if class == CLASS_JMP {
                        if raw.imm != 0 {
                            return Err(bad(
                                pc,
                                "ja with nonzero imm (use gotol for 32-bit offsets)",
                            ));
                        }
                        Ok(Insn::Ja {
                            off: raw.off as i32,
                        })
                    } else {
                        if raw.off != 0 {
                            return Err(bad(pc, "gotol with nonzero offset field"));
                        }
                        Ok(Insn::Ja { off: raw.imm })
                    }
                }
                JMP_CALL if class == CLASS_JMP => {
                    if raw.code & SRC_X != 0 {
                        // callx: the target is in a register. LLVM places it in dst_reg;
                        // older assemblers used imm. Accept both, keep dst form.
                        if raw.src != 0 || raw.off != 0 || (raw.dst != 0 && raw.imm != 0) {
                            return Err(bad(
                                pc,
                                "callx with nonzero src, offset or both dst and imm",
                            ));
                        }
                        let reg = if raw.dst != 0 {
                            raw.dst
                        } else {
                            u8::try_from(raw.imm).unwrap_or(u8::MAX)
                        };
                        let reg = check_reg(pc, reg, "callx target")?;
                        return Ok(Insn::CallReg { reg });
                    }
                    if raw.dst != 0 || raw.off != 0 {
                        return Err(bad(pc, "call with nonzero dst or offset"));
                    }
                    match raw.src {
                        CALL_HELPER => Ok(Insn::Call(CallTarget::Helper(raw.imm))),
                        CALL_LOCAL => Ok(Insn::Call(CallTarget::Local(raw.imm))),
                        CALL_KFUNC => Ok(Insn::Call(CallTarget::Kfunc(raw.imm))),
                        s => Err(bad(pc, format!("call with unknown src {s}"))),
                    }
                }
                JMP_EXIT if class == CLASS_JMP => {
                    // The kernel checks every field but the offset ("BPF_EXIT
                    // uses reserved fields"): an exit with one loads there.
                    if raw.code & SRC_X != 0 || raw.dst != 0 || raw.src != 0 || raw.imm != 0 {
                        return Err(bad(pc, "exit with nonzero fields"));
                    }
                    Ok(Insn::Exit)
                }
                JMP_JCOND if raw.code == MAY_GOTO => {
                    // The kernel's only JCOND kind; every other field is
                    // reserved ("invalid may_goto imm").
                    if raw.src != JCOND_MAY_GOTO || raw.dst != 0 || raw.imm != 0 {
                        return Err(bad(
                            pc,
                            format!(
                                "invalid may_goto (src r{}, dst r{}, imm {}): only src 0 with \
                                 dst and imm clear is defined",
                                raw.src, raw.dst, raw.imm
                            ),
                        ));
                    }
                    Ok(Insn::MayGoto { off: raw.off })
                }
                _ => {
                    let jop = jmp_op(op).ok_or(DecodeError::BadOpcode { pc, code: raw.code })?;
                    let dst = check_reg(pc, raw.dst, "jump operand")?;
                    let src = if raw.code & SRC_X != 0 {
                        if raw.imm != 0 {
                            return Err(bad(pc, "register-source jump with nonzero imm"));
                        }
                        Operand::Reg(check_reg(pc, raw.src, "jump operand")?)
                    } else {
                        if raw.src != 0 {
                            return Err(bad(pc, "immediate jump with nonzero src register"));
                        }
                        Operand::Imm(raw.imm)
                    };
                    Ok(Insn::Jmp {
                        width,
                        op: jop,
                        dst,
                        src,
                        off: raw.off,
                    })
                }
            }
        }
        CLASS_LD => {
            let mode = raw.code & 0xe0;
            match (mode, raw.code & 0x18) {
                (MODE_IMM, SIZE_DW) => {
                    let next = next.ok_or(DecodeError::TruncatedLdDw { pc })?;
                    if next.code != 0 || next.dst != 0 || next.src != 0 || next.off != 0 {
                        return Err(bad(pc + 1, "second slot of lddw must be zero except imm"));
                    }
                    let dst = check_dst(pc, raw.dst)?;
                    if raw.off != 0 {
                        return Err(bad(pc, "lddw with nonzero offset"));
                    }
                    let kind = match raw.src {
                        PSEUDO_IMM64 => LdDwKind::Imm,
                        PSEUDO_MAP_FD => LdDwKind::MapFd,
                        PSEUDO_MAP_VALUE => LdDwKind::MapValue,
                        PSEUDO_BTF_ID => LdDwKind::BtfId,
                        PSEUDO_FUNC => LdDwKind::Func,
                        PSEUDO_MAP_IDX => LdDwKind::MapIdx,
                        PSEUDO_MAP_IDX_VALUE => LdDwKind::MapIdxValue,
                        s => return Err(bad(pc, format!("lddw with unknown pseudo source {s}"))),
                    };
                    Ok(Insn::LdDw {
                        kind,
                        dst,
                        imm: (raw.imm as u32 as u64) | ((next.imm as u32 as u64) << 32),
                    })
                }
                (MODE_ABS, sz) | (MODE_IND, sz) if sz != SIZE_DW => {
                    // The destination is implicitly r0, so the field must be clear.
                    if raw.dst != 0 || raw.off != 0 || (mode == MODE_ABS && raw.src != 0) {
                        return Err(bad(pc, "legacy packet load with reserved fields set"));
                    }
                    let indirect = if mode == MODE_IND {
                        Some(check_reg(pc, raw.src, "ldind source")?)
                    } else {
                        None
                    };
                    Ok(Insn::LdPacket {
                        size: size_of(raw.code),
                        indirect,
                        imm: raw.imm,
                    })
                }
                _ => Err(DecodeError::BadOpcode { pc, code: raw.code }),
            }
        }
        CLASS_LDX => {
            let mode = raw.code & 0xe0;
            let sign_extend = match mode {
                MODE_MEM => false,
                MODE_MEMSX if raw.code & 0x18 != SIZE_DW => true,
                _ => return Err(DecodeError::BadOpcode { pc, code: raw.code }),
            };
            if raw.imm != 0 {
                return Err(bad(pc, "load with nonzero imm"));
            }
            Ok(Insn::Load {
                size: size_of(raw.code),
                sign_extend,
                dst: check_dst(pc, raw.dst)?,
                src: check_reg(pc, raw.src, "load base")?,
                off: raw.off,
            })
        }
        CLASS_ST => {
            if raw.code & 0xe0 != MODE_MEM {
                return Err(DecodeError::BadOpcode { pc, code: raw.code });
            }
            if raw.src != 0 {
                return Err(bad(pc, "immediate store with nonzero src register"));
            }
            Ok(Insn::Store {
                size: size_of(raw.code),
                dst: check_reg(pc, raw.dst, "store base")?,
                off: raw.off,
                src: Operand::Imm(raw.imm),
            })
        }
        CLASS_STX => {
            let mode = raw.code & 0xe0;
            let dst = check_reg(pc, raw.dst, "store base")?;
            let src = check_reg(pc, raw.src, "store source")?;
            match mode {
                MODE_MEM => {
                    if raw.imm != 0 {
                        return Err(bad(pc, "register store with nonzero imm"));
                    }
                    Ok(Insn::Store {
                        size: size_of(raw.code),
                        dst,
                        off: raw.off,
                        src: Operand::Reg(src),
                    })
                }
                MODE_ATOMIC if raw.imm == ATOMIC_LOAD_ACQ => {
                    // dst receives the value: the kernel checks it as a
                    // load's destination.
                    if dst == FRAME_POINTER {
                        return Err(DecodeError::BadRegister {
                            pc,
                            reg: dst,
                            what: "load_acquire would write r10",
                        });
                    }
                    Ok(Insn::LoadAcquire {
                        size: size_of(raw.code),
                        dst,
                        src,
                        off: raw.off,
                    })
                }
                MODE_ATOMIC if raw.imm == ATOMIC_STORE_REL => Ok(Insn::StoreRelease {
                    size: size_of(raw.code),
                    dst,
                    off: raw.off,
                    src,
                }),
                MODE_ATOMIC => {
                    let width = match raw.code & 0x18 {
                        SIZE_W => Width::W32,
                        SIZE_DW => Width::W64,
                        _ => return Err(bad(pc, "atomic operations are 32 or 64 bits only")),
                    };
                    let fetch = raw.imm & ATOMIC_FETCH != 0;
                    let op = match raw.imm & !ATOMIC_FETCH {
                        ATOMIC_ADD => AtomicOp::Add,
                        ATOMIC_OR => AtomicOp::Or,
                        ATOMIC_AND => AtomicOp::And,
                        ATOMIC_XOR => AtomicOp::Xor,
                        0xe0 if fetch => AtomicOp::Xchg,
                        0xf0 if fetch => AtomicOp::CmpXchg,
                        _ => {
                            return Err(bad(pc, format!("unknown atomic operation {:#x}", raw.imm)))
                        }
                    };
                    // Fetching forms write the fetched value back into src.
                    if fetch && op != AtomicOp::CmpXchg && src == FRAME_POINTER {
                        return Err(DecodeError::BadRegister {
                            pc,
                            reg: src,
                            what: "fetching atomic would write r10",
                        });
                    }
                    Ok(Insn::Atomic {
                        width,
                        op,
                        fetch,
                        dst,
                        src,
                        off: raw.off,
                    })
                }
                _ => Err(DecodeError::BadOpcode { pc, code: raw.code }),
            }
        }
        _ => unreachable!("class is 3 bits"),
    }
}

/// Parse raw bytes into slots.
pub fn parse_slots(bytes: &[u8]) -> Result<Vec<RawInsn>, DecodeError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(DecodeError::TruncatedProgram(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| RawInsn::from_bytes(c.try_into().expect("chunk of 8")))
        .collect())
}

/// Decode and validate a whole program: one typed entry per slot (the second
/// slot of an `lddw` is [`Insn::LdDwTail`]), jumps and local calls in range and
/// never landing inside an `lddw`.
pub fn decode_program(slots: &[RawInsn]) -> Result<Vec<Insn>, DecodeError> {
    if slots.is_empty() {
        return Err(DecodeError::Empty);
    }
    let mut out = Vec::with_capacity(slots.len());
    let mut pc = 0;
    while pc < slots.len() {
        let insn = decode_insn(pc, &slots[pc], slots.get(pc + 1))?;
        out.push(insn);
        if insn.slots() == 2 {
            out.push(Insn::LdDwTail);
        }
        pc += insn.slots();
    }
    check_targets(&out)?;
    Ok(out)
}

/// Jumps and local calls in range and never landing inside an `lddw`.
pub(crate) fn check_targets(out: &[Insn]) -> Result<(), DecodeError> {
    let len = out.len();
    for (pc, insn) in out.iter().enumerate() {
        let target = match *insn {
            Insn::Call(CallTarget::Local(off)) => {
                let t = pc as i64 + 1 + off as i64;
                if t < 0 || t >= len as i64 {
                    return Err(DecodeError::CallOutOfRange { pc, target: t });
                }
                Some(t)
            }
            Insn::LdDw {
                kind: LdDwKind::Func,
                imm,
                ..
            } => {
                let t = pc as i64 + 1 + imm as i32 as i64;
                if t < 0 || t >= len as i64 {
                    return Err(DecodeError::CallOutOfRange { pc, target: t });
                }
                Some(t)
            }
            _ => insn.jump_target(pc),
        };
        if let Some(t) = target {
            if t < 0 || t >= len as i64 {
                return Err(DecodeError::JumpOutOfRange { pc, target: t, len });
            }
            if out[t as usize] == Insn::LdDwTail {
                return Err(DecodeError::JumpIntoLdDw {
                    pc,
                    target_of: t as usize - 1,
                });
            }
        }
    }
    Ok(())
}

/// Convenience: bytes straight to a validated typed program.
pub fn decode_bytes(bytes: &[u8]) -> Result<Vec<Insn>, DecodeError> {
    decode_program(&parse_slots(bytes)?)
}
