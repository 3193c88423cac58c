//! What a relocation resolves to: the candidate search in the target and
//! the values on both sides (libbpf `bpf_core_calc_relo_insn` and the
//! `bpf_core_calc_*_relo` functions).

use super::kind::CoreKind;
use super::names::essential_name;
use super::spec::{self, members, skip_mods, Spec};
use super::target::CoreTargets;
use crate::btf::{Btf, BtfType};

/// The decision for one relocation (libbpf `struct bpf_core_relo_res`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) orig: u64,
    pub(super) new: u64,
    pub(super) poison: bool,
    pub(super) poison_reason: String,
    /// Check the instruction holds `orig` before patching.
    pub(super) validate: bool,
    /// Load/store size as compiled and in the target (field byte offsets).
    pub(super) orig_sz: u32,
    pub(super) new_sz: u32,
    /// The size change cannot preserve the value (signed or non-integer).
    pub(super) fail_memsz: bool,
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

pub(super) fn resolve(
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
