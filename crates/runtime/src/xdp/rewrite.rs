//! Finding and rewriting a program's `xdp_md` accesses.
//!
//! Like the kernel's `convert_ctx_accesses`, every load of a context field is
//! rewritten at load time into a load from bpfjet's [`XdpMd`](super::XdpMd)
//! (64-bit pointers for `data`, `data_end`, `data_meta`). Which loads read the
//! context is a dataflow fact: [`find_ctx_accesses`] computes it with a small
//! forward analysis that follows the context pointer from r1 at entry through
//! register copies, 8-byte stack spills and fills, bpf-to-bpf call arguments
//! and return values, and the callback argument of `bpf_loop` and
//! `bpf_for_each_map_elem`. The verifier will produce the same list from its
//! own register types; [`rewrite_ctx_accesses`] takes the list from either.
//!
//! Anything the kernel verifier would reject about a context access (a store,
//! a modified context pointer, a size other than 4 bytes, an offset that is
//! no field) and any load whose base is the context on some paths but not on
//! others is an error naming the instruction.

use super::context::CtxField;
use bpfjet_isa::{AluOp, CallTarget, Insn, LdDwKind, Operand, Reg, Size, Width};
use std::collections::{BTreeMap, HashMap};

/// One load of a context field: the slot of the load and the field it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtxAccess {
    pub pc: usize,
    pub field: CtxField,
}

/// A context access bpfjet cannot classify or the kernel would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("insn {pc}: {reason}")]
pub struct CtxError {
    pub pc: usize,
    pub reason: String,
}

fn err(pc: usize, reason: impl Into<String>) -> CtxError {
    CtxError {
        pc,
        reason: reason.into(),
    }
}

/// What the analysis knows about a register or an 8-byte stack slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    /// No path reaches here with a value yet.
    Unset,
    /// Certainly not the context pointer.
    Other,
    /// The context pointer itself.
    Ctx,
    /// The context pointer plus something: the kernel forbids dereferencing it.
    CtxDerived,
    /// The context on some paths, something else on others.
    Mixed,
    /// A function pointer (`lddw` of a subprogram), for callback helpers.
    Func(usize),
    /// This frame's r10 plus an offset.
    Fp(i64),
    /// The calling frame's r10 plus an offset (a stack pointer passed as an
    /// argument: how `bpf_loop` callbacks reach the caller's context).
    CallerFp(i64),
}

impl Val {
    fn join(self, other: Val) -> Val {
        use Val::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Unset, x) | (x, Unset) => x,
            (Ctx | CtxDerived | Mixed, _) | (_, Ctx | CtxDerived | Mixed) => Mixed,
            _ => Other,
        }
    }

    fn after_alu(self, op: AluOp, src: Option<i64>) -> Val {
        match (self, op, src) {
            (Val::Fp(o), AluOp::Add, Some(k)) => Val::Fp(o + k),
            (Val::Fp(o), AluOp::Sub, Some(k)) => Val::Fp(o - k),
            (Val::CallerFp(o), AluOp::Add, Some(k)) => Val::CallerFp(o + k),
            (Val::CallerFp(o), AluOp::Sub, Some(k)) => Val::CallerFp(o - k),
            (Val::Ctx | Val::CtxDerived, _, _) => Val::CtxDerived,
            (Val::Mixed, _, _) => Val::Mixed,
            _ => Val::Other,
        }
    }

    /// What an argument becomes in the callee's frame.
    fn passed(self) -> Val {
        match self {
            Val::Fp(o) => Val::CallerFp(o),
            Val::CallerFp(_) => Val::Other,
            v => v,
        }
    }
}

const STACK_SLOTS: usize = 512 / 8;
const HELPER_FOR_EACH_MAP_ELEM: i32 = 164;
const HELPER_LOOP: i32 = 181;
const HELPER_USER_RINGBUF_DRAIN: i32 = 209;

#[derive(Clone, PartialEq, Eq)]
struct State {
    regs: [Val; 11],
    stack: [Val; STACK_SLOTS],
    /// The calling frame's stack as it was at the call (for `CallerFp`).
    caller_stack: [Val; STACK_SLOTS],
}

impl State {
    fn entry(args: [Val; 5], caller_stack: [Val; STACK_SLOTS]) -> State {
        let mut regs = [Val::Other; 11];
        regs[1..6].copy_from_slice(&args.map(Val::passed));
        regs[10] = Val::Fp(0);
        State {
            regs,
            stack: [Val::Other; STACK_SLOTS],
            caller_stack,
        }
    }

