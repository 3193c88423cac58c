//! Rejections: which instruction, what it is, which rule it broke and the
//! register state that broke it.

use serde::Serialize;
use std::fmt;

/// Why a program was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyError {
    /// Slot of the offending instruction (`None` for whole-program problems).
    pub pc: Option<usize>,
    /// The instruction, disassembled.
    pub insn_text: String,
    /// The source line (`file:line: text`) from BTF line info, when known.
    pub line: Option<String>,
    /// A short stable code, e.g. `pkt_out_of_range`, `uninit_stack_read`.
    pub rule: &'static str,
    /// What is wrong, in words.
    pub message: String,
    /// The registers (and stack) of the current frame at the failure.
    pub state: String,
}

impl VerifyError {
    pub fn new(rule: &'static str, message: impl Into<String>) -> VerifyError {
        VerifyError {
            pc: None,
            insn_text: String::new(),
            line: None,
            rule,
            message: message.into(),
            state: String::new(),
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pc {
            Some(pc) => writeln!(f, "program rejected at insn {pc}: {}", self.message)?,
            None => writeln!(f, "program rejected: {}", self.message)?,
        }
        if let Some(line) = &self.line {
            writeln!(f, "  source: {line}")?;
        }
        if !self.insn_text.is_empty() {
            writeln!(f, "  insn:   {}", self.insn_text)?;
        }
        writeln!(f, "  rule:   {}", self.rule)?;
        if !self.state.is_empty() {
            for (i, l) in self.state.lines().enumerate() {
                if i == 0 {
                    writeln!(f, "  state:  {l}")?;
                } else {
                    writeln!(f, "          {l}")?;
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

/// A rejection inside the analysis, before the driver adds the location.
pub(crate) type VResult<T> = Result<T, VerifyError>;

pub(crate) fn err<T>(rule: &'static str, message: impl Into<String>) -> VResult<T> {
    Err(VerifyError::new(rule, message))
}
