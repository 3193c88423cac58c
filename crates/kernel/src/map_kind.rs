//! How each kernel map type is filled from, and dumped to, STATE.json.
//! One table, so `apply` and `dump` cannot disagree about a type.

use libbpf_sys as sys;

/// Access pattern of a map type from userspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapKind {
    /// Every index `0..max_entries` exists; dumped in full, in index order.
    /// Global data maps (`.data`, `.bss`, `.rodata`) are arrays of one element.
    DenseArray { per_cpu: bool },
    /// Keys come and go; dumped as the present keys sorted by key bytes.
    Keyed { per_cpu: bool },
    /// Values are program fds in, program ids out; empty slots are absent.
    ProgArray,
    /// Values are map fds in, map ids out; empty slots are absent.
    MapInMap { array: bool },
    /// Not representable as key/value state: omitted from dumps, refused by `apply`.
    Opaque(&'static str),
}

/// Whether entries of a map of this type and value size hold programs
/// (`struct bpf_devmap_val`, `struct bpf_cpumap_val`): STATE.json gives
/// the 4-byte ifindex (qsize) as `value` and the program as `prog`.
pub(crate) fn holds_entry_programs(map_type: u32, value_size: u32) -> bool {
    matches!(
        map_type,
        sys::BPF_MAP_TYPE_DEVMAP | sys::BPF_MAP_TYPE_DEVMAP_HASH | sys::BPF_MAP_TYPE_CPUMAP
    ) && value_size >= 8
}

impl MapKind {
    pub(crate) fn of(map_type: u32) -> MapKind {
        match map_type {
            sys::BPF_MAP_TYPE_ARRAY => MapKind::DenseArray { per_cpu: false },
            sys::BPF_MAP_TYPE_PERCPU_ARRAY => MapKind::DenseArray { per_cpu: true },
            sys::BPF_MAP_TYPE_HASH
            | sys::BPF_MAP_TYPE_LRU_HASH
            | sys::BPF_MAP_TYPE_LPM_TRIE
            | sys::BPF_MAP_TYPE_DEVMAP
            | sys::BPF_MAP_TYPE_DEVMAP_HASH
            | sys::BPF_MAP_TYPE_CPUMAP => MapKind::Keyed { per_cpu: false },
            sys::BPF_MAP_TYPE_PERCPU_HASH | sys::BPF_MAP_TYPE_LRU_PERCPU_HASH => {
                MapKind::Keyed { per_cpu: true }
            }
            sys::BPF_MAP_TYPE_PROG_ARRAY => MapKind::ProgArray,
            sys::BPF_MAP_TYPE_ARRAY_OF_MAPS => MapKind::MapInMap { array: true },
            sys::BPF_MAP_TYPE_HASH_OF_MAPS => MapKind::MapInMap { array: false },
            sys::BPF_MAP_TYPE_RINGBUF | sys::BPF_MAP_TYPE_USER_RINGBUF => {
                MapKind::Opaque("a ring buffer is a stream, not key/value state")
            }
            sys::BPF_MAP_TYPE_PERF_EVENT_ARRAY => {
                MapKind::Opaque("its values are perf event fds, not state")
            }
            sys::BPF_MAP_TYPE_QUEUE | sys::BPF_MAP_TYPE_STACK => {
                MapKind::Opaque("it can only be read by popping, which changes it")
            }
            sys::BPF_MAP_TYPE_BLOOM_FILTER => MapKind::Opaque("a bloom filter has no keys to list"),
            sys::BPF_MAP_TYPE_XSKMAP
            | sys::BPF_MAP_TYPE_SOCKMAP
            | sys::BPF_MAP_TYPE_SOCKHASH
            | sys::BPF_MAP_TYPE_REUSEPORT_SOCKARRAY => {
                MapKind::Opaque("its values are sockets, not state")
            }
            _ => MapKind::Opaque("the map type has no STATE.json representation"),
        }
    }

    pub(crate) fn is_per_cpu(self) -> bool {
        matches!(
            self,
            MapKind::DenseArray { per_cpu: true } | MapKind::Keyed { per_cpu: true }
        )
    }
}

/// Map type as spelled in STATE.json (`inner.type`): bpftool's names.
pub(crate) fn type_name(map_type: u32) -> String {
    match bpfjet_maps::MapType::from_kernel(map_type) {
        Some(t) => t.name().to_string(),
        None => format!("type{map_type}"),
    }
}

pub(crate) fn type_from_name(name: &str) -> Option<u32> {
    if let Some(t) = bpfjet_maps::MapType::from_name(name) {
        return Some(t as u32);
    }
    name.strip_prefix("type").and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_round_trip() {
        for t in [
            sys::BPF_MAP_TYPE_HASH,
            sys::BPF_MAP_TYPE_LRU_HASH,
            sys::BPF_MAP_TYPE_ARRAY,
        ] {
            assert_eq!(type_from_name(&type_name(t)), Some(t));
        }
        assert_eq!(
            type_name(sys::BPF_MAP_TYPE_ARENA),
            format!("type{}", sys::BPF_MAP_TYPE_ARENA)
        );
        assert_eq!(type_from_name("type33"), Some(33));
        assert_eq!(type_from_name("no_such_type"), None);
    }

    #[test]
    fn streams_are_not_state() {
        assert!(matches!(
            MapKind::of(sys::BPF_MAP_TYPE_RINGBUF),
            MapKind::Opaque(_)
        ));
        assert!(MapKind::of(sys::BPF_MAP_TYPE_LRU_PERCPU_HASH).is_per_cpu());
        assert!(!MapKind::of(sys::BPF_MAP_TYPE_HASH).is_per_cpu());
    }
}
