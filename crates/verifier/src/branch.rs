//! Conditional jumps: deciding them when the ranges allow, refining both
//! operands on each side when not (all conditions, 64- and 32-bit, both
//! directions), null checks, and packet ranges learned from comparisons with
//! `data_end`.

use crate::driver::{Succ, Verifier};
use crate::error::{err, VResult};
use crate::frame::State;
use crate::precision::{Loc, Note};
use crate::range::Scalar;
use crate::reg_state::{RegState, RegType};
use crate::tnum::Tnum;
use bpfjet_isa::{JmpOp, Operand, Width};

/// The condition that holds on the other side.
pub fn negate(op: JmpOp) -> Option<JmpOp> {
    use JmpOp::*;
    Some(match op {
        Jeq => Jne,
        Jne => Jeq,
        Jgt => Jle,
        Jle => Jgt,
        Jge => Jlt,
        Jlt => Jge,
        Jsgt => Jsle,
        Jsle => Jsgt,
        Jsge => Jslt,
        Jslt => Jsge,
        Jset => return None,
    })
}

/// `a OP b` ⇔ `b swap(OP) a`.
pub fn swap(op: JmpOp) -> JmpOp {
    use JmpOp::*;
    match op {
        Jgt => Jlt,
        Jlt => Jgt,
        Jge => Jle,
        Jle => Jge,
        Jsgt => Jslt,
        Jslt => Jsgt,
        Jsge => Jsle,
        Jsle => Jsge,
        o => o,
    }
}

/// The concrete condition.
pub fn eval_cond(op: JmpOp, width: Width, a: u64, b: u64) -> bool {
    let (a, b, sa, sb) = match width {
        Width::W64 => (a, b, a as i64, b as i64),
        Width::W32 => (
            a as u32 as u64,
            b as u32 as u64,
            a as u32 as i32 as i64,
            b as u32 as i32 as i64,
        ),
    };
    match op {
        JmpOp::Jeq => a == b,
        JmpOp::Jne => a != b,
        JmpOp::Jgt => a > b,
        JmpOp::Jge => a >= b,
        JmpOp::Jlt => a < b,
        JmpOp::Jle => a <= b,
        JmpOp::Jsgt => sa > sb,
        JmpOp::Jsge => sa >= sb,
        JmpOp::Jslt => sa < sb,
        JmpOp::Jsle => sa <= sb,
        JmpOp::Jset => a & b != 0,
    }
}

/// One width's view: tnum plus both ranges, as i128 for easy arithmetic.
#[derive(Clone, Copy, Debug)]
struct V {
    t: Tnum,
    ulo: i128,
    uhi: i128,
    slo: i128,
    shi: i128,
}

fn get(s: &Scalar, w: Width) -> V {
    match w {
        Width::W64 => V {
            t: s.var_off,
            ulo: s.umin as i128,
            uhi: s.umax as i128,
            slo: s.smin as i128,
            shi: s.smax as i128,
        },
        Width::W32 => V {
            t: s.var_off.subreg(),
            ulo: s.u32_min as i128,
            uhi: s.u32_max as i128,
            slo: s.s32_min as i128,
            shi: s.s32_max as i128,
        },
    }
}

fn put(s: &mut Scalar, v: V, w: Width) -> bool {
    if v.ulo > v.uhi || v.slo > v.shi {
        return false;
    }
    match w {
        Width::W64 => {
            s.var_off = v.t;
            s.umin = v.ulo as u64;
            s.umax = v.uhi as u64;
            s.smin = v.slo as i64;
            s.smax = v.shi as i64;
        }
        Width::W32 => {
            s.var_off = s.var_off.with_subreg(v.t);
            s.u32_min = v.ulo as u32;
            s.u32_max = v.uhi as u32;
            s.s32_min = v.slo as i32;
            s.s32_max = v.shi as i32;
        }
    }
    s.sync();
    !s.is_empty()
}

