//! `bpf_trace_printk` and `bpf_snprintf`: the kernel's restricted printf
//! (`bpf_bprintf_prepare`): `%%`, `%c`, `%s`, `%d %i %u %x %X` with `l`/`ll`,
//! flags `0 + - space` and a width, and the pointer forms `%p %px %pK %pB`,
//! `%pi4 %pI4 %pi6 %pI6`, `%pks %pus`. Anything else, a non-printable
//! character in the format, or more conversions than arguments is EINVAL.
//!
//! Plain `%p` prints the raw address (the kernel prints a hashed one).
//! Strings a program points to outside its memory print as empty, like the
//! kernel's fault-tolerant copy.

use super::common::env;
use super::ids;
use super::strings::read_cstr;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};

/// `MAX_BPRINTF_BUF`: trace_printk's line buffer.
const MAX_BPRINTF_BUF: usize = 1024;
/// `MAX_BPRINTF_VARARGS`: bpf_snprintf's argument limit.
const MAX_BPRINTF_VARARGS: u64 = 12;
/// Longest format string bpfjet reads for `bpf_snprintf`.
const MAX_FORMAT: usize = 64 << 10;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::TRACE_PRINTK, "trace_printk", trace_printk));
    r.register(Helper::new(ids::SNPRINTF, "snprintf", snprintf));
    r.register(Helper::new(
        ids::TRACE_VPRINTK,
        "trace_vprintk",
        trace_vprintk,
    ));
}

fn trace_printk(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let raw = ctx.read_mem(a[0], a[1] as u32 as u64)?;
    let Some(nul) = raw.iter().position(|&b| b == 0) else {
        return Ok(errno::neg(errno::EINVAL));
    };
    let fmt = raw[..nul].to_vec();
    let out = match format(ctx, &fmt, &[a[2], a[3], a[4]]) {
        Ok(out) => out,
        Err(e) => return Ok(errno::neg(e)),
    };
    let len = out.len();
    let shown = &out[..len.min(MAX_BPRINTF_BUF - 1)];
    let line = String::from_utf8_lossy(shown).into_owned();
    env(ctx)?.trace.push(line);
    Ok(len as u64)
}

/// `bpf_trace_vprintk(fmt, fmt_size, args, data_len)`: `bpf_trace_printk`
/// with its arguments in an array of u64 (what `bpf_printk` becomes with
/// more than three arguments).
fn trace_vprintk(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (fmt_addr, fmt_size, data, data_len) = (a[0], a[1] as u32 as u64, a[2], a[3] as u32 as u64);
    if data_len % 8 != 0 || data_len > MAX_BPRINTF_VARARGS * 8 || (data_len != 0 && data == 0) {
        return Ok(errno::neg(errno::EINVAL));
    }
    let args = u64_args(ctx, data, data_len)?;
    let raw = ctx.read_mem(fmt_addr, fmt_size)?;
    let Some(nul) = raw.iter().position(|&b| b == 0) else {
        return Ok(errno::neg(errno::EINVAL));
    };
    let fmt = raw[..nul].to_vec();
    let out = match format(ctx, &fmt, &args) {
        Ok(out) => out,
        Err(e) => return Ok(errno::neg(e)),
    };
    let len = out.len();
    let shown = &out[..len.min(MAX_BPRINTF_BUF - 1)];
    let line = String::from_utf8_lossy(shown).into_owned();
    env(ctx)?.trace.push(line);
    Ok(len as u64)
}

