//! Static liveness for state pruning: per instruction, the registers and the
//! 8-byte stack slots of the current frame that some path from there may
//! read before writing them. Pruning ignores everything else, because no
//! continuation can observe it (the kernel computes the same facts, with
//! read marks in older versions and a static analysis since 6.15/6.18).
//!
//! Registers are classic backward liveness. Stack slots need to know where
//! a memory access lands, so a forward pass first tracks which registers
//! (and spilled slots) may hold a pointer into the current frame's stack and
//! at which offset from r10; an access through a pointer whose offset is not
//! known reads every slot, and a call that gets a pointer into the frame may
//! read every slot (a callee can address the whole frame from it).
//!
//! Within one subprogram "the frame" is the subprogram's own activation: its
//! r10 is the only source of pointers into it (arguments point into callers'
//! frames, a callee cannot return or store a pointer to its own frame, and
//! nothing stores a stack pointer into a caller's frame — the verifier
//! refuses all three), so the analysis is local to the subprogram.

use crate::cfg::{successors, Cfg};
use crate::proto::{self, ArgType};
use crate::stack::STACK_SIZE;
use bpfjet_isa::{AluOp, CallTarget, Insn, Operand, Width};

/// Number of 8-byte slots of a frame.
pub const SLOTS: usize = (STACK_SIZE / 8) as usize;

/// Every slot.
const ALL_SLOTS: u64 = u64::MAX;

/// r1–r5.
const ARG_REGS: u16 = 0b11_1110;
/// r0–r5: what a call clobbers.
const CALL_CLOBBER: u16 = 0b11_1111;

/// What the pruning may ignore, per instruction slot.
#[derive(Clone, Debug, Default)]
pub struct Liveness {
    /// Registers (bit `r`) that may be read before written from here.
    pub regs: Vec<u16>,
    /// Stack slots of the current frame (bit `i` = bytes `[-8(i+1), -8i)`
    /// from r10) that may be read before fully overwritten from here.
    pub slots: Vec<u64>,
    /// Slots each instruction itself may read (for a call: what the callee
    /// may reach through the pointers it is given).
    pub slot_reads: Vec<u64>,
}

impl Liveness {
    /// Registers and slots of a frame that is suspended in the call at
    /// `callsite`: what the caller reads after the call returns (r0–r5 are
    /// then the call's result or clobbered), plus what the callee may reach
    /// through pointers into the frame.
    pub fn at_return(&self, callsite: usize) -> (u16, u64) {
        let after = callsite + 1;
        let regs = self.regs.get(after).copied().unwrap_or(u16::MAX) & !CALL_CLOBBER;
        let slots = self.slots.get(after).copied().unwrap_or(ALL_SLOTS)
            | self.slot_reads.get(callsite).copied().unwrap_or(ALL_SLOTS);
        (regs, slots)
    }
}

/// Whether a register may point into the current frame's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fp {
    /// Not a pointer into this frame.
    No,
    /// If a pointer into this frame, then exactly r10 + k.
    At(i64),
    /// May point anywhere into this frame.
    Any,
}

impl Fp {
    fn join(self, other: Fp) -> Fp {
        match (self, other) {
            (Fp::No, x) | (x, Fp::No) => x,
            (Fp::At(a), Fp::At(b)) if a == b => Fp::At(a),
            _ => Fp::Any,
        }
    }

    fn is_fp(self) -> bool {
        self != Fp::No
    }
}

/// The forward facts before one instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FpState {
    regs: [Fp; 11],
    /// What a fill of each slot may produce.
    slots: [Fp; SLOTS],
}

impl FpState {
    fn entry() -> FpState {
        let mut regs = [Fp::No; 11];
        regs[10] = Fp::At(0);
        FpState {
            regs,
            slots: [Fp::No; SLOTS],
        }
    }

    fn join_from(&mut self, other: &FpState) -> bool {
        let mut changed = false;
        for (a, b) in self
            .regs
            .iter_mut()
            .chain(self.slots.iter_mut())
            .zip(other.regs.iter().chain(other.slots.iter()))
        {
            let j = a.join(*b);
            if j != *a {
                *a = j;
                changed = true;
            }
        }
        changed
    }

    /// Every value any slot may hold.
    fn any_slot(&self) -> Fp {
        self.slots.iter().fold(Fp::No, |a, b| a.join(*b))
    }
}

/// The slot holding frame offset `off` (negative), if inside the frame.
fn slot_of(off: i64) -> Option<usize> {
    (-STACK_SIZE..0)
        .contains(&off)
        .then(|| ((-off - 1) / 8) as usize)
}