/// Whether `a OP b` is always true (`Some(true)`), always false, or either.
pub fn decide(op: JmpOp, width: Width, a: &Scalar, b: &Scalar) -> Option<bool> {
    let x = get(a, width);
    let y = get(b, width);
    match op {
        JmpOp::Jeq | JmpOp::Jne => {
            let eq = if x.t.is_const() && y.t.is_const() {
                Some(x.t.value == y.t.value)
            } else if x.t.disjoint(y.t)
                || x.uhi < y.ulo
                || y.uhi < x.ulo
                || x.shi < y.slo
                || y.shi < x.slo
            {
                Some(false)
            } else {
                None
            };
            if op == JmpOp::Jeq {
                eq
            } else {
                eq.map(|e| !e)
            }
        }
        JmpOp::Jgt => cmp(x.ulo > y.uhi, x.uhi <= y.ulo),
        JmpOp::Jge => cmp(x.ulo >= y.uhi, x.uhi < y.ulo),
        JmpOp::Jlt => cmp(x.uhi < y.ulo, x.ulo >= y.uhi),
        JmpOp::Jle => cmp(x.uhi <= y.ulo, x.ulo > y.uhi),
        JmpOp::Jsgt => cmp(x.slo > y.shi, x.shi <= y.slo),
        JmpOp::Jsge => cmp(x.slo >= y.shi, x.shi < y.slo),
        JmpOp::Jslt => cmp(x.shi < y.slo, x.slo >= y.shi),
        JmpOp::Jsle => cmp(x.shi <= y.slo, x.slo > y.shi),
        JmpOp::Jset => {
            if x.t.value & y.t.value != 0 {
                Some(true)
            } else if (x.t.value | x.t.mask) & (y.t.value | y.t.mask) == 0 {
                Some(false)
            } else {
                None
            }
        }
    }
}

fn cmp(always: bool, never: bool) -> Option<bool> {
    if always {
        Some(true)
    } else if never {
        Some(false)
    } else {
        None
    }
}

/// Narrow `a` and `b` assuming `a OP b` holds. `None`: it cannot hold.
pub fn refine(op: JmpOp, width: Width, a: &Scalar, b: &Scalar) -> Option<(Scalar, Scalar)> {
    let mut x = get(a, width);
    let mut y = get(b, width);
    match op {
        JmpOp::Jeq => {
            if x.t.disjoint(y.t) {
                return None;
            }
            let t = x.t.intersect(y.t);
            let v = V {
                t,
                ulo: x.ulo.max(y.ulo),
                uhi: x.uhi.min(y.uhi),
                slo: x.slo.max(y.slo),
                shi: x.shi.min(y.shi),
            };
            x = v;
            y = v;
        }
        JmpOp::Jne => {
            // Only a constant on one side can shave an end off the other.
            if y.t.is_const() {
                shave(&mut x, y.t.value, width);
            }
            if x.t.is_const() {
                shave(&mut y, x.t.value, width);
            }
            if x.t.is_const() && y.t.is_const() && x.t.value == y.t.value {
                return None;
            }
        }
        JmpOp::Jgt => {
            x.ulo = x.ulo.max(y.ulo + 1);
            y.uhi = y.uhi.min(x.uhi - 1);
        }
        JmpOp::Jge => {
            x.ulo = x.ulo.max(y.ulo);
            y.uhi = y.uhi.min(x.uhi);
        }
        JmpOp::Jlt => {
            x.uhi = x.uhi.min(y.uhi - 1);
            y.ulo = y.ulo.max(x.ulo + 1);
        }
        JmpOp::Jle => {
            x.uhi = x.uhi.min(y.uhi);
            y.ulo = y.ulo.max(x.ulo);
        }
        JmpOp::Jsgt => {
            x.slo = x.slo.max(y.slo + 1);
            y.shi = y.shi.min(x.shi - 1);
        }
        JmpOp::Jsge => {
            x.slo = x.slo.max(y.slo);
            y.shi = y.shi.min(x.shi);
        }
        JmpOp::Jslt => {
            x.shi = x.shi.min(y.shi - 1);
            y.slo = y.slo.max(x.slo + 1);
        }
        JmpOp::Jsle => {
            x.shi = x.shi.min(y.shi);
            y.slo = y.slo.max(x.slo);
        }
        JmpOp::Jset => {
            if y.t.is_const() && y.t.value.is_power_of_two() {
                let bit = y.t.value;
                if x.t.value & bit == 0 && x.t.mask & bit == 0 {
                    return None;
                }
                x.t = Tnum {
                    value: x.t.value | bit,
                    mask: x.t.mask & !bit,
                };
            }
        }
    }
    let mut ra = *a;
    let mut rb = *b;
    if !put(&mut ra, x, width) || !put(&mut rb, y, width) {
        return None;
    }
    Some((ra, rb))
}

