//! Precision tracking: which scalars' exact values a safety decision
//! depended on.
//!
//! Recorded states (checkpoints) start with every scalar imprecise, and
//! pruning lets an imprecise scalar of an explored state match any scalar.
//! When a decision depends on a scalar's value (pointer arithmetic with it,
//! a memory size, a branch whose outcome the ranges decide, a constant map
//! key, a callback's return value), that value is "demanded" and the
//! demand is walked back through the instructions of the current path:
//! a register demanded after `r1 = r2 + r3` becomes a demand on r2 and r3,
//! a register filled from the stack a demand on the slot, and so on. Every
//! checkpoint the walk passes gets the demanded registers and slots marked
//! precise, so that a later state is pruned against it only if it agrees
//! on them. The kernel does the same (`mark_chain_precision`).
//!
//! When a state is pruned against an explored one, the explored state's
//! precise scalars matter for the pruned path too (its continuation is the
//! explored one's), so they are demanded on the current path as well.
//!
//! The walk needs the instruction sequence of the path: each path keeps a
//! [`Hist`] entry per instruction since its last checkpoint, and each
//! checkpoint keeps the entries from its parent checkpoint to itself.

use crate::frame::{State, MAX_FRAMES};
use bpfjet_isa::{AluOp, AtomicOp, CallTarget, Insn, Operand};

/// A register or spilled stack slot of one frame (by call depth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    Reg { frame: u8, reg: u8 },
    Slot { frame: u8, slot: u8 },
}

/// What the instruction did that the walk back cannot read from the
/// instruction alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Note {
    #[default]
    None,
    /// A load from the stack returned the register spilled in this slot.
    Fill { frame: u8, slot: u8 },
    /// A store (or atomic) left a spilled register in this slot.
    Spill { frame: u8, slot: u8 },
    /// A conditional jump refined these scalars together (they share an
    /// id with an operand, operands included).
    Linked(Box<[Loc]>),
    /// The exit of a callback: back to the call that ran it, whose result
    /// the callback's r0 is not.
    CallbackExit,
}

/// One executed instruction of a path.
#[derive(Clone, Debug)]
pub struct Hist {
    pub pc: u32,
    /// Call depth when the instruction executed.
    pub depth: u8,
    pub note: Note,
}

/// Registers and slots still to be traced, per frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    pub regs: [u16; MAX_FRAMES],
    pub slots: [u64; MAX_FRAMES],
}

impl Demand {
    pub fn is_empty(&self) -> bool {
        self.regs.iter().all(|&r| r == 0) && self.slots.iter().all(|&s| s == 0)
    }

    pub fn add(&mut self, loc: Loc) {
        match loc {
            Loc::Reg { frame, reg } => self.regs[frame as usize] |= 1 << reg,
            Loc::Slot { frame, slot } => self.slots[frame as usize] |= 1 << slot,
        }
    }

    fn has(&self, loc: Loc) -> bool {
        match loc {
            Loc::Reg { frame, reg } => self.regs[frame as usize] & (1 << reg) != 0,
            Loc::Slot { frame, slot } => self.slots[frame as usize] & (1 << slot) != 0,
        }
    }

    fn has_reg(&self, frame: usize, reg: u8) -> bool {
        self.regs[frame] & (1 << reg) != 0
    }

    fn set_reg(&mut self, frame: usize, reg: u8) {
        self.regs[frame] |= 1 << reg;
    }

    fn clear_reg(&mut self, frame: usize, reg: u8) {
        self.regs[frame] &= !(1 << reg);
    }

    fn clear_frame(&mut self, frame: usize) {
        self.regs[frame] = 0;
        self.slots[frame] = 0;
    }

    fn frame_is_empty(&self, frame: usize) -> bool {
        self.regs[frame] == 0 && self.slots[frame] == 0
    }
}

/// The walk found something it cannot explain (a demand on a register the
/// instruction could not have produced): the caller falls back to marking
/// every scalar precise, which is always sound.
#[derive(Debug)]
pub struct Unexplained;