/// Slots overlapping bytes `[lo, hi)` of the frame.
fn slots_between(lo: i64, hi: i64) -> u64 {
    let lo = lo.max(-STACK_SIZE);
    let hi = hi.min(0);
    let mut m = 0;
    let mut o = lo;
    while o < hi {
        if let Some(s) = slot_of(o) {
            m |= 1 << s;
        }
        o = (o & !7) + 8;
    }
    m
}

/// Slots an access of `size` bytes at `off` from a base holding `base` may
/// touch.
fn access_slots(base: Fp, off: i64, size: i64) -> u64 {
    match base {
        Fp::No => 0,
        Fp::At(k) => slots_between(k + off, k + off + size),
        Fp::Any => ALL_SLOTS,
    }
}

/// Registers a call reads: the helper's declared arguments, or all of r1–r5.
fn call_uses(target: CallTarget) -> u16 {
    match target {
        CallTarget::Helper(id) => match proto::helper_proto(id) {
            Some(p) => p
                .args
                .iter()
                .enumerate()
                .filter(|(_, a)| **a != ArgType::DontCare)
                .fold(0, |m, (i, _)| m | 1 << (i + 1)),
            None => ARG_REGS,
        },
        _ => ARG_REGS,
    }
}

/// Registers read and written by one instruction (bit masks over r0–r10).
fn reg_uses_defs(insn: &Insn) -> (u16, u16) {
    let bit = |r: u8| 1u16 << r;
    let op_bit = |o: Operand| match o {
        Operand::Reg(r) => bit(r),
        Operand::Imm(_) => 0,
    };
    match *insn {
        Insn::Alu { op, dst, src, .. } => {
            let d = if matches!(op, AluOp::Mov | AluOp::MovSx(_)) {
                0
            } else {
                bit(dst)
            };
            (op_bit(src) | d, bit(dst))
        }
        Insn::Endian { dst, .. } => (bit(dst), bit(dst)),
        Insn::LdDw { dst, .. } => (0, bit(dst)),
        Insn::LdDwTail | Insn::Ja { .. } => (0, 0),
        Insn::LdPacket { indirect, .. } => (bit(6) | indirect.map_or(0, bit), CALL_CLOBBER),
        Insn::Load { dst, src, .. } | Insn::LoadAcquire { dst, src, .. } => (bit(src), bit(dst)),
        Insn::Store { dst, src, .. } => (bit(dst) | op_bit(src), 0),
        Insn::StoreRelease { dst, src, .. } => (bit(dst) | bit(src), 0),
        Insn::Atomic {
            op,
            fetch,
            dst,
            src,
            ..
        } => {
            let cmpx = op == bpfjet_isa::AtomicOp::CmpXchg;
            let uses = bit(dst) | bit(src) | if cmpx { bit(0) } else { 0 };
            let defs = if cmpx {
                bit(0)
            } else if fetch {
                bit(src)
            } else {
                0
            };
            (uses, defs)
        }
        Insn::Jmp { dst, src, .. } => (bit(dst) | op_bit(src), 0),
        // Reads no register (the kernel's `compute_insn_live_regs`, JCOND).
        Insn::MayGoto { .. } => (0, 0),
        Insn::Call(target) => (call_uses(target), CALL_CLOBBER),
        Insn::CallReg { reg } => (ARG_REGS | bit(reg), CALL_CLOBBER),
        Insn::Exit => (bit(0), 0),
    }
}

