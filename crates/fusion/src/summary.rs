//! What one program does with each map, and with which key: a forward
//! data-flow over the linked program that follows the thread id from
//! `bpf_get_current_pid_tgid()` through registers, ALU narrowing and stack
//! spills into the key argument of the map helpers.

use bpfjet_isa::{decode_program, AluOp, CallTarget, Insn, LdDwKind, Operand, Size, Width};
use bpfjet_maps::MapSpec;
use bpfjet_obj::Program;
use std::collections::{BTreeMap, BTreeSet};

const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_MAP_UPDATE: i32 = 2;
const HELPER_MAP_DELETE: i32 = 3;
const HELPER_TAIL_CALL: i32 = 12;
const HELPER_GET_CURRENT_PID_TGID: i32 = 14;

/// Which part of `bpf_get_current_pid_tgid()` a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadKey {
    /// The whole value: `tgid << 32 | tid`.
    PidTgid,
    /// The low half: the thread id.
    Tid,
    /// The high half: the process id, the same for every thread.
    Tgid,
}

impl ThreadKey {
    pub fn describe(self) -> &'static str {
        match self {
            ThreadKey::PidTgid => "bpf_get_current_pid_tgid()",
            ThreadKey::Tid => "the thread id (low half of bpf_get_current_pid_tgid())",
            ThreadKey::Tgid => "the process id (high half of bpf_get_current_pid_tgid())",
        }
    }
}

/// What a program does to a map at one instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapOp {
    Lookup,
    /// `bpf_map_update_elem`; the flags when they are a known constant.
    Update {
        flags: Option<u64>,
    },
    Delete,
    /// Anything else: the map pointer given to another helper or kfunc,
    /// stored outside the stack, used in arithmetic, or referenced from code
    /// the analysis does not follow. Says what.
    Other(String),
}

/// One use of a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapUse {
    /// Slot of the instruction in [`Program::insns`].
    pub slot: usize,
    pub op: MapOp,
    /// The key, when it is a thread-derived value of exactly the map's key
    /// size; `None` for any other key (and for [`MapOp::Other`]).
    pub key: Option<ThreadKey>,
}

/// Every map use of one program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramSummary {
    /// By index in `Object::maps`, in slot order.
    pub uses: BTreeMap<usize, Vec<MapUse>>,
    /// The program tail-calls: what runs next is not known statically.
    pub tail_calls: bool,
}

impl ProgramSummary {
    pub fn uses_of(&self, map: usize) -> &[MapUse] {
        self.uses.get(&map).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// An abstract register or stack value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    Unknown,
    Const(u64),
    /// The frame pointer plus an offset.
    Fp(i64),
    /// The pointer to map `usize` (what `lddw` of a map loads).
    Map(usize),
    Thread(ThreadKey),
    /// The thread id shifted left by 32 (the first half of a zero-extension
    /// by shifts, as clang emits it for older CPU versions).
    TidHigh,
}

/// A value on the stack: its bytes start at the key's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    val: Val,
    size: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [Val; 11],
    stack: BTreeMap<i64, Slot>,
}

impl State {
    fn entry() -> State {
        let mut regs = [Val::Unknown; 11];
        regs[10] = Val::Fp(0);
        State {
            regs,
            stack: BTreeMap::new(),
        }
    }

    /// Keeps what both states agree on.
    fn join(&self, other: &State) -> State {
        let mut regs = self.regs;
        for (r, o) in regs.iter_mut().zip(other.regs.iter()) {
            if r != o {
                *r = Val::Unknown;
            }
        }
        let stack = self
            .stack
            .iter()
            .filter(|(k, v)| other.stack.get(k) == Some(v))
            .map(|(k, v)| (*k, *v))
            .collect();
        State { regs, stack }
    }

    fn store(&mut self, off: i64, size: u8, val: Val) {
        let end = off + i64::from(size);
        // Any value overlapping the written bytes is no longer whole.
        let overlapping: Vec<i64> = self
            .stack
            .range(..end)
            .filter(|(k, s)| **k + i64::from(s.size) > off)
            .map(|(k, _)| *k)
            .collect();
        for k in overlapping {
            self.stack.remove(&k);
        }
        let val = narrow(val, size);
        if val != Val::Unknown {
            self.stack.insert(off, Slot { val, size });
        }
    }

    fn load(&self, off: i64, size: u8) -> Val {
        match self.stack.get(&off) {
            Some(s) if s.size == size => s.val,
            _ => Val::Unknown,
        }
    }
}

/// The value a store of `size` bytes keeps (little-endian: the low bytes).
fn narrow(val: Val, size: u8) -> Val {
    match (val, size) {
        (v, 8) => v,
        (Val::Thread(ThreadKey::PidTgid), 4) => Val::Thread(ThreadKey::Tid),
        (Val::Thread(k), 4) => Val::Thread(k),
        (Val::Const(c), n) => Val::Const(c & ((1u64 << (8 * u32::from(n))) - 1)),
        _ => Val::Unknown,
    }
}

fn size_bytes(size: Size) -> u8 {
    size.bytes() as u8
}

