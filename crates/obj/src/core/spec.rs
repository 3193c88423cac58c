//! Access specifications: what a relocation's access string (`"0:1:2"`)
//! denotes in the local BTF, and the same path found in a target BTF.
//!
//! The first index steps over the root pointer as an array; each further
//! index picks a member (of a struct/union) or an element (of an array).
//! Named members and array elements become accessors; anonymous members
//! only add their offset, so the path can be found in a target whose
//! anonymous nesting differs (libbpf `bpf_core_parse_spec` semantics).

use super::compat::{fields_compat, types_compat, types_match};
use super::kind::CoreKind;
use super::names::same_essential;
use crate::btf::{Btf, BtfType, Member};

/// libbpf's `BPF_CORE_SPEC_MAX_LEN`.
const MAX_LEN: usize = 64;
/// Nesting depth bound for the recursive type comparisons.
pub(super) const MAX_DEPTH: u32 = 32;

/// One step of a path: member `idx` of composite `type_id` (named), or
/// element `idx` of an array whose element type is `type_id` (unnamed).
#[derive(Clone, Debug)]
pub(super) struct Accessor {
    pub type_id: u32,
    pub idx: u32,
    pub name: Option<String>,
}

#[derive(Clone, Debug)]
pub(super) struct Spec {
    pub root_id: u32,
    pub acc: Vec<Accessor>,
    pub raw: Vec<u32>,
    pub bit_offset: u64,
}

/// The type `id` names once typedefs and qualifiers are skipped.
pub(super) fn skip_mods(btf: &Btf, id: u32) -> Result<(u32, &BtfType), String> {
    let resolved = btf
        .resolve(id)
        .ok_or_else(|| format!("type [{id}] does not exist or its typedef chain is cyclic"))?;
    let ty = btf
        .type_by_id(resolved)
        .ok_or_else(|| format!("type [{resolved}] does not exist"))?;
    Ok((resolved, ty))
}

pub(super) fn members(ty: &BtfType) -> Option<&[Member]> {
    match ty {
        BtfType::Struct { members, .. } | BtfType::Union { members, .. } => Some(members),
        _ => None,
    }
}

fn size(btf: &Btf, id: u32) -> Result<u64, String> {
    btf.size_of(id)
        .ok_or_else(|| format!("type [{id}] has no size"))
}

/// The bit offset of element `idx` of `size`-byte elements, checked: sizes
/// in malformed BTF can be anything.
fn elem_bits(idx: u32, size: u64) -> Result<u64, String> {
    (idx as u64)
        .checked_mul(size)
        .and_then(|b| b.checked_mul(8))
        .ok_or_else(|| "offset overflows".to_string())
}

fn add_bits(spec: &mut Spec, bits: u64) -> Result<(), String> {
    spec.bit_offset = spec
        .bit_offset
        .checked_add(bits)
        .ok_or("offset overflows")?;
    Ok(())
}

/// An array member at the end of its struct with no elements (`x[]`).
fn is_flex(btf: &Btf, prev: Option<&Accessor>, nelems: u32) -> bool {
    let Some(prev) = prev.filter(|p| p.name.is_some() && nelems == 0) else {
        return false;
    };
    btf.type_by_id(prev.type_id)
        .and_then(members)
        .is_some_and(|m| prev.idx as usize + 1 == m.len())
}