/// The forward step: where stack pointers of this frame may be afterwards.
fn fp_step(insn: &Insn, s: &FpState) -> FpState {
    let mut n = s.clone();
    match insn.unordered() {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            let d = s.regs[dst as usize];
            let v = match src {
                Operand::Reg(r) => s.regs[r as usize],
                Operand::Imm(_) => Fp::No,
            };
            n.regs[dst as usize] = match (op, src) {
                (AluOp::Mov, Operand::Reg(_)) if width == Width::W64 => v,
                (AluOp::Mov | AluOp::MovSx(_), _) => Fp::No,
                (AluOp::Add | AluOp::Sub, Operand::Imm(imm)) if width == Width::W64 => match d {
                    Fp::At(k) if op == AluOp::Add => Fp::At(k + imm as i64),
                    Fp::At(k) => Fp::At(k - imm as i64),
                    other => other,
                },
                // A variable offset, or an operation the verifier turns into
                // a scalar (or refuses): keep it maybe-pointing anywhere.
                _ if d.is_fp() || v.is_fp() => Fp::Any,
                _ => Fp::No,
            };
        }
        Insn::Endian { dst, .. } => {
            if s.regs[dst as usize].is_fp() {
                n.regs[dst as usize] = Fp::Any;
            }
        }
        Insn::LdDw { dst, .. } => n.regs[dst as usize] = Fp::No,
        Insn::Load { dst, src, off, .. } => {
            n.regs[dst as usize] = match s.regs[src as usize] {
                Fp::No => Fp::No,
                Fp::At(k) => match slot_of(k + off as i64) {
                    Some(slot) => s.slots[slot],
                    None => s.any_slot(),
                },
                Fp::Any => s.any_slot(),
            };
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => {
            let value = match src {
                Operand::Reg(r) => s.regs[r as usize],
                Operand::Imm(_) => Fp::No,
            };
            match s.regs[dst as usize] {
                Fp::No => {}
                Fp::At(k) => {
                    let at = k + off as i64;
                    match slot_of(at) {
                        // A whole slot is replaced.
                        Some(slot) if size.bytes() == 8 && at % 8 == 0 => n.slots[slot] = value,
                        Some(slot) => n.slots[slot] = s.slots[slot].join(value),
                        None => {}
                    }
                }
                Fp::Any => {
                    for slot in n.slots.iter_mut() {
                        *slot = slot.join(value);
                    }
                }
            }
        }
        Insn::Atomic { op, fetch, src, .. } => {
            if op == bpfjet_isa::AtomicOp::CmpXchg {
                n.regs[0] = Fp::No;
            } else if fetch {
                n.regs[src as usize] = Fp::No;
            }
        }
        Insn::Call(_) | Insn::CallReg { .. } | Insn::LdPacket { .. } => {
            for r in 0..=5 {
                n.regs[r] = Fp::No;
            }
        }
        Insn::LdDwTail | Insn::Ja { .. } | Insn::Jmp { .. } | Insn::MayGoto { .. } | Insn::Exit => {
        }
        Insn::LoadAcquire { .. } | Insn::StoreRelease { .. } => {
            unreachable!("unordered() makes ordered accesses plain ones")
        }
    }
    n
}

/// Stack slots an instruction may read (`gen`) and certainly overwrites as
/// a whole (`kill`), given the forward facts before it.
fn slot_uses_defs(insn: &Insn, s: &FpState, privileged: bool) -> (u64, u64) {
    match insn.unordered() {
        Insn::Load { size, src, off, .. } => (
            access_slots(s.regs[src as usize], off as i64, size.bytes() as i64),
            0,
        ),
        Insn::Store { size, dst, off, .. } => {
            let base = s.regs[dst as usize];
            let size = size.bytes() as i64;
            match base {
                Fp::At(k) if size == 8 && (k + off as i64) % 8 == 0 => {
                    (0, access_slots(base, off as i64, size))
                }
                // A narrower store keeps the rest of the slot; without
                // CAP_PERFMON it also fails on a spilled pointer, so it
                // depends on what the slot holds.
                _ if !privileged => (access_slots(base, off as i64, size), 0),
                _ => (0, 0),
            }
        }
        Insn::Atomic {
            width, dst, off, ..
        } => {
            let size = if width == Width::W64 { 8 } else { 4 };
            (access_slots(s.regs[dst as usize], off as i64, size), 0)
        }
        Insn::Call(target) => {
            let args = call_uses(target);
            let mut gen = 0;
            for r in 1..=5u8 {
                if args & (1 << r) == 0 {
                    continue;
                }
                gen |= match (target, s.regs[r as usize]) {
                    (_, Fp::No) => 0,
                    // A helper's memory argument is [ptr, ptr + size) and
                    // stays inside the frame, so it ends at r10 at the most.
                    (CallTarget::Helper(id), Fp::At(k)) if !has_callback(id) => slots_between(k, 0),
                    // A subprogram, kfunc or callback may address the whole
                    // frame from the pointer.
                    _ => ALL_SLOTS,
                };
            }
            (gen, 0)
        }
        Insn::CallReg { .. } => (ALL_SLOTS, 0),
        _ => (0, 0),
    }
}

fn has_callback(id: i32) -> bool {
    proto::helper_proto(id).is_some_and(|p| p.callback.is_some())
}

