//! Atomic read-modify-write instructions (RFC 9669 §5.3).
//!
//! They are real host atomics because map values are shared between data-plane
//! threads and control planes; sequentially consistent ordering matches the
//! kernel's full barriers around fetching atomics.

use bpfjet_isa::{AtomicOp, Width};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// Apply `op` at `addr` and return the old memory value (zero-extended for
/// 32-bit operations). For cmpxchg `expected` is r0; only its low half takes
/// part in a 32-bit compare.
///
/// # Safety
/// `addr` must be writable host memory, aligned to the operation's width.
#[inline]
pub(crate) unsafe fn rmw(
    width: Width,
    op: AtomicOp,
    addr: u64,
    operand: u64,
    expected: u64,
) -> u64 {
    match width {
        Width::W64 => {
            let cell = AtomicU64::from_ptr(addr as *mut u64);
            match op {
                AtomicOp::Add => cell.fetch_add(operand, SeqCst),
                AtomicOp::Or => cell.fetch_or(operand, SeqCst),
                AtomicOp::And => cell.fetch_and(operand, SeqCst),
                AtomicOp::Xor => cell.fetch_xor(operand, SeqCst),
                AtomicOp::Xchg => cell.swap(operand, SeqCst),
                AtomicOp::CmpXchg => match cell.compare_exchange(expected, operand, SeqCst, SeqCst)
                {
                    Ok(old) | Err(old) => old,
                },
            }
        }
        Width::W32 => {
            let cell = AtomicU32::from_ptr(addr as *mut u32);
            let operand = operand as u32;
            u64::from(match op {
                AtomicOp::Add => cell.fetch_add(operand, SeqCst),
                AtomicOp::Or => cell.fetch_or(operand, SeqCst),
                AtomicOp::And => cell.fetch_and(operand, SeqCst),
                AtomicOp::Xor => cell.fetch_xor(operand, SeqCst),
                AtomicOp::Xchg => cell.swap(operand, SeqCst),
                AtomicOp::CmpXchg => {
                    match cell.compare_exchange(expected as u32, operand, SeqCst, SeqCst) {
                        Ok(old) | Err(old) => old,
                    }
                }
            })
        }
    }
}
