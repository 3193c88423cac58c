//! Conditional jump predicates (RFC 9669 §4.3).

use bpfjet_isa::JmpOp;

/// Whether a 64-bit (JMP) comparison holds; `b` is sign-extended if it was an imm.
#[inline(always)]
pub(crate) fn taken64(op: JmpOp, a: u64, b: u64) -> bool {
    taken(op, a, b, a as i64, b as i64)
}

/// Whether a JMP32 comparison holds: only the low 32 bits take part, read as
/// unsigned or signed 32-bit numbers.
#[inline(always)]
pub(crate) fn taken32(op: JmpOp, a: u64, b: u64) -> bool {
    let (a, b) = (a as u32, b as u32);
    taken(
        op,
        u64::from(a),
        u64::from(b),
        i64::from(a as i32),
        i64::from(b as i32),
    )
}

#[inline(always)]
fn taken(op: JmpOp, ua: u64, ub: u64, sa: i64, sb: i64) -> bool {
    match op {
        JmpOp::Jeq => ua == ub,
        JmpOp::Jne => ua != ub,
        JmpOp::Jset => ua & ub != 0,
        JmpOp::Jgt => ua > ub,
        JmpOp::Jge => ua >= ub,
        JmpOp::Jlt => ua < ub,
        JmpOp::Jle => ua <= ub,
        JmpOp::Jsgt => sa > sb,
        JmpOp::Jsge => sa >= sb,
        JmpOp::Jslt => sa < sb,
        JmpOp::Jsle => sa <= sb,
    }
}
