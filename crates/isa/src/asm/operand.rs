//! Operand syntax of the conformance assembler: registers (`%r3`), integers
//! (decimal or `0x` hex, optionally signed), memory references (`[%r10-8]`)
//! and jump targets (`+3`, `-2`, `label`). Each parser reports exactly what it
//! expected so that the driver only has to add the line.

use super::error::AsmErrorKind as E;
use crate::insn::Reg;

/// Where a jump, local call or function pointer goes, before labels are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// Slot offset relative to the next instruction, as encoded.
    Rel(i64),
    Label(String),
}

/// Split off the first whitespace-delimited word.
pub(super) fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

/// Comma-separated operands; no operands at all for a blank tail.
pub(super) fn split_operands(s: &str) -> Vec<&str> {
    if s.trim().is_empty() {
        Vec::new()
    } else {
        s.split(',').map(str::trim).collect()
    }
}

fn register_digits(s: &str) -> Option<&str> {
    let digits = s.strip_prefix("%r").or_else(|| s.strip_prefix('r'))?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// Whether an operand is written as a register (as opposed to an immediate).
pub(super) fn is_register(s: &str) -> bool {
    let s = s.trim();
    s.starts_with('%') || register_digits(s).is_some()
}

/// `%rN` (the `%` may be omitted), N in 0..=10.
pub(super) fn register(s: &str) -> Result<Reg, E> {
    let s = s.trim();
    let digits = register_digits(s).ok_or_else(|| E::ExpectedRegister(s.to_string()))?;
    match digits.parse::<u8>() {
        Ok(n) if n <= 10 => Ok(n),
        _ => Err(E::RegisterOutOfRange(s.to_string())),
    }
}

/// A signed integer wide enough for every immediate the ISA has (u64 and
/// i64 alike).
fn integer(s: &str) -> Result<i128, E> {
    let t = s.trim();
    let (neg, body) = if let Some(b) = t.strip_prefix('-') {
        (true, b.trim_start())
    } else if let Some(b) = t.strip_prefix('+') {
        (false, b.trim_start())
    } else {
        (false, t)
    };
    let (radix, digits) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => (16, h),
        None => (10, body),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(E::ExpectedImmediate(t.to_string()));
    }
    let too_big = || E::ImmediateOutOfRange {
        text: t.to_string(),
        bits: 64,
    };
    let mag = u128::from_str_radix(digits, radix).map_err(|_| too_big())?;
    if mag > u64::MAX as u128 {
        return Err(too_big());
    }
    Ok(if neg { -(mag as i128) } else { mag as i128 })
}

/// A 32-bit immediate. Values in `i32::MAX+1..=u32::MAX` are taken as their
/// bit pattern (`0xffffffff` is -1), as the conformance suite writes them.
pub(super) fn imm32(s: &str) -> Result<i32, E> {
    let v = integer(s)?;
    if v < i32::MIN as i128 || v > u32::MAX as i128 {
        return Err(E::ImmediateOutOfRange {
            text: s.trim().to_string(),
            bits: 32,
        });
    }
    Ok(v as i32)
}

/// A 64-bit immediate, signed or unsigned spelling.
pub(super) fn imm64(s: &str) -> Result<u64, E> {
    let v = integer(s)?;
    if v < i64::MIN as i128 {
        return Err(E::ImmediateOutOfRange {
            text: s.trim().to_string(),
            bits: 64,
        });
    }
    Ok(v as u64)
}

/// `[%rN]`, `[%rN+off]` or `[%rN-off]`, spaces allowed inside. The offset is
/// a signed 16-bit field; unlike immediates it is never read as a bit pattern
/// because the printers always write it signed.
pub(super) fn memory(s: &str) -> Result<(Reg, i16), E> {
    let t = s.trim();
    let bad = || E::ExpectedMemory(t.to_string());
    let inner = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .ok_or_else(bad)?
        .trim();
    let Some(i) = inner.find(['+', '-']) else {
        return Ok((register(inner)?, 0));
    };
    let reg = register(&inner[..i])?;
    let value = match integer(&inner[i..]) {
        Ok(v) => v,
        Err(E::ExpectedImmediate(_)) => return Err(bad()),
        Err(e) => return Err(e),
    };
    let off = i16::try_from(value).map_err(|_| E::OffsetOutOfRange {
        value: value.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        bits: 16,
    })?;
    Ok((reg, off))
}

fn is_label(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '.')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// A label definition's name must be usable as a jump target.
pub(super) fn label_name(s: &str) -> Result<&str, E> {
    if is_label(s) {
        Ok(s)
    } else {
        Err(E::BadLabel(s.to_string()))
    }
}

