//! Disassembler (placeholder until the full printer lands).
use crate::insn::Insn;

/// Format one instruction; `pc` enables absolute jump targets in comments.
pub fn format_insn(insn: &Insn, _pc: Option<usize>) -> String {
    format!("{insn:?}")
}