/// Refine for the false side of `JSET` with a constant mask: those bits are 0.
fn refine_jset_false(a: &Scalar, b: &Scalar, width: Width) -> Option<Scalar> {
    let mut x = get(a, width);
    let y = get(b, width);
    if y.t.is_const() {
        let m = y.t.value;
        if x.t.value & m != 0 {
            return None;
        }
        x.t = Tnum {
            value: x.t.value,
            mask: x.t.mask & !m,
        };
    }
    let mut r = *a;
    put(&mut r, x, width).then_some(r)
}

fn shave(x: &mut V, c: u64, width: Width) {
    let (cu, cs) = match width {
        Width::W64 => (c as i128, c as i64 as i128),
        Width::W32 => (c as u32 as i128, c as u32 as i32 as i128),
    };
    if x.ulo == cu {
        x.ulo += 1;
    } else if x.uhi == cu {
        x.uhi -= 1;
    }
    if x.slo == cs {
        x.slo += 1;
    } else if x.shi == cs {
        x.shi -= 1;
    }
}

/// The refined operands on the taken (`taken == true`) or fall-through side.
pub fn refine_side(
    op: JmpOp,
    width: Width,
    a: &Scalar,
    b: &Scalar,
    taken: bool,
) -> Option<(Scalar, Scalar)> {
    if taken {
        return refine(op, width, a, b);
    }
    match negate(op) {
        Some(n) => refine(n, width, a, b),
        None => refine_jset_false(a, b, width).map(|r| (r, *b)),
    }
}

/// Which packet comparison this is: the pointer compared against its end.
struct PktCmp {
    /// Register holding the packet (or meta) pointer.
    reg: u8,
    /// Condition "pointer OP end" after normalising operand order.
    op: JmpOp,
}

