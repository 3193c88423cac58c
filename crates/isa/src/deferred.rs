//! Decoding as the kernel loads a program: malformed slots whose faults the
//! kernel only reports when its verifier walk reaches them are kept, with
//! their reason, instead of refusing the whole program.
//!
//! The kernel checks a few things for every slot before it walks the
//! program (`bpf_check`): the opcode byte must be in its instruction table
//! and an `LDX` must not use reserved fields (`resolve_pseudo_ldimm64`), an
//! `lddw`'s second slot must be clear and its pseudo source known (same
//! pass), every jump must stay inside its subprogram (`check_subprogs`) and
//! never land inside an `lddw` (`check_cfg`), and local calls must target
//! the program (`add_subprog`). Everything else — registers above r10,
//! writes to r10, reserved fields of the other classes, unknown atomic or
//! call kinds — is checked by the walk (`check_reg_arg`, "... uses reserved
//! fields"), so a malformed slot on a path the walk proves dead is accepted
//! and then removed as dead code. [`decode_for_load`] reproduces that
//! split: the caller (the verifier) refuses an [`Decoded::invalid`] slot
//! only when its analysis reaches it, and the loader replaces the dead ones
//! before any engine sees them.

use std::collections::BTreeMap;

use crate::decode::{decode_insn, DecodeError};
use crate::insn::*;
use crate::opcode::*;

/// A program decoded for loading: one typed entry per slot, as
/// [`crate::decode_program`] returns it, except that each slot of
/// `invalid` holds a placeholder with the control-flow edges the kernel's
/// static passes give the malformed slot (so the CFG, jump-range and
/// reachability checks treat it as the kernel does). A placeholder must
/// never execute: the verifier refuses a path reaching it with the decoder's
/// reason, and [`Decoded::trap_invalid`] replaces it after verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub insns: Vec<Insn>,
    pub invalid: BTreeMap<usize, DecodeError>,
}

impl Decoded {
    /// The first malformed slot's error, for callers that run programs
    /// without a verifier (nothing proves the slot dead there).
    pub fn first_invalid(&self) -> Option<&DecodeError> {
        self.invalid.values().next()
    }

    /// Replace every malformed slot (both slots of an `lddw`) by `ja -1`,
    /// the kernel's own filler for dead code (`sanitize_dead_code`): once
    /// the verifier has proved the slots unreachable, no engine ever sees
    /// their placeholders.
    pub fn trap_invalid(&mut self) {
        for &pc in self.invalid.keys() {
            let n = self.insns[pc].slots();
            for slot in pc..pc + n {
                self.insns[slot] = Insn::Ja { off: -1 };
            }
        }
    }
}

/// Whether the kernel's instruction table (`bpf_opcode_in_insntable`)
/// knows the opcode byte; any other byte is refused for every slot before
/// the walk. Opcodes this ISA does not decode at all (indirect jumps) are
/// left out: refusing them everywhere keeps bpfjet at least as strict as
/// the kernel.
pub fn in_kernel_insn_table(code: u8) -> bool {
    let op = code & 0xf0;
    match code & 0x07 {
        CLASS_ALU | CLASS_ALU64 => match op {
            ALU_NEG => code & SRC_X == 0,
            ALU_END => {
                code == CLASS_ALU | ALU_END | SRC_K
                    || code == CLASS_ALU | ALU_END | SRC_X
                    || code == CLASS_ALU64 | ALU_END | SRC_K
            }
            0xe0 | 0xf0 => false,
            _ => true,
        },
        CLASS_JMP => match op {
            JMP_JA | JMP_CALL | JMP_EXIT => code & SRC_X == 0,
            // `may_goto` (6.9+): only the immediate form is in the table.
            JMP_JCOND => code == MAY_GOTO,
            0xf0 => false,
            _ => true,
        },
        CLASS_JMP32 => match op {
            JMP_JA => code & SRC_X == 0,
            JMP_CALL | JMP_EXIT | 0xe0 | 0xf0 => false,
            _ => true,
        },
        CLASS_LD => {
            code == LDDW || matches!(code & 0xe0, MODE_ABS | MODE_IND) && code & 0x18 != SIZE_DW
        }
        CLASS_LDX => match code & 0xe0 {
            MODE_MEM => true,
            MODE_MEMSX => code & 0x18 != SIZE_DW,
            _ => false,
        },
        CLASS_ST => code & 0xe0 == MODE_MEM,
        CLASS_STX => matches!(code & 0xe0, MODE_MEM | MODE_ATOMIC),
        _ => unreachable!("class is 3 bits"),
    }
}

