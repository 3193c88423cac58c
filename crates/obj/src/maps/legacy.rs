//! Legacy map definitions: `struct bpf_map_def` instances in the `maps`
//! section (dropped by libbpf 1.0, still found in older programs and in
//! iproute2's and cilium/ebpf's objects).

use bpfjet_maps::{MapSpec, MapType};

use crate::bytes::u32_at;
use crate::error::ObjError;

/// `type`, `key_size`, `value_size`, `max_entries` are mandatory; `map_flags`
/// follows.
const MIN_DEF_SIZE: usize = 16;

/// `struct bpf_map_def`: the five fields bpfjet reads.
const DEF_SIZE: usize = 20;

/// iproute2's `struct bpf_elf_map`: `struct bpf_map_def`'s fields, then
/// `id`, `pinning`, `inner_id`, `inner_idx`.
const IPROUTE2_FIELDS: [&str; 4] = ["id", "pinning", "inner_id", "inner_idx"];

/// Reads the definition of map `name` from `def` (its bytes in `maps`).
///
/// Bytes past `struct bpf_map_def` must be zero, as libbpf 0.x and
/// cilium/ebpf require ("unrecognized, non-zero options"): they would ask
/// for something (iproute2's pinning namespace or map-in-map ids, another
/// loader's options) bpfjet would otherwise silently not do.
pub(crate) fn parse(name: &str, def: &[u8]) -> Result<MapSpec, ObjError> {
    let invalid = |reason: String| ObjError::InvalidMap {
        map: name.to_string(),
        reason,
    };
    if def.len() < MIN_DEF_SIZE {
        return Err(invalid(format!(
            "legacy definition is {} bytes, need at least {MIN_DEF_SIZE}",
            def.len()
        )));
    }
    if let Some(at) = def.iter().skip(DEF_SIZE).position(|&b| b != 0) {
        let at = DEF_SIZE + at;
        let field = IPROUTE2_FIELDS
            .get((at - DEF_SIZE) / 4)
            .filter(|_| def.len() == DEF_SIZE + 4 * IPROUTE2_FIELDS.len())
            .map(|f| format!(" (iproute2's `{f}`, which bpfjet does not implement)"))
            .unwrap_or_default();
        return Err(invalid(format!(
            "legacy definition of {} bytes has non-zero options past `struct bpf_map_def` \
             at byte {at}{field}; libbpf 0.x and cilium/ebpf refuse them too",
            def.len()
        )));
    }
    let field = |i: usize| u32_at(def, 4 * i).unwrap_or(0);
    let type_id = field(0);
    let map_type = MapType::from_kernel(type_id).ok_or_else(|| ObjError::UnsupportedMapType {
        map: name.to_string(),
        type_id,
    })?;
    let mut spec = MapSpec::new(name, map_type, field(1), field(2), field(3));
    spec.flags = field(4);
    Ok(spec)
}
