//! Bounds-checked little-endian reads. Every read of untrusted object bytes goes
//! through here so that malformed input yields `None`, never a panic.

pub(crate) fn u16_at(data: &[u8], off: usize) -> Option<u16> {
    let b = data.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

pub(crate) fn u32_at(data: &[u8], off: usize) -> Option<u32> {
    let b = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// `len` bytes at `off`, or `None` if any of them lies outside `data`.
pub(crate) fn slice_at(data: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    data.get(off..off.checked_add(len)?)
}

/// The NUL-terminated string at `off`.
pub(crate) fn cstr_at(data: &[u8], off: usize) -> Option<&str> {
    let tail = data.get(off..)?;
    let end = tail.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&tail[..end]).ok()
}
