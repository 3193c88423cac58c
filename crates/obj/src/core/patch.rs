//! Writing a relocation's outcome into its instruction (libbpf
//! `bpf_core_patch_insn`).

use bpfjet_isa::opcode::{
    CLASS_ALU, CLASS_ALU64, CLASS_LD, CLASS_LDX, CLASS_ST, CLASS_STX, LDDW, SIZE_B, SIZE_DW,
    SIZE_H, SIZE_W, SRC_X,
};
use bpfjet_isa::RawInsn;

use super::calc::Outcome;

pub(super) enum Patched {
    Insns(Vec<RawInsn>),
    Poison { len: usize, reason: String },
}

fn size_bytes(code: u8) -> u32 {
    match code & 0x18 {
        SIZE_W => 4,
        SIZE_H => 2,
        SIZE_B => 1,
        _ => 8,
    }
}

fn size_code(bytes: u32) -> Option<u8> {
    Some(match bytes {
        4 => SIZE_W,
        2 => SIZE_H,
        1 => SIZE_B,
        8 => SIZE_DW,
        _ => return None,
    })
}

/// libbpf `bpf_core_patch_insn`: the new form of the instruction at `slot`.
pub(super) fn patch(insns: &[RawInsn], slot: usize, out: &Outcome) -> Result<Patched, String> {
    let insn = *insns
        .get(slot)
        .ok_or_else(|| format!("instruction {slot} is past the end of the program"))?;
    let lddw = insn.code == LDDW;
    let poison = |reason: String| Patched::Poison {
        len: if lddw { 2 } else { 1 },
        reason,
    };
    if out.poison {
        return Ok(poison(out.poison_reason.clone()));
    }
    let unexpected = |got: u64| {
        format!(
            "instruction holds {got}, expected {} (to become {})",
            out.orig, out.new
        )
    };
    let mut new = insn;
    match insn.code & 0x07 {
        CLASS_ALU | CLASS_ALU64 => {
            if insn.code & SRC_X != 0 {
                return Err("ALU instruction with a register operand cannot be relocated".into());
            }
            let got = insn.imm as i64 as u64;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            new.imm = out.new as i32;
            Ok(Patched::Insns(vec![new]))
        }
        CLASS_LDX | CLASS_ST | CLASS_STX => {
            let got = insn.off as i64 as u64;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            if out.new > i16::MAX as u64 {
                return Err(format!("offset {} does not fit an instruction", out.new));
            }
            if out.fail_memsz {
                return Ok(poison(format!(
                    "the field is {} bytes in the target and {} as compiled, and not an unsigned \
                     integer or pointer on both sides: access it with its own type and size",
                    out.new_sz, out.orig_sz
                )));
            }
            new.off = out.new as i16;
            if out.new_sz != out.orig_sz {
                let have = size_bytes(insn.code);
                if have != out.orig_sz {
                    return Err(format!(
                        "the instruction accesses {have} bytes, the field as compiled is {}",
                        out.orig_sz
                    ));
                }
                let size = size_code(out.new_sz)
                    .ok_or_else(|| format!("no load/store of {} bytes", out.new_sz))?;
                new.code = (insn.code & !0x18) | size;
            }
            Ok(Patched::Insns(vec![new]))
        }
        CLASS_LD if lddw => {
            let next = *insns.get(slot + 1).ok_or("lddw without its second half")?;
            if insn.src != 0
                || insn.off != 0
                || next.code != 0
                || next.dst != 0
                || next.src != 0
                || next.off != 0
            {
                return Err("lddw has an unexpected form for a CO-RE relocation".into());
            }
            let got = insn.imm as u32 as u64 | (next.imm as u32 as u64) << 32;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            let mut second = next;
            new.imm = out.new as u32 as i32;
            second.imm = (out.new >> 32) as u32 as i32;
            Ok(Patched::Insns(vec![new, second]))
        }
        _ => Err(format!(
            "instruction with opcode {:#04x} cannot carry a CO-RE relocation",
            insn.code
        )),
    }
}
