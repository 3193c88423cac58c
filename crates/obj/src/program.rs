//! A linked, self-contained program and its debug information.

use bpfjet_isa::RawInsn;

use crate::core::{CoreRelo, UnresolvedCore};
use crate::prog_kind::ProgKind;

#[derive(Clone, Debug)]
pub struct Program {
    /// The entry function's name (what `--prog NAME` selects).
    pub name: String,
    /// The ELF section it came from (`xdp`, `xdp.frags`, `xdp/foo`, ...).
    pub section: String,
    pub kind: ProgKind,
    /// The program followed by every function it reaches, fully relocated
    /// (see the crate documentation for the encoding).
    pub insns: Vec<RawInsn>,
    /// Where each function starts; the first entry is the program itself at slot 0.
    pub func_info: Vec<FuncInfo>,
    /// Source lines from `.BTF.ext`, sorted by slot; empty without BTF.
    pub line_info: Vec<LineInfo>,
    /// CO-RE relocations as compiled, by slot of `insns` (already applied
    /// when the object was loaded; kept to explain the result).
    pub core_relos: Vec<CoreRelo>,
    /// Relocations that found no target: their instruction was poisoned
    /// (see [`crate::core`]) and rejects the program only if reachable.
    pub unresolved_core: Vec<UnresolvedCore>,
}

/// The start of one function in a linked program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    pub slot: usize,
    pub name: String,
    /// The BTF `FUNC` type describing it, when the object has BTF.
    pub btf_type_id: Option<u32>,
}

/// The source line an instruction was compiled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineInfo {
    pub slot: usize,
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// The line's source text as recorded by clang.
    pub source: String,
}

impl Program {
    /// Whether a loader loads it by default: libbpf does not load a
    /// program whose section starts with `?` unless asked
    /// (`bpf_program__set_autoload`).
    pub fn autoload(&self) -> bool {
        !self.section.starts_with('?')
    }

    /// The source line covering `slot`: the closest record at or before it.
    pub fn line_at(&self, slot: usize) -> Option<&LineInfo> {
        let i = self.line_info.partition_point(|l| l.slot <= slot);
        i.checked_sub(1).map(|i| &self.line_info[i])
    }

    /// The unresolved CO-RE relocation that poisoned `slot`, if any: a
    /// rejection at that slot is explained by it rather than by the call
    /// to an unknown helper the poison looks like.
    pub fn unresolved_core_at(&self, slot: usize) -> Option<&UnresolvedCore> {
        self.unresolved_core
            .iter()
            .find(|u| (u.slot..u.slot + u.len).contains(&slot))
    }

    /// The function whose code contains `slot`.
    pub fn func_at(&self, slot: usize) -> Option<&FuncInfo> {
        self.func_info
            .iter()
            .filter(|f| f.slot <= slot)
            .max_by_key(|f| f.slot)
    }
}
