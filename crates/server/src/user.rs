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
