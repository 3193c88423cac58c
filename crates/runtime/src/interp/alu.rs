//! Arithmetic, logic and byte-order instructions (RFC 9669 §4.1–4.2).
//!
//! 32-bit operations compute on the low halves and the caller zero-extends the
//! result, which is also why a 32-bit modulo by zero still clears the upper
//! half of the destination (the kernel rewrites it to `w_dst = w_dst`).

use bpfjet_isa::{AluOp, ByteOrder};

/// `dst op src` for ALU64; `src` is already sign-extended if it was an imm.
#[inline(always)]
pub(crate) fn alu64(op: AluOp, dst: u64, src: u64) -> u64 {
    match op {
        AluOp::Add => dst.wrapping_add(src),
        AluOp::Sub => dst.wrapping_sub(src),
        AluOp::Mul => dst.wrapping_mul(src),
        AluOp::Div => dst.checked_div(src).unwrap_or(0),
        // wrapping_div gives INT_MIN / -1 = INT_MIN, the RFC's result.
        AluOp::SDiv if src == 0 => 0,
        AluOp::SDiv => (dst as i64).wrapping_div(src as i64) as u64,
        AluOp::Mod => dst.checked_rem(src).unwrap_or(dst),
        // wrapping_rem gives INT_MIN % -1 = 0; the sign follows the dividend.
        AluOp::SMod if src == 0 => dst,
        AluOp::SMod => (dst as i64).wrapping_rem(src as i64) as u64,
        AluOp::Or => dst | src,
        AluOp::And => dst & src,
        AluOp::Xor => dst ^ src,
        // wrapping_shl/shr mask the amount to the width, as the RFC requires.
        AluOp::Lsh => dst.wrapping_shl(src as u32),
        AluOp::Rsh => dst.wrapping_shr(src as u32),
        AluOp::Arsh => (dst as i64).wrapping_shr(src as u32) as u64,
        AluOp::Neg => dst.wrapping_neg(),
        AluOp::Mov => src,
        AluOp::MovSx(8) => src as i8 as i64 as u64,
        AluOp::MovSx(16) => src as i16 as i64 as u64,
        AluOp::MovSx(_) => src as i32 as i64 as u64,
    }
}

/// `dst op src` on the low 32 bits for ALU; the result is zero-extended.
#[inline(always)]
pub(crate) fn alu32(op: AluOp, dst: u32, src: u32) -> u32 {
    match op {
        AluOp::Add => dst.wrapping_add(src),
        AluOp::Sub => dst.wrapping_sub(src),
        AluOp::Mul => dst.wrapping_mul(src),
        AluOp::Div => dst.checked_div(src).unwrap_or(0),
        AluOp::SDiv if src == 0 => 0,
        AluOp::SDiv => (dst as i32).wrapping_div(src as i32) as u32,
        AluOp::Mod => dst.checked_rem(src).unwrap_or(dst),
        AluOp::SMod if src == 0 => dst,
        AluOp::SMod => (dst as i32).wrapping_rem(src as i32) as u32,
        AluOp::Or => dst | src,
        AluOp::And => dst & src,
        AluOp::Xor => dst ^ src,
        AluOp::Lsh => dst.wrapping_shl(src),
        AluOp::Rsh => dst.wrapping_shr(src),
        AluOp::Arsh => (dst as i32).wrapping_shr(src) as u32,
        AluOp::Neg => dst.wrapping_neg(),
        AluOp::Mov => src,
        AluOp::MovSx(8) => src as i8 as i32 as u32,
        // The loader rejects movsx32 in the 32-bit class; 16 is the only other.
        AluOp::MovSx(_) => src as i16 as i32 as u32,
    }
}

/// `le`/`be` convert host order to the named order, truncating to `bits`
/// (so on a little-endian host `le16` just clears the upper 48 bits);
/// `bswap` swaps unconditionally.
#[inline(always)]
pub(crate) fn byte_order(order: ByteOrder, bits: u8, v: u64) -> u64 {
    match (order, bits) {
        (ByteOrder::ToLe, 16) => u64::from((v as u16).to_le()),
        (ByteOrder::ToLe, 32) => u64::from((v as u32).to_le()),
        (ByteOrder::ToLe, _) => v.to_le(),
        (ByteOrder::ToBe, 16) => u64::from((v as u16).to_be()),
        (ByteOrder::ToBe, 32) => u64::from((v as u32).to_be()),
        (ByteOrder::ToBe, _) => v.to_be(),
        (ByteOrder::Swap, 16) => u64::from((v as u16).swap_bytes()),
        (ByteOrder::Swap, 32) => u64::from((v as u32).swap_bytes()),
        (ByteOrder::Swap, _) => v.swap_bytes(),
    }
}