    /// Join `other` into `self`; whether anything changed.
    fn join_from(&mut self, other: &State) -> bool {
        let mut changed = false;
        for (a, b) in self
            .regs
            .iter_mut()
            .chain(self.stack.iter_mut())
            .chain(self.caller_stack.iter_mut())
            .zip(
                other
                    .regs
                    .iter()
                    .chain(other.stack.iter())
                    .chain(other.caller_stack.iter()),
            )
        {
            let j = a.join(*b);
            changed |= j != *a;
            *a = j;
        }
        changed
    }
}

/// Which frame's stack an access through a stack pointer lands in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    Own,
    Caller,
}

/// The frame and frame-pointer-relative offset of an access through `base`.
fn stack_access(base: Val, off: i16) -> Option<(Frame, i64)> {
    match base {
        Val::Fp(o) => Some((Frame::Own, o + i64::from(off))),
        Val::CallerFp(o) => Some((Frame::Caller, o + i64::from(off))),
        _ => None,
    }
}

fn slots_mut(state: &mut State, frame: Frame) -> &mut [Val; STACK_SLOTS] {
    match frame {
        Frame::Own => &mut state.stack,
        Frame::Caller => &mut state.caller_stack,
    }
}

/// The 8-byte stack slots an access of `size` at r10-relative `off` touches.
fn stack_slots(off: i64, size: usize) -> std::ops::Range<usize> {
    if !(-512..0).contains(&off) {
        return 0..0;
    }
    let start = (off + 512) as usize;
    let end = (start + size).min(512);
    start / 8..end.div_ceil(8)
}

fn reg_val(state: &State, r: Reg) -> Val {
    state
        .regs
        .get(usize::from(r))
        .copied()
        .unwrap_or(Val::Other)
}

fn set_reg(state: &mut State, r: Reg, v: Val) {
    if let Some(slot) = state.regs.get_mut(usize::from(r)) {
        *slot = v;
    }
}

struct Analysis<'a> {
    insns: &'a [Insn],
    states: Vec<Option<State>>,
    /// Subprogram entry slots, sorted: a slot belongs to the last entry at or before it.
    entries: Vec<usize>,
    returns: HashMap<usize, Val>,
    call_sites: HashMap<usize, Vec<usize>>,
    work: Vec<usize>,
}

