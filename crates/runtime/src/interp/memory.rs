//! Loads, stores and the two memory modes.
//!
//! Both modes access real host addresses (a program's pointers are host
//! pointers, so helpers see the same values either way); they differ only in
//! whether an access is checked against the known regions first. The mode is
//! a type parameter of the interpreter loop so that the verified fast path
//! compiles the check away entirely.

use crate::error::{Access, Fault};
use crate::program::ProgramInner;
use crate::state::RunState;
use bpfjet_isa::Size;
use std::ptr;

/// Whether and how memory accesses are checked.
pub(crate) trait MemMode {
    const BOUNDS_CHECKED: bool;

    /// `Ok` if the program may make `access` of `size` bytes at `addr` while
    /// running at call depth `depth`.
    fn check(
        state: &RunState,
        prog: &ProgramInner,
        depth: usize,
        pc: usize,
        addr: u64,
        size: u64,
        access: Access,
    ) -> Result<(), Fault>;
}

/// The verifier proved every access safe.
pub(crate) struct Verified;

impl MemMode for Verified {
    const BOUNDS_CHECKED: bool = false;

    #[inline(always)]
    fn check(
        _: &RunState,
        _: &ProgramInner,
        _: usize,
        _: usize,
        _: u64,
        _: u64,
        _: Access,
    ) -> Result<(), Fault> {
        Ok(())
    }
}

/// Every access must fall inside one live stack frame or one known region.
pub(crate) struct BoundsChecked;

impl MemMode for BoundsChecked {
    const BOUNDS_CHECKED: bool = true;

    #[inline]
    fn check(
        state: &RunState,
        prog: &ProgramInner,
        depth: usize,
        pc: usize,
        addr: u64,
        size: u64,
        access: Access,
    ) -> Result<(), Fault> {
        if state.permits(depth, addr, size, access)
            || prog
                .static_regions
                .iter()
                .any(|r| r.permits(addr, size, access))
        {
            Ok(())
        } else {
            Err(Fault::OutOfBounds {
                pc,
                addr,
                size,
                access,
            })
        }
    }
}

/// Read `size` bytes at `addr`, zero-extended. eBPF allows unaligned access.
///
/// # Safety
/// `addr..addr + size` must be readable host memory.
#[inline(always)]
pub(crate) unsafe fn load(addr: u64, size: Size) -> u64 {
    match size {
        Size::B => u64::from(ptr::read_unaligned(addr as *const u8)),
        Size::H => u64::from(ptr::read_unaligned(addr as *const u16)),
        Size::W => u64::from(ptr::read_unaligned(addr as *const u32)),
        Size::DW => ptr::read_unaligned(addr as *const u64),
    }
}

/// Write the low `size` bytes of `value` at `addr`.
///
/// # Safety
/// `addr..addr + size` must be writable host memory.
#[inline(always)]
pub(crate) unsafe fn store(addr: u64, size: Size, value: u64) {
    match size {
        Size::B => ptr::write_unaligned(addr as *mut u8, value as u8),
        Size::H => ptr::write_unaligned(addr as *mut u16, value as u16),
        Size::W => ptr::write_unaligned(addr as *mut u32, value as u32),
        Size::DW => ptr::write_unaligned(addr as *mut u64, value),
    }
}

/// Sign-extend a loaded value of `size` bytes (`ldxs*`, cpu v4).
#[inline(always)]
pub(crate) fn sign_extend(value: u64, size: Size) -> u64 {
    match size {
        Size::B => value as i8 as i64 as u64,
        Size::H => value as i16 as i64 as u64,
        Size::W => value as i32 as i64 as u64,
        Size::DW => value,
    }
}
