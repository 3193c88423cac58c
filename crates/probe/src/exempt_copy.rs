//! Copies of libc's system-call wrappers inside Syscall User Dispatch's
//! allowed range.
//!
//! With dispatch on, the kernel lets a system call through without reading
//! the thread's selector byte when it is issued from the allowed code range
//! (`prctl(PR_SET_SYSCALL_USER_DISPATCH, ON, offset, len, selector)`);
//! from anywhere else it reads the byte from user memory first. On this
//! project's machine that read costs ~40 ns per call (a `getppid` loop:
//! ~212 ns untraced, ~256 ns with dispatch on and the call in the allowed
//! range, ~296 ns outside it with the selector ALLOW). The fast path's
//! wrappers issue their `syscall` from libc, outside the range. So each
//! wrapper the fast path covers is also copied, byte for byte, into a pool
//! inside the range (the end of `syscalls.rs`'s region), and an entry whose
//! call is traced continues into the copy with the selector left at BLOCK:
//! the copy's own `syscall` goes straight to the kernel, and anything else
//! the wrapper calls that makes a system call (glibc's cancellation
//! helpers) is dispatched, as the kernel's tracepoint would see it.
//!
//! The copy keeps the function's layout exactly: only the displacements of
//! branches and calls leaving the function and of RIP-relative operands are
//! rewritten, in place, for the new address. So the function's unwind
//! information (its FDE in libc's `.eh_frame`) describes the copy too, and
//! a clone of it, rebased, is registered with the unwinder
//! (`__register_frame`): thread cancellation, which unwinds from a
//! signal frame inside the wrapper, walks through the copy as through the
//! original. A wrapper that cannot be copied so (a short branch out of the
//! function, a target out of reach, unwind information of an unexpected
//! form) keeps running in libc, as before: still exact, ~40 ns dearer.

use iced_x86::{Decoder, DecoderOptions, FlowControl};
use std::sync::Mutex;

extern "C" {
    /// The pool, page-aligned, inside the allowed range (`syscalls.rs`).
    static bpfjet_sud_pool: u8;
    static bpfjet_sud_pool_end: u8;
}

#[repr(C)]
struct DwarfEhBases {
    tbase: *const libc::c_void,
    dbase: *const libc::c_void,
    func: *const libc::c_void,
}

#[link(name = "gcc_s")]
extern "C" {
    /// libgcc's lookup of the FDE covering `pc` (the unwinder's own).
    fn _Unwind_Find_FDE(pc: *const libc::c_void, bases: *mut DwarfEhBases) -> *const u8;
    /// Registers an `.eh_frame`-format block (CIEs and FDEs, ended by a
    /// zero length) with the unwinder.
    fn __register_frame(begin: *const u8);
}

/// Bytes of the pool handed out so far.
static USED: Mutex<u64> = Mutex::new(0);

fn pool() -> (u64, u64) {
    // Only the symbols' addresses are taken.
    (
        std::ptr::addr_of!(bpfjet_sud_pool) as u64,
        std::ptr::addr_of!(bpfjet_sud_pool_end) as u64,
    )
}

/// Whether `ip` is in the pool (a copy's code or unwind data).
pub fn in_pool(ip: u64) -> bool {
    let (start, end) = pool();
    (start..end).contains(&ip)
}

/// Copies the function at `address` (its bytes are `code`) into the pool
/// and registers its unwind information; returns the copy's address.
pub(crate) fn copy_function(address: u64, code: &[u8]) -> Result<u64, String> {
    let fde = find_fde(address, code.len() as u64)?;
    let mut used = USED.lock().unwrap();
    let (start, end) = pool();
    let at = start + *used;
    let code_len = code.len() as u64;
    let frame_at = (at + code_len).next_multiple_of(8);
    let new_code = relocate_whole(code, address, at)?;
    let frame = fde.rebased(frame_at, at, code_len)?;
    let next = (frame_at + frame.len() as u64).next_multiple_of(16);
    if next > end {
        return Err(format!(
            "the pool of wrapper copies is full ({} bytes)",
            end - start
        ));
    }
    let mut bytes = new_code;
    bytes.resize((frame_at - at) as usize, 0xcc);
    bytes.extend_from_slice(&frame);
    write_pool(at, &bytes)?;
    *used = next - start;
    // SAFETY: a complete `.eh_frame` block (CIE, FDE, zero terminator)
    // that stays in place for the life of the process (the pool is never
    // reused).
    unsafe { __register_frame(frame_at as *const u8) };
    Ok(at)
}

