//! Load-time checks and bindings: what turns a typed instruction list into a
//! [`ProgramInner`] the interpreter can run without ever panicking.
//!
//! The decoder already enforces most of this for programs that come from
//! bytes, but programs may also be built by hand or rewritten by later passes,
//! so the interpreter re-checks every property its loop relies on: register
//! numbers, no writes to r10, intact `lddw` pairs, branch and call targets.

use crate::error::LoadError;
use crate::program::{LoadOptions, MemoryMode, ProgramInner};
use bpfjet_isa::{AluOp, AtomicOp, CallTarget, Insn, LdDwKind, Operand, Reg, Width};

const FRAME_POINTER: Reg = 10;

fn readable(pc: usize, reg: Reg) -> Result<(), LoadError> {
    if reg > FRAME_POINTER {
        return Err(LoadError::BadRegister { pc, reg });
    }
    Ok(())
}

fn writable(pc: usize, reg: Reg) -> Result<(), LoadError> {
    readable(pc, reg)?;
    if reg == FRAME_POINTER {
        return Err(LoadError::WritesFramePointer { pc });
    }
    Ok(())
}

fn operand(pc: usize, src: Operand) -> Result<(), LoadError> {
    match src {
        Operand::Reg(reg) => readable(pc, reg),
        Operand::Imm(_) => Ok(()),
    }
}

/// A branch, call or function-pointer target: inside the program and not the
/// second slot of an `lddw`.
fn target(insns: &[Insn], pc: usize, off: i64, what: &'static str) -> Result<usize, LoadError> {
    let target = pc as i64 + 1 + off;
    match usize::try_from(target)
        .ok()
        .and_then(|t| insns.get(t).map(|i| (t, i)))
    {
        Some((t, insn)) if *insn != Insn::LdDwTail => Ok(t),
        _ => Err(LoadError::BadTarget { pc, target, what }),
    }
}

