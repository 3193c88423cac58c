//! CO-RE ("compile once, run everywhere") relocations, applied as their own
//! step after linking: [`relocate`] is a pure function of a linked program,
//! its object's BTF and the target BTFs, returning one [`Fixup`] per
//! relocated instruction; [`apply`] writes them. The rules are libbpf's
//! (`relo_core.c`): candidates are target types of the same kind whose
//! names match ignoring `___flavor` suffixes, the access string is followed
//! through the target (anonymous members, arrays), several candidates must
//! agree, and a relocation with no candidate either yields its "does not
//! exist" value or poisons its instruction.
//!
//! A poisoned instruction becomes a call to helper [`POISON_HELPER`], as
//! libbpf encodes it: harmless in dead code, and a verifier rejection (named
//! after the relocation, see [`Program::unresolved_core_at`]) if reachable.

mod calc;
mod compat;
mod context;
mod kind;
mod names;
mod patch;
mod spec;
mod target;

use std::fmt;

use bpfjet_isa::opcode::{CLASS_JMP, JMP_CALL};
use bpfjet_isa::RawInsn;

pub use context::{context_btf, XDP_MD_FIELDS};
pub use kind::CoreKind;
pub use names::essential_name;
pub use target::{CoreTargets, KernelBtf, TargetBtf, VMLINUX_BTF};

use crate::btf::{Btf, BtfType};
use crate::error::ObjError;
use crate::program::Program;
use calc::resolve;
use patch::{patch, Patched};
use spec::Spec;

/// The helper id of a poisoned instruction (libbpf's `0xbad2310`).
pub const POISON_HELPER: i32 = 0xbad2310;

/// One CO-RE relocation of a linked program, as compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreRelo {
    /// The instruction it applies to.
    pub slot: usize,
    /// The local (object BTF) type the access starts from.
    pub type_id: u32,
    /// Indices through members and arrays, `"0:1:2"`.
    pub access: String,
    /// The raw `enum bpf_core_relo_kind`; see [`CoreKind::from_raw`].
    pub kind: u32,
}

/// A relocation no target could satisfy; its instruction was poisoned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnresolvedCore {
    pub slot: usize,
    /// Slots poisoned from `slot` on: 2 for an `lddw`, else 1.
    pub len: usize,
    /// Position of the relocation in [`Program::core_relos`].
    pub index: usize,
    /// What was relocated, e.g. `field byte offset of struct task_struct::pid`.
    pub description: String,
    /// Why it did not resolve.
    pub reason: String,
}

impl UnresolvedCore {
    /// The message without the instruction, for reports that name it already.
    pub fn summary(&self) -> String {
        format!(
            "unresolved CO-RE relocation #{} ({}): {}",
            self.index, self.description, self.reason
        )
    }
}

impl fmt::Display for UnresolvedCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "instruction {}: {}", self.slot, self.summary())
    }
}

/// New contents for the instructions starting at `slot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixup {
    pub slot: usize,
    pub insns: Vec<RawInsn>,
    /// Set when the instructions are poison.
    pub unresolved: Option<UnresolvedCore>,
}

/// Computes the fixups of every CO-RE relocation of `prog` against
/// `targets`. `local` is the BTF of the object `prog` comes from.
pub fn relocate(
    prog: &Program,
    local: &Btf,
    targets: &CoreTargets,
) -> Result<Vec<Fixup>, ObjError> {
    let mut fixups = Vec::with_capacity(prog.core_relos.len());
    for (index, relo) in prog.core_relos.iter().enumerate() {
        let fail = |relocation: String, reason: String| ObjError::Core {
            program: prog.name.clone(),
            section: prog.section.clone(),
            slot: relo.slot,
            index,
            relocation,
            reason,
        };
        let kind = CoreKind::from_raw(relo.kind).ok_or_else(|| {
            fail(
                format!(
                    "kind {} on type [{}], access `{}`",
                    relo.kind, relo.type_id, relo.access
                ),
                "unknown relocation kind".into(),
            )
        })?;
        let spec =
            spec::parse_local(local, relo.type_id, &relo.access, kind).map_err(|reason| {
                fail(
                    format!(
                        "{kind} of type [{}], access `{}`",
                        relo.type_id, relo.access
                    ),
                    reason,
                )
            })?;
        let description = describe(local, &spec, kind);
        let full = || format!("{description}, access `{}`", relo.access);
        let outcome = resolve(local, &spec, kind, targets).map_err(|r| fail(full(), r))?;
        let fixup = patch(&prog.insns, relo.slot, &outcome).map_err(|r| fail(full(), r))?;
        fixups.push(match fixup {
            Patched::Insns(insns) => Fixup {
                slot: relo.slot,
                insns,
                unresolved: None,
            },
            Patched::Poison { len, reason } => Fixup {
                slot: relo.slot,
                insns: vec![poison(); len],
                unresolved: Some(UnresolvedCore {
                    slot: relo.slot,
                    len,
                    index,
                    description,
                    reason,
                }),
            },
        });
    }
    Ok(fixups)
}

/// Writes `fixups` into `prog` (from [`relocate`] on the same program).
pub fn apply(prog: &mut Program, fixups: Vec<Fixup>) {
    for fixup in fixups {
        for (i, insn) in fixup.insns.into_iter().enumerate() {
            if let Some(slot) = prog.insns.get_mut(fixup.slot + i) {
                *slot = insn;
            }
        }
        if let Some(u) = fixup.unresolved {
            prog.unresolved_core.push(u);
        }
    }
}

fn poison() -> RawInsn {
    RawInsn {
        code: CLASS_JMP | JMP_CALL,
        dst: 0,
        src: 0,
        off: 0,
        imm: POISON_HELPER,
    }
}

/// `struct task_struct`, `enum foo`, `typedef bar`.
fn type_title(btf: &Btf, id: u32) -> String {
    let Some(ty) = btf.type_by_id(id) else {
        return format!("[{id}]");
    };
    let word = match ty {
        BtfType::Struct { .. } => "struct ",
        BtfType::Union { .. } => "union ",
        BtfType::Enum { .. } => "enum ",
        BtfType::Typedef { .. } => "typedef ",
        BtfType::Fwd { union: true, .. } => "union ",
        BtfType::Fwd { union: false, .. } => "struct ",
        _ => "",
    };
    let name = if ty.name().is_empty() {
        format!("<anon [{id}]>")
    } else {
        ty.name().to_string()
    };
    format!("{word}{name}")
}

/// `field byte offset of struct task_struct::pid`, `enum value of enum e::V`.
fn describe(btf: &Btf, spec: &Spec, kind: CoreKind) -> String {
    let mut text = format!("{kind} of {}", type_title(btf, spec.root_id));
    if kind.is_enumval() {
        text += &format!("::{}", spec.acc[0].name.as_deref().unwrap_or("?"));
    } else if kind.is_field() {
        if spec.raw[0] != 0 {
            text += &format!("[{}]", spec.raw[0]);
        }
        let mut first = true;
        for acc in &spec.acc[1..] {
            match &acc.name {
                Some(name) => {
                    text += if first { "::" } else { "." };
                    text += name;
                }
                None => text += &format!("[{}]", acc.idx),
            }
            first = false;
        }
    }
    text
}