impl Verifier<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_cond_jmp(
        &mut self,
        st: &mut State,
        pc: usize,
        width: Width,
        op: JmpOp,
        dst: u8,
        src: Operand,
        off: i16,
    ) -> VResult<Succ> {
        let target = (pc as i64 + 1 + off as i64) as usize;
        let fall = pc + 1;
        let d = self.read_reg(st, dst)?;
        let (s, src_no) = match src {
            Operand::Reg(r) => (self.read_reg(st, r)?, Some(r)),
            Operand::Imm(imm) => (
                RegState::constant(match width {
                    Width::W64 => imm as i64 as u64,
                    Width::W32 => imm as u32 as u64,
                }),
                None,
            ),
        };
        let unpriv = !self.env.privileged();

        if d.is_scalar() && s.is_scalar() {
            return Ok(self.scalar_branch(st, width, op, dst, &d, src_no, &s, target, fall));
        }
        // Packet pointer against its end.
        if let (Some(r), Width::W64) = (src_no, width) {
            if let Some(cmp) = pkt_compare(dst, &d, r, &s, op) {
                let mut taken = st.clone();
                let reg = *st.reg(cmp.reg);
                // What each side implies about "pointer OP end".
                let (t_le, f_le) = match cmp.op {
                    // p > e: false side p <= e.
                    JmpOp::Jgt => (None, Some(false)),
                    // p < e: true side p < e.
                    JmpOp::Jlt => (Some(true), None),
                    // p >= e: false side p < e.
                    JmpOp::Jge => (None, Some(true)),
                    // p <= e: true side p <= e.
                    JmpOp::Jle => (Some(false), None),
                    _ => (None, None),
                };
                if let Some(open) = t_le {
                    mark_pkt_range(&mut taken, &reg, open);
                }
                if let Some(open) = f_le {
                    mark_pkt_range(st, &reg, open);
                }
                return Ok(Succ::Fork(fall, target, taken));
            }
        }
        // Null checks of maybe-null pointers against immediate 0.
        if width == Width::W64
            && src_no.is_none()
            && s.is_null_const()
            && d.maybe_null
            && matches!(op, JmpOp::Jeq | JmpOp::Jne)
        {
            let mut is_null = st.clone();
            mark_null(&mut is_null, d.id, true);
            mark_null(st, d.id, false);
            let (t_state, f_state) = if op == JmpOp::Jeq {
                (is_null, st.clone())
            } else {
                (st.clone(), is_null)
            };
            *st = f_state;
            return Ok(Succ::Fork(fall, target, t_state));
        }
        // A non-null pointer compared with 0 for (in)equality is decided.
        let zero_cmp = |p: &RegState, z: &RegState| {
            p.is_pointer()
                && !p.maybe_null
                && z.is_null_const()
                && matches!(op, JmpOp::Jeq | JmpOp::Jne)
        };
        if width == Width::W64 && (zero_cmp(&d, &s) || zero_cmp(&s, &d)) {
            // Decided by the scalar being zero.
            if s.is_scalar() {
                if let Some(r) = src_no {
                    self.need_reg(st, r);
                }
            } else {
                self.need_reg(st, dst);
            }
            return Ok(Succ::Goto(if op == JmpOp::Jne { target } else { fall }));
        }
        if unpriv {
            let r = if s.is_pointer() {
                src_no.unwrap_or(dst)
            } else {
                dst
            };
            return err("ptr_compare", format!("R{r} pointer comparison prohibited"));
        }
        // Privileged: any other comparison involving pointers teaches nothing.
        let other = st.clone();
        Ok(Succ::Fork(fall, target, other))
    }

    #[allow(clippy::too_many_arguments)]
    fn scalar_branch(
        &mut self,
        st: &mut State,
        width: Width,
        op: JmpOp,
        dst: u8,
        d: &RegState,
        src_no: Option<u8>,
        s: &RegState,
        target: usize,
        fall: usize,
    ) -> Succ {
        // Only one way to go: the operands' values decided it, so pruning
        // must not let other values past this point unexplored.
        let need_operands = |v: &mut Self, st: &State| {
            v.need_reg(st, dst);
            if let Some(r) = src_no {
                v.need_reg(st, r);
            }
        };
        if let Some(outcome) = decide(op, width, &d.val, &s.val) {
            need_operands(self, st);
            return Succ::Goto(if outcome { target } else { fall });
        }
        let t = refine_side(op, width, &d.val, &s.val, true);
        let f = refine_side(op, width, &d.val, &s.val, false);
        if t.is_none() || f.is_none() {
            need_operands(self, st);
        }
        self.note_links(st, d.id, src_no.map_or(0, |_| s.id));
        let mut taken = st.clone();
        let apply = |state: &mut State, refined: (Scalar, Scalar)| {
            set_scalar(state, dst, d.id, refined.0);
            if let Some(r) = src_no {
                set_scalar(state, r, s.id, refined.1);
            }
        };
        match (t, f) {
            (Some(tv), Some(fv)) => {
                apply(&mut taken, tv);
                apply(st, fv);
                Succ::Fork(fall, target, taken)
            }
            (Some(tv), None) => {
                apply(st, tv);
                Succ::Goto(target)
            }
            (None, Some(fv)) => {
                apply(st, fv);
                Succ::Goto(fall)
            }
            // Contradictory state: this path cannot happen.
            (None, None) => Succ::End,
        }
    }
}

impl Verifier<'_> {
    /// The scalars a refinement of registers with ids `a` and `b` reaches
    /// (copies share an id), for precision tracking.
    fn note_links(&mut self, st: &State, a: u32, b: u32) {
        if a == 0 && b == 0 {
            return;
        }
        let mut locs = Vec::new();
        for (f, frame) in st.frames.iter().enumerate() {
            for (r, reg) in frame.regs.iter().enumerate() {
                if reg.is_scalar() && reg.id != 0 && (reg.id == a || reg.id == b) {
                    locs.push(Loc::Reg {
                        frame: f as u8,
                        reg: r as u8,
                    });
                }
            }
            for (s, slot) in frame.stack.slots.iter().enumerate() {
                if slot
                    .spill
                    .is_some_and(|r| r.is_scalar() && r.id != 0 && (r.id == a || r.id == b))
                {
                    locs.push(Loc::Slot {
                        frame: f as u8,
                        slot: s as u8,
                    });
                }
            }
        }
        if locs.len() > 1 {
            self.note = Note::Linked(locs.into_boxed_slice());
        }
    }
}