/// The function's bytes for `new_ip`: the same bytes, with the
/// displacements that reach outside the function rewritten.
fn relocate_whole(code: &[u8], ip: u64, new_ip: u64) -> Result<Vec<u8>, String> {
    let end = ip + code.len() as u64;
    let mut out = code.to_vec();
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let delta = new_ip.wrapping_sub(ip);
    while dec.can_decode() {
        let ins = dec.decode();
        if ins.is_invalid() {
            return Err(format!("undecodable bytes at {:#x}", ins.ip()));
        }
        let at = (ins.ip() - ip) as usize;
        let next = ins.next_ip();
        let new_next = next.wrapping_add(delta);
        let rel32 = |target: u64| -> Result<[u8; 4], String> {
            let d = target.wrapping_sub(new_next) as i64;
            i32::try_from(d)
                .map(i32::to_le_bytes)
                .map_err(|_| format!("{target:#x} is out of reach of the copy"))
        };
        let len = ins.len();
        if ins.is_ip_rel_memory_operand() {
            let offsets = dec.get_constant_offsets(&ins);
            if !offsets.has_displacement() || offsets.displacement_size() != 4 {
                return Err(format!("unexpected RIP-relative form at {:#x}", ins.ip()));
            }
            let o = at + offsets.displacement_offset();
            out[o..o + 4].copy_from_slice(&rel32(ins.ip_rel_memory_address())?);
        }
        let branch = matches!(
            ins.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
        ) && ins.near_branch_target() != 0;
        if branch {
            let target = ins.near_branch_target();
            if (ip..end).contains(&target) {
                continue; // relative within the copy: unchanged
            }
            // The displacement is the instruction's last bytes: 4 for a
            // near form, 1 for a short one (which cannot reach out).
            let tail = &code[at + len - 4.min(len)..at + len];
            let near = len >= 5
                && next.wrapping_add(i32::from_le_bytes(tail.try_into().unwrap()) as i64 as u64)
                    == target;
            if !near {
                return Err(format!(
                    "the short branch at {:#x} leaves the function",
                    ins.ip()
                ));
            }
            out[at + len - 4..at + len].copy_from_slice(&rel32(target)?);
        }
    }
    Ok(out)
}

