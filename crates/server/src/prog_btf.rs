//! The BTF a program loaded through `bpf()` brings: its own (`prog_btf_fd`,
//! where `bpf_obj_new`'s local type ids point) and its maps' value types
//! (`btf_fd` + `btf_value_type_id` at `BPF_MAP_CREATE`), whose special
//! fields — kptrs, graph roots and nodes, spin locks — the verifier and the
//! runtime need for the kernel's object and graph kfuncs, as for an ELF
//! object (`bpfjet_obj::Object::btf`, `map_fields`).

use crate::namespace::{Kind, Namespace};
use crate::objects::{MapMeta, ProgRecord};
use crate::progs::Refusal;
use bpfjet_obj::special_fields::{datasec_fields, struct_fields};
use bpfjet_obj::{Btf, BtfType, SpecialField};
use bpfjet_sys::Errno;
use std::collections::HashMap;

/// What `bpfjet_obj::Object` takes from BTF.
#[derive(Default)]
pub struct ProgBtf {
    pub btf: Option<Btf>,
    /// Per map of the record, in `rec.map_ids` order.
    pub map_fields: Vec<Vec<SpecialField>>,
}

fn refusal(log: String) -> Refusal {
    Refusal::new(Errno::EINVAL, log)
}

/// The program's BTF and its maps' special fields, from the instance's
/// BTF and map records. A map without a record (one a bpfjet data plane
/// made from an ELF object) or without a value type has no fields, as a
/// kernel map created without BTF.
pub fn of(ns: &Namespace, rec: &ProgRecord) -> Result<ProgBtf, Refusal> {
    let mut parsed: HashMap<u32, Btf> = HashMap::new();
    let mut btf_by_id = |id: u32| -> Result<Btf, Refusal> {
        if let Some(b) = parsed.get(&id) {
            return Ok(b.clone());
        }
        let raw = ns
            .read_record(Kind::Btf, id)
            .map_err(|e| refusal(format!("BTF id {id}: {e:?}")))?;
        let b = Btf::parse(&raw).map_err(|e| refusal(format!("BTF id {id}: {e}")))?;
        parsed.insert(id, b.clone());
        Ok(b)
    };
    let btf = match rec.btf_id {
        0 => None,
        id => Some(btf_by_id(id)?),
    };
    let mut map_fields = Vec::with_capacity(rec.map_ids.len());
    for &map_id in &rec.map_ids {
        let meta: Option<MapMeta> = ns
            .read_record(Kind::Map, map_id)
            .ok()
            .and_then(|r| serde_json::from_slice(&r).ok());
        let fields = match meta {
            Some(m) if m.btf_id != 0 && m.btf_value_type_id != 0 => {
                let b = btf_by_id(m.btf_id)?;
                value_fields(&b, m.btf_value_type_id)
                    .map_err(|e| refusal(format!("map id {map_id}'s value type: {e}")))?
            }
            _ => Vec::new(),
        };
        map_fields.push(fields);
    }
    Ok(ProgBtf { btf, map_fields })
}

/// A map value's special fields: a struct's, or a global data section's
/// variables' (libbpf gives such a map its `DATASEC` as the value type,
/// with the offsets already fixed up).
pub(crate) fn value_fields(btf: &Btf, type_id: u32) -> Result<Vec<SpecialField>, String> {
    match btf.type_by_id(type_id) {
        Some(BtfType::DataSec { name, .. }) => datasec_fields(btf, name, |_| None),
        _ => struct_fields(btf, type_id),
    }
}