/// A jump target: a signed slot offset (`+3`, `-2`, or bare `3`) or a label.
pub(super) fn target(s: &str) -> Result<Target, E> {
    let t = s.trim();
    if t.starts_with(['+', '-']) || t.starts_with(|c: char| c.is_ascii_digit()) {
        let v = integer(t).map_err(|_| E::ExpectedTarget(t.to_string()))?;
        let v = i64::try_from(v).map_err(|_| E::OffsetOutOfRange {
            value: if v < 0 { i64::MIN } else { i64::MAX },
            bits: 32,
        })?;
        Ok(Target::Rel(v))
    } else if is_label(t) {
        Ok(Target::Label(t.to_string()))
    } else {
        Err(E::ExpectedTarget(t.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers() {
        assert_eq!(register("%r0"), Ok(0));
        assert_eq!(register(" %r10 "), Ok(10));
        assert_eq!(register("r7"), Ok(7));
        assert_eq!(register("%r11"), Err(E::RegisterOutOfRange("%r11".into())));
        assert_eq!(
            register("%r999999999999"),
            Err(E::RegisterOutOfRange("%r999999999999".into()))
        );
        assert_eq!(register("5"), Err(E::ExpectedRegister("5".into())));
        assert_eq!(register("%x1"), Err(E::ExpectedRegister("%x1".into())));
        assert_eq!(register(""), Err(E::ExpectedRegister("".into())));
    }

    #[test]
    fn immediates() {
        assert_eq!(imm32("0"), Ok(0));
        assert_eq!(imm32("-1"), Ok(-1));
        assert_eq!(imm32("0xffffffff"), Ok(-1));
        assert_eq!(imm32("0x80000000"), Ok(i32::MIN));
        assert_eq!(imm32("-2147483648"), Ok(i32::MIN));
        assert_eq!(imm32("+0x10"), Ok(16));
        assert_eq!(imm32("0X1F"), Ok(31));
        assert!(matches!(
            imm32("0x100000000"),
            Err(E::ImmediateOutOfRange { bits: 32, .. })
        ));
        assert!(matches!(
            imm32("-2147483649"),
            Err(E::ImmediateOutOfRange { bits: 32, .. })
        ));
        assert_eq!(imm32("0x"), Err(E::ExpectedImmediate("0x".into())));
        assert_eq!(imm32("12a"), Err(E::ExpectedImmediate("12a".into())));
        assert_eq!(imm64("0xFFFFFFFFFFFFFFFF"), Ok(u64::MAX));
        assert_eq!(imm64("-1"), Ok(u64::MAX));
        assert_eq!(imm64("-9223372036854775808"), Ok(1 << 63));
        assert!(matches!(
            imm64("0x10000000000000000"),
            Err(E::ImmediateOutOfRange { bits: 64, .. })
        ));
        assert!(matches!(
            imm64("-9223372036854775809"),
            Err(E::ImmediateOutOfRange { bits: 64, .. })
        ));
        assert!(matches!(
            imm64(&"9".repeat(60)),
            Err(E::ImmediateOutOfRange { bits: 64, .. })
        ));
    }

    #[test]
    fn memory_operands() {
        assert_eq!(memory("[%r1]"), Ok((1, 0)));
        assert_eq!(memory("[%r10-8]"), Ok((10, -8)));
        assert_eq!(memory("[ %r2 + 0x10 ]"), Ok((2, 16)));
        assert_eq!(memory("[%r2-32768]"), Ok((2, i16::MIN)));
        assert_eq!(
            memory("[%r2+32768]"),
            Err(E::OffsetOutOfRange {
                value: 32768,
                bits: 16
            })
        );
        assert_eq!(memory("%r1+2"), Err(E::ExpectedMemory("%r1+2".into())));
        assert_eq!(memory("[%r1+x]"), Err(E::ExpectedMemory("[%r1+x]".into())));
        assert_eq!(
            memory("[%r12+1]"),
            Err(E::RegisterOutOfRange("%r12".into()))
        );
    }

    #[test]
    fn targets() {
        assert_eq!(target("+3"), Ok(Target::Rel(3)));
        assert_eq!(target("-0x10"), Ok(Target::Rel(-16)));
        assert_eq!(target("7"), Ok(Target::Rel(7)));
        assert_eq!(target("fail"), Ok(Target::Label("fail".into())));
        assert_eq!(target(".L1_x"), Ok(Target::Label(".L1_x".into())));
        assert_eq!(target("%r1"), Err(E::ExpectedTarget("%r1".into())));
        assert_eq!(target("+"), Err(E::ExpectedTarget("+".into())));
    }

    #[test]
    fn words_and_operands() {
        assert_eq!(
            split_word("  fetch add [%r1], %r2"),
            ("fetch", "add [%r1], %r2")
        );
        assert_eq!(split_word("exit"), ("exit", ""));
        assert_eq!(split_operands(" %r1 , 5 "), vec!["%r1", "5"]);
        assert!(split_operands("   ").is_empty());
    }
}