/// Makes pool bytes `[at, at + bytes.len())` hold `bytes`. The bytes were
/// never handed out: no thread runs them; others in the same pages may be
/// running, so the pages stay executable while written.
fn write_pool(at: u64, bytes: &[u8]) -> Result<(), String> {
    let page = at & !(crate::code_alloc::PAGE - 1);
    let span = (at + bytes.len() as u64 - page).next_multiple_of(crate::code_alloc::PAGE);
    let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    // SAFETY: pool pages (this library's own text), made writable for the
    // copy and sealed again.
    unsafe {
        if libc::mprotect(page as *mut libc::c_void, span as usize, rwx) != 0 {
            return Err(format!(
                "mprotect of the copy pool: {}",
                std::io::Error::last_os_error()
            ));
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len());
        let rx = libc::PROT_READ | libc::PROT_EXEC;
        if libc::mprotect(page as *mut libc::c_void, span as usize, rx) != 0 {
            return Err(format!(
                "mprotect of the copy pool: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // The bytes are new to every core (never executed): no cross-core
    // synchronisation is needed before a thread first jumps to them, which
    // happens only after the probe using them is published.
    Ok(())
}

/// A function's FDE and its CIE, as found in its object's `.eh_frame`.
struct Fde {
    cie: Vec<u8>,
    /// The FDE from its length field to its end.
    fde: Vec<u8>,
    /// Offset of the initial location in `fde`.
    pc_begin_at: usize,
    /// Offset of the address range in `fde`.
    pc_range_at: usize,
}

/// DW_EH_PE_pcrel | DW_EH_PE_sdata4: the FDE encoding of every object
/// GCC and clang build for x86-64 Linux.
const PCREL_SDATA4: u8 = 0x1b;

fn find_fde(address: u64, len: u64) -> Result<Fde, String> {
    let mut bases = DwarfEhBases {
        tbase: std::ptr::null(),
        dbase: std::ptr::null(),
        func: std::ptr::null(),
    };
    // SAFETY: a lookup in the unwinder's tables; `bases` is written.
    let fde = unsafe { _Unwind_Find_FDE(address as *const libc::c_void, &mut bases) };
    if fde.is_null() {
        return Err("no unwind information (FDE) for the function".into());
    }
    if bases.func as u64 != address {
        return Err(format!(
            "its FDE starts at {:#x}, not at the function",
            bases.func as u64
        ));
    }
    // SAFETY: `fde` points at an FDE in a loaded object's `.eh_frame`
    // (mapped, read-only, for the object's life): its length field, then
    // the CIE pointer; the CIE is in the same section.
    unsafe {
        let length = read_u32(fde);
        if length == 0 || length == u32::MAX {
            return Err("an FDE of unexpected form (64-bit or empty)".into());
        }
        let fde_bytes = std::slice::from_raw_parts(fde, 4 + length as usize).to_vec();
        let cie_field = fde.add(4);
        let cie = cie_field.sub(read_u32(cie_field) as usize);
        let cie_len = read_u32(cie);
        if cie_len == 0 || cie_len == u32::MAX {
            return Err("a CIE of unexpected form".into());
        }
        let cie_bytes = std::slice::from_raw_parts(cie, 4 + cie_len as usize).to_vec();
        let (encoding, lsda) = fde_encoding(&cie_bytes)?;
        if encoding != PCREL_SDATA4 {
            return Err(format!("FDE pointer encoding {encoding:#x}"));
        }
        if lsda {
            return Err("the FDE has a language-specific data area".into());
        }
        let range = read_u32(fde.add(12)) as u64;
        if range < len {
            return Err(format!(
                "its FDE covers {range} of the function's {len} bytes"
            ));
        }
        Ok(Fde {
            cie: cie_bytes,
            fde: fde_bytes,
            pc_begin_at: 8,
            pc_range_at: 12,
        })
    }
}

impl Fde {
    /// The CIE and FDE for a copy at `code_at` (`code_len` bytes), laid out
    /// at `at`, with the zero terminator.
    fn rebased(&self, at: u64, code_at: u64, code_len: u64) -> Result<Vec<u8>, String> {
        let mut out = self.cie.clone();
        let fde_at = at + out.len() as u64;
        let mut fde = self.fde.clone();
        // CIE pointer: from the field to the CIE's start.
        let cie_ptr = (fde_at + 4 - at) as u32;
        fde[4..8].copy_from_slice(&cie_ptr.to_le_bytes());
        let field = fde_at + self.pc_begin_at as u64;
        let begin = i32::try_from(code_at as i64 - field as i64)
            .map_err(|_| "the copy's unwind data is out of reach".to_string())?;
        fde[self.pc_begin_at..self.pc_begin_at + 4].copy_from_slice(&begin.to_le_bytes());
        fde[self.pc_range_at..self.pc_range_at + 4]
            .copy_from_slice(&(code_len as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        out.extend_from_slice(&0u32.to_le_bytes());
        Ok(out)
    }
}

unsafe fn read_u32(p: *const u8) -> u32 {
    // SAFETY: the caller's.
    unsafe { std::ptr::read_unaligned(p as *const u32) }
}

/// The CIE's FDE pointer encoding ('R') and whether FDEs carry an LSDA
/// pointer ('L'); an augmentation this cannot rebase is an error.
fn fde_encoding(cie: &[u8]) -> Result<(u8, bool), String> {
    let bad = || "a CIE of unexpected form".to_string();
    if cie.len() < 10 || cie[4..8] != [0, 0, 0, 0] {
        return Err(bad());
    }
    let version = cie[8];
    let aug_end = cie[9..].iter().position(|b| *b == 0).ok_or_else(bad)? + 9;
    let aug = &cie[9..aug_end];
    if aug.first() != Some(&b'z') {
        return Err(format!(
            "CIE augmentation {:?}",
            String::from_utf8_lossy(aug)
        ));
    }
    let mut p = aug_end + 1;
    let uleb = |p: &mut usize| -> Result<u64, String> {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = *cie.get(*p).ok_or_else(bad)?;
            *p += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(bad());
            }
        }
    };
    uleb(&mut p)?; // code alignment
    uleb(&mut p)?; // data alignment (SLEB: only skipped)
    if version == 1 {
        p += 1;
    } else {
        uleb(&mut p)?;
    }
    uleb(&mut p)?; // augmentation data length
    let (mut encoding, mut lsda) = (None, false);
    for c in &aug[1..] {
        match c {
            b'R' => {
                encoding = Some(*cie.get(p).ok_or_else(bad)?);
                p += 1;
            }
            b'L' => {
                lsda = true;
                p += 1;
            }
            b'S' => {}
            other => {
                return Err(format!(
                    "CIE augmentation {:?} ('{}')",
                    String::from_utf8_lossy(aug),
                    *other as char
                ))
            }
        }
    }
    Ok((encoding.ok_or_else(bad)?, lsda))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_inner_branches_and_moves_outer_ones() {
        // je +2 (inside); call rel32 (outside); lea rax,[rip+0x10]; ret
        let ip = 0x10_0000u64;
        let code = [
            0x74, 0x02, 0xe8, 0x00, 0x10, 0x00, 0x00, 0x48, 0x8d, 0x05, 0x10, 0x00, 0x00, 0x00,
            0xc3,
        ];
        let new_ip = ip + 0x100;
        let out = relocate_whole(&code, ip, new_ip).unwrap();
        assert_eq!(&out[..2], &code[..2]);
        // call target ip+7+0x1000, now from new_ip+7
        let call = i32::from_le_bytes(out[3..7].try_into().unwrap());
        assert_eq!(
            (new_ip + 7).wrapping_add(call as i64 as u64),
            ip + 7 + 0x1000
        );
        let lea = i32::from_le_bytes(out[10..14].try_into().unwrap());
        assert_eq!(
            (new_ip + 14).wrapping_add(lea as i64 as u64),
            ip + 14 + 0x10
        );
        assert_eq!(out[14], 0xc3);
    }

    #[test]
    fn refuses_a_short_branch_out_of_the_function() {
        // jmp short +0x10 (outside the 3 bytes); ret
        let code = [0xeb, 0x10, 0xc3];
        let e = relocate_whole(&code, 0x1000, 0x2000).unwrap_err();
        assert!(e.contains("short branch"), "{e}");
    }

    #[test]
    fn reads_libc_read_s_unwind_information() {
        let objects = crate::symbols::loaded_objects();
        let t = crate::symbols::UprobeTarget {
            path: "libc.so.6".into(),
            symbol: "read".into(),
            offset: 0,
        };
        let r = crate::symbols::resolve(&t, &objects).unwrap();
        let fde = find_fde(r.address, r.remaining).unwrap();
        let block = fde.rebased(0x20_0000, 0x10_0000, r.remaining).unwrap();
        // CIE, FDE, terminator; the FDE's CIE pointer leads back to 0.
        let cie_len = u32::from_le_bytes(block[..4].try_into().unwrap()) as usize + 4;
        let ptr = u32::from_le_bytes(block[cie_len + 4..cie_len + 8].try_into().unwrap());
        assert_eq!(ptr as usize, cie_len + 4);
        assert_eq!(&block[block.len() - 4..], &[0, 0, 0, 0]);
    }
}