impl Analysis<'_> {
    fn func_of(&self, pc: usize) -> usize {
        let i = self.entries.partition_point(|&e| e <= pc);
        self.entries[i.saturating_sub(1)]
    }

    fn flow(&mut self, to: usize, state: &State) {
        let Some(slot) = self.states.get_mut(to) else {
            return;
        };
        let changed = match slot {
            Some(s) => s.join_from(state),
            None => {
                *slot = Some(state.clone());
                true
            }
        };
        if changed {
            self.work.push(to);
        }
    }

    fn enter(&mut self, target: usize, args: [Val; 5], caller_stack: [Val; STACK_SLOTS]) {
        self.flow(target, &State::entry(args, caller_stack));
    }

    fn step(&mut self, pc: usize) -> Result<(), CtxError> {
        let Some(state) = self.states[pc].clone() else {
            return Ok(());
        };
        let mut next = state.clone();
        let insn = self.insns[pc];
        // Ordered accesses address memory as plain ones do.
        match insn.unordered() {
            Insn::Alu {
                width,
                op,
                dst,
                src,
                ..
            } => {
                let imm = match src {
                    Operand::Imm(k) => Some(i64::from(k)),
                    Operand::Reg(_) => None,
                };
                let v = match (width, op, src) {
                    (Width::W64, AluOp::Mov, Operand::Reg(s)) => reg_val(&state, s),
                    (Width::W64, AluOp::Mov, Operand::Imm(_)) => Val::Other,
                    (Width::W64, _, _) => reg_val(&state, dst).after_alu(op, imm),
                    (Width::W32, _, _) => Val::Other,
                };
                set_reg(&mut next, dst, v);
            }
            Insn::Endian { dst, .. } => set_reg(&mut next, dst, Val::Other),
            Insn::LdDw { kind, dst, imm } => {
                let v = match kind {
                    // The loader has not resolved function pointers yet:
                    // imm is the slot offset from the next slot.
                    LdDwKind::Func => {
                        let target = pc as i64 + 1 + i64::from(imm as u32 as i32);
                        usize::try_from(target).map_or(Val::Other, Val::Func)
                    }
                    _ => Val::Other,
                };
                set_reg(&mut next, dst, v);
                self.flow(pc + 2, &next);
                return Ok(());
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => {
                let base = reg_val(&state, src);
                check_ctx_base(pc, base, "load")?;
                let v = match stack_access(base, off) {
                    Some((frame, at)) if size == Size::DW && !sign_extend && at % 8 == 0 => {
                        let r = stack_slots(at, 8);
                        let slots = match frame {
                            Frame::Own => &state.stack,
                            Frame::Caller => &state.caller_stack,
                        };
                        if r.len() == 1 {
                            slots[r.start]
                        } else {
                            Val::Other
                        }
                    }
                    _ => Val::Other,
                };
                set_reg(&mut next, dst, v);
            }
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => {
                check_ctx_base(pc, reg_val(&state, dst), "store")?;
                if reg_val(&state, dst) == Val::Ctx {
                    return Err(err(pc, "store into the XDP context (xdp_md is read-only)"));
                }
                if let Some((frame, at)) = stack_access(reg_val(&state, dst), off) {
                    let slots = stack_slots(at, size.bytes());
                    let v = match src {
                        Operand::Reg(s) if size == Size::DW && at % 8 == 0 => reg_val(&state, s),
                        _ => Val::Other,
                    };
                    let whole = slots.len() == 1 && size == Size::DW;
                    let stack = slots_mut(&mut next, frame);
                    for i in slots {
                        stack[i] = if whole { v } else { Val::Other };
                    }
                }
            }
            Insn::Atomic { .. } => atomic_effect(pc, &state, &mut next, insn)?,
            Insn::LoadAcquire { .. } | Insn::StoreRelease { .. } => {
                unreachable!("unordered() makes ordered accesses plain ones")
            }
            Insn::Ja { off } => {
                let target = pc as i64 + 1 + i64::from(off);
                if let Ok(t) = usize::try_from(target) {
                    self.flow(t, &next);
                }
                return Ok(());
            }
            Insn::Jmp { off, .. } | Insn::MayGoto { off } => {
                let target = pc as i64 + 1 + i64::from(off);
                if let Ok(t) = usize::try_from(target) {
                    self.flow(t, &next);
                }
            }
            Insn::Call(CallTarget::Local(off)) => {
                let target = pc as i64 + 1 + i64::from(off);
                if let Ok(t) = usize::try_from(target) {
                    let args = [1, 2, 3, 4, 5].map(|r| reg_val(&state, r));
                    self.call_sites.entry(t).or_default().push(pc);
                    self.enter(t, args, state.stack);
                    let ret = self.returns.get(&t).copied().unwrap_or(Val::Unset);
                    set_reg(&mut next, 0, ret);
                } else {
                    set_reg(&mut next, 0, Val::Other);
                }
                for r in 1..=5 {
                    set_reg(&mut next, r, Val::Other);
                }
            }
            Insn::Call(CallTarget::Helper(id)) => {
                let callback = match id {
                    HELPER_LOOP | HELPER_USER_RINGBUF_DRAIN => {
                        Some((2, [Val::Other, reg_val(&state, 3)]))
                    }
                    HELPER_FOR_EACH_MAP_ELEM => Some((2, [Val::Other, Val::Other])),
                    _ => None,
                };
                if let Some((fn_reg, _)) = callback {
                    if let Val::Func(t) = reg_val(&state, fn_reg) {
                        // bpf_loop's callback gets (index, ctx), the
                        // drain's (dynptr, ctx): ctx in r2 for both.
                        let args = if id == HELPER_LOOP || id == HELPER_USER_RINGBUF_DRAIN {
                            [
                                Val::Other,
                                reg_val(&state, 3),
                                Val::Other,
                                Val::Other,
                                Val::Other,
                            ]
                        } else {
                            [
                                Val::Other,
                                Val::Other,
                                Val::Other,
                                reg_val(&state, 3),
                                Val::Other,
                            ]
                        };
                        self.enter(t, args, state.stack);
                    }
                }
                for r in 0..=5 {
                    set_reg(&mut next, r, Val::Other);
                }
            }
            Insn::Call(CallTarget::Kfunc(_)) | Insn::CallReg { .. } => {
                for r in 0..=5 {
                    set_reg(&mut next, r, Val::Other);
                }
            }
            Insn::Exit => {
                let f = self.func_of(pc);
                let old = self.returns.get(&f).copied().unwrap_or(Val::Unset);
                let new = old.join(reg_val(&state, 0));
                if new != old {
                    self.returns.insert(f, new);
                    // Re-run the callers so their r0 after the call sees it.
                    for site in self.call_sites.get(&f).cloned().unwrap_or_default() {
                        self.work.push(site);
                    }
                }
                return Ok(());
            }
            Insn::LdDwTail | Insn::LdPacket { .. } => return Ok(()),
        }
        self.flow(pc + 1, &next);
        Ok(())
    }
}

