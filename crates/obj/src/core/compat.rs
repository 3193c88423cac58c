//! Type compatibility as CO-RE decides it: whether a local field or type
//! can stand for a target one (libbpf `bpf_core_fields_are_compat`,
//! `bpf_core_types_are_compat`, `bpf_core_types_match`).

use super::names::same_essential;
use super::spec::{members, skip_mods};
use crate::btf::{Btf, BtfType};

fn int_offset(ty: &BtfType) -> u32 {
    match ty {
        BtfType::Int { encoding, .. } => (encoding >> 16) & 0xff,
        _ => 0,
    }
}

fn same_kind(a: &BtfType, b: &BtfType) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Names equal ignoring flavors, or either anonymous.
fn loose_names(a: &str, b: &str) -> bool {
    a.is_empty() || b.is_empty() || same_essential(a, b)
}

/// libbpf `bpf_core_fields_are_compat`: can a field of local type `lid` be
/// read as a field of target type `tid`?
pub(super) fn fields_compat(
    lbtf: &Btf,
    lid: u32,
    tbtf: &Btf,
    tid: u32,
    depth: u32,
) -> Result<bool, String> {
    if depth == 0 {
        return Err("array nesting is too deep".into());
    }
    let (_, lt) = skip_mods(lbtf, lid)?;
    let (_, tt) = skip_mods(tbtf, tid)?;
    if members(lt).is_some() && members(tt).is_some() {
        return Ok(true);
    }
    if !same_kind(lt, tt) {
        return Ok(false);
    }
    Ok(match (lt, tt) {
        (BtfType::Ptr { .. }, _) | (BtfType::Float { .. }, _) => true,
        (BtfType::Fwd { .. } | BtfType::Enum { .. }, _) => loose_names(lt.name(), tt.name()),
        (BtfType::Int { .. }, _) => int_offset(lt) == 0 && int_offset(tt) == 0,
        (BtfType::Array { elem: le, .. }, BtfType::Array { elem: te, .. }) => {
            fields_compat(lbtf, *le, tbtf, *te, depth - 1)?
        }
        _ => false,
    })
}

/// libbpf `bpf_core_types_are_compat` (type exists/size/id relocations).
pub(super) fn types_compat(
    lbtf: &Btf,
    lid: u32,
    tbtf: &Btf,
    tid: u32,
    depth: u32,
) -> Result<bool, String> {
    if depth == 0 {
        return Err("type nesting is too deep".into());
    }
    let (_, lt) = skip_mods(lbtf, lid)?;
    let (_, tt) = skip_mods(tbtf, tid)?;
    if !same_kind(lt, tt) {
        return Ok(false);
    }
    Ok(match (lt, tt) {
        (BtfType::Void, _)
        | (BtfType::Struct { .. }, _)
        | (BtfType::Union { .. }, _)
        | (BtfType::Enum { .. }, _)
        | (BtfType::Fwd { .. }, _) => true,
        (BtfType::Int { .. }, _) => int_offset(lt) == 0 && int_offset(tt) == 0,
        (BtfType::Ptr { target: l }, BtfType::Ptr { target: t }) => {
            types_compat(lbtf, *l, tbtf, *t, depth - 1)?
        }
        (BtfType::Array { elem: l, .. }, BtfType::Array { elem: t, .. }) => {
            types_compat(lbtf, *l, tbtf, *t, depth - 1)?
        }
        (
            BtfType::FuncProto {
                ret: lr,
                params: lp,
            },
            BtfType::FuncProto {
                ret: tr,
                params: tp,
            },
        ) => {
            if lp.len() != tp.len() {
                return Ok(false);
            }
            for (l, t) in lp.iter().zip(tp) {
                if !types_compat(lbtf, l.type_id, tbtf, t.type_id, depth - 1)? {
                    return Ok(false);
                }
            }
            types_compat(lbtf, *lr, tbtf, *tr, depth - 1)?
        }
        _ => false,
    })
}