/// What `program` does with the maps of its object.
pub fn summarise(program: &Program, maps: &[MapSpec]) -> Result<ProgramSummary, String> {
    let insns = decode_program(&program.insns).map_err(|e| format!("{}: {e}", program.name))?;
    let states = fixpoint(&insns);
    let mut summary = ProgramSummary::default();
    let mut record = |map: usize, slot: usize, op: MapOp, key: Option<ThreadKey>| {
        summary
            .uses
            .entry(map)
            .or_default()
            .push(MapUse { slot, op, key });
    };
    let mut tail_calls = false;
    for (slot, insn) in insns.iter().enumerate() {
        let Some(state) = states.get(&slot) else {
            // Code the flow from the entry does not reach through jumps:
            // subprograms and callbacks. Their map uses are not followed.
            if let Insn::LdDw {
                kind: LdDwKind::MapIdx,
                imm,
                ..
            } = insn
            {
                record(
                    *imm as usize,
                    slot,
                    MapOp::Other("referenced from a subprogram or callback".into()),
                    None,
                );
            }
            continue;
        };
        let r = &state.regs;
        match *insn {
            Insn::Call(CallTarget::Helper(id)) => {
                if id == HELPER_TAIL_CALL {
                    tail_calls = true;
                }
                let map_op = match id {
                    HELPER_MAP_LOOKUP => Some(MapOp::Lookup),
                    HELPER_MAP_UPDATE => Some(MapOp::Update {
                        flags: match r[4] {
                            Val::Const(c) => Some(c),
                            _ => None,
                        },
                    }),
                    HELPER_MAP_DELETE => Some(MapOp::Delete),
                    _ => None,
                };
                for (arg, val) in r.iter().enumerate().take(6).skip(1) {
                    let Val::Map(m) = *val else { continue };
                    match (&map_op, arg) {
                        (Some(op), 1) => {
                            let key = key_of(state, r[2], maps.get(m));
                            record(m, slot, op.clone(), key);
                        }
                        _ => record(
                            m,
                            slot,
                            MapOp::Other(format!("passed to helper {id} as argument {arg}")),
                            None,
                        ),
                    }
                }
            }
            Insn::Call(CallTarget::Kfunc(_)) | Insn::Call(CallTarget::Local(_)) => {
                for (arg, val) in r.iter().enumerate().take(6).skip(1) {
                    if let Val::Map(m) = *val {
                        record(
                            m,
                            slot,
                            MapOp::Other(format!("passed to a function call as argument {arg}")),
                            None,
                        );
                    }
                }
            }
            Insn::Store {
                dst,
                src: Operand::Reg(src),
                ..
            }
            | Insn::StoreRelease { dst, src, .. }
            | Insn::Atomic { dst, src, .. } => {
                if let Val::Map(m) = r[usize::from(src)] {
                    let on_stack = matches!(insn, Insn::Store { .. })
                        && matches!(r[usize::from(dst)], Val::Fp(_));
                    if !on_stack {
                        record(m, slot, MapOp::Other("its pointer is stored".into()), None);
                    }
                }
            }
            Insn::Alu { dst, src, op, .. } if op != AluOp::Mov => {
                for v in [Some(r[usize::from(dst)]), operand(r, src)]
                    .into_iter()
                    .flatten()
                {
                    if let Val::Map(m) = v {
                        record(m, slot, MapOp::Other("pointer arithmetic".into()), None);
                    }
                }
            }
            _ => {}
        }
    }
    summary.tail_calls = tail_calls;
    Ok(summary)
}

fn operand(regs: &[Val; 11], src: Operand) -> Option<Val> {
    match src {
        Operand::Reg(s) => Some(regs[usize::from(s)]),
        Operand::Imm(_) => None,
    }
}

/// The key a map helper reads through `r2`, if it is a whole thread-derived
/// value of the map's key size.
fn key_of(state: &State, r2: Val, spec: Option<&MapSpec>) -> Option<ThreadKey> {
    let (Val::Fp(off), Some(spec)) = (r2, spec) else {
        return None;
    };
    let size = u8::try_from(spec.key_size).ok()?;
    match state.load(off, size) {
        Val::Thread(k) => Some(k),
        _ => None,
    }
}

/// The state before every instruction reachable from slot 0 through jumps
/// (calls are not entered).
fn fixpoint(insns: &[Insn]) -> BTreeMap<usize, State> {
    let mut states: BTreeMap<usize, State> = BTreeMap::new();
    let mut work: BTreeSet<usize> = BTreeSet::new();
    states.insert(0, State::entry());
    work.insert(0);
    while let Some(pc) = work.pop_first() {
        let Some(insn) = insns.get(pc) else { continue };
        let mut s = states[&pc].clone();
        let next = step(insn, &mut s);
        let succs: Vec<usize> = match *insn {
            Insn::Exit => vec![],
            Insn::Ja { .. } => insn
                .jump_target(pc)
                .map(|t| vec![t as usize])
                .unwrap_or_default(),
            Insn::Jmp { .. } | Insn::MayGoto { .. } => {
                let mut v = vec![pc + 1];
                if let Some(t) = insn.jump_target(pc) {
                    v.push(t as usize);
                }
                v
            }
            _ => vec![pc + next],
        };
        for succ in succs {
            if succ >= insns.len() {
                continue;
            }
            let merged = match states.get(&succ) {
                Some(old) => {
                    let j = old.join(&s);
                    if &j == old {
                        continue;
                    }
                    j
                }
                None => s.clone(),
            };
            states.insert(succ, merged);
            work.insert(succ);
        }
    }
    states
}

