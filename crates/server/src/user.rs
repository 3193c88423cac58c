//! The caller's memory, addressed as the kernel receives it (`u64`
//! addresses in the attr). The caller is this process: a null address is
//! EFAULT as in the kernel; any other address is trusted like a pointer
//! passed to a libc function.

use bpfjet_sys::Errno;

/// `len` bytes at `addr`.
pub fn read(addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
    Ok(slice(addr, len)?.to_vec())
}

/// A view of `len` bytes at `addr`.
pub fn slice<'a>(addr: u64, len: usize) -> Result<&'a [u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    if addr == 0 {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller passed this buffer to bpf() with this length.
    Ok(unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
}

/// Copy `data` to `addr`.
pub fn write(addr: u64, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    if addr == 0 {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller passed this buffer to bpf() for the kernel to fill.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
    Ok(())
}

/// A NUL-terminated string of at most `max` bytes at `addr`.
pub fn cstring(addr: u64, max: usize) -> Result<String, Errno> {
    if addr == 0 {
        return Err(Errno::EFAULT);
    }
    let mut out = Vec::new();
    for i in 0..max {
        // SAFETY: reading a C string the caller passed, up to its NUL.
        let b = unsafe { *((addr as usize + i) as *const u8) };
        if b == 0 {
            return String::from_utf8(out).map_err(|_| Errno::EINVAL);
        }
        out.push(b);
    }
    Err(Errno::E2BIG)
}

/// `len` bytes at `addr`, `EFAULT` where the kernel's `copy_from_user`
/// would fail (memory this process has not mapped readable) instead of a
/// fault: `process_vm_readv` of this process. A system call per read, so
/// for commands that are not on a map's fast path (uprobe-multi links'
/// arrays, which a caller may well get wrong).
pub fn read_checked(addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` is `out`'s buffer of `len` bytes; the kernel checks
    // `remote` and fails rather than fault.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n != len as isize {
        return Err(Errno::EFAULT);
    }
    Ok(out)
}

/// `data` to `addr`, `EFAULT` where the kernel's `copy_to_user` would
/// fail, as [`read_checked`] (`process_vm_writev`).
pub fn write_checked(addr: u64, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: `local` is `data`; the kernel checks `remote`.
    let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n != data.len() as isize {
        return Err(Errno::EFAULT);
    }
    Ok(())
}

/// A NUL-terminated string of at most `max` bytes at `addr` (`EINVAL`
/// when it has no NUL within them, as `strndup_user`), `EFAULT` where
/// the memory is not readable, as [`read_checked`]: read up to each page
/// end, so that a string ending just before an unmapped page is read.
pub fn cstring_checked(addr: u64, max: usize) -> Result<String, Errno> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let chunk = ((PAGE - at % PAGE) as usize).min(max - out.len());
        let b = read_checked(at, chunk)?;
        if let Some(nul) = b.iter().position(|&c| c == 0) {
            out.extend_from_slice(&b[..nul]);
            return String::from_utf8(out).map_err(|_| Errno::EINVAL);
        }
        out.extend_from_slice(&b);
        at += chunk as u64;
    }
    Err(Errno::EINVAL)
}

/// Write a log the way the kernel's verifier log does: at most
/// `size - 1` bytes and a NUL. Returns the size the whole log needs.
pub fn write_log(buf: u64, size: u32, text: &str) -> Result<u32, Errno> {
    let needed = text.len() as u32 + 1;
    if buf == 0 || size == 0 {
        return Ok(needed);
    }
    let n = (size as usize - 1).min(text.len());
    let mut out = text.as_bytes()[..n].to_vec();
    out.push(0);
    write(buf, &out)?;
    Ok(needed)
}

/// The kernel's checks of a log request (`bpf_vlog_init`): buffer and size
/// together, a buffer only with a level, known level bits, sane size.
pub fn check_log(level: u32, buf: u64, size: u32) -> Result<(), Errno> {
    const BPF_LOG_MASK: u32 = 1 | 2 | 4 | 8;
    if (buf == 0) != (size == 0) || (buf != 0 && level == 0) || level & !BPF_LOG_MASK != 0 {
        return Err(Errno::EINVAL);
    }
    if size > u32::MAX >> 2 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Write a refusal's explanation as the kernel does and return the errno
/// the call fails with: the refusal's, or ENOSPC when the log did not fit.
pub fn log_refusal(level: u32, buf: u64, size: u32, text: &str, errno: Errno) -> (Errno, u32) {
    if level == 0 {
        return (errno, 0);
    }
    let needed = text.len() as u32 + 1;
    if buf == 0 {
        return (errno, needed);
    }
    match write_log(buf, size, text) {
        Ok(n) if n > size => (Errno::ENOSPC, n),
        Ok(n) => (errno, n),
        Err(e) => (e, needed),
    }
}
