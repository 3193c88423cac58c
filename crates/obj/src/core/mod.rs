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

mod context;
mod kind;
mod names;
mod spec;
mod target;

use std::fmt;

use bpfjet_isa::opcode::{
    CLASS_ALU, CLASS_ALU64, CLASS_JMP, CLASS_LD, CLASS_LDX, CLASS_ST, CLASS_STX, JMP_CALL, LDDW,
    SIZE_B, SIZE_DW, SIZE_H, SIZE_W, SRC_X,
};
use bpfjet_isa::RawInsn;

pub use context::{context_btf, XDP_MD_FIELDS};
pub use kind::CoreKind;
pub use names::essential_name;
pub use target::{CoreTargets, KernelBtf, TargetBtf, VMLINUX_BTF};

use crate::btf::{Btf, BtfType};
use crate::error::ObjError;
use crate::program::Program;
use spec::{members, skip_mods, Spec};

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

/// The decision for one relocation (libbpf `struct bpf_core_relo_res`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Outcome {
    orig: u64,
    new: u64,
    poison: bool,
    poison_reason: String,
    /// Check the instruction holds `orig` before patching.
    validate: bool,
    /// Load/store size as compiled and in the target (field byte offsets).
    orig_sz: u32,
    new_sz: u32,
    /// The size change cannot preserve the value (signed or non-integer).
    fail_memsz: bool,
}

enum Calc {
    /// No target: the instruction must be poisoned.
    Poison,
    Fatal(String),
}

impl From<String> for Calc {
    fn from(s: String) -> Calc {
        Calc::Fatal(s)
    }
}

impl From<&str> for Calc {
    fn from(s: &str) -> Calc {
        Calc::Fatal(s.to_string())
    }
}

/// A value computed from one side (local or target) of a relocation.
#[derive(Default)]
struct Value {
    val: u64,
    validate: bool,
    /// (byte size, type id) of the accessed field, for load/store sizing.
    mem: Option<(u32, u32)>,
}

fn resolve(
    local: &Btf,
    spec: &Spec,
    kind: CoreKind,
    targets: &CoreTargets,
) -> Result<Outcome, String> {
    if kind == CoreKind::TypeIdLocal {
        return Ok(Outcome {
            orig: spec.root_id as u64,
            new: spec.root_id as u64,
            ..Outcome::default()
        });
    }
    let local_ty = local
        .type_by_id(spec.root_id)
        .ok_or("local type does not exist")?;
    let essential = essential_name(local_ty.name());
    if essential.is_empty() {
        return Err("relocations against anonymous types are not supported (as in libbpf)".into());
    }
    // Target type ids name kernel types (libbpf resolves them in vmlinux):
    // bpfjet's context BTF only stands in for layouts.
    let kernel_ids = kind == CoreKind::TypeIdTarget && targets.kernel.is_ok();
    let mut target = targets.context;
    let mut cands: Vec<u32> = if kernel_ids {
        Vec::new()
    } else {
        target.candidates(local_ty, essential).collect()
    };
    if cands.is_empty() {
        target = targets.kernel.map_err(str::to_string)?;
        cands = target.candidates(local_ty, essential).collect();
    }
    let tbtf = target.btf();
    let mut chosen: Option<(Outcome, Spec)> = None;
    for id in cands {
        let Some(tspec) = spec::match_target(spec, local, kind, tbtf, id)? else {
            continue;
        };
        let outcome = calc(local, spec, tbtf, Some(&tspec), kind)?;
        match &chosen {
            None => chosen = Some((outcome, tspec)),
            Some((first, first_spec)) => {
                if kind.is_field() && first_spec.bit_offset != tspec.bit_offset {
                    return Err(format!(
                        "field offset ambiguity in {}: candidates [{}] and [{id}] put it at bits {} and {}",
                        target.origin(),
                        first_spec.root_id,
                        first_spec.bit_offset,
                        tspec.bit_offset
                    ));
                }
                if first.poison != outcome.poison || first.new != outcome.new {
                    return Err(format!(
                        "relocation decision ambiguity in {}: candidates [{}] and [{id}] give {} and {}",
                        target.origin(),
                        first_spec.root_id,
                        first.new,
                        outcome.new
                    ));
                }
            }
        }
    }
    match chosen {
        Some((outcome, _)) => Ok(outcome),
        None => {
            let mut outcome = calc(local, spec, tbtf, None, kind)?;
            if outcome.poison {
                outcome.poison_reason = format!("no matching target in {}", target.origin());
            }
            Ok(outcome)
        }
    }
}

