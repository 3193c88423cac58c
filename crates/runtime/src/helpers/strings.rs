//! `bpf_strncmp`.

use super::ids;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::STRNCMP, "strncmp", |ctx, a| {
        let s1 = ctx.read_mem(a[0], a[1] as u32 as u64)?.to_vec();
        let s2 = read_cstr(ctx, a[2], s1.len() + 1)?;
        Ok(strncmp(&s1, &s2, s1.len()) as i64 as u64)
    }));
}

/// A NUL-terminated string of at most `max` bytes (NUL excluded) starting at
/// `addr`, read byte by byte so that it may end anywhere in its region.
pub(crate) fn read_cstr(ctx: &HelperCtx<'_>, addr: u64, max: usize) -> Result<Vec<u8>, Fault> {
    let len = cstr_len(ctx, addr, max)?;
    (0..len as u64)
        .map(|i| Ok(ctx.read_mem(addr.wrapping_add(i), 1)?[0]))
        .collect()
}

/// Length of the NUL-terminated string at `addr` (at most `max`), read
/// byte by byte: a fault before the NUL is the program's fault.
pub(crate) fn cstr_len(ctx: &HelperCtx<'_>, addr: u64, max: usize) -> Result<usize, Fault> {
    let mut n = 0;
    while n < max {
        if ctx.read_mem(addr.wrapping_add(n as u64), 1)?[0] == 0 {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// The kernel's `strncmp`: -1, 0 or 1, comparing unsigned bytes; a missing
/// byte past the end of a slice is the terminating NUL.
pub fn strncmp(a: &[u8], b: &[u8], n: usize) -> i32 {
    for i in 0..n {
        let (c1, c2) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if c1 != c2 {
            return if c1 < c2 { -1 } else { 1 };
        }
        if c1 == 0 {
            break;
        }
    }
    0
}
