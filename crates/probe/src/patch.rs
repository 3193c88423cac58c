//! Writing a jump over a live function's first bytes.
//!
//! Other threads may be executing the function while it is patched. The
//! five bytes are therefore written in one atomic store when they lie in one
//! aligned 8-byte word (or one aligned 16-byte word, with `cmpxchg16b`), so
//! an instruction fetch sees either the old bytes or the whole jump; the page
//! stays executable throughout (R-W-X, never R-W), goes back to its original
//! protection afterwards, and other threads' instruction streams are
//! serialized with `membarrier(SYNC_CORE)`. A patch that straddles a 16-byte
//! boundary is only done while the process has a single thread (the agent's
//! constructor, before `main`).

use crate::code_alloc::PAGE;
use crate::ProbeError;
use std::sync::atomic::{AtomicU64, Ordering};

/// Protection of the mapping holding `addr`, from /proc/self/maps.
fn protection_of(addr: u64) -> Result<i32, ProbeError> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| ProbeError::Os {
        what: "reading /proc/self/maps".into(),
        err: e,
    })?;
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else {
            continue;
        };
        if addr >= lo && addr < hi {
            let b = perms.as_bytes();
            let mut prot = 0;
            if b[0] == b'r' {
                prot |= libc::PROT_READ;
            }
            if b[1] == b'w' {
                prot |= libc::PROT_WRITE;
            }
            if b[2] == b'x' {
                prot |= libc::PROT_EXEC;
            }
            return Ok(prot);
        }
    }
    Err(ProbeError::Os {
        what: format!("{addr:#x} is not mapped"),
        err: std::io::Error::from_raw_os_error(libc::EFAULT),
    })
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(usize::MAX)
}

/// 16-byte compare-and-swap (`lock cmpxchg16b`); `ptr` 16-byte aligned.
unsafe fn cas16(ptr: *mut u128, old: u128, new: u128) -> bool {
    let ok: u8;
    // rbx is reserved by LLVM: swap the low word in and out around the CAS.
    std::arch::asm!(
        "xchg rbx, {nlo}",
        "lock cmpxchg16b [{p}]",
        "sete {ok}",
        "xchg rbx, {nlo}",
        p = in(reg) ptr,
        nlo = inout(reg) new as u64 => _,
        ok = out(reg_byte) ok,
        in("rcx") (new >> 64) as u64,
        inout("rax") old as u64 => _,
        inout("rdx") (old >> 64) as u64 => _,
        options(nostack),
    );
    ok != 0
}

fn sync_other_cores() {
    const REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 6;
    const PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 5;
    // Best effort: on kernels without it, the atomic store plus the
    // processor's cross-modifying-code snooping is what remains.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
            0,
            0,
        );
        libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
    }
}

/// Replaces the `bytes.len()` (≤ 8) bytes at `addr` in live code.
pub fn write_live_code(addr: u64, bytes: &[u8]) -> Result<(), String> {
    assert!(bytes.len() <= 8);
    let prot = protection_of(addr).map_err(|e| e.to_string())?;
    let page = addr & !(PAGE - 1);
    let span = (addr + bytes.len() as u64 - page).div_ceil(PAGE) * PAGE;
    let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    // SAFETY: the range is mapped code of this process; it stays executable.
    if unsafe { libc::mprotect(page as *mut libc::c_void, span as usize, rwx) } != 0 {
        return Err(format!("mprotect RWX: {}", std::io::Error::last_os_error()));
    }
    let result = store(addr, bytes);
    // SAFETY: as above.
    unsafe { libc::mprotect(page as *mut libc::c_void, span as usize, prot) };
    sync_other_cores();
    result
}

fn store(addr: u64, bytes: &[u8]) -> Result<(), String> {
    let n = bytes.len() as u64;
    if addr % 8 + n <= 8 {
        let word = addr & !7;
        let shift = (addr - word) * 8;
        // SAFETY: aligned, mapped, writable now.
        let cell = unsafe { &*(word as *const AtomicU64) };
        let old = cell.load(Ordering::Acquire);
        let mut new = old;
        for (i, b) in bytes.iter().enumerate() {
            let s = shift + 8 * i as u64;
            new = (new & !(0xff << s)) | ((*b as u64) << s);
        }
        cell.store(new, Ordering::Release);
        return Ok(());
    }
    if addr % 16 + n <= 16 {
        let word = addr & !15;
        let shift = (addr - word) * 8;
        loop {
            // SAFETY: aligned, mapped, writable now.
            let old = unsafe { std::ptr::read_volatile(word as *const u128) };
            let mut new = old;
            for (i, b) in bytes.iter().enumerate() {
                let s = shift + 8 * i as u64;
                new = (new & !(0xffu128 << s)) | ((*b as u128) << s);
            }
            if unsafe { cas16(word as *mut u128, old, new) } {
                return Ok(());
            }
        }
    }
    if thread_count() != 1 {
        return Err(
            "the 5 patched bytes straddle a 16-byte boundary, so they cannot be written \
             atomically while other threads run (attach before threads start)"
                .into(),
        );
    }
    // SAFETY: single-threaded; mapped and writable now.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    Ok(())
}
