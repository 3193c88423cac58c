//! Legacy map definitions: `struct bpf_map_def` instances in the `maps`
//! section (dropped by libbpf 1.0, still found in older programs).

use bpfjet_maps::{MapSpec, MapType};

use crate::bytes::u32_at;
use crate::error::ObjError;

/// `type`, `key_size`, `value_size`, `max_entries` are mandatory; `map_flags`
/// follows. Larger definitions (iproute2's `id`, `pinning`, ...) are accepted
/// and their extra fields ignored.
const MIN_DEF_SIZE: usize = 16;

/// Reads the definition of map `name` from `def` (its bytes in `maps`).
pub(crate) fn parse(name: &str, def: &[u8]) -> Result<MapSpec, ObjError> {
    if def.len() < MIN_DEF_SIZE {
        return Err(ObjError::InvalidMap {
            map: name.to_string(),
            reason: format!(
                "legacy definition is {} bytes, need at least {MIN_DEF_SIZE}",
                def.len()
            ),
        });
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