/// libbpf `bpf_core_names_match`: an anonymous target matches only an
/// anonymous local; otherwise names equal ignoring flavors.
fn names_match(local: &str, targ: &str) -> bool {
    if targ.is_empty() {
        return local.is_empty();
    }
    same_essential(local, targ)
}

/// libbpf `bpf_core_types_match` (`bpf_core_type_matches()`): a stricter,
/// layout-aware comparison.
pub(super) fn types_match(
    lbtf: &Btf,
    lid: u32,
    tbtf: &Btf,
    tid: u32,
    behind_ptr: bool,
    depth: u32,
) -> Result<bool, String> {
    if depth == 0 {
        return Err("type nesting is too deep".into());
    }
    let (_, lt) = skip_mods(lbtf, lid)?;
    let (_, tt) = skip_mods(tbtf, tid)?;
    if !names_match(lt.name(), tt.name()) {
        return Ok(false);
    }
    Ok(match lt {
        BtfType::Void => matches!(tt, BtfType::Void),
        BtfType::Fwd { union: lu, .. } => match tt {
            BtfType::Fwd { union: tu, .. } => lu == tu,
            BtfType::Union { .. } => *lu,
            BtfType::Struct { .. } => !*lu,
            _ => false,
        },
        BtfType::Enum {
            size: ls,
            values: lv,
            ..
        } => match tt {
            BtfType::Enum {
                size: ts,
                values: tv,
                ..
            } => {
                ls == ts
                    && lv.len() <= tv.len()
                    && lv
                        .iter()
                        .all(|(ln, _)| tv.iter().any(|(tn, _)| names_match(ln, tn)))
            }
            _ => false,
        },
        BtfType::Struct { .. } | BtfType::Union { .. } => {
            let is_union = matches!(lt, BtfType::Union { .. });
            if behind_ptr {
                match tt {
                    BtfType::Fwd { union, .. } => *union == is_union,
                    _ => same_kind(lt, tt),
                }
            } else {
                if !same_kind(lt, tt) {
                    return Ok(false);
                }
                let (lm, tm) = (members(lt).unwrap_or(&[]), members(tt).unwrap_or(&[]));
                if lm.len() > tm.len() {
                    return Ok(false);
                }
                for l in lm {
                    let mut matched = false;
                    for t in tm.iter().filter(|t| names_match(&l.name, &t.name)) {
                        if types_match(lbtf, l.type_id, tbtf, t.type_id, behind_ptr, depth - 1)? {
                            matched = true;
                            break;
                        }
                    }
                    if !matched {
                        return Ok(false);
                    }
                }
                true
            }
        }
        BtfType::Int {
            size: ls,
            encoding: le,
            ..
        } => match tt {
            BtfType::Int {
                size: ts,
                encoding: te,
                ..
            } => ls == ts && (le >> 24) & 1 == (te >> 24) & 1,
            _ => false,
        },
        BtfType::Ptr { target: l } => match tt {
            BtfType::Ptr { target: t } => types_match(lbtf, *l, tbtf, *t, true, depth - 1)?,
            _ => false,
        },
        BtfType::Array {
            elem: le,
            nelems: ln,
            ..
        } => match tt {
            BtfType::Array {
                elem: te,
                nelems: tn,
                ..
            } => ln == tn && types_match(lbtf, *le, tbtf, *te, behind_ptr, depth - 1)?,
            _ => false,
        },
        BtfType::FuncProto {
            ret: lr,
            params: lp,
        } => match tt {
            BtfType::FuncProto {
                ret: tr,
                params: tp,
            } => {
                if lp.len() != tp.len() {
                    return Ok(false);
                }
                for (l, t) in lp.iter().zip(tp) {
                    if !types_match(lbtf, l.type_id, tbtf, t.type_id, behind_ptr, depth - 1)? {
                        return Ok(false);
                    }
                }
                types_match(lbtf, *lr, tbtf, *tr, behind_ptr, depth - 1)?
            }
            _ => false,
        },
        _ => false,
    })
}