/// Compute liveness for every instruction of every subprogram.
pub fn compute(insns: &[Insn], cfg: &Cfg, privileged: bool) -> Liveness {
    let n = insns.len();
    let mut gen_regs = vec![0u16; n];
    let mut kill_regs = vec![0u16; n];
    let mut gen_slots = vec![0u64; n];
    let mut kill_slots = vec![0u64; n];
    for idx in 0..cfg.entries.len() {
        let start = cfg.entries[idx];
        let end = cfg.subprog_end(idx, n);
        let facts = forward(insns, start, end);
        for pc in start..end {
            if insns[pc] == Insn::LdDwTail {
                continue;
            }
            let (u, d) = reg_uses_defs(&insns[pc]);
            gen_regs[pc] = u;
            kill_regs[pc] = d;
            // Unreached by the forward pass: nothing is known, assume the worst.
            let (g, k) = match &facts[pc - start] {
                Some(s) => slot_uses_defs(&insns[pc], s, privileged),
                None => (ALL_SLOTS, 0),
            };
            gen_slots[pc] = g;
            kill_slots[pc] = k;
        }
    }
    let mut live = Liveness {
        regs: vec![0; n],
        slots: vec![0; n],
        slot_reads: gen_slots.clone(),
    };
    let mut changed = true;
    while changed {
        changed = false;
        for pc in (0..n).rev() {
            if insns[pc] == Insn::LdDwTail {
                continue;
            }
            let (mut out_r, mut out_s) = (0u16, 0u64);
            for s in successors(insns, pc) {
                if s < n {
                    out_r |= live.regs[s];
                    out_s |= live.slots[s];
                }
            }
            let r = gen_regs[pc] | (out_r & !kill_regs[pc]);
            let s = gen_slots[pc] | (out_s & !kill_slots[pc]);
            if r != live.regs[pc] || s != live.slots[pc] {
                live.regs[pc] = r;
                live.slots[pc] = s;
                changed = true;
            }
        }
    }
    live
}

/// The forward facts before each instruction of the subprogram `[start, end)`.
fn forward(insns: &[Insn], start: usize, end: usize) -> Vec<Option<FpState>> {
    let mut at: Vec<Option<FpState>> = vec![None; end - start];
    at[0] = Some(FpState::entry());
    let mut work = vec![start];
    while let Some(pc) = work.pop() {
        let Some(s) = at[pc - start].clone() else {
            continue;
        };
        let out = fp_step(&insns[pc], &s);
        for succ in successors(insns, pc) {
            if succ < start || succ >= end {
                continue;
            }
            let slot = &mut at[succ - start];
            let changed = match slot {
                None => {
                    *slot = Some(out.clone());
                    true
                }
                Some(old) => old.join_from(&out),
            };
            if changed {
                work.push(succ);
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(text: &str) -> Liveness {
        let insns = bpfjet_isa::assemble(text).unwrap();
        let cfg = crate::cfg::build(&insns).map_err(|(_, e)| e).unwrap();
        compute(&insns, &cfg, true)
    }

    #[test]
    fn slot_written_before_read_is_dead() {
        // Slot 0 (fp-8) is overwritten at 1 before the read at 2.
        let l = live("mov %r1, 1\n stxdw [%r10-8], %r1\n ldxdw %r0, [%r10-8]\n exit");
        assert_eq!(l.slots[0] & 1, 0);
        assert_eq!(l.slots[2] & 1, 1);
        assert_eq!(l.slots[3], 0);
    }

    #[test]
    fn pointer_copies_are_followed() {
        // r2 = fp-16; a load through r2+8 reads slot 0 (fp-8).
        let l = live("mov %r2, %r10\n add %r2, -16\n ldxdw %r0, [%r2+8]\n exit");
        assert_eq!(l.slots[0], 1);
        assert_eq!(l.slots[2], 1);
    }

    #[test]
    fn helper_reads_from_pointer_to_frame_top() {
        // map_lookup_elem(r1, fp-16): slots 0 and 1 are live before the call.
        let l = live("mov %r2, %r10\n add %r2, -16\n lddw %r1, 0\n call 1\n mov %r0, 0\n exit");
        assert_eq!(l.slots[4], 0b11);
        assert_eq!(l.slots[5], 0);
    }

    #[test]
    fn unknown_offset_reads_everything() {
        let l = live("mov %r2, %r10\n add %r2, -16\n add %r2, %r1\n ldxb %r0, [%r2+0]\n exit");
        assert_eq!(l.slots[3], ALL_SLOTS);
    }

    #[test]
    fn helper_args_only() {
        // bpf_ktime_get_ns (5) takes no arguments: r1 is dead before it.
        let l = live("call 5\n exit");
        assert_eq!(l.regs[0] & 0b10, 0);
    }
}