pub(crate) fn load(mut insns: Vec<Insn>, options: LoadOptions) -> Result<ProgramInner, LoadError> {
    if insns.is_empty() {
        return Err(LoadError::Empty);
    }
    let mut entries = vec![0usize];
    let mut static_regions = Vec::new();
    for pc in 0..insns.len() {
        match insns[pc] {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                writable(pc, dst)?;
                operand(pc, src)?;
                match op {
                    AluOp::MovSx(8 | 16) => {}
                    AluOp::MovSx(32) if width == Width::W64 => {}
                    AluOp::MovSx(_) => {
                        return Err(LoadError::InvalidInsn {
                            pc,
                            what: "movsx must extend from 8 or 16 bits (or 32 in ALU64)",
                        })
                    }
                    _ => {}
                }
            }
            Insn::Endian { bits, dst, .. } => {
                writable(pc, dst)?;
                if !matches!(bits, 16 | 32 | 64) {
                    return Err(LoadError::InvalidInsn {
                        pc,
                        what: "byte swap width must be 16, 32 or 64",
                    });
                }
            }
            Insn::LdDw { kind, dst, imm } => {
                writable(pc, dst)?;
                if insns.get(pc + 1) != Some(&Insn::LdDwTail) {
                    return Err(LoadError::BrokenLdDw { pc });
                }
                let value = match kind {
                    LdDwKind::Imm => imm,
                    LdDwKind::Func => {
                        let slot =
                            target(&insns, pc, imm as u32 as i32 as i64, "function pointer")?;
                        entries.push(slot);
                        slot as u64
                    }
                    LdDwKind::MapIdx | LdDwKind::MapIdxValue => {
                        let index = imm as u32;
                        let binding = options.maps.get(index as usize).ok_or(
                            LoadError::MapIndexOutOfRange {
                                pc,
                                index,
                                count: options.maps.len(),
                            },
                        )?;
                        if kind == LdDwKind::MapIdx {
                            // The kernel's rule for a map reference: the
                            // second slot's imm is 0.
                            if imm >> 32 != 0 {
                                return Err(LoadError::MapRefUpperHalf {
                                    pc,
                                    upper: (imm >> 32) as u32,
                                });
                            }
                            // The map's kernel view may be read (privileged
                            // `struct bpf_map` field reads).
                            if let Some(view) = binding.view {
                                if !static_regions.contains(&view) {
                                    static_regions.push(view);
                                }
                            }
                            binding.handle
                        } else {
                            let value = binding
                                .value
                                .ok_or(LoadError::MapHasNoValue { pc, index })?;
                            let offset = (imm >> 32) as u32;
                            if u64::from(offset) >= value.len {
                                return Err(LoadError::MapValueOffsetOutOfRange {
                                    pc,
                                    index,
                                    offset,
                                    len: value.len,
                                });
                            }
                            if !static_regions.contains(&value) {
                                static_regions.push(value);
                            }
                            value.start.wrapping_add(u64::from(offset))
                        }
                    }
                    LdDwKind::MapFd | LdDwKind::MapValue | LdDwKind::BtfId => {
                        return Err(LoadError::UnrelocatedLdDw { pc, kind })
                    }
                };
                insns[pc] = Insn::LdDw {
                    kind: LdDwKind::Imm,
                    dst,
                    imm: value,
                };
            }
            Insn::LdDwTail => {
                if !matches!(pc.checked_sub(1).map(|p| insns[p]), Some(Insn::LdDw { .. })) {
                    return Err(LoadError::StrayLdDwTail { pc });
                }
            }
            Insn::LdPacket { .. } => return Err(LoadError::LegacyPacketLoad { pc }),
            Insn::Load { dst, src, .. } | Insn::LoadAcquire { dst, src, .. } => {
                writable(pc, dst)?;
                readable(pc, src)?;
            }
            Insn::Store { dst, src, .. } => {
                readable(pc, dst)?;
                operand(pc, src)?;
            }
            Insn::StoreRelease { dst, src, .. } => {
                readable(pc, dst)?;
                readable(pc, src)?;
            }
            Insn::Atomic {
                op,
                fetch,
                dst,
                src,
                ..
            } => {
                readable(pc, dst)?;
                // Fetching forms (except cmpxchg, which returns in r0) write
                // the old value back into `src`.
                let writes_src = op != AtomicOp::CmpXchg && (fetch || op == AtomicOp::Xchg);
                if writes_src {
                    writable(pc, src)?;
                } else {
                    readable(pc, src)?;
                }
            }
            Insn::Ja { off } => {
                target(&insns, pc, off.into(), "jump")?;
            }
            Insn::MayGoto { off } => {
                target(&insns, pc, off.into(), "may_goto")?;
            }
            Insn::Jmp { dst, src, off, .. } => {
                readable(pc, dst)?;
                operand(pc, src)?;
                target(&insns, pc, off.into(), "jump")?;
            }
            Insn::Call(CallTarget::Local(off)) => {
                let slot = target(&insns, pc, off.into(), "call")?;
                entries.push(slot);
            }
            Insn::Call(CallTarget::Helper(id)) => {
                if options.helpers.get_signed(id).is_none() {
                    return Err(LoadError::UnknownHelper { pc, id });
                }
            }
            Insn::Call(CallTarget::Kfunc(id)) => {
                if options.kfuncs.get_signed(id).is_none() {
                    return Err(LoadError::UnknownKfunc { pc, id });
                }
            }
            Insn::CallReg { reg } => readable(pc, reg)?,
            Insn::Exit => {}
        }
    }
    entries.sort_unstable();
    entries.dedup();
    Ok(ProgramInner {
        insns,
        helpers: options.helpers,
        kfuncs: options.kfuncs,
        static_regions,
        subprog_entries: entries,
        bounds_checked: matches!(options.memory, MemoryMode::BoundsChecked),
        this: std::sync::Weak::new(),
    })
}