fn calc(
    local: &Btf,
    lspec: &Spec,
    tbtf: &Btf,
    tspec: Option<&Spec>,
    kind: CoreKind,
) -> Result<Outcome, String> {
    let side = |btf: &Btf, spec: Option<&Spec>| -> Result<Value, Calc> {
        if kind.is_field() {
            field_value(btf, spec, kind)
        } else if kind.is_type() {
            type_value(btf, spec, kind)
        } else {
            enumval_value(btf, spec, kind)
        }
    };
    let orig = match side(local, Some(lspec)) {
        Ok(v) => v,
        Err(Calc::Fatal(r)) => return Err(r),
        Err(Calc::Poison) => return Err("the local type does not resolve".into()),
    };
    let mut outcome = Outcome {
        orig: orig.val,
        validate: orig.validate,
        ..Outcome::default()
    };
    let new = match side(tbtf, tspec) {
        Ok(v) => v,
        Err(Calc::Poison) => {
            outcome.poison = true;
            return Ok(outcome);
        }
        Err(Calc::Fatal(r)) => return Err(r),
    };
    outcome.new = new.val;
    if let (Some((osz, oid)), Some((nsz, nid))) = (orig.mem, new.mem) {
        outcome.orig_sz = osz;
        outcome.new_sz = nsz;
        if osz != nsz {
            // Narrowing a load keeps the value only for pointers (32-bit
            // kernel pointers read as zero-extended integers) and unsigned
            // integers (zero extension).
            let (ot, nt) = (local.type_by_id(oid), tbtf.type_by_id(nid));
            let unsigned = |t: Option<&BtfType>| matches!(t, Some(BtfType::Int { encoding, .. }) if (encoding >> 24) & 1 == 0);
            let ptr = |t: Option<&BtfType>| matches!(t, Some(BtfType::Ptr { .. }));
            outcome.fail_memsz = !((ptr(ot) && ptr(nt)) || (unsigned(ot) && unsigned(nt)));
        }
    }
    Ok(outcome)
}

