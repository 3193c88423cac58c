//! The BTF a program loaded through `bpf()` brings: its own (`prog_btf_fd`,
//! where `bpf_obj_new`'s local type ids point) and its maps' value types
//! (`btf_fd` + `btf_value_type_id` at `BPF_MAP_CREATE`), whose special
//! fields — kptrs, graph roots and nodes, spin locks — the verifier and the
//! runtime need, as for an ELF object (`bpfjet_obj::Object::btf`,
//! `map_fields`).

use crate::namespace::{Kind, Namespace};
use crate::objects::{MapMeta, ProgRecord};
use crate::progs::Refusal;
use bpfjet_obj::special_fields::value_fields;
use bpfjet_obj::{Btf, SpecialField};
use bpfjet_sys::Errno;
use std::collections::hash_map::Entry;
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

/// BTF object `id` of the instance, parsed once per call of [`of`].
fn parsed<'a>(
    ns: &Namespace,
    cache: &'a mut HashMap<u32, Btf>,
    id: u32,
) -> Result<&'a Btf, Refusal> {
    Ok(match cache.entry(id) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(v) => {
            let raw = ns
                .read_record(Kind::Btf, id)
                .map_err(|e| refusal(format!("BTF id {id}: {e:?}")))?;
            v.insert(Btf::parse(&raw).map_err(|e| refusal(format!("BTF id {id}: {e}")))?)
        }
    })
}

/// The program's BTF and its maps' special fields, from the instance's
/// BTF and map records. A map without a record (one a bpfjet data plane
/// made from an ELF object) or without a value type has no fields, as a
/// kernel map created without BTF.
pub fn of(ns: &Namespace, rec: &ProgRecord) -> Result<ProgBtf, Refusal> {
    let mut cache = HashMap::new();
    let mut map_fields = Vec::with_capacity(rec.map_ids.len());
    for &map_id in &rec.map_ids {
        let meta: Option<MapMeta> = ns
            .read_record(Kind::Map, map_id)
            .ok()
            .and_then(|r| serde_json::from_slice(&r).ok());
        let fields = match meta {
            Some(m) if m.btf_id != 0 && m.btf_value_type_id != 0 => {
                value_fields(parsed(ns, &mut cache, m.btf_id)?, m.btf_value_type_id)
                    .map_err(|e| refusal(format!("map id {map_id}'s value type: {e}")))?
            }
            _ => Vec::new(),
        };
        map_fields.push(fields);
    }
    let btf = match rec.btf_id {
        0 => None,
        id => {
            parsed(ns, &mut cache, id)?;
            cache.remove(&id)
        }
    };
    Ok(ProgBtf { btf, map_fields })
}