/// Turn the demand after instruction `h` into the demand before it.
/// `depth_after` is the call depth after it (which successor the path took).
pub fn undo(
    insns: &[Insn],
    h: &Hist,
    depth_after: usize,
    d: &mut Demand,
) -> Result<(), Unexplained> {
    let f = h.depth as usize;
    let Some(insn) = insns.get(h.pc as usize) else {
        return Err(Unexplained);
    };
    // Between `f` and `depth_after` only a call (one deeper) or an exit
    // (one shallower) moves.
    match *insn {
        Insn::Alu { op, dst, src, .. } => match op {
            AluOp::Mov | AluOp::MovSx(_) => {
                if d.has_reg(f, dst) {
                    d.clear_reg(f, dst);
                    if let Operand::Reg(s) = src {
                        d.set_reg(f, s);
                    }
                }
            }
            AluOp::Neg => {}
            _ => {
                if let Operand::Reg(s) = src {
                    if d.has_reg(f, dst) {
                        d.set_reg(f, s);
                    }
                }
            }
        },
        Insn::Endian { .. } | Insn::Ja { .. } | Insn::MayGoto { .. } | Insn::LdDwTail => {}
        Insn::LdDw { dst, .. } => d.clear_reg(f, dst),
        Insn::Load { dst, .. } | Insn::LoadAcquire { dst, .. } => {
            if d.has_reg(f, dst) {
                d.clear_reg(f, dst);
                if let Note::Fill { frame, slot } = h.note {
                    d.add(Loc::Slot { frame, slot });
                }
            }
        }
        Insn::LdPacket { .. } => {
            for r in 0..=5 {
                d.clear_reg(f, r);
            }
        }
        Insn::Store { src, .. } => {
            if let Note::Spill { frame, slot } = h.note {
                let loc = Loc::Slot { frame, slot };
                if d.has(loc) {
                    d.slots[frame as usize] &= !(1 << slot);
                    if let Operand::Reg(s) = src {
                        d.set_reg(f, s);
                    }
                }
            }
        }
        Insn::StoreRelease { src, .. } => {
            if let Note::Spill { frame, slot } = h.note {
                let loc = Loc::Slot { frame, slot };
                if d.has(loc) {
                    d.slots[frame as usize] &= !(1 << slot);
                    d.set_reg(f, src);
                }
            }
        }
        Insn::Atomic { op, fetch, src, .. } => {
            if op == AtomicOp::CmpXchg {
                d.clear_reg(f, 0);
            } else if fetch {
                d.clear_reg(f, src);
            }
            // The slot now holds an unknown scalar.
            if let Note::Spill { frame, slot } = h.note {
                d.slots[frame as usize] &= !(1 << slot);
            }
        }
        Insn::Jmp { dst, src, .. } => {
            let linked = match &h.note {
                Note::Linked(locs) => &locs[..],
                _ => &[],
            };
            sync_linked(d, linked);
            if let Operand::Reg(s) = src {
                if d.has_reg(f, dst) || d.has_reg(f, s) {
                    d.set_reg(f, dst);
                    d.set_reg(f, s);
                }
            }
            sync_linked(d, linked);
        }
        Insn::Call(CallTarget::Local(_)) if depth_after == f => {
            // A global function: its body is verified on its own; r0 is
            // its (unknown) result, r1–r5 are clobbered.
            for r in 0..=5 {
                d.clear_reg(f, r);
            }
        }
        Insn::Call(CallTarget::Local(_)) => {
            if depth_after != f + 1 {
                return Err(Unexplained);
            }
            // The callee's r1–r5 are the caller's; nothing else of the new
            // frame existed before the call.
            let args = d.regs[f + 1] & 0b11_1110;
            if d.regs[f + 1] & !args != 0 || d.slots[f + 1] != 0 {
                return Err(Unexplained);
            }
            d.regs[f] |= args;
            d.clear_frame(f + 1);
        }
        Insn::Call(_) | Insn::CallReg { .. } => {
            if depth_after == f + 1 {
                // A callback entered from its helper: its arguments are the
                // loop index (unknown), helper-made pointers and the
                // caller's context argument (r3).
                if !d.frame_is_empty(f + 1) {
                    d.set_reg(f, 3);
                }
                d.clear_frame(f + 1);
            } else {
                // r0 is the result, r1–r5 are clobbered.
                for r in 0..=5 {
                    d.clear_reg(f, r);
                }
            }
        }
        Insn::Exit if h.note == Note::CallbackExit => {
            // Back at the call, the caller's frame is as the callback left
            // it (its r0–r5 too: the call runs again); nothing of the
            // callback's frame is left to demand.
            if depth_after + 1 != f || !d.frame_is_empty(f) {
                return Err(Unexplained);
            }
        }
        Insn::Exit => {
            if depth_after + 1 != f {
                return Err(Unexplained);
            }
            let caller = f - 1;
            let r0 = d.has_reg(caller, 0);
            for r in 0..=5 {
                d.clear_reg(caller, r);
            }
            if !d.frame_is_empty(f) {
                return Err(Unexplained);
            }
            if r0 {
                d.set_reg(f, 0);
            }
        }
    }
    Ok(())
}