fn check_ctx_base(pc: usize, base: Val, what: &str) -> Result<(), CtxError> {
    match base {
        Val::CtxDerived => Err(err(
            pc,
            format!("{what} through a modified context pointer (the kernel verifier forbids it)"),
        )),
        Val::Mixed => Err(err(
            pc,
            format!(
                "{what} whose base register holds the XDP context on some paths \
                 and another pointer on others"
            ),
        )),
        _ => Ok(()),
    }
}

fn atomic_effect(pc: usize, state: &State, next: &mut State, insn: Insn) -> Result<(), CtxError> {
    if let Insn::Atomic {
        dst,
        src,
        off,
        width,
        ..
    } = insn
    {
        let base = reg_val(state, dst);
        check_ctx_base(pc, base, "atomic operation")?;
        if base == Val::Ctx {
            return Err(err(pc, "atomic operation on the XDP context"));
        }
        if let Some((frame, at)) = stack_access(base, off) {
            let size = if width == Width::W64 { 8 } else { 4 };
            let stack = slots_mut(next, frame);
            for i in stack_slots(at, size) {
                stack[i] = Val::Other;
            }
        }
        // Fetching forms write the old value to src, cmpxchg to r0.
        set_reg(next, src, Val::Other);
        set_reg(next, 0, reg_val(next, 0).join(Val::Other));
    }
    Ok(())
}

