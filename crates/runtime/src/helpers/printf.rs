//! `bpf_trace_printk`, `bpf_trace_vprintk` and `bpf_snprintf`: the
//! kernel's restricted printf (`bpf_bprintf_prepare`), parsed by
//! `bpfjet_verifier::printf_format` (which the verifier uses to refuse a
//! `bpf_snprintf` format at load, as the kernel does). An invalid format
//! or more conversions than arguments is EINVAL.
//!
//! Plain `%p` prints the raw address (the kernel prints a hashed one).
//! Strings and addresses a program passes are read without faulting: one
//! that cannot be read prints as empty or zeros, like the kernel's
//! fault-tolerant copies.

use super::common::env;
use super::ids;
use super::strings::cstr_len;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use bpfjet_verifier::printf_format::{self, Conv, Piece, Spec};

/// `MAX_BPRINTF_BUF`: trace_printk's line buffer.
const MAX_BPRINTF_BUF: usize = 1024;
/// `MAX_BPRINTF_VARARGS`: bpf_snprintf's argument limit.
const MAX_BPRINTF_VARARGS: u64 = 12;
/// The u64 arguments of `bpf_trace_vprintk` and `bpf_snprintf`.
type Args = [u64; MAX_BPRINTF_VARARGS as usize];
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
    print_line(ctx, a[0], a[1] as u32 as u64, &[a[2], a[3], a[4]])
}

/// `bpf_trace_vprintk(fmt, fmt_size, args, data_len)`: `bpf_trace_printk`
/// with its arguments in an array of u64 (what `bpf_printk` becomes with
/// more than three arguments).
fn trace_vprintk(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let Some((args, n)) = varargs(ctx, a[2], a[3] as u32 as u64)? else {
        return Ok(errno::neg(errno::EINVAL));
    };
    print_line(ctx, a[0], a[1] as u32 as u64, &args[..n])
}

/// Format the `fmt_size` bytes at `fmt_addr` (NUL-terminated within them)
/// into a line of at most the kernel's 1,023 bytes and keep it: in the
/// tracing object's ring (no allocation: the run may be inside the traced
/// process's allocator, tracing/trace_ring.rs), or in the run's own list
/// (XDP runs, test runs). Returns the whole formatted length.
fn print_line(
    ctx: &mut HelperCtx<'_>,
    fmt_addr: u64,
    fmt_size: u64,
    args: &[u64],
) -> Result<u64, Fault> {
    let mut line = [0u8; MAX_BPRINTF_BUF - 1];
    let total = {
        let raw = ctx.read_mem(fmt_addr, fmt_size)?;
        let Some(nul) = raw.iter().position(|&b| b == 0) else {
            return Ok(errno::neg(errno::EINVAL));
        };
        let mut out = Bounded::new(&mut line);
        if let Err(e) = format(&raw[..nul], args, &mut out) {
            return Ok(errno::neg(e));
        }
        out.total
    };
    let line = &line[..total.min(line.len())];
    let e = env(ctx)?;
    match &e.trace_ring {
        Some(ring) => ring.push(line),
        None => e.trace.push(String::from_utf8_lossy(line).into_owned()),
    }
    Ok(total as u64)
}

/// The `data_len / 8` u64 arguments at `data` and how many, or None when
/// `data_len` is not a multiple of 8, exceeds the kernel's limit, or has no
/// array (the helpers' -EINVAL).
fn varargs(ctx: &HelperCtx<'_>, data: u64, data_len: u64) -> Result<Option<(Args, usize)>, Fault> {
    if !data_len.is_multiple_of(8)
        || data_len > MAX_BPRINTF_VARARGS * 8
        || (data_len != 0 && data == 0)
    {
        return Ok(None);
    }
    let mut args: Args = [0; MAX_BPRINTF_VARARGS as usize];
    if data_len == 0 {
        return Ok(Some((args, 0)));
    }
    let raw = ctx.read_mem(data, data_len)?;
    let mut n = 0;
    for (slot, c) in args.iter_mut().zip(raw.chunks_exact(8)) {
        *slot = u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
        n += 1;
    }
    Ok(Some((args, n)))
}

fn snprintf(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (str_addr, str_size, fmt_addr) = (a[0], a[1] as u32 as u64, a[2]);
    let Some((args, n)) = varargs(ctx, a[3], a[4] as u32 as u64)? else {
        return Ok(errno::neg(errno::EINVAL));
    };
    // The output is kept on the stack up to the kernel's line size; a
    // larger destination gets a heap buffer of its size.
    let mut small = [0u8; MAX_BPRINTF_BUF];
    let mut large = Vec::new();
    let keep = (str_size as usize).saturating_sub(1);
    let buf: &mut [u8] = if keep <= small.len() {
        &mut small[..keep]
    } else {
        large.resize(keep, 0);
        &mut large
    };
    let total = {
        let fmt_len = cstr_len(ctx, fmt_addr, MAX_FORMAT)?;
        let fmt = ctx.read_mem(fmt_addr, fmt_len as u64)?;
        let mut out = Bounded::new(buf);
        if let Err(e) = format(fmt, &args[..n], &mut out) {
            return Ok(errno::neg(e));
        }
        out.total
    };
    if str_size > 0 {
        let kept = total.min(keep);
        let dst = ctx.write_mem(str_addr, kept as u64 + 1)?;
        dst[..kept].copy_from_slice(&buf[..kept]);
        dst[kept] = 0;
    }
    Ok(total as u64 + 1)
}

