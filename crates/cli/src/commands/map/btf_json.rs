//! Map keys and values as JSON typed by the program's BTF, the way
//! `bpftool map dump` formats them: structs as objects (anonymous members
//! merged into their parent), arrays as lists, `char` arrays as strings,
//! integers as numbers, enums by name, `bool` as true/false, pointers as
//! hex strings. The reverse direction accepts the same forms (missing
//! struct members are zero) for `map update/lookup/delete --typed`.
//!
//! The running instance publishes its object's raw `.BTF` section next to
//! its maps (`/dev/shm/bpfjet.<NAME>.btf`, see `bpfjet run`), so another
//! process can format maps without the object file.

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_obj::{Btf, BtfType, Member};
use serde_json::{Map as JsonMap, Value};
use std::path::PathBuf;

/// Nesting deeper than this is a malformed (cyclic) type graph.
const MAX_DEPTH: usize = 32;
const INT_SIGNED: u32 = 1;
const INT_CHAR: u32 = 2;
const INT_BOOL: u32 = 4;

/// Where `bpfjet run` publishes instance `name`'s BTF.
pub fn btf_path(name: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/bpfjet.{name}.btf"))
}

/// The BTF the running instance published.
pub fn load_published(instance: &str) -> Result<Btf> {
    let path = btf_path(instance);
    let raw = std::fs::read(&path).map_err(|e| {
        anyhow!(
            "instance '{instance}' published no BTF ({}: {e}); its object was built \
             without -g, or the instance is not running",
            path.display()
        )
    })?;
    Btf::parse(&raw).map_err(|e| anyhow!("BTF of instance '{instance}': {e}"))
}

/// The key and value type ids of the BTF-defined map `name` (`__type(key, T)`
/// and `__type(value, T)` in its `.maps` definition).
pub fn map_types(btf: &Btf, name: &str) -> Result<(u32, u32)> {
    let def = btf
        .datasec(".maps")
        .unwrap_or_default()
        .iter()
        .find_map(|v| match btf.type_by_id(v.type_id) {
            Some(BtfType::Var {
                name: n, target, ..
            }) if n == name => Some(*target),
            _ => None,
        })
        .ok_or_else(|| anyhow!("the BTF has no `.maps` definition of {name}"))?;
    let members = match btf.resolve(def).and_then(|id| btf.type_by_id(id)) {
        Some(BtfType::Struct { members, .. }) => members,
        _ => bail!("the BTF definition of {name} is not a struct"),
    };
    let pointee = |field: &str| -> Result<u32> {
        let m = members.iter().find(|m| m.name == field).ok_or_else(|| {
            anyhow!("{name} declares its {field} by size only (no __type({field}, ...))")
        })?;
        match btf.type_by_id(m.type_id) {
            Some(BtfType::Ptr { target }) => Ok(*target),
            _ => bail!("{name}: the {field} member is not a __type() pointer"),
        }
    };
    Ok((pointee("key")?, pointee("value")?))
}

fn resolved(btf: &Btf, id: u32) -> Result<(u32, &BtfType)> {
    let r = btf
        .resolve(id)
        .ok_or_else(|| anyhow!("BTF type {id} does not resolve"))?;
    let t = btf
        .type_by_id(r)
        .ok_or_else(|| anyhow!("no BTF type {r}"))?;
    Ok((r, t))
}

fn size_of(btf: &Btf, id: u32) -> Result<usize> {
    btf.size_of(id)
        .map(|s| s as usize)
        .ok_or_else(|| anyhow!("BTF type {id} has no size"))
}

/// Whether `id` is a one-byte `char`-like integer (arrays of it are strings).
fn is_char(btf: &Btf, id: u32) -> bool {
    matches!(resolved(btf, id), Ok((_, BtfType::Int { name, size: 1, encoding }))
        if (encoding >> 24) & INT_CHAR != 0 || name.contains("char"))
}

/// Rejects bitfields: `Member` carries no bitfield width, so an overlapping
/// or unaligned member cannot be formatted faithfully.
fn check_members(btf: &Btf, members: &[Member], is_struct: bool) -> Result<()> {
    for (i, m) in members.iter().enumerate() {
        if m.bit_offset % 8 != 0 {
            bail!("bitfield member {:?} is not supported", m.name);
        }
        if is_struct {
            if let Some(next) = members.get(i + 1) {
                let end = m.bit_offset as usize / 8 + size_of(btf, m.type_id)?;
                if end > next.bit_offset as usize / 8 {
                    bail!("bitfield member {:?} is not supported", m.name);
                }
            }
        }
    }
    Ok(())
}

