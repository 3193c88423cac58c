//! State subsumption for pruning: an explored state `old` covers the current
//! state `cur` when every concrete machine state `cur` describes is also
//! described by `old` (so everything reachable from `cur` was already proven
//! safe). Ids are compared up to a consistent renaming.

use crate::frame::State;
use crate::liveness::Liveness;
use crate::reg_state::{RegState, RegType};
use crate::stack::{ByteKind, Slot, Stack};
use std::collections::HashMap;

#[derive(Default)]
struct IdMap {
    fwd: HashMap<u32, u32>,
    back: HashMap<u32, u32>,
}

impl IdMap {
    /// `old` and `cur` must correspond one to one.
    fn check(&mut self, old: u32, cur: u32) -> bool {
        if old == 0 && cur == 0 {
            return true;
        }
        if old == 0 || cur == 0 {
            return false;
        }
        match (self.fwd.get(&old), self.back.get(&cur)) {
            (Some(&c), _) if c != cur => false,
            (_, Some(&o)) if o != old => false,
            _ => {
                self.fwd.insert(old, cur);
                self.back.insert(cur, old);
                true
            }
        }
    }

    /// Scalars: only an id in `old` constrains (cur may lack the link only
    /// if old has none).
    fn check_scalar(&mut self, old: u32, cur: u32, tmp: &mut u32) -> bool {
        if old == 0 {
            return true;
        }
        let cur = if cur == 0 {
            *tmp += 1;
            *tmp
        } else {
            cur
        };
        self.check(old, cur)
    }
}

/// How scalars are compared.
#[derive(Clone, Copy)]
struct Mode {
    /// Every scalar compared, precise or not.
    exact: bool,
    allow_uninit: bool,
}

impl Mode {
    /// This mode, comparing the value exactly when `forced`.
    fn forced(self, forced: bool) -> Mode {
        Mode {
            exact: self.exact || forced,
            ..self
        }
    }

    /// An explored scalar whose value no decision depended on.
    fn imprecise(self, old: &RegState) -> bool {
        !self.exact && old.is_scalar() && !old.precise
    }
}

fn reg_covers(old: &RegState, cur: &RegState, ids: &mut IdMap, tmp: &mut u32, mode: Mode) -> bool {
    if old.ty == RegType::NotInit {
        return true;
    }
    if old.ty != cur.ty || old.maybe_null != cur.maybe_null {
        return false;
    }
    if old.ty == RegType::Scalar {
        // Linked imprecise scalars need no id check either: a refinement
        // through a link that mattered marked the whole link precise.
        return mode.imprecise(old)
            || old.val.includes(&cur.val) && ids.check_scalar(old.id, cur.id, tmp);
    }
    if old.off != cur.off || !old.val.includes(&cur.val) {
        return false;
    }
    // A stack pointer with a variable offset reads and writes differently
    // from one with a fixed offset (spills): equal offsets only.
    if matches!(old.ty, RegType::Stack { .. }) && old.val != cur.val {
        return false;
    }
    if old.ty.is_pkt() {
        if cur.range < old.range {
            return false;
        }
        if !ids.check(old.id, cur.id) {
            return false;
        }
    } else if old.maybe_null && !ids.check(old.id, cur.id) {
        return false;
    }
    if !ids.check(old.ref_id, cur.ref_id) {
        return false;
    }
    // A dynptr's slots and its slices: the same dynptr in both states.
    if matches!(old.ty, RegType::Dynptr { .. } | RegType::ConstDynptr) && !ids.check(old.id, cur.id)
    {
        return false;
    }
    if old.dynptr_id != 0 && !ids.check(old.dynptr_id, cur.dynptr_id) {
        return false;
    }
    true
}