/// Applies one instruction; returns how many slots it takes.
fn step(insn: &Insn, s: &mut State) -> usize {
    // Ordered accesses move values as plain ones do.
    match insn.unordered() {
        Insn::LdDw { kind, dst, imm } => {
            s.regs[usize::from(dst)] = match kind {
                LdDwKind::MapIdx => Val::Map(imm as u32 as usize),
                LdDwKind::Imm => Val::Const(imm),
                _ => Val::Unknown,
            };
            return 2;
        }
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            let d = usize::from(dst);
            let srcv = match src {
                Operand::Reg(r) => s.regs[usize::from(r)],
                Operand::Imm(i) => match width {
                    Width::W64 => Val::Const(i as i64 as u64),
                    Width::W32 => Val::Const(u64::from(i as u32)),
                },
            };
            s.regs[d] = alu(width, op, s.regs[d], srcv, src);
        }
        Insn::Endian { dst, .. } => s.regs[usize::from(dst)] = Val::Unknown,
        Insn::Load {
            size,
            dst,
            src,
            off,
            ..
        } => {
            let v = match s.regs[usize::from(src)] {
                Val::Fp(base) => s.load(base + i64::from(off), size_bytes(size)),
                _ => Val::Unknown,
            };
            s.regs[usize::from(dst)] = v;
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => {
            if let Val::Fp(base) = s.regs[usize::from(dst)] {
                let v = match src {
                    Operand::Reg(r) => s.regs[usize::from(r)],
                    Operand::Imm(i) => Val::Const(i as i64 as u64),
                };
                s.store(base + i64::from(off), size_bytes(size), v);
            }
        }
        Insn::LoadAcquire { .. } | Insn::StoreRelease { .. } => {
            unreachable!("unordered() makes ordered accesses plain ones")
        }
        Insn::Atomic {
            width,
            dst,
            src,
            off,
            fetch,
            op,
        } => {
            if let Val::Fp(base) = s.regs[usize::from(dst)] {
                let n = if width == Width::W64 { 8 } else { 4 };
                s.store(base + i64::from(off), n, Val::Unknown);
            }
            if fetch || op == bpfjet_isa::AtomicOp::CmpXchg {
                let r = if op == bpfjet_isa::AtomicOp::CmpXchg {
                    0
                } else {
                    src
                };
                s.regs[usize::from(r)] = Val::Unknown;
            }
        }
        Insn::LdPacket { .. } => s.regs[0] = Val::Unknown,
        Insn::Call(target) => {
            s.regs[0] = match target {
                CallTarget::Helper(HELPER_GET_CURRENT_PID_TGID) => Val::Thread(ThreadKey::PidTgid),
                _ => Val::Unknown,
            };
            for r in 1..=5 {
                s.regs[r] = Val::Unknown;
            }
        }
        Insn::CallReg { .. } => {
            for r in 0..=5 {
                s.regs[r] = Val::Unknown;
            }
        }
        Insn::LdDwTail | Insn::Ja { .. } | Insn::Jmp { .. } | Insn::MayGoto { .. } | Insn::Exit => {
        }
    }
    1
}

fn alu(width: Width, op: AluOp, dst: Val, src: Val, operand: Operand) -> Val {
    use ThreadKey::*;
    let imm = match operand {
        Operand::Imm(i) => Some(i),
        Operand::Reg(_) => match src {
            Val::Const(c) => i32::try_from(c).ok(),
            _ => None,
        },
    };
    match (width, op) {
        (Width::W64, AluOp::Mov) => src,
        (Width::W32, AluOp::Mov) => match src {
            Val::Thread(PidTgid) | Val::Thread(Tid) => Val::Thread(Tid),
            Val::Thread(Tgid) => Val::Thread(Tgid),
            Val::Const(c) => Val::Const(c & 0xffff_ffff),
            _ => Val::Unknown,
        },
        (Width::W64, AluOp::Add) | (Width::W64, AluOp::Sub) => match (dst, imm) {
            (Val::Fp(o), Some(i)) => {
                let i = i64::from(i);
                Val::Fp(if op == AluOp::Add { o + i } else { o - i })
            }
            _ => Val::Unknown,
        },
        (Width::W64, AluOp::Rsh) if imm == Some(32) => match dst {
            Val::Thread(PidTgid) => Val::Thread(Tgid),
            Val::TidHigh => Val::Thread(Tid),
            _ => Val::Unknown,
        },
        (Width::W64, AluOp::Lsh) if imm == Some(32) => match dst {
            Val::Thread(PidTgid) | Val::Thread(Tid) => Val::TidHigh,
            _ => Val::Unknown,
        },
        _ => Val::Unknown,
    }
}
