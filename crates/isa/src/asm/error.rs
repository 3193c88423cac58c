//! What can go wrong while assembling, and where.

use crate::decode::DecodeError;
use thiserror::Error;

/// An assembly failure, pinned to the source line that caused it so that a
/// user can find it in a file of hundreds of lines.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{}", render(*.line, .text, .kind))]
pub struct AsmError {
    /// 1-based source line; 0 when the error concerns the whole program.
    pub line: usize,
    /// The offending source line as written (empty when `line` is 0).
    pub text: String,
    /// Why the line was rejected.
    pub kind: AsmErrorKind,
}

/// The reason an [`AsmError`] was raised. Kept as an enum so that tools and
/// tests can react to a class of error without parsing messages.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AsmErrorKind {
    #[error("unknown mnemonic '{0}'")]
    UnknownMnemonic(String),
    #[error("'{mnemonic}' takes {expected} operand(s), found {found}")]
    OperandCount {
        mnemonic: String,
        expected: &'static str,
        found: usize,
    },
    #[error("expected register, found '{0}'")]
    ExpectedRegister(String),
    #[error("register '{0}' does not exist (r0-r10)")]
    RegisterOutOfRange(String),
    #[error("expected immediate, found '{0}'")]
    ExpectedImmediate(String),
    #[error("immediate '{text}' does not fit in {bits} bits")]
    ImmediateOutOfRange { text: String, bits: u8 },
    #[error("expected memory operand like [%r1+8], found '{0}'")]
    ExpectedMemory(String),
    #[error("offset out of range: {value} does not fit in {bits} bits")]
    OffsetOutOfRange { value: i64, bits: u8 },
    #[error("expected jump target (a label, +N or -N), found '{0}'")]
    ExpectedTarget(String),
    #[error("undefined label '{0}'")]
    UndefinedLabel(String),
    #[error("invalid label name '{0}'")]
    BadLabel(String),
    #[error("duplicate label '{name}' (first defined on line {first_line})")]
    DuplicateLabel { name: String, first_line: usize },
    #[error("invalid instruction: {0}")]
    Invalid(DecodeError),
    #[error("program is empty")]
    Empty,
}

fn render(line: usize, text: &str, kind: &AsmErrorKind) -> String {
    if line == 0 {
        kind.to_string()
    } else {
        format!("line {line}: {kind}: `{}`", text.trim())
    }
}