/// Formatted output: the first `buf.len()` bytes are kept, every byte is
/// counted (the return value is the whole length, as `bstr_printf`'s).
struct Bounded<'a> {
    buf: &'a mut [u8],
    len: usize,
    total: usize,
}

impl<'a> Bounded<'a> {
    fn new(buf: &'a mut [u8]) -> Bounded<'a> {
        Bounded {
            buf,
            len: 0,
            total: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        self.total += bytes.len();
    }

    fn fill(&mut self, byte: u8, count: usize) {
        let n = count.min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].fill(byte);
        self.len += n;
        self.total += count;
    }
}

/// A conversion's text before padding: numbers and addresses (the longest,
/// an IPv6 address with colons, is 39 bytes), or a string's bytes.
struct Body {
    buf: [u8; MAX_BPRINTF_BUF],
    len: usize,
}

impl Body {
    fn new() -> Body {
        Body {
            buf: [0; MAX_BPRINTF_BUF],
            len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for Body {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let b = s.as_bytes();
        let n = b.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
        Ok(())
    }
}

/// Pad `body` to the conversion's width into `out`.
fn pad(spec: &Spec, body: &[u8], numeric: bool, out: &mut Bounded<'_>) {
    let fill = spec.width.saturating_sub(body.len());
    if spec.left {
        out.put(body);
        out.fill(b' ', fill);
    } else if spec.zero && numeric {
        // Zeros go between the sign and the digits.
        let sign = usize::from(matches!(body.first(), Some(b'-' | b'+' | b' ')));
        out.put(&body[..sign]);
        out.fill(b'0', fill);
        out.put(&body[sign..]);
    } else {
        out.fill(b' ', fill);
        out.put(body);
    }
}

/// Format `fmt` with `args` into `out`; `Err` is the positive errno (an
/// invalid format, or more conversions than arguments). Allocates
/// nothing: a tracing program's run may be inside the traced process's
/// allocator.
fn format(fmt: &[u8], args: &[u64], out: &mut Bounded<'_>) -> Result<(), u64> {
    let mut next_arg = args.iter().copied();
    let mut missing = false;
    let mut body = Body::new();
    printf_format::parse(fmt, |piece| {
        let (spec, conv) = match piece {
            Piece::Literal(b) => return out.put(&[b]),
            Piece::Arg(spec, conv) => (spec, conv),
        };
        let Some(arg) = next_arg.next() else {
            missing = true;
            return;
        };
        convert(&spec, conv, arg, &mut body);
        let numeric = matches!(
            conv,
            Conv::Signed { .. } | Conv::Unsigned { .. } | Conv::Hex { .. }
        );
        pad(&spec, body.bytes(), numeric, out);
    })
    .map_err(|_| errno::EINVAL)?;
    if missing {
        return Err(errno::EINVAL);
    }
    Ok(())
}

/// One conversion's text into `body`. Addresses (`%s`, `%pks`, `%pI4`...)
/// are values no verifier checked (the kernel reads them with its
/// `_nofault` copies): read without faulting; one that cannot be read
/// prints as an empty string or zeros.
fn convert(spec: &Spec, conv: Conv, arg: u64, body: &mut Body) {
    use std::fmt::Write;
    body.len = 0;
    let int = |wide: bool| if wide { arg } else { u64::from(arg as u32) };
    // Writing into `Body` cannot fail.
    let _ = match conv {
        Conv::Signed { wide } => {
            let v = if wide {
                arg as i64
            } else {
                i64::from(arg as i32)
            };
            let sign = if v < 0 {
                "-"
            } else if spec.plus {
                "+"
            } else if spec.space {
                " "
            } else {
                ""
            };
            write!(body, "{sign}{}", v.unsigned_abs())
        }
        Conv::Unsigned { wide } => write!(body, "{}", int(wide)),
        Conv::Hex { wide, upper: false } => write!(body, "{:x}", int(wide)),
        Conv::Hex { wide, upper: true } => write!(body, "{:X}", int(wide)),
        Conv::Char => {
            // The byte itself (not its UTF-8 encoding).
            body.buf[0] = arg as u8;
            body.len = 1;
            Ok(())
        }
        Conv::Str => {
            body.len = match crate::tracing::user_mem::read_str(arg, &mut body.buf) {
                Ok(n) => n.saturating_sub(1),
                Err(_) => 0,
            };
            Ok(())
        }
        Conv::Pointer => write!(body, "{arg:016x}"),
        Conv::Ipv4 { padded } => {
            let mut b = [0u8; 4];
            let _ = crate::tracing::user_mem::read(arg, &mut b);
            if padded {
                write!(body, "{:03}.{:03}.{:03}.{:03}", b[0], b[1], b[2], b[3])
            } else {
                write!(body, "{}.{}.{}.{}", b[0], b[1], b[2], b[3])
            }
        }
        Conv::Ipv6 { colons } => {
            let mut b = [0u8; 16];
            let _ = crate::tracing::user_mem::read(arg, &mut b);
            for (k, g) in b.chunks(2).enumerate() {
                if k > 0 && colons {
                    let _ = body.write_str(":");
                }
                let _ = write!(body, "{:02x}{:02x}", g[0], g[1]);
            }
            Ok(())
        }
    };
}