/// Set a scalar register and every register sharing its id.
fn set_scalar(st: &mut State, r: u8, id: u32, val: Scalar) {
    st.reg_mut(r).val = val;
    if id != 0 {
        st.for_each_reg(|reg| {
            if reg.is_scalar() && reg.id == id {
                reg.val = val;
            }
        });
    }
}

fn pkt_compare(dst: u8, d: &RegState, src: u8, s: &RegState, op: JmpOp) -> Option<PktCmp> {
    let is_end_for = |p: &RegState, e: &RegState| match p.ty {
        RegType::Pkt => e.ty == RegType::PktEnd,
        RegType::PktMeta => e.ty == RegType::Pkt && e.off == 0 && e.val.is_zero(),
        _ => false,
    };
    if !matches!(op, JmpOp::Jgt | JmpOp::Jge | JmpOp::Jlt | JmpOp::Jle) {
        if d.ty.is_pkt() && (s.ty == RegType::PktEnd || s.ty.is_pkt())
            || s.ty.is_pkt() && d.ty == RegType::PktEnd
        {
            // Equality tests of packet pointers teach nothing.
            return Some(PktCmp {
                reg: dst,
                op: JmpOp::Jeq,
            });
        }
        return None;
    }
    if is_end_for(d, s) {
        Some(PktCmp { reg: dst, op })
    } else if is_end_for(s, d) {
        Some(PktCmp {
            reg: src,
            op: swap(op),
        })
    } else if d.ty.is_pkt() && s.ty.is_pkt() || d.ty == RegType::PktEnd && s.ty == RegType::PktEnd {
        Some(PktCmp {
            reg: dst,
            op: JmpOp::Jeq,
        })
    } else {
        None
    }
}

/// The side where `p <= end` (`open == false`) or `p < end` (`open`) holds:
/// every pointer sharing `p`'s id gets the proven range.
fn mark_pkt_range(st: &mut State, p: &RegState, open: bool) {
    if p.off < 0 {
        return;
    }
    if p.val.umax > 0xffff || p.val.umax + p.off as u64 > 0xffff {
        return;
    }
    // p < end proves one byte more than p <= end.
    let new = if open { p.off as u32 + 1 } else { p.off as u32 };
    let (ty, id) = (p.ty, p.id);
    st.for_each_reg(|r| {
        if r.ty == ty && r.id == id {
            r.range = r.range.max(new);
        }
    });
}

/// Resolve a null check on every copy of pointer `id`.
fn mark_null(st: &mut State, id: u32, is_null: bool) {
    let mut released = None;
    st.for_each_reg(|r| {
        if r.maybe_null && r.id == id && r.is_pointer() {
            if is_null {
                if r.ref_id != 0 {
                    released = Some(r.ref_id);
                }
                *r = RegState::constant(0);
            } else {
                r.maybe_null = false;
            }
        }
    });
    if let Some(ref_id) = released {
        st.refs.retain(|x| x.id != ref_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gt_refines_both_sides() {
        let a = Scalar::unsigned_upto(100);
        let b = Scalar::constant(10);
        let (t, _) = refine_side(JmpOp::Jgt, Width::W64, &a, &b, true).unwrap();
        assert_eq!((t.umin, t.umax), (11, 100));
        let (f, _) = refine_side(JmpOp::Jgt, Width::W64, &a, &b, false).unwrap();
        assert_eq!((f.umin, f.umax), (0, 10));
    }

    #[test]
    fn decided_branches() {
        let a = Scalar::unsigned_upto(5);
        assert_eq!(
            decide(JmpOp::Jgt, Width::W64, &a, &Scalar::constant(5)),
            Some(false)
        );
        assert_eq!(
            decide(JmpOp::Jle, Width::W64, &a, &Scalar::constant(5)),
            Some(true)
        );
        assert_eq!(
            decide(JmpOp::Jeq, Width::W64, &a, &Scalar::constant(3)),
            None
        );
    }

    #[test]
    fn jmp32_refines_subregister() {
        let a = Scalar::UNKNOWN;
        let (t, _) = refine_side(JmpOp::Jlt, Width::W32, &a, &Scalar::constant(16), true).unwrap();
        assert_eq!(t.u32_max, 15);
        // The upper half stays unknown.
        assert!(t.contains(0xffff_ffff_0000_0005));
    }
}