fn field_value(btf: &Btf, spec: Option<&Spec>, kind: CoreKind) -> Result<Value, Calc> {
    if kind == CoreKind::FieldExists {
        return Ok(Value {
            val: spec.is_some() as u64,
            validate: true,
            mem: None,
        });
    }
    let spec = spec.ok_or(Calc::Poison)?;
    let size = |id: u32| {
        btf.size_of(id)
            .ok_or_else(|| format!("type [{id}] has no size"))
    };
    let acc = spec.acc.last().ok_or("empty access path")?;
    if acc.name.is_none() {
        // The path ends at an array element (or the root itself).
        let sz = size(acc.type_id)?;
        return match kind {
            CoreKind::FieldByteOffset => Ok(Value {
                val: spec.bit_offset / 8,
                validate: true,
                mem: Some((sz as u32, acc.type_id)),
            }),
            CoreKind::FieldByteSize => Ok(Value {
                val: sz,
                validate: true,
                mem: None,
            }),
            _ => Err(Calc::Fatal(format!(
                "{kind} cannot be applied to an array element"
            ))),
        };
    }
    let member = btf
        .type_by_id(acc.type_id)
        .and_then(members)
        .and_then(|m| m.get(acc.idx as usize))
        .ok_or("accessor names no member")?;
    let (field_id, field_ty) = skip_mods(btf, member.type_id)?;
    let bit_off = spec.bit_offset;
    let mut bit_sz = member.bitfield_size as u64;
    let bitfield = bit_sz > 0;
    let (byte_sz, byte_off) = if bitfield {
        let mut byte_sz = size(field_id)?;
        if byte_sz == 0 {
            return Err(Calc::Fatal("bitfield of a zero-sized type".into()));
        }
        let mut byte_off = bit_off / 8 / byte_sz * byte_sz;
        // The smallest load holding the whole bitfield.
        while bit_off + bit_sz - byte_off * 8 > byte_sz.saturating_mul(8) {
            if byte_sz >= 8 {
                return Err(Calc::Fatal(
                    "bitfield cannot be read with a 64-bit load".into(),
                ));
            }
            byte_sz *= 2;
            byte_off = bit_off / 8 / byte_sz * byte_sz;
        }
        (byte_sz, byte_off)
    } else {
        let sz = size(field_id)?;
        bit_sz = sz.saturating_mul(8);
        (sz, bit_off / 8)
    };
    // Bitfield layouts are ambiguous enough that the compiler's values are
    // not checked, except those that cannot differ.
    let mut value = Value {
        val: 0,
        validate: !bitfield,
        mem: None,
    };
    match kind {
        CoreKind::FieldByteOffset => {
            value.val = byte_off;
            if !bitfield {
                value.mem = Some((byte_sz as u32, field_id));
            }
        }
        CoreKind::FieldByteSize => value.val = byte_sz,
        CoreKind::FieldSigned => {
            value.val = match field_ty {
                BtfType::Enum { signed, .. } => *signed as u64,
                BtfType::Int { encoding, .. } => ((encoding >> 24) & 1) as u64,
                _ => 0,
            };
            value.validate = true;
        }
        // Little-endian: shift the field's top bit to bit 63.
        CoreKind::FieldLshiftU64 => {
            let end = bit_off
                .wrapping_add(bit_sz)
                .wrapping_sub(byte_off.wrapping_mul(8));
            value.val = 64u64.wrapping_sub(end) & 0xffff_ffff
        }
        CoreKind::FieldRshiftU64 => {
            value.val = 64u64.wrapping_sub(bit_sz) & 0xffff_ffff;
            value.validate = true;
        }
        _ => return Err(Calc::Fatal(format!("{kind} is not a field relocation"))),
    }
    Ok(value)
}

fn type_value(btf: &Btf, spec: Option<&Spec>, kind: CoreKind) -> Result<Value, Calc> {
    let mut value = Value {
        val: 0,
        validate: true,
        mem: None,
    };
    // A missing type is not an error for type relocations: its values are 0.
    let Some(spec) = spec else {
        return Ok(value);
    };
    match kind {
        CoreKind::TypeIdTarget => {
            value.val = spec.root_id as u64;
            // Type ids change when objects are linked; do not check them.
            value.validate = false;
        }
        CoreKind::TypeExists | CoreKind::TypeMatches => value.val = 1,
        CoreKind::TypeSize => {
            value.val = btf
                .size_of(spec.root_id)
                .ok_or_else(|| format!("type [{}] has no size", spec.root_id))?
        }
        _ => return Err(Calc::Fatal(format!("{kind} is not a type relocation"))),
    }
    Ok(value)
}

fn enumval_value(btf: &Btf, spec: Option<&Spec>, kind: CoreKind) -> Result<Value, Calc> {
    let mut value = Value {
        val: 0,
        validate: true,
        mem: None,
    };
    match kind {
        CoreKind::EnumvalExists => value.val = spec.is_some() as u64,
        CoreKind::EnumvalValue => {
            let acc = &spec.ok_or(Calc::Poison)?.acc[0];
            let Some(BtfType::Enum { values, .. }) = btf.type_by_id(acc.type_id) else {
                return Err(Calc::Fatal("enumerator accessor is not an enum".into()));
            };
            value.val = values
                .get(acc.idx as usize)
                .ok_or("enumerator index out of range")?
                .1 as u64;
        }
        _ => return Err(Calc::Fatal(format!("{kind} is not an enum relocation"))),
    }
    Ok(value)
}