/// The placeholder of a slot the kernel would refuse only when walked, or
/// `None` when it refuses the slot at load whatever the path.
fn placeholder(raw: &RawInsn, next: Option<&RawInsn>) -> Option<Insn> {
    if !in_kernel_insn_table(raw.code) {
        return None;
    }
    let class = raw.code & 0x07;
    match class {
        // `resolve_pseudo_ldimm64`: "BPF_LDX uses reserved fields".
        CLASS_LDX if raw.imm != 0 => None,
        CLASS_LD if raw.code == LDDW => {
            // The second slot and the pseudo source are load-time checks;
            // the destination and the offset are the walk's (`check_ld_imm`).
            let next = next?;
            if next.code != 0 || next.dst != 0 || next.src != 0 || next.off != 0 {
                return None;
            }
            let kind = match raw.src {
                PSEUDO_IMM64 => LdDwKind::Imm,
                PSEUDO_MAP_FD => LdDwKind::MapFd,
                PSEUDO_MAP_VALUE => LdDwKind::MapValue,
                PSEUDO_BTF_ID => LdDwKind::BtfId,
                PSEUDO_FUNC => LdDwKind::Func,
                PSEUDO_MAP_IDX => LdDwKind::MapIdx,
                PSEUDO_MAP_IDX_VALUE => LdDwKind::MapIdxValue,
                _ => return None,
            };
            // Kept as an lddw so that its map or function reference is
            // resolved at load, as the kernel does for every lddw.
            Some(Insn::LdDw {
                kind,
                dst: 0,
                imm: (raw.imm as u32 as u64) | ((next.imm as u32 as u64) << 32),
            })
        }
        CLASS_JMP | CLASS_JMP32 => {
            let width = if class == CLASS_JMP {
                Width::W64
            } else {
                Width::W32
            };
            Some(match raw.code & 0xf0 {
                JMP_EXIT => Insn::Exit,
                // A local call's target is checked at load (`add_subprog`),
                // whatever its other fields; the other kinds fall through.
                JMP_CALL => match raw.src {
                    CALL_HELPER => Insn::Call(CallTarget::Helper(raw.imm)),
                    CALL_LOCAL => Insn::Call(CallTarget::Local(raw.imm)),
                    CALL_KFUNC => Insn::Call(CallTarget::Kfunc(raw.imm)),
                    _ => Insn::Ja { off: 0 },
                },
                // `check_subprogs` and `check_cfg` take a `gotol`'s target
                // from imm and every other jump's from off.
                JMP_JA if class == CLASS_JMP32 => Insn::Ja { off: raw.imm },
                JMP_JA => Insn::Ja {
                    off: raw.off as i32,
                },
                // A `may_goto` with reserved fields set: its two edges, as
                // `check_cfg` takes them, refused when the walk reaches it.
                JMP_JCOND => Insn::MayGoto { off: raw.off },
                op => Insn::Jmp {
                    width,
                    op: jmp_op(op)?,
                    dst: 0,
                    src: Operand::Imm(0),
                    off: raw.off,
                },
            })
        }
        // Every other class falls through to the next slot.
        _ => Some(Insn::Ja { off: 0 }),
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

/// Decode a program the way the kernel loads it: the load-time checks
/// above refuse the program (the same errors as [`crate::decode_program`]),
/// the walk-time ones are deferred to [`Decoded::invalid`].
pub fn decode_for_load(slots: &[RawInsn]) -> Result<Decoded, DecodeError> {
    if slots.is_empty() {
        return Err(DecodeError::Empty);
    }
    let mut insns = Vec::with_capacity(slots.len());
    let mut invalid = BTreeMap::new();
    let mut pc = 0;
    while pc < slots.len() {
        let next = slots.get(pc + 1);
        let insn = match decode_insn(pc, &slots[pc], next) {
            Ok(insn) => insn,
            Err(e) => {
                // An error about the second slot of an lddw is a load-time one.
                let own = e.pc() == Some(pc);
                match placeholder(&slots[pc], next).filter(|_| own) {
                    Some(p) => {
                        invalid.insert(pc, e);
                        p
                    }
                    None => return Err(e),
                }
            }
        };
        insns.push(insn);
        if insn.slots() == 2 {
            insns.push(Insn::LdDwTail);
        }
        pc += insn.slots();
    }
    crate::decode::check_targets(&insns)?;
    Ok(Decoded { insns, invalid })
}