fn int_value(bytes: &[u8], signed: bool) -> Value {
    let mut b = [0u8; 16];
    b[..bytes.len()].copy_from_slice(bytes);
    let v = u128::from_le_bytes(b);
    let bits = bytes.len() * 8;
    if signed {
        let shift = 128 - bits;
        let s = ((v << shift) as i128) >> shift;
        match i64::try_from(s) {
            Ok(s) => Value::from(s),
            Err(_) => Value::from(s.to_string()),
        }
    } else {
        match u64::try_from(v) {
            Ok(u) => Value::from(u),
            Err(_) => Value::from(format!("{v:#x}")),
        }
    }
}

/// `bytes` (exactly the type's size) as JSON.
pub fn to_json(btf: &Btf, id: u32, bytes: &[u8]) -> Result<Value> {
    let size = size_of(btf, id)?;
    if bytes.len() != size {
        bail!("{} bytes for a BTF type of {size}", bytes.len());
    }
    to_json_at(btf, id, bytes, 0)
}

fn to_json_at(btf: &Btf, id: u32, bytes: &[u8], depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        bail!("BTF type nesting deeper than {MAX_DEPTH}");
    }
    let (_, t) = resolved(btf, id)?;
    Ok(match t {
        BtfType::Int { size, encoding, .. } => {
            let enc = (encoding >> 24) & 0xf;
            let b = &bytes[..*size as usize];
            if enc & INT_BOOL != 0 {
                Value::Bool(b.iter().any(|x| *x != 0))
            } else {
                int_value(b, enc & INT_SIGNED != 0)
            }
        }
        BtfType::Enum { size, values, .. } => {
            let v = int_value(&bytes[..*size as usize], true);
            let n = v.as_i64();
            match values.iter().find(|(_, x)| Some(*x) == n) {
                Some((name, _)) => Value::from(name.clone()),
                None => v,
            }
        }
        BtfType::Float { size, .. } => match size {
            4 => Value::from(f32::from_le_bytes(bytes[..4].try_into()?)),
            8 => Value::from(f64::from_le_bytes(bytes[..8].try_into()?)),
            _ => Value::from(bpfjet_maps::state::to_hex(bytes)),
        },
        BtfType::Ptr { .. } => {
            Value::from(format!("{:#x}", u64::from_le_bytes(bytes[..8].try_into()?)))
        }
        BtfType::Array { elem, nelems, .. } => {
            let esize = size_of(btf, *elem)?;
            if is_char(btf, *elem) {
                let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
                let text = &bytes[..end];
                let printable = text.iter().all(|b| (0x20..0x7f).contains(b))
                    && bytes[end..].iter().all(|b| *b == 0);
                if printable {
                    return Ok(Value::from(String::from_utf8_lossy(text).into_owned()));
                }
            }
            let mut out = Vec::with_capacity(*nelems as usize);
            for i in 0..*nelems as usize {
                out.push(to_json_at(
                    btf,
                    *elem,
                    &bytes[i * esize..(i + 1) * esize],
                    depth + 1,
                )?);
            }
            Value::Array(out)
        }
        BtfType::Struct { members, .. } | BtfType::Union { members, .. } => {
            check_members(btf, members, matches!(t, BtfType::Struct { .. }))?;
            let mut obj = JsonMap::new();
            for m in members {
                let off = m.bit_offset as usize / 8;
                let len = size_of(btf, m.type_id)?;
                let field = bytes
                    .get(off..off + len)
                    .ok_or_else(|| anyhow!("member {:?} lies outside its struct", m.name))?;
                let v = to_json_at(btf, m.type_id, field, depth + 1)?;
                match (m.name.is_empty(), v) {
                    (true, Value::Object(inner)) => obj.extend(inner),
                    (true, v) => {
                        obj.insert(format!("@{off}"), v);
                    }
                    (false, v) => {
                        obj.insert(m.name.clone(), v);
                    }
                }
            }
            Value::Object(obj)
        }
        other => bail!("cannot format BTF kind {other:?}"),
    })
}

/// JSON as the bytes of BTF type `id`.
pub fn from_json(btf: &Btf, id: u32, v: &Value) -> Result<Vec<u8>> {
    let mut out = vec![0u8; size_of(btf, id)?];
    write_at(btf, id, v, &mut out, 0)?;
    Ok(out)
}

fn write_int(v: &Value, out: &mut [u8], signed: bool) -> Result<()> {
    let bits = out.len() * 8;
    let n: i128 = match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .ok_or_else(|| anyhow!("{n} is not an integer"))?,
        Value::Bool(b) => i128::from(*b),
        Value::String(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(h) => u128::from_str_radix(h, 16).ok().map(|u| u as i128),
                None => s.parse::<i128>().ok(),
            };
            parsed.ok_or_else(|| anyhow!("{s:?} is not an integer"))?
        }
        other => bail!("expected an integer, got {other}"),
    };
    let fits = if bits >= 128 {
        true
    } else if signed {
        let half = 1i128 << (bits - 1);
        (-half..half).contains(&n)
    } else {
        (0..(1i128 << bits)).contains(&n)
    };
    if !fits {
        bail!(
            "{n} does not fit in {} {}-bit integer",
            if signed { "a signed" } else { "an unsigned" },
            bits
        );
    }
    out.copy_from_slice(&n.to_le_bytes()[..out.len()]);
    Ok(())
}