fn slot_covers(old: &Slot, cur: &Slot, ids: &mut IdMap, tmp: &mut u32, mode: Mode) -> bool {
    // An imprecise spilled scalar only says "these bytes were written".
    let old_imprecise = old.spill.is_some_and(|o| mode.imprecise(&o));
    let unknown = |o: &RegState| {
        o.is_scalar()
            && (mode.imprecise(o) || o.val.includes(&crate::range::Scalar::UNKNOWN) && o.id == 0)
    };
    if let Some(o) = &old.spill {
        // A spilled register must be there, the same size, and covered.
        match &cur.spill {
            Some(c) if old.spill_size == cur.spill_size => {
                if !reg_covers(o, c, ids, tmp, mode) {
                    return false;
                }
            }
            Some(c) if old_imprecise && c.is_scalar() => {}
            Some(_) => return false,
            None => {
                // Written bytes of the same kind cover an old spill only if
                // it held no information.
                if !unknown(o) {
                    return false;
                }
            }
        }
    }
    for b in 0..8 {
        let ok = match (old.bytes[b], cur.bytes[b]) {
            (ByteKind::Invalid, _) => true,
            (ByteKind::Spill, ByteKind::Spill) => true,
            (ByteKind::Spill, ByteKind::Misc | ByteKind::Zero) => {
                old.spill.is_some_and(|o| unknown(&o))
            }
            (ByteKind::Misc, ByteKind::Misc | ByteKind::Zero) => true,
            (ByteKind::Misc, ByteKind::Spill) => cur.spill.is_some_and(|c| c.is_scalar()),
            (ByteKind::Misc, ByteKind::Invalid) => mode.allow_uninit,
            (ByteKind::Zero, ByteKind::Zero) => true,
            (ByteKind::Zero, ByteKind::Spill) => cur.spill.is_some_and(|c| c.is_null_const()),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Slots outside `live` (bit per slot) are never read again: ignored.
fn stack_covers(
    old: &Stack,
    cur: &Stack,
    (live, forced): (u64, u64),
    ids: &mut IdMap,
    tmp: &mut u32,
    mode: Mode,
) -> bool {
    let n = old.slots.len().max(cur.slots.len());
    (0..n).all(|i| {
        live & (1 << i) == 0
            || slot_covers(
                old.slot(i),
                cur.slot(i),
                ids,
                tmp,
                mode.forced(forced & (1 << i) != 0),
            )
    })
}

/// Registers (bit per register) and stack slots (bit per slot) of each
/// frame whose scalars are compared as if precise: what an earlier run
/// learned a state at this point turns out to need ([`covers_with`]).
pub type Hint = [(u16, u64)];

/// Whether `old` covers `cur` at instruction `pc`. Registers and stack
/// slots that no continuation reads ([`Liveness`]) are ignored, and so are
/// the values of `old`'s imprecise scalars unless `exact`.
pub fn covers(
    old: &State,
    cur: &State,
    live: &Liveness,
    pc: usize,
    allow_uninit: bool,
    exact: bool,
) -> bool {
    covers_with(old, cur, live, pc, allow_uninit, exact, &[])
}

/// [`covers`], comparing the scalars `hint` names as if `old` had them
/// precise (more exact, never less: any hint is sound).
pub fn covers_with(
    old: &State,
    cur: &State,
    live: &Liveness,
    pc: usize,
    allow_uninit: bool,
    exact: bool,
    hint: &Hint,
) -> bool {
    let mode = Mode {
        exact,
        allow_uninit,
    };
    if old.frames.len() != cur.frames.len() || old.refs.len() != cur.refs.len() {
        return false;
    }
    let mut ids = IdMap::default();
    let mut tmp = 1u32 << 31;
    let last = old.frames.len() - 1;
    for (i, (of, cf)) in old.frames.iter().zip(&cur.frames).enumerate() {
        if of.callsite != cf.callsite || of.entry != cf.entry || of.callback != cf.callback {
            return false;
        }
        let (live_regs, live_slots) = if i == last {
            (
                live.regs.get(pc).copied().unwrap_or(u16::MAX),
                live.slots.get(pc).copied().unwrap_or(u64::MAX),
            )
        } else {
            live.at_return(old.frames[i + 1].callsite)
        };
        let (forced_regs, forced_slots) = hint.get(i).copied().unwrap_or((0, 0));
        for r in 0..10 {
            if live_regs & (1 << r) == 0 {
                continue;
            }
            let m = mode.forced(forced_regs & (1 << r) != 0);
            if !reg_covers(&of.regs[r], &cf.regs[r], &mut ids, &mut tmp, m) {
                return false;
            }
        }
        let slots = (live_slots, forced_slots);
        if !stack_covers(&of.stack, &cf.stack, slots, &mut ids, &mut tmp, mode) {
            return false;
        }
    }
    let locks_match = match (old.lock, cur.lock) {
        (None, None) => true,
        (Some(o), Some(c)) => o.map == c.map && ids.check(o.id, c.id),
        _ => false,
    };
    locks_match
        && old
            .refs
            .iter()
            .zip(&cur.refs)
            .all(|(o, c)| ids.check(o.id, c.id))
}

/// The kernel's loop detector: the state at a loop head repeats exactly
/// (precision marks are bookkeeping, not part of the state), in the same
/// iteration of every callback (the kernel's `callback_unroll_depth`).
pub fn same_loop_state(old: &State, cur: &State) -> bool {
    let same = |a: &RegState, b: &RegState| {
        let mut a = *a;
        a.precise = b.precise;
        a == *b
    };
    let same_slot = |a: &Slot, b: &Slot| {
        a.bytes == b.bytes
            && a.spill_size == b.spill_size
            && match (&a.spill, &b.spill) {
                (Some(x), Some(y)) => same(x, y),
                (None, None) => true,
                _ => false,
            }
    };
    old.frames.len() == cur.frames.len()
        && old.refs == cur.refs
        && old.lock == cur.lock
        && old.may_goto_depth == cur.may_goto_depth
        && old.frames.iter().zip(&cur.frames).all(|(a, b)| {
            a.entry == b.entry
                && a.callsite == b.callsite
                && a.refs_at_entry == b.refs_at_entry
                && a.callback_depth == b.callback_depth
                && a.regs.iter().zip(&b.regs).all(|(x, y)| same(x, y))
                && a.callback == b.callback
                && (0..a.stack.slots.len().max(b.stack.slots.len()))
                    .all(|i| same_slot(a.stack.slot(i), b.stack.slot(i)))
        })
}
