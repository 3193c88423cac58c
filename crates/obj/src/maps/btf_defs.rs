//! BTF-defined maps (`SEC(".maps")`). libbpf's macros encode every numeric
//! attribute in a member's *type* rather than its value: `__uint(name, N)` is
//! `int (*name)[N]` and `__type(name, T)` is `T *name`, so a map definition is
//! read entirely from BTF.

use bpfjet_maps::spec::Pinning;
use bpfjet_maps::{MapSpec, MapType};

use crate::btf::{Btf, BtfType};
use crate::error::ObjError;

/// What `__array(values, ...)` declares, and where its slots start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ValuesArray {
    /// Byte offset of the `values` member inside the definition.
    pub offset: u64,
}

pub(crate) struct BtfMapDef {
    pub spec: MapSpec,
    pub values: Option<ValuesArray>,
    /// Byte offset of the `struct bpf_spin_lock` in the value type, if any.
    pub spin_lock: Option<u32>,
    /// BTF id of the value type (`__type(value, T)`), for its special fields.
    pub value_type: Option<u32>,
    /// The inner template's value type, for map-in-maps.
    pub inner_value_type: Option<u32>,
}

fn invalid(map: &str, reason: impl Into<String>) -> ObjError {
    ObjError::InvalidMap {
        map: map.to_string(),
        reason: reason.into(),
    }
}

/// The `N` of a `__uint(field, N)` member.
fn uint_field(btf: &Btf, map: &str, field: &str, type_id: u32) -> Result<u32, ObjError> {
    let bad = || invalid(map, format!("`{field}` is not declared with __uint()"));
    let ptr = btf.resolve(type_id).and_then(|id| btf.type_by_id(id));
    let Some(BtfType::Ptr { target }) = ptr else {
        return Err(bad());
    };
    match btf.resolve(*target).and_then(|id| btf.type_by_id(id)) {
        Some(BtfType::Array { nelems, .. }) => Ok(*nelems),
        _ => Err(bad()),
    }
}

/// The size of `T` in a `__type(field, T)` member.
fn type_field_size(btf: &Btf, map: &str, field: &str, type_id: u32) -> Result<u32, ObjError> {
    let bad = |why: &str| invalid(map, format!("`{field}` {why}"));
    let ptr = btf.resolve(type_id).and_then(|id| btf.type_by_id(id));
    let Some(BtfType::Ptr { target }) = ptr else {
        return Err(bad("is not declared with __type()"));
    };
    let size = btf
        .size_of(*target)
        .ok_or_else(|| bad("has a type of unknown size"))?;
    u32::try_from(size).map_err(|_| bad("is too large"))
}

/// Sets a size once; a second, different declaration (`__type(key, ..)` and
/// `__uint(key_size, ..)` disagreeing) is an error, as in libbpf.
fn set_size(map: &str, field: &str, slot: &mut Option<u32>, v: u32) -> Result<(), ObjError> {
    match *slot {
        Some(old) if old != v => Err(invalid(map, format!("conflicting {field}: {old} and {v}"))),
        _ => {
            *slot = Some(v);
            Ok(())
        }
    }
}

/// What the elements of `__array(values, X)` point to.
enum ValuesElem {
    /// A map definition struct: the inner map template.
    MapDef(u32),
    /// A function prototype: a PROG_ARRAY's programs.
    Program,
}

fn values_elem(btf: &Btf, map: &str, type_id: u32) -> Result<ValuesElem, ObjError> {
    let bad = || invalid(map, "`values` is not declared with __array()");
    let ty = |id: u32| {
        btf.resolve(id)
            .and_then(|r| btf.type_by_id(r).map(|t| (r, t)))
    };
    let Some((_, BtfType::Array { elem, .. })) = ty(type_id) else {
        return Err(bad());
    };
    let Some((_, BtfType::Ptr { target })) = ty(*elem) else {
        return Err(bad());
    };
    match ty(*target) {
        Some((id, BtfType::Struct { .. })) => Ok(ValuesElem::MapDef(id)),
        Some((_, BtfType::FuncProto { .. })) => Ok(ValuesElem::Program),
        _ => Err(bad()),
    }
}