/// Linked scalars were refined together: one demanded means all are.
fn sync_linked(d: &mut Demand, linked: &[Loc]) {
    if linked.iter().any(|&l| d.has(l)) {
        for &l in linked {
            d.add(l);
        }
    }
}

/// Mark the demanded scalars precise in a recorded state. Demands on
/// scalars that already were precise are dropped (their history was walked
/// when they were marked), as are demands on non-scalars (a pointer's
/// offset is always compared exactly).
pub fn mark_state(st: &mut State, d: &mut Demand) -> Result<(), Unexplained> {
    for f in 0..MAX_FRAMES {
        if d.frame_is_empty(f) {
            continue;
        }
        let Some(frame) = st.frames.get_mut(f) else {
            return Err(Unexplained);
        };
        for r in 0..11u8 {
            if d.has_reg(f, r) {
                let reg = &mut frame.regs[r as usize];
                if !reg.is_scalar() || reg.precise {
                    d.clear_reg(f, r);
                } else {
                    reg.precise = true;
                }
            }
        }
        for s in 0..64usize {
            if d.slots[f] & (1 << s) == 0 {
                continue;
            }
            match frame
                .stack
                .slots
                .get_mut(s)
                .and_then(|sl| sl.spill.as_mut())
            {
                Some(reg) if reg.is_scalar() && !reg.precise => reg.precise = true,
                // No spilled scalar: a later fill reads plain bytes, whose
                // kinds pruning compares anyway (a scalar spilled there
                // later is traced to its store before reaching this state).
                _ => d.slots[f] &= !(1 << s),
            }
        }
    }
    Ok(())
}

/// The precise scalars of `st`, per frame: registers (bit per register)
/// and spilled scalars (bit per stack slot).
pub fn marks_of(st: &State) -> Vec<(u16, u64)> {
    st.frames
        .iter()
        .map(|f| {
            let regs = (0..11)
                .filter(|&r| f.regs[r].is_scalar() && f.regs[r].precise)
                .fold(0u16, |m, r| m | 1 << r);
            let slots = f
                .stack
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.spill.is_some_and(|r| r.is_scalar() && r.precise))
                .fold(0u64, |m, (i, _)| m | 1 << i);
            (regs, slots)
        })
        .collect()
}

/// Every scalar of a recorded state precise (the fallback).
pub fn mark_all(st: &mut State) {
    st.for_each_reg(|r| {
        if r.is_scalar() {
            r.precise = true;
        }
    });
}

/// The precise scalars of an explored state that a pruned path must
/// reproduce: the live ones, per frame (`live(frame)` gives the live
/// registers and slots of that frame).
pub fn precise_of(st: &State, live: impl Fn(usize) -> (u16, u64)) -> Demand {
    let mut d = Demand::default();
    for (f, frame) in st.frames.iter().enumerate() {
        let (regs, slots) = live(f);
        for r in 0..11u8 {
            let reg = &frame.regs[r as usize];
            if regs & (1 << r) != 0 && reg.is_scalar() && reg.precise {
                d.set_reg(f, r);
            }
        }
        for (s, slot) in frame.stack.slots.iter().enumerate() {
            if slots & (1 << s) != 0 && slot.spill.is_some_and(|r| r.is_scalar() && r.precise) {
                d.slots[f] |= 1 << s;
            }
        }
    }
    d
}