fn parse_indices(access: &str) -> Result<Vec<u32>, String> {
    if access.is_empty() {
        return Err("empty access string".into());
    }
    let raw = access
        .split(':')
        .map(|part| {
            part.parse::<u32>()
                .map_err(|_| format!("access string `{access}` is not a list of indices"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if raw.len() > MAX_LEN {
        return Err(format!("access string has more than {MAX_LEN} indices"));
    }
    Ok(raw)
}

/// The local spec of a relocation; errors are malformed records.
pub(super) fn parse_local(
    btf: &Btf,
    type_id: u32,
    access: &str,
    kind: CoreKind,
) -> Result<Spec, String> {
    let raw = parse_indices(access)?;
    if type_id == 0 {
        return Err("relocation of type [0] (void)".into());
    }
    btf.type_by_id(type_id)
        .ok_or_else(|| format!("local type [{type_id}] does not exist"))?;
    let mut spec = Spec {
        root_id: type_id,
        acc: Vec::new(),
        raw: raw.clone(),
        bit_offset: 0,
    };
    if kind.is_type() {
        if access != "0" {
            return Err(format!(
                "type relocation with access string `{access}`, not `0`"
            ));
        }
        return Ok(spec);
    }
    let (mut id, root) = skip_mods(btf, type_id)?;
    spec.acc.push(Accessor {
        type_id: id,
        idx: raw[0],
        name: None,
    });
    if kind.is_enumval() {
        let BtfType::Enum { values, .. } = root else {
            return Err(format!(
                "enum value relocation of non-enum type [{type_id}]"
            ));
        };
        let value = values
            .get(raw[0] as usize)
            .filter(|_| raw.len() == 1)
            .ok_or_else(|| format!("access `{access}` names no enumerator of type [{type_id}]"))?;
        spec.acc[0].name = Some(value.0.clone());
        return Ok(spec);
    }
    spec.bit_offset = elem_bits(raw[0], size(btf, id)?)?;
    for &idx in &raw[1..] {
        let (skipped, ty) = skip_mods(btf, id)?;
        id = skipped;
        if let Some(members) = members(ty) {
            let m = members
                .get(idx as usize)
                .ok_or_else(|| format!("member {idx} of type [{id}] does not exist"))?;
            spec.bit_offset += m.bit_offset as u64;
            if !m.name.is_empty() {
                spec.acc.push(Accessor {
                    type_id: id,
                    idx,
                    name: Some(m.name.clone()),
                });
            }
            id = m.type_id;
        } else if let BtfType::Array { elem, nelems, .. } = ty {
            let (elem_id, _) = skip_mods(btf, *elem)?;
            if !is_flex(btf, spec.acc.last(), *nelems) && idx >= *nelems {
                return Err(format!(
                    "index {idx} is past the end of array type [{id}] ({nelems} elements)"
                ));
            }
            spec.acc.push(Accessor {
                type_id: elem_id,
                idx,
                name: None,
            });
            add_bits(&mut spec, elem_bits(idx, size(btf, elem_id)?)?)?;
            id = elem_id;
        } else {
            return Err(format!(
                "access index {idx} steps into type [{id}], which is neither a struct, union nor array"
            ));
        }
    }
    Ok(spec)
}

/// Whether a target type `targ_id` fits the local spec; the target spec
/// when it does. `Err` is malformed BTF, not a mismatch.
pub(super) fn match_target(
    local: &Spec,
    lbtf: &Btf,
    kind: CoreKind,
    tbtf: &Btf,
    targ_id: u32,
) -> Result<Option<Spec>, String> {
    let mut targ = Spec {
        root_id: targ_id,
        acc: Vec::new(),
        raw: Vec::new(),
        bit_offset: 0,
    };
    if kind.is_type() {
        let ok = if kind == CoreKind::TypeMatches {
            types_match(lbtf, local.root_id, tbtf, targ_id, false, MAX_DEPTH)?
        } else {
            types_compat(lbtf, local.root_id, tbtf, targ_id, MAX_DEPTH)?
        };
        return Ok(ok.then_some(targ));
    }
    let local_name = local.acc[0].name.as_deref().unwrap_or_default();
    if kind.is_enumval() {
        let (id, ty) = skip_mods(tbtf, targ_id)?;
        let BtfType::Enum { values, .. } = ty else {
            return Ok(None);
        };
        let Some(idx) = values
            .iter()
            .position(|(n, _)| same_essential(n, local_name))
        else {
            return Ok(None);
        };
        targ.acc.push(Accessor {
            type_id: id,
            idx: idx as u32,
            name: Some(values[idx].0.clone()),
        });
        return Ok(Some(targ));
    }
    let mut id = targ_id;
    for (i, lacc) in local.acc.iter().enumerate() {
        if i > 0 {
            if lacc.name.is_some() {
                match match_member(lbtf, lacc, tbtf, id, &mut targ, MAX_DEPTH)? {
                    Some(next) => id = next,
                    None => return Ok(None),
                }
                continue;
            }
            let (_, ty) = skip_mods(tbtf, id)?;
            let BtfType::Array { elem, nelems, .. } = ty else {
                return Ok(None);
            };
            if !is_flex(tbtf, targ.acc.last(), *nelems) && lacc.idx >= *nelems {
                return Ok(None);
            }
            id = skip_mods(tbtf, *elem)?.0;
        }
        if targ.raw.len() == MAX_LEN {
            return Err("target path is too deep".into());
        }
        targ.acc.push(Accessor {
            type_id: id,
            idx: lacc.idx,
            name: None,
        });
        targ.raw.push(lacc.idx);
        add_bits(&mut targ, elem_bits(lacc.idx, size(tbtf, id)?)?)?;
    }
    Ok(Some(targ))
}

/// Finds the member named like `lacc` in composite `targ_id`, descending
/// into anonymous members; pushes its accessor and returns its type.
fn match_member(
    lbtf: &Btf,
    lacc: &Accessor,
    tbtf: &Btf,
    targ_id: u32,
    spec: &mut Spec,
    depth: u32,
) -> Result<Option<u32>, String> {
    if depth == 0 {
        return Err("anonymous members nest too deeply".into());
    }
    let local_member = lbtf
        .type_by_id(lacc.type_id)
        .and_then(members)
        .and_then(|m| m.get(lacc.idx as usize))
        .ok_or("local accessor names no member")?;
    let (targ_id, targ_ty) = skip_mods(tbtf, targ_id)?;
    let Some(targ_members) = members(targ_ty) else {
        return Ok(None);
    };
    for (i, m) in targ_members.iter().enumerate() {
        if spec.raw.len() == MAX_LEN {
            return Err("target path is too deep".into());
        }
        spec.bit_offset += m.bit_offset as u64;
        spec.raw.push(i as u32);
        if m.name.is_empty() {
            if let Some(found) = match_member(lbtf, lacc, tbtf, m.type_id, spec, depth - 1)? {
                return Ok(Some(found));
            }
        } else if m.name == local_member.name {
            if !fields_compat(lbtf, local_member.type_id, tbtf, m.type_id, MAX_DEPTH)? {
                spec.raw.pop();
                spec.bit_offset -= m.bit_offset as u64;
                return Ok(None);
            }
            spec.acc.push(Accessor {
                type_id: targ_id,
                idx: i as u32,
                name: Some(m.name.clone()),
            });
            return Ok(Some(m.type_id));
        }
        spec.bit_offset -= m.bit_offset as u64;
        spec.raw.pop();
    }
    Ok(None)
}
