//! Atomic read-modify-write instructions (RFC 9669 §5.3), and the ordered
//! loads and stores (`load_acquire`, `store_release`).
//!
//! They are real host atomics because map values are shared between data-plane
//! threads and control planes; sequentially consistent ordering matches the
//! kernel's full barriers around fetching atomics.

use bpfjet_isa::{AtomicOp, Size, Width};
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

/// `load_acquire`: the value at `addr`, zero-extended; no later access of
/// this thread moves before it.
///
/// # Safety
/// `addr` must be readable host memory, aligned to `size`.
#[inline]
pub(crate) unsafe fn load_acquire(addr: u64, size: Size) -> u64 {
    use std::sync::atomic::{AtomicU16, AtomicU8, Ordering::Acquire};
    match size {
        Size::B => u64::from(AtomicU8::from_ptr(addr as *mut u8).load(Acquire)),
        Size::H => u64::from(AtomicU16::from_ptr(addr as *mut u16).load(Acquire)),
        Size::W => u64::from(AtomicU32::from_ptr(addr as *mut u32).load(Acquire)),
        Size::DW => AtomicU64::from_ptr(addr as *mut u64).load(Acquire),
    }
}

/// `store_release`: the low `size` bytes of `value` at `addr`; no earlier
/// access of this thread moves after it.
///
/// # Safety
/// `addr` must be writable host memory, aligned to `size`.
#[inline]
pub(crate) unsafe fn store_release(addr: u64, size: Size, value: u64) {
    use std::sync::atomic::{AtomicU16, AtomicU8, Ordering::Release};
    match size {
        Size::B => AtomicU8::from_ptr(addr as *mut u8).store(value as u8, Release),
        Size::H => AtomicU16::from_ptr(addr as *mut u16).store(value as u16, Release),
        Size::W => AtomicU32::from_ptr(addr as *mut u32).store(value as u32, Release),
        Size::DW => AtomicU64::from_ptr(addr as *mut u64).store(value, Release),
    }
}