/// Every load of an `xdp_md` field in `insns` (slot form, as decoded, before
/// the runtime's loader resolves `lddw`s), in slot order.
pub fn find_ctx_accesses(insns: &[Insn]) -> Result<Vec<CtxAccess>, CtxError> {
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
        if let Ok(t) = usize::try_from(pc as i64 + 1 + off) {
            if t < insns.len() {
                entries.push(t);
            }
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let mut a = Analysis {
        insns,
        states: vec![None; insns.len()],
        entries: entries.clone(),
        returns: HashMap::new(),
        call_sites: HashMap::new(),
        work: Vec::new(),
    };
    let no_caller = [Val::Other; STACK_SLOTS];
    a.enter(
        0,
        [Val::Ctx, Val::Other, Val::Other, Val::Other, Val::Other],
        no_caller,
    );
    loop {
        while let Some(pc) = a.work.pop() {
            a.step(pc)?;
        }
        // Callbacks handed to helpers the analysis does not model still run:
        // analyse them with arguments that are not the context.
        let unseen: Vec<usize> = entries
            .iter()
            .copied()
            .filter(|&e| a.states[e].is_none())
            .collect();
        if unseen.is_empty() {
            break;
        }
        for e in unseen {
            a.enter(e, [Val::Other; 5], no_caller);
        }
    }
    let mut found = BTreeMap::new();
    for (pc, insn) in insns.iter().enumerate() {
        let Some(state) = &a.states[pc] else { continue };
        if let Insn::Load {
            size,
            sign_extend,
            src,
            off,
            ..
        } = *insn
        {
            if reg_val(state, src) != Val::Ctx {
                continue;
            }
            let field = CtxField::from_uapi_offset(off).ok_or_else(|| {
                err(
                    pc,
                    format!("read of xdp_md at offset {off}, which is not a field"),
                )
            })?;
            if size != Size::W {
                return Err(err(
                    pc,
                    format!(
                        "{}-byte read of xdp_md.{}: the kernel allows only 4-byte loads",
                        size.bytes(),
                        field.name()
                    ),
                ));
            }
            if sign_extend && field.is_pointer() {
                return Err(err(
                    pc,
                    format!(
                        "sign-extending read of xdp_md.{}: the kernel refuses it for pointer fields",
                        field.name()
                    ),
                ));
            }
            found.insert(pc, field);
        }
    }
    Ok(found
        .into_iter()
        .map(|(pc, field)| CtxAccess { pc, field })
        .collect())
}

/// Rewrite each listed load to read bpfjet's [`XdpMd`](super::XdpMd): pointer
/// fields become 64-bit loads, the rest 32-bit loads at the new offsets.
pub fn rewrite_ctx_accesses(insns: &mut [Insn], accesses: &[CtxAccess]) -> Result<(), CtxError> {
    for access in accesses {
        let Some(Insn::Load {
            dst,
            src,
            sign_extend,
            ..
        }) = insns.get(access.pc).copied()
        else {
            return Err(err(access.pc, "listed as a context access but not a load"));
        };
        if sign_extend && access.field.is_pointer() {
            return Err(err(
                access.pc,
                "sign-extending load of a context pointer field",
            ));
        }
        insns[access.pc] = Insn::Load {
            size: if access.field.is_pointer() {
                Size::DW
            } else {
                Size::W
            },
            // Scalar fields keep a sign-extending load sign-extending (the
            // kernel's conversion appends a movsx).
            sign_extend,
            dst,
            src,
            off: access.field.offset(),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfjet_isa::JmpOp;

    fn ldx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::Load {
            size,
            sign_extend: false,
            dst,
            src,
            off,
        }
    }

    fn mov(dst: Reg, src: Reg) -> Insn {
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst,
            src: Operand::Reg(src),
        }
    }

    #[test]
    fn follows_copies_and_spills() {
        let insns = vec![
            mov(6, 1),
            Insn::Store {
                size: Size::DW,
                dst: 10,
                off: -8,
                src: Operand::Reg(6),
            },
            ldx(Size::DW, 7, 10, -8),
            ldx(Size::W, 2, 7, 4),
            ldx(Size::W, 3, 6, 12),
            Insn::Exit,
        ];
        let found = find_ctx_accesses(&insns).unwrap();
        assert_eq!(
            found,
            vec![
                CtxAccess {
                    pc: 3,
                    field: CtxField::DataEnd
                },
                CtxAccess {
                    pc: 4,
                    field: CtxField::IngressIfindex
                }
            ]
        );
        let mut rewritten = insns.clone();
        rewrite_ctx_accesses(&mut rewritten, &found).unwrap();
        assert_eq!(rewritten[3], ldx(Size::DW, 2, 7, 8));
        assert_eq!(rewritten[4], ldx(Size::W, 3, 6, 24));
    }

    #[test]
    fn sign_extending_loads_of_scalar_fields_stay_sign_extending() {
        let ldsx = |dst: Reg, off: i16| Insn::Load {
            size: Size::W,
            sign_extend: true,
            dst,
            src: 1,
            off,
        };
        let insns = vec![ldsx(2, 16), Insn::Exit];
        let found = find_ctx_accesses(&insns).unwrap();
        let mut rewritten = insns.clone();
        rewrite_ctx_accesses(&mut rewritten, &found).unwrap();
        let moved = CtxField::RxQueueIndex.offset();
        assert_eq!(rewritten[0], ldsx(2, moved));
        // Pointer fields have no sign-extending form (nor in the kernel).
        let pointer = vec![ldsx(2, 0), Insn::Exit];
        assert!(find_ctx_accesses(&pointer).is_err());
        let listed = [CtxAccess {
            pc: 0,
            field: CtxField::Data,
        }];
        assert!(rewrite_ctx_accesses(&mut pointer.clone(), &listed).is_err());
    }

    #[test]
    fn refuses_what_the_kernel_refuses() {
        let store = vec![
            Insn::Store {
                size: Size::W,
                dst: 1,
                off: 0,
                src: Operand::Imm(0),
            },
            Insn::Exit,
        ];
        assert!(find_ctx_accesses(&store).is_err());
        let narrow = vec![ldx(Size::B, 2, 1, 0), Insn::Exit];
        assert!(find_ctx_accesses(&narrow).is_err());
        let modified = vec![
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: 1,
                src: Operand::Imm(4),
            },
            ldx(Size::W, 2, 1, 0),
            Insn::Exit,
        ];
        assert_eq!(find_ctx_accesses(&modified).unwrap_err().pc, 1);
        // r2 is the context on one path and the stack on the other.
        let mixed = vec![
            mov(2, 1),
            Insn::Jmp {
                width: Width::W64,
                op: JmpOp::Jeq,
                dst: 3,
                src: Operand::Imm(0),
                off: 1,
            },
            mov(2, 10),
            ldx(Size::W, 0, 2, -8),
            Insn::Exit,
        ];
        assert_eq!(find_ctx_accesses(&mixed).unwrap_err().pc, 3);
    }
}
