//! Executable pages within ±2 GiB of a probed function, so the patched
//! `jmp rel32` reaches its trampoline and relocated RIP-relative operands
//! keep reaching their data.

use crate::ProbeError;

pub const PAGE: u64 = 4096;
const STEP: u64 = 1 << 20;
const REACH: u64 = (1 << 31) - (1 << 24);

/// Maps one page, read-write (the caller fills it, then seals it R-X),
/// within reach of `near`.
pub fn alloc_near(near: u64) -> Result<u64, ProbeError> {
    let base = near & !(PAGE - 1);
    // Alternate below and above the target, closest first.
    let mut dist = STEP;
    while dist < REACH {
        for hint in [base.checked_sub(dist), base.checked_add(dist)]
            .into_iter()
            .flatten()
        {
            if hint < 0x10000 {
                continue;
            }
            // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
            let p = unsafe {
                libc::mmap(
                    hint as *mut libc::c_void,
                    PAGE as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Ok(p as u64);
            }
        }
        dist += STEP;
    }
    Err(ProbeError::Os {
        what: format!("no free page within ±2 GiB of {near:#x} for a trampoline"),
        err: std::io::Error::from_raw_os_error(libc::ENOMEM),
    })
}

/// Makes a filled trampoline page executable and no longer writable.
pub fn seal(page: u64) -> Result<(), ProbeError> {
    // SAFETY: `page` came from alloc_near.
    let r = unsafe {
        libc::mprotect(
            page as *mut libc::c_void,
            PAGE as usize,
            libc::PROT_READ | libc::PROT_EXEC,
        )
    };
    if r != 0 {
        return Err(ProbeError::os("mprotect trampoline R-X"));
    }
    Ok(())
}
