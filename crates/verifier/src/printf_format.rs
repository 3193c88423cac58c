//! The kernel's restricted printf format (`bpf_bprintf_prepare`), parsed
//! once for both of its users: the verifier, which refuses a
//! `bpf_snprintf` whose constant format the kernel refuses at load
//! ("Invalid format string"), and the runtime's `bpf_trace_printk`,
//! `bpf_trace_vprintk` and `bpf_snprintf`, which format by it.
//!
//! Accepted: `%%`, `%c`, `%s`, `%d %i %u %x %X` with `l` or `ll`, flags
//! `0 + - space` and a width, and `%p` (plain: followed by the end, a space
//! or punctuation), `%px %pK %pB`, `%pks %pus`, `%pi4 %pI4 %pi6 %pI6`. Any
//! other conversion, a character that is neither printable nor a space,
//! or a non-ASCII byte makes the format invalid.

/// Flags and width of a conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    pub left: bool,
    pub zero: bool,
    pub plus: bool,
    pub space: bool,
    pub width: usize,
}

/// What a conversion prints from its argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv {
    /// `%d %i`; `wide` with `l`/`ll` (else the argument's low 32 bits).
    Signed { wide: bool },
    /// `%u`.
    Unsigned { wide: bool },
    /// `%x` (`upper`: `%X`).
    Hex { wide: bool, upper: bool },
    /// `%c`: the argument's low byte.
    Char,
    /// `%s`, `%pks`, `%pus`: the string at the argument.
    Str,
    /// `%p %px %pK %pB`: the argument as 16 hex digits.
    Pointer,
    /// `%pi4` (`padded`: each byte in 3 digits) and `%pI4`: 4 bytes at the
    /// argument.
    Ipv4 { padded: bool },
    /// `%pi6` and `%pI6` (`colons`): 16 bytes at the argument.
    Ipv6 { colons: bool },
}

/// A piece of a format, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// A byte printed as it is (`%%` gives `%`).
    Literal(u8),
    /// A conversion of the next argument.
    Arg(Spec, Conv),
}

/// The format is not one the kernel accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidFormat;

/// Walk `fmt` (without its NUL), giving each piece to `on`; stops at the
/// first invalid byte or conversion. Returns the number of conversions.
pub fn parse(fmt: &[u8], mut on: impl FnMut(Piece)) -> Result<usize, InvalidFormat> {
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut conversions = 0;
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if !c.is_ascii() || !(c.is_ascii_graphic() || c.is_ascii_whitespace()) {
            return Err(InvalidFormat);
        }
        i += 1;
        if c != b'%' {
            on(Piece::Literal(c));
            continue;
        }
        if at(i) == b'%' {
            on(Piece::Literal(b'%'));
            i += 1;
            continue;
        }
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
        let conv = match at(i) {
            b'p' => {
                let (next, after) = (at(i + 1), at(i + 2));
                let (conv, len) = match (next, after) {
                    (0, _) => (Conv::Pointer, 1),
                    (n, _) if n.is_ascii_whitespace() || n.is_ascii_punctuation() => {
                        (Conv::Pointer, 1)
                    }
                    (b'K' | b'x' | b'B', _) => (Conv::Pointer, 2),
                    (b'k' | b'u', b's') => (Conv::Str, 3),
                    (b'i' | b'I', b'4') => (
                        Conv::Ipv4 {
                            padded: next == b'i',
                        },
                        3,
                    ),
                    (b'i' | b'I', b'6') => (
                        Conv::Ipv6 {
                            colons: next == b'I',
                        },
                        3,
                    ),
                    _ => return Err(InvalidFormat),
                };
                i += len;
                conv
            }
            b's' => {
                i += 1;
                Conv::Str
            }
            b'c' => {
                i += 1;
                Conv::Char
            }
            _ => {
                let mut long = 0;
                while at(i) == b'l' && long < 2 {
                    long += 1;
                    i += 1;
                }
                let wide = long > 0;
                let conv = match at(i) {
                    b'd' | b'i' => Conv::Signed { wide },
                    b'u' => Conv::Unsigned { wide },
                    b'x' => Conv::Hex { wide, upper: false },
                    b'X' => Conv::Hex { wide, upper: true },
                    _ => return Err(InvalidFormat),
                };
                i += 1;
                conv
            }
        };
        conversions += 1;
        on(Piece::Arg(spec, conv));
    }
    Ok(conversions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(fmt: &str) -> Result<Vec<Piece>, InvalidFormat> {
        let mut out = Vec::new();
        parse(fmt.as_bytes(), |p| out.push(p))?;
        Ok(out)
    }

    #[test]
    fn conversions_flags_and_widths() {
        let p = pieces("a%-05d%%%llx%pI6 %p").unwrap();
        assert_eq!(p[0], Piece::Literal(b'a'));
        assert_eq!(
            p[1],
            Piece::Arg(
                Spec {
                    left: true,
                    zero: true,
                    width: 5,
                    ..Spec::default()
                },
                Conv::Signed { wide: false }
            )
        );
        assert_eq!(p[2], Piece::Literal(b'%'));
        assert_eq!(
            p[3],
            Piece::Arg(
                Spec::default(),
                Conv::Hex {
                    wide: true,
                    upper: false
                }
            )
        );
        assert_eq!(
            p[4],
            Piece::Arg(Spec::default(), Conv::Ipv6 { colons: true })
        );
        assert_eq!(p[6], Piece::Arg(Spec::default(), Conv::Pointer));
        assert_eq!(parse(b"%s %c %pks %pi4", |_| {}), Ok(4));
    }

    #[test]
    fn what_the_kernel_refuses() {
        for bad in ["%q", "%lq", "%pZ", "%pi5", "%lllld", "tab\x01", "caf\u{e9}"] {
            assert_eq!(parse(bad.as_bytes(), |_| {}), Err(InvalidFormat), "{bad:?}");
        }
    }
}