fn write_at(btf: &Btf, id: u32, v: &Value, out: &mut [u8], depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        bail!("BTF type nesting deeper than {MAX_DEPTH}");
    }
    let (_, t) = resolved(btf, id)?;
    match t {
        BtfType::Int { encoding, .. } => {
            let enc = (encoding >> 24) & 0xf;
            write_int(v, out, enc & INT_SIGNED != 0)
        }
        BtfType::Enum { values, name, .. } => match v {
            Value::String(s) if values.iter().any(|(n, _)| n == s) => {
                let x = values.iter().find(|(n, _)| n == s).map(|(_, x)| *x);
                write_int(&Value::from(x.unwrap_or(0)), out, true)
            }
            Value::String(s) if s.parse::<i64>().is_err() && !s.starts_with("0x") => {
                let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
                bail!("{s:?} is not a value of enum {name} ({})", names.join(", "))
            }
            _ => write_int(v, out, true),
        },
        BtfType::Float { size, .. } => {
            let f = v
                .as_f64()
                .ok_or_else(|| anyhow!("expected a number, got {v}"))?;
            match size {
                4 => out.copy_from_slice(&(f as f32).to_le_bytes()),
                8 => out.copy_from_slice(&f.to_le_bytes()),
                s => bail!("cannot write a {s}-byte float"),
            }
            Ok(())
        }
        BtfType::Ptr { .. } => write_int(v, out, false),
        BtfType::Array { elem, nelems, .. } => {
            let esize = size_of(btf, *elem)?;
            match v {
                Value::String(s) if is_char(btf, *elem) => {
                    if s.len() > out.len() {
                        bail!("{s:?} is longer than the {}-byte array", out.len());
                    }
                    out[..s.len()].copy_from_slice(s.as_bytes());
                    Ok(())
                }
                Value::Array(items) => {
                    if items.len() > *nelems as usize {
                        bail!("{} elements for an array of {nelems}", items.len());
                    }
                    for (i, item) in items.iter().enumerate() {
                        write_at(
                            btf,
                            *elem,
                            item,
                            &mut out[i * esize..(i + 1) * esize],
                            depth + 1,
                        )
                        .with_context(|| format!("element {i}"))?;
                    }
                    Ok(())
                }
                other => bail!("expected a list for an array, got {other}"),
            }
        }
        BtfType::Struct { members, .. } | BtfType::Union { members, .. } => {
            check_members(btf, members, matches!(t, BtfType::Struct { .. }))?;
            let Value::Object(fields) = v else {
                bail!("expected an object for a struct, got {v}");
            };
            let mut used = 0;
            write_members(btf, members, fields, out, depth, &mut used)?;
            if used != fields.len() {
                let known = member_names(btf, members);
                let unknown: Vec<&String> = fields.keys().filter(|k| !known.contains(k)).collect();
                bail!(
                    "unknown member(s) {unknown:?} (members: {})",
                    known.join(", ")
                );
            }
            Ok(())
        }
        other => bail!("cannot write BTF kind {other:?}"),
    }
}

/// Writes the members `fields` names; anonymous struct/union members take
/// their members from the same object (as `to_json` merges them).
fn write_members(
    btf: &Btf,
    members: &[Member],
    fields: &JsonMap<String, Value>,
    out: &mut [u8],
    depth: usize,
    used: &mut usize,
) -> Result<()> {
    for m in members {
        let off = m.bit_offset as usize / 8;
        let len = size_of(btf, m.type_id)?;
        let slot = out
            .get_mut(off..off + len)
            .ok_or_else(|| anyhow!("member {:?} lies outside its struct", m.name))?;
        if m.name.is_empty() {
            if let (
                _,
                BtfType::Struct { members: inner, .. } | BtfType::Union { members: inner, .. },
            ) = resolved(btf, m.type_id)?
            {
                write_members(btf, inner, fields, slot, depth + 1, used)?;
            }
            continue;
        }
        if let Some(v) = fields.get(&m.name) {
            write_at(btf, m.type_id, v, slot, depth + 1)
                .with_context(|| format!("member {:?}", m.name))?;
            *used += 1;
        }
    }
    Ok(())
}

fn member_names(btf: &Btf, members: &[Member]) -> Vec<String> {
    let mut names = Vec::new();
    for m in members {
        if m.name.is_empty() {
            if let Ok((
                _,
                BtfType::Struct { members: inner, .. } | BtfType::Union { members: inner, .. },
            )) = resolved(btf, m.type_id)
            {
                names.extend(member_names(btf, inner));
            }
        } else {
            names.push(m.name.clone());
        }
    }
    names
}
