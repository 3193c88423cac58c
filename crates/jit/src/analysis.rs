//! What the lifter needs to know about a program before emitting IR: where
//! its functions are, where basic blocks start, and which registers hold a
//! pointer into the current stack frame at a known offset, a known
//! constant (map handles and callback slots, for helper inlining), or a
//! known offset from a value defined elsewhere (to prove that two memory
//! ranges are disjoint, for copies).

use crate::error::JitError;
use bpfjet_isa::{AluOp, AtomicOp, CallTarget, Insn, LdDwKind, Operand, Width, FRAME_POINTER};

/// One BPF function: the slots `entry..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Function {
    pub entry: usize,
    pub end: usize,
}

/// The function entries of a program as written (before the loader resolved
/// `lddw` kinds): slot 0, targets of local calls, targets of `PSEUDO_FUNC`
/// loads. Each function runs up to the next entry.
pub(crate) fn functions(insns: &[Insn]) -> Result<Vec<Function>, JitError> {
    let mut entries = vec![0usize];
    for (pc, insn) in insns.iter().enumerate() {
        let off = match *insn {
            Insn::Call(CallTarget::Local(off)) => i64::from(off),
            Insn::LdDw {
                kind: LdDwKind::Func,
                imm,
                ..
            } => i64::from(imm as u32 as i32),
            _ => continue,
        };
        let target = pc as i64 + 1 + off;
        match usize::try_from(target) {
            Ok(t) if t < insns.len() => entries.push(t),
            _ => {
                return Err(JitError::Unsupported {
                    pc,
                    what: format!("function target {target} is outside the program"),
                })
            }
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let ends = entries.iter().skip(1).copied().chain([insns.len()]);
    Ok(entries
        .iter()
        .zip(ends)
        .map(|(&entry, end)| Function { entry, end })
        .collect())
}

/// Successor slots of the instruction at `pc` (at most two).
pub(crate) fn successors(insn: &Insn, pc: usize) -> [Option<i64>; 2] {
    let next = Some(pc as i64 + insn.slots() as i64);
    match insn {
        Insn::Exit | Insn::LdDwTail => [None, None],
        Insn::Ja { .. } => [insn.jump_target(pc), None],
        Insn::Jmp { .. } | Insn::MayGoto { .. } => [next, insn.jump_target(pc)],
        _ => [next, None],
    }
}

/// Slots of `f` that begin a basic block: the entry, jump targets, and the
/// slots after jumps and exits.
pub(crate) fn block_leaders(insns: &[Insn], f: Function) -> Vec<usize> {
    let mut leaders = vec![f.entry];
    let body = insns.get(f.entry..f.end).unwrap_or(&[]);
    for (pc, insn) in (f.entry..).zip(body) {
        if let Some(t) = insn.jump_target(pc) {
            if let Ok(t) = usize::try_from(t) {
                leaders.push(t);
            }
            leaders.push(pc + 1);
        } else if matches!(insn, Insn::Exit) {
            leaders.push(pc + 1);
        }
    }
    leaders.retain(|&pc| pc >= f.entry && pc < f.end);
    leaders.sort_unstable();
    leaders.dedup();
    leaders
}

/// What is known about a register's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prov {
    Unknown,
    /// The frame pointer plus this many bytes.
    Stack(i64),
    /// A constant set by `lddw` or a 64-bit `mov` of an immediate (in the
    /// loaded program, map handles and function slots are such constants).
    Const(u64),
    /// The value most recently defined by the instruction `root` (see
    /// [`arg_root`] for the function's arguments) plus `off`. Two registers
    /// with the same root hold addresses a known distance apart, e.g. the
    /// two halves of one map value.
    Rel {
        root: u32,
        off: i64,
    },
}

/// The root of argument register `r` (1–5) at function entry: above every
/// slot number, so it never collides with a defining instruction.
pub(crate) fn arg_root(r: u8) -> u32 {
    u32::MAX - u32::from(r)
}

/// Register knowledge at one slot (r0–r10); `None` for unreachable slots.
pub(crate) type RegFacts = Option<[Prov; 11]>;

/// Offsets further than this from the frame pointer are not tracked.
const TRACK_LIMIT: i64 = 1 << 20;

fn shifted(p: Prov, delta: i64) -> Prov {
    // Offsets and deltas come from program immediates and constants: any
    // i64, so the sums are checked (i64::MIN has no absolute value).
    let near = |x: i64, d: i64| {
        x.checked_add(d)
            .filter(|v| v.unsigned_abs() <= TRACK_LIMIT as u64)
    };
    match p {
        Prov::Stack(o) => near(o, delta).map_or(Prov::Unknown, Prov::Stack),
        Prov::Rel { root, off } => {
            near(off, delta).map_or(Prov::Unknown, |off| Prov::Rel { root, off })
        }
        _ => Prov::Unknown,
    }
}

/// A small constant as a signed offset.
fn const_offset(p: Prov) -> Option<i64> {
    match p {
        Prov::Const(k) if (k as i64).unsigned_abs() <= TRACK_LIMIT as u64 => Some(k as i64),
        _ => None,
    }
}

fn transfer(pc: usize, insn: &Insn, mut regs: [Prov; 11]) -> [Prov; 11] {
    let set = |regs: &mut [Prov; 11], r: u8, p: Prov| {
        if let Some(slot) = regs.get_mut(usize::from(r)) {
            *slot = p;
        }
    };
    let get = |regs: &[Prov; 11], r: u8| regs.get(usize::from(r)).copied().unwrap_or(Prov::Unknown);
    // This instruction's own definitions are rooted here; registers still
    // relative to its previous execution (a loop) are no longer comparable
    // with them, so they are forgotten first.
    let root = u32::try_from(pc).unwrap_or(u32::MAX / 2);
    for slot in regs.iter_mut() {
        if matches!(*slot, Prov::Rel { root: r, .. } if r == root) {
            *slot = Prov::Unknown;
        }
    }
    let fresh = Prov::Rel { root, off: 0 };
    match *insn {
        Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src,
        } => {
            let old = get(&regs, dst);
            let new = match (op, src) {
                (AluOp::Mov, Operand::Reg(s)) => get(&regs, s),
                (AluOp::Mov, Operand::Imm(k)) => Prov::Const(i64::from(k) as u64),
                (AluOp::Add, Operand::Imm(k)) => shifted(old, i64::from(k)),
                (AluOp::Sub, Operand::Imm(k)) => shifted(old, -i64::from(k)),
                (AluOp::Add, Operand::Reg(s)) => match (const_offset(get(&regs, s)), old) {
                    (Some(k), Prov::Stack(_) | Prov::Rel { .. }) => shifted(old, k),
                    _ => fresh,
                },
                _ => fresh,
            };
            set(&mut regs, dst, new);
        }
        // A 32-bit move zero-extends: clang sets `__u32` arguments (sizes
        // of kfunc memory arguments) this way.
        Insn::Alu {
            width: Width::W32,
            op: AluOp::Mov,
            dst,
            src: Operand::Imm(k),
        } => set(&mut regs, dst, Prov::Const(u64::from(k as u32))),
        Insn::LdDw {
            kind: LdDwKind::Imm,
            dst,
            imm,
        } => set(&mut regs, dst, Prov::Const(imm)),
        Insn::Alu { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::LdDw { dst, .. }
        | Insn::Load { dst, .. }
        | Insn::LoadAcquire { dst, .. } => set(&mut regs, dst, fresh),
        Insn::Atomic { op, fetch, src, .. } => {
            if op == AtomicOp::CmpXchg {
                set(&mut regs, 0, fresh);
            } else if fetch || op == AtomicOp::Xchg {
                set(&mut regs, src, fresh);
            }
        }
        Insn::Call(_) | Insn::CallReg { .. } => set(&mut regs, 0, fresh),
        _ => {}
    }
    regs[usize::from(FRAME_POINTER)] = Prov::Stack(0);
    regs
}

fn join(a: [Prov; 11], b: [Prov; 11]) -> [Prov; 11] {
    let mut out = a;
    for (o, b) in out.iter_mut().zip(b) {
        if *o != b {
            *o = Prov::Unknown;
        }
    }
    out
}

/// Forward dataflow over `f`: for each slot (indexed from `f.entry`), which
/// registers certainly hold frame-pointer-relative addresses, constants, or
/// offsets from another definition. Memory accesses through frame-relative
/// registers become direct accesses to the frame's stack allocation, which
/// LLVM can then promote to SSA values.
pub(crate) fn stack_pointers(insns: &[Insn], f: Function) -> Vec<RegFacts> {
    let mut facts: Vec<RegFacts> = vec![None; f.end - f.entry];
    let mut init = [Prov::Unknown; 11];
    for r in 1..=5u8 {
        init[usize::from(r)] = Prov::Rel {
            root: arg_root(r),
            off: 0,
        };
    }
    init[usize::from(FRAME_POINTER)] = Prov::Stack(0);
    facts[0] = Some(init);
    let mut work = vec![f.entry];
    while let Some(pc) = work.pop() {
        let Some(before) = facts[pc - f.entry] else {
            continue;
        };
        let insn = &insns[pc];
        let after = transfer(pc, insn, before);
        for succ in successors(insn, pc).into_iter().flatten() {
            let Ok(s) = usize::try_from(succ) else {
                continue;
            };
            if s < f.entry || s >= f.end {
                continue;
            }
            let slot = &mut facts[s - f.entry];
            let merged = match *slot {
                None => after,
                Some(old) => join(old, after),
            };
            if *slot != Some(merged) {
                *slot = Some(merged);
                work.push(s);
            }
        }
    }
    facts
}