/// Reads the map definition struct `struct_id` for the map called `name`.
/// `allow_values` is false for inner templates, which cannot nest further.
pub(crate) fn parse(
    btf: &Btf,
    name: &str,
    struct_id: u32,
    allow_values: bool,
) -> Result<BtfMapDef, ObjError> {
    let members = match btf.resolve(struct_id).and_then(|id| btf.type_by_id(id)) {
        Some(BtfType::Struct { members, .. }) => members,
        _ => return Err(invalid(name, "definition is not a struct")),
    };
    let mut map_type = None;
    let (mut key_size, mut value_size) = (None, None);
    let (mut max_entries, mut flags, mut map_extra) = (0, 0, 0u64);
    let mut pinning = Pinning::None;
    let mut inner = None;
    let mut inner_value_type = None;
    let mut values = None;
    let mut spin_lock = None;
    let mut value_type = None;
    for m in members {
        let field = m.name.as_str();
        match field {
            "type" => map_type = Some(uint_field(btf, name, field, m.type_id)?),
            "max_entries" => max_entries = uint_field(btf, name, field, m.type_id)?,
            "map_flags" => flags = uint_field(btf, name, field, m.type_id)?,
            "map_extra" => map_extra = uint_field(btf, name, field, m.type_id)? as u64,
            // NUMA placement has no meaning in userspace shared memory.
            "numa_node" => {
                uint_field(btf, name, field, m.type_id)?;
            }
            "key_size" => {
                let v = uint_field(btf, name, field, m.type_id)?;
                set_size(name, "key size", &mut key_size, v)?;
            }
            "value_size" => {
                let v = uint_field(btf, name, field, m.type_id)?;
                set_size(name, "value size", &mut value_size, v)?;
            }
            "key" => {
                let v = type_field_size(btf, name, field, m.type_id)?;
                set_size(name, "key size", &mut key_size, v)?;
            }
            "value" => {
                let v = type_field_size(btf, name, field, m.type_id)?;
                set_size(name, "value size", &mut value_size, v)?;
                spin_lock = value_spin_lock(btf, name, m.type_id)?;
                if let Some(BtfType::Ptr { target }) =
                    btf.resolve(m.type_id).and_then(|id| btf.type_by_id(id))
                {
                    value_type = Some(*target);
                }
            }
            "pinning" => {
                pinning = match uint_field(btf, name, field, m.type_id)? {
                    0 => Pinning::None,
                    1 => Pinning::ByName,
                    p => return Err(invalid(name, format!("unknown pinning type {p}"))),
                }
            }
            "values" if allow_values => {
                if m.bit_offset % 8 != 0 {
                    return Err(invalid(name, "`values` is not byte aligned"));
                }
                values = Some(ValuesArray {
                    offset: m.bit_offset as u64 / 8,
                });
                if let ValuesElem::MapDef(inner_id) = values_elem(btf, name, m.type_id)? {
                    let inner_name = format!("{name}.inner");
                    let def = parse(btf, &inner_name, inner_id, false)?;
                    inner_value_type = def.value_type;
                    inner = Some(Box::new(def.spec));
                }
            }
            other => return Err(invalid(name, format!("unknown field `{other}`"))),
        }
    }
    let type_id = map_type.ok_or_else(|| invalid(name, "no `type` field"))?;
    let map_type = MapType::from_kernel(type_id).ok_or_else(|| ObjError::UnsupportedMapType {
        map: name.to_string(),
        type_id,
    })?;
    // Outer maps and PROG_ARRAYs hold 32-bit ids; libbpf fills the size in
    // when only `values` describes them.
    let slot_holder = values.is_some()
        || matches!(
            map_type,
            MapType::ArrayOfMaps | MapType::HashOfMaps | MapType::ProgArray
        );
    let value_size = match value_size {
        None if slot_holder => 4,
        v => v.unwrap_or(0),
    };
    // libbpf sizes a ring buffer up to the next power-of-two number of
    // pages instead of letting the kernel refuse the object's size.
    let max_entries = if matches!(map_type, MapType::Ringbuf | MapType::UserRingbuf) {
        ringbuf_size(
            max_entries,
            u32::try_from(bpfjet_maps::page_size()).unwrap_or(4096),
        )
    } else {
        max_entries
    };
    let mut spec = MapSpec::new(
        name,
        map_type,
        key_size.unwrap_or(0),
        value_size,
        max_entries,
    );
    spec.flags = flags;
    spec.map_extra = map_extra;
    spec.pinning = pinning;
    spec.inner = inner;
    // The kernel supports a lock only in hash and array values (in XDP's
    // reach): it refuses BTF for other maps (-EOPNOTSUPP) and libbpf then
    // creates the map without BTF, so the lock word is plain data and
    // bpf_spin_lock on it is rejected. Do the same.
    let spin_lock = spin_lock.filter(|_| matches!(map_type, MapType::Hash | MapType::Array));
    Ok(BtfMapDef {
        spec,
        values,
        spin_lock,
        value_type,
        inner_value_type,
    })
}