enum Patched {
    Insns(Vec<RawInsn>),
    Poison { len: usize, reason: String },
}

fn size_bytes(code: u8) -> u32 {
    match code & 0x18 {
        SIZE_W => 4,
        SIZE_H => 2,
        SIZE_B => 1,
        _ => 8,
    }
}

fn size_code(bytes: u32) -> Option<u8> {
    Some(match bytes {
        4 => SIZE_W,
        2 => SIZE_H,
        1 => SIZE_B,
        8 => SIZE_DW,
        _ => return None,
    })
}

/// libbpf `bpf_core_patch_insn`: the new form of the instruction at `slot`.
fn patch(insns: &[RawInsn], slot: usize, out: &Outcome) -> Result<Patched, String> {
    let insn = *insns
        .get(slot)
        .ok_or_else(|| format!("instruction {slot} is past the end of the program"))?;
    let lddw = insn.code == LDDW;
    let poison = |reason: String| Patched::Poison {
        len: if lddw { 2 } else { 1 },
        reason,
    };
    if out.poison {
        return Ok(poison(out.poison_reason.clone()));
    }
    let unexpected = |got: u64| {
        format!(
            "instruction holds {got}, expected {} (to become {})",
            out.orig, out.new
        )
    };
    let mut new = insn;
    match insn.code & 0x07 {
        CLASS_ALU | CLASS_ALU64 => {
            if insn.code & SRC_X != 0 {
                return Err("ALU instruction with a register operand cannot be relocated".into());
            }
            let got = insn.imm as i64 as u64;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            new.imm = out.new as i32;
            Ok(Patched::Insns(vec![new]))
        }
        CLASS_LDX | CLASS_ST | CLASS_STX => {
            let got = insn.off as i64 as u64;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            if out.new > i16::MAX as u64 {
                return Err(format!("offset {} does not fit an instruction", out.new));
            }
            if out.fail_memsz {
                return Ok(poison(format!(
                    "the field is {} bytes in the target and {} as compiled, and not an unsigned \
                     integer or pointer on both sides: access it with its own type and size",
                    out.new_sz, out.orig_sz
                )));
            }
            new.off = out.new as i16;
            if out.new_sz != out.orig_sz {
                let have = size_bytes(insn.code);
                if have != out.orig_sz {
                    return Err(format!(
                        "the instruction accesses {have} bytes, the field as compiled is {}",
                        out.orig_sz
                    ));
                }
                let size = size_code(out.new_sz)
                    .ok_or_else(|| format!("no load/store of {} bytes", out.new_sz))?;
                new.code = (insn.code & !0x18) | size;
            }
            Ok(Patched::Insns(vec![new]))
        }
        CLASS_LD if lddw => {
            let next = *insns.get(slot + 1).ok_or("lddw without its second half")?;
            if insn.src != 0
                || insn.off != 0
                || next.code != 0
                || next.dst != 0
                || next.src != 0
                || next.off != 0
            {
                return Err("lddw has an unexpected form for a CO-RE relocation".into());
            }
            let got = insn.imm as u32 as u64 | (next.imm as u32 as u64) << 32;
            if out.validate && got != out.orig {
                return Err(unexpected(got));
            }
            let mut second = next;
            new.imm = out.new as u32 as i32;
            second.imm = (out.new >> 32) as u32 as i32;
            Ok(Patched::Insns(vec![new, second]))
        }
        _ => Err(format!(
            "instruction with opcode {:#04x} cannot carry a CO-RE relocation",
            insn.code
        )),
    }
}
