//! Reading the traced process's memory without ever faulting: a tracing
//! program may pass any address to `bpf_probe_read_user*`, and a bad one
//! must come back as `-EFAULT` (with the buffer zeroed, as the kernel's
//! `copy_from_user_nofault` callers do), not as a SIGSEGV in the traced
//! process. `process_vm_readv(2)` on the own pid is the kernel doing the
//! copy with fault handling: an unmapped or unreadable address makes the
//! call fail or come back short instead of raising a signal.

/// An address the process cannot read (`-EFAULT` for the program).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadAddress;

impl std::fmt::Display for BadAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bad address")
    }
}

impl std::error::Error for BadAddress {}

/// Copy `dst.len()` bytes from `addr`. On a fault `dst` is zeroed.
pub fn read(addr: u64, dst: &mut [u8]) -> Result<(), BadAddress> {
    if dst.is_empty() {
        return Ok(());
    }
    if copy(addr, dst) == dst.len() {
        Ok(())
    } else {
        dst.fill(0);
        Err(BadAddress)
    }
}

/// `strncpy_from_user_nofault` into `dst`: the string at `addr` with its
/// NUL, at most `dst.len()` bytes; a string that does not fit is cut and
/// NUL-terminated at `dst.len() - 1`. Bytes of `dst` after the NUL keep
/// their values, as in the kernel (a string read into a zeroed map key
/// leaves the rest of the key zero). Returns the bytes written including
/// the NUL (0 for an empty `dst`); on a fault `dst` is zeroed.
pub fn read_str(addr: u64, dst: &mut [u8]) -> Result<usize, BadAddress> {
    let size = dst.len();
    if size == 0 {
        return Ok(0);
    }
    let page = page_size();
    // Read through a bounce buffer: what follows the NUL in the process's
    // memory must not reach `dst`.
    let mut bounce = [0u8; 256];
    let mut done = 0usize;
    while done < size {
        // Never cross a page in one copy: the string may end just before
        // an unmapped page.
        let at = addr.wrapping_add(done as u64);
        let to_page_end = page - (at as usize & (page - 1));
        let chunk = to_page_end.min(size - done).min(bounce.len());
        let got = copy(at, &mut bounce[..chunk]);
        if got != chunk {
            dst.fill(0);
            return Err(BadAddress);
        }
        if let Some(nul) = bounce[..chunk].iter().position(|&b| b == 0) {
            dst[done..=done + nul].copy_from_slice(&bounce[..=nul]);
            return Ok(done + nul + 1);
        }
        dst[done..done + chunk].copy_from_slice(&bounce[..chunk]);
        done += chunk;
    }
    dst[size - 1] = 0;
    Ok(size)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Bytes `process_vm_readv` copied from `addr` into `dst` (0 on failure).
fn copy(addr: u64, dst: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: dst.len(),
    };
    // SAFETY: `local` is writable memory of the given length; the remote
    // side is only read by the kernel, which reports faults as errors.
    // The cached pid: `getpid` would be one more system call per read.
    let pid = super::current::tgid_tid().0 as libc::pid_t;
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    usize::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_addresses_fault_without_crashing() {
        let mut buf = [0xaau8; 16];
        assert_eq!(read(0, &mut buf), Err(BadAddress));
        assert_eq!(buf, [0; 16]);
        assert_eq!(read(8, &mut buf), Err(BadAddress));
        let mut s = [0xaau8; 8];
        assert_eq!(read_str(0x10, &mut s), Err(BadAddress));
        assert_eq!(s, [0; 8]);
    }

    #[test]
    fn strings_are_cut_and_terminated() {
        let text = b"hello\0world";
        let mut buf = [0xffu8; 16];
        assert_eq!(read_str(text.as_ptr() as u64, &mut buf), Ok(6));
        assert_eq!(&buf[..6], b"hello\0");
        // Nothing after the NUL is written (the kernel's rule): no
        // "world" leaks into the rest of the buffer.
        assert_eq!(&buf[6..], &[0xff; 10]);
        let long = [b'x'; 700];
        let mut across = [0u8; 700];
        assert_eq!(read_str(long.as_ptr() as u64, &mut across[..601]), Ok(601));
        assert!(across[..600].iter().all(|&b| b == b'x') && across[600] == 0);
        let mut small = [0xffu8; 4];
        assert_eq!(read_str(text.as_ptr() as u64, &mut small), Ok(4));
        assert_eq!(&small, b"hel\0");
        let mut exact = [0u8; 5];
        assert_eq!(read(text.as_ptr() as u64, &mut exact), Ok(()));
        assert_eq!(&exact, b"hello");
    }
}