/// libbpf's ring-buffer size rule (`adjust_ringbuf_sz`): 0 and a
/// power-of-two number of pages stay; any other size becomes the smallest
/// power-of-two number of pages above it, unless that would pass 32 bits
/// (then the kernel refuses the size as written).
fn ringbuf_size(size: u32, page: u32) -> u32 {
    if size == 0 || page == 0 || (size.is_multiple_of(page) && (size / page).is_power_of_two()) {
        return size;
    }
    let mut bytes = u64::from(page);
    while bytes <= u64::from(size) {
        bytes <<= 1;
    }
    u32::try_from(bytes).unwrap_or(size)
}

/// The offset of the `struct bpf_spin_lock` in the value type named by
/// `__type(value, T)` (member `type_id` points to `T`). Like the kernel, the
/// value must be a struct; locks are found among its members and, nested,
/// in the members of member structs (not in arrays or unions); a value
/// holds at most one lock, 4-byte aligned.
fn value_spin_lock(btf: &Btf, map: &str, type_id: u32) -> Result<Option<u32>, ObjError> {
    let Some(BtfType::Ptr { target }) = btf.resolve(type_id).and_then(|id| btf.type_by_id(id))
    else {
        return Ok(None);
    };
    let mut found = None;
    find_locks(btf, map, *target, 0, 0, &mut found)?;
    Ok(found)
}

/// Nesting deeper than this is not searched (the kernel bounds it too).
const MAX_NESTING: u32 = 32;

fn find_locks(
    btf: &Btf,
    map: &str,
    struct_id: u32,
    base_bits: u32,
    depth: u32,
    found: &mut Option<u32>,
) -> Result<(), ObjError> {
    let Some(BtfType::Struct { members, .. }) =
        btf.resolve(struct_id).and_then(|id| btf.type_by_id(id))
    else {
        return Ok(());
    };
    for m in members {
        let bits = base_bits + m.bit_offset;
        let member_id = btf.resolve(m.type_id).unwrap_or(0);
        let Some(BtfType::Struct { name, .. }) = btf.type_by_id(member_id) else {
            continue;
        };
        if name != "bpf_spin_lock" {
            if depth < MAX_NESTING {
                find_locks(btf, map, member_id, bits, depth + 1, found)?;
            }
            continue;
        }
        record_lock(map, &m.name, bits, found)?;
    }
    Ok(())
}

/// The lock found at `bits` (member or variable `name`): one per value, on a
/// 4-byte boundary.
fn record_lock(map: &str, name: &str, bits: u32, found: &mut Option<u32>) -> Result<(), ObjError> {
    if found.is_some() {
        return Err(invalid(
            map,
            "the value type has more than one bpf_spin_lock",
        ));
    }
    if !bits.is_multiple_of(32) {
        return Err(invalid(
            map,
            format!("bpf_spin_lock member `{name}` is not 4-byte aligned (bit offset {bits})"),
        ));
    }
    *found = Some(bits / 8);
    Ok(())
}

/// The offset of the `struct bpf_spin_lock` in a map value type given by
/// its BTF id (`BPF_MAP_CREATE`'s `btf_value_type_id`), with the rules of
/// `__type(value, T)` maps above.
pub fn spin_lock_offset(btf: &Btf, map: &str, value_type_id: u32) -> Result<Option<u32>, ObjError> {
    let mut found = None;
    match btf.type_by_id(value_type_id) {
        // A global data section (libbpf's `.data.NAME` maps give their
        // DATASEC as the value type, offsets fixed up): the lock is one of
        // its variables, or inside one.
        Some(BtfType::DataSec { vars, .. }) => {
            for v in vars {
                let Some(BtfType::Var { name, target, .. }) = btf.type_by_id(v.type_id) else {
                    continue;
                };
                let id = btf.resolve(*target).unwrap_or(0);
                let bits = v.offset * 8;
                match btf.type_by_id(id) {
                    Some(BtfType::Struct { name: s, .. }) if s == "bpf_spin_lock" => {
                        record_lock(map, name, bits, &mut found)?
                    }
                    _ => find_locks(btf, map, id, bits, 1, &mut found)?,
                }
            }
        }
        _ => find_locks(btf, map, value_type_id, 0, 0, &mut found)?,
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ring_buffer_sizes_as_libbpf_adjusts_them() {
        let page = 4096;
        for (asked, created) in [
            (0, 0),
            (4096, 4096),
            (8192, 8192),
            (12288, 16384),
            (1, 4096),
            (5000, 8192),
            (4097, 8192),
            (1 << 31, 1 << 31),
            ((1 << 31) + 1, (1 << 31) + 1),
            (u32::MAX, u32::MAX),
        ] {
            assert_eq!(super::ringbuf_size(asked, page), created, "{asked}");
        }
    }
}