/// `data_len / 8` u64 arguments at `data`.
fn u64_args(ctx: &HelperCtx<'_>, data: u64, data_len: u64) -> Result<Vec<u64>, Fault> {
    if data_len == 0 {
        return Ok(Vec::new());
    }
    Ok(ctx
        .read_mem(data, data_len)?
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

fn snprintf(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (str_addr, str_size, fmt_addr, data, data_len) =
        (a[0], a[1] as u32 as u64, a[2], a[3], a[4] as u32 as u64);
    if data_len % 8 != 0 || data_len > MAX_BPRINTF_VARARGS * 8 || (data_len != 0 && data == 0) {
        return Ok(errno::neg(errno::EINVAL));
    }
    let args: Vec<u64> = ctx
        .read_mem(data, data_len)?
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let fmt = read_cstr(ctx, fmt_addr, MAX_FORMAT)?;
    let out = match format(ctx, &fmt, &args) {
        Ok(out) => out,
        Err(e) => return Ok(errno::neg(e)),
    };
    if str_size > 0 {
        let n = out.len().min(str_size as usize - 1);
        let dst = ctx.write_mem(str_addr, n as u64 + 1)?;
        dst[..n].copy_from_slice(&out[..n]);
        dst[n] = 0;
    }
    Ok(out.len() as u64 + 1)
}

/// Conversion flags and width.
#[derive(Default)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    width: usize,
}

impl Spec {
    fn pad(&self, body: Vec<u8>, numeric: bool, out: &mut Vec<u8>) {
        let fill = self.width.saturating_sub(body.len());
        if self.left {
            out.extend_from_slice(&body);
            out.extend(std::iter::repeat_n(b' ', fill));
        } else if self.zero && numeric {
            // Zeros go between the sign and the digits.
            let sign = usize::from(matches!(body.first(), Some(b'-' | b'+' | b' ')));
            out.extend_from_slice(&body[..sign]);
            out.extend(std::iter::repeat_n(b'0', fill));
            out.extend_from_slice(&body[sign..]);
        } else {
            out.extend(std::iter::repeat_n(b' ', fill));
            out.extend_from_slice(&body);
        }
    }
}

/// Format `fmt` with `args`; `Err` is the positive errno.
pub(crate) fn format(ctx: &HelperCtx<'_>, fmt: &[u8], args: &[u64]) -> Result<Vec<u8>, u64> {
    let mut out = Vec::new();
    let mut next_arg = args.iter().copied();
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if !c.is_ascii() || !(c.is_ascii_graphic() || c.is_ascii_whitespace()) {
            return Err(errno::EINVAL);
        }
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        if at(i) == b'%' {
            out.push(b'%');
            i += 1;
            continue;
        }
        let arg = next_arg.next().ok_or(errno::EINVAL)?;
        let mut spec = Spec::default();
        loop {
            match at(i) {
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b'-' => spec.left = true,
                b' ' => spec.space = true,
                _ => break,
            }
            i += 1;
        }
        if (b'1'..=b'9').contains(&at(i)) {
            while at(i).is_ascii_digit() {
                spec.width = spec.width.saturating_mul(10) + usize::from(at(i) - b'0');
                i += 1;
            }
        }
        match at(i) {
            b'p' => {
                i += 1;
                let body = pointer(ctx, fmt, &mut i, arg)?;
                spec.pad(body, false, &mut out);
                continue;
            }
            b's' => {
                i += 1;
                let s = read_cstr(ctx, arg, MAX_BPRINTF_BUF).unwrap_or_default();
                spec.pad(s, false, &mut out);
                continue;
            }
            b'c' => {
                i += 1;
                spec.pad(vec![arg as u8], false, &mut out);
                continue;
            }
            _ => {}
        }
        let mut long = 0;
        while at(i) == b'l' && long < 2 {
            long += 1;
            i += 1;
        }
        let conv = at(i);
        i += 1;
        let wide = long > 0;
        let body = match conv {
            b'd' | b'i' => {
                let v = if wide {
                    arg as i64
                } else {
                    i64::from(arg as i32)
                };
                let mut s = if v < 0 {
                    "-".to_string()
                } else if spec.plus {
                    "+".to_string()
                } else if spec.space {
                    " ".to_string()
                } else {
                    String::new()
                };
                s.push_str(&v.unsigned_abs().to_string());
                s
            }
            b'u' => if wide { arg } else { u64::from(arg as u32) }.to_string(),
            b'x' => format!("{:x}", if wide { arg } else { u64::from(arg as u32) }),
            b'X' => format!("{:X}", if wide { arg } else { u64::from(arg as u32) }),
            _ => return Err(errno::EINVAL),
        };
        spec.pad(body.into_bytes(), true, &mut out);
    }
    Ok(out)
}

/// The `%p` family; `i` is just past the `p`.
fn pointer(ctx: &HelperCtx<'_>, fmt: &[u8], i: &mut usize, arg: u64) -> Result<Vec<u8>, u64> {
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let next = at(*i);
    if next == 0 || next.is_ascii_whitespace() || next.is_ascii_punctuation() {
        return Ok(format!("{arg:016x}").into_bytes());
    }
    let bytes = |n: usize| -> Vec<u8> {
        ctx.read_mem(arg, n as u64)
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|_| vec![0; n])
    };
    match (next, at(*i + 1)) {
        (b'K' | b'x' | b'B', _) => {
            *i += 1;
            Ok(format!("{arg:016x}").into_bytes())
        }
        (b'k' | b'u', b's') => {
            *i += 2;
            Ok(read_cstr(ctx, arg, MAX_BPRINTF_BUF).unwrap_or_default())
        }
        (b'i' | b'I', b'4') => {
            *i += 2;
            let b = bytes(4);
            Ok(if next == b'i' {
                format!("{:03}.{:03}.{:03}.{:03}", b[0], b[1], b[2], b[3])
            } else {
                format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
            }
            .into_bytes())
        }
        (b'i' | b'I', b'6') => {
            *i += 2;
            let b = bytes(16);
            let groups: Vec<String> = b
                .chunks(2)
                .map(|g| format!("{:02x}{:02x}", g[0], g[1]))
                .collect();
            Ok(groups
                .join(if next == b'I' { ":" } else { "" })
                .into_bytes())
        }
        _ => Err(errno::EINVAL),
    }
}
