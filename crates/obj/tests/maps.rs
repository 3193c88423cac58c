//! Map definitions: BTF-defined, legacy, map-in-map, PROG_ARRAY, errors.

mod common;

use bpfjet_isa::{Insn, LdDwKind};
use bpfjet_maps::spec::{flags, Pinning};
use bpfjet_maps::MapType;
use bpfjet_obj::{ObjError, SlotTarget};
use common::{compile, decode, load};

/// Names of the maps referenced by `lddw ... PSEUDO_MAP_IDX` in a program.
fn referenced_maps(obj: &bpfjet_obj::Object, prog: &str) -> Vec<String> {
    let prog = obj.program(prog).expect("program");
    decode(prog)
        .iter()
        .filter_map(|i| match *i {
            Insn::LdDw {
                kind: LdDwKind::MapIdx,
                imm,
                ..
            } => Some(obj.maps[imm as usize].name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn btf_maps_of_several_types() {
    let obj = load("maps_btf");
    let names: Vec<_> = obj.maps.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "inner_b",
            "inner_a",
            "outer",
            "jumps",
            "flows",
            "stats",
            "seen",
            "pinned_lru",
            "outer_hash"
        ]
    );
    let m = |n: &str| &obj.maps[obj.map_index(n).unwrap()];

    let flows = m("flows");
    assert_eq!(
        (
            flows.map_type,
            flows.key_size,
            flows.value_size,
            flows.max_entries,
            flows.flags
        ),
        (MapType::Hash, 4, 8, 128, flags::NO_PREALLOC)
    );
    let stats = m("stats");
    assert_eq!(
        (
            stats.map_type,
            stats.key_size,
            stats.value_size,
            stats.max_entries
        ),
        (MapType::PercpuArray, 4, 16, 4)
    );
    let seen = m("seen");
    assert_eq!(
        (
            seen.map_type,
            seen.key_size,
            seen.value_size,
            seen.map_extra
        ),
        (MapType::BloomFilter, 0, 4, 3)
    );
    let lru = m("pinned_lru");
    assert_eq!(
        (lru.map_type, lru.key_size, lru.pinning),
        (MapType::LruHash, 8, Pinning::ByName)
    );
    assert!(obj
        .maps
        .iter()
        .all(|m| m.initial_data.is_none() && !m.frozen));
}

#[test]
fn map_in_map_templates_and_static_values() {
    let obj = load("maps_btf");
    let idx = |n: &str| obj.map_index(n).unwrap();

    let outer = &obj.maps[idx("outer")];
    assert_eq!(
        (
            outer.map_type,
            outer.key_size,
            outer.value_size,
            outer.max_entries
        ),
        (MapType::ArrayOfMaps, 4, 4, 4)
    );
    let inner = outer.inner.as_deref().expect("inner template");
    assert_eq!(
        (
            inner.name.as_str(),
            inner.map_type,
            inner.key_size,
            inner.value_size,
            inner.max_entries
        ),
        ("outer.inner", MapType::Array, 4, 4, 8)
    );

    let outer_hash = &obj.maps[idx("outer_hash")];
    assert_eq!(outer_hash.map_type, MapType::HashOfMaps);
    let inner = outer_hash
        .inner
        .as_deref()
        .expect("anonymous inner template");
    assert_eq!(
        (
            inner.map_type,
            inner.key_size,
            inner.value_size,
            inner.max_entries
        ),
        (MapType::Hash, 2, 8, 10)
    );

    let jumps = &obj.maps[idx("jumps")];
    assert_eq!(
        (
            jumps.map_type,
            jumps.key_size,
            jumps.value_size,
            jumps.max_entries
        ),
        (MapType::ProgArray, 4, 4, 2)
    );
    assert!(jumps.inner.is_none());

    let mut inits: Vec<_> = obj
        .map_inits
        .iter()
        .map(|i| (obj.maps[i.map].name.clone(), i.slot, i.target.clone()))
        .collect();
    inits.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_eq!(
        inits,
        [
            (
                "jumps".to_string(),
                1,
                SlotTarget::Program("tail_target".into())
            ),
            ("outer".to_string(), 1, SlotTarget::Map(idx("inner_b"))),
            ("outer".to_string(), 3, SlotTarget::Map(idx("inner_a"))),
        ]
    );
}

#[test]
fn map_references_become_map_indices() {
    let obj = load("maps_btf");
    let mut refs = referenced_maps(&obj, "use_maps");
    refs.sort();
    refs.dedup();
    assert_eq!(
        refs,
        [
            "flows",
            "jumps",
            "outer",
            "outer_hash",
            "pinned_lru",
            "seen",
            "stats"
        ]
    );
    assert!(referenced_maps(&obj, "tail_target").is_empty());
}

#[test]
fn legacy_map_definitions() {
    let obj = load("legacy");
    let counts = &obj.maps[obj.map_index("legacy_counts").unwrap()];
    assert_eq!(
        (
            counts.map_type,
            counts.key_size,
            counts.value_size,
            counts.max_entries,
            counts.flags
        ),
        (MapType::PercpuArray, 4, 8, 256, 0)
    );
    let hash = &obj.maps[obj.map_index("legacy_hash").unwrap()];
    assert_eq!(
        (
            hash.map_type,
            hash.key_size,
            hash.value_size,
            hash.max_entries,
            hash.flags
        ),
        (MapType::Hash, 8, 4, 1024, flags::NO_PREALLOC)
    );
    assert_eq!(
        referenced_maps(&obj, "legacy"),
        ["legacy_counts", "legacy_hash"]
    );
}

#[test]
fn unsupported_map_type_is_named() {
    let err = bpfjet_obj::load(&compile("bad_map")).unwrap_err();
    match err {
        ObjError::UnsupportedMapType { ref map, type_id } => {
            assert_eq!((map.as_str(), type_id), ("socks", 15));
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("socks"));
}

/// iproute2's `struct bpf_elf_map` (bpf_map_def + id, pinning, inner_id,
/// inner_idx): loads when the extra fields ask for nothing, refused naming
/// the field when they ask for what bpfjet does not do; another size with
/// non-zero bytes past `struct bpf_map_def` is refused too (libbpf 0.x and
/// cilium/ebpf refuse both).
#[test]
fn legacy_definitions_with_options_past_bpf_map_def() {
    let source = |tail: &str| {
        format!(
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             struct elf_map {{ unsigned int type, key, value, max, flags{tail}; }};\n\
             struct elf_map SEC(\"maps\") m = {{ BPF_MAP_TYPE_ARRAY, 4, 8, 2, 0, {init} }};\n\
             SEC(\"xdp\") int p(struct xdp_md *c) {{ __u32 k = 0; \
             return bpf_map_lookup_elem(&m, &k) ? XDP_PASS : XDP_DROP; }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
            init = if tail.is_empty() { "" } else { "INIT" }
        )
    };
    let load_with = |name: &str, tail: &str, init: &str| {
        let text = source(tail).replace("INIT", init);
        let path = bpfjet_testsupport::Compile::text(name, &text).object();
        bpfjet_obj::load_file(path)
    };
    let iproute2 = ", id, pinning, inner_id, inner_idx";
    let plain = load_with("elf_map_zero", iproute2, "0, 0, 0, 0").unwrap();
    assert_eq!(plain.maps[plain.map_index("m").unwrap()].max_entries, 2);
    let pinned = load_with("elf_map_pinned", iproute2, "0, 2, 0, 0").unwrap_err();
    assert!(
        pinned.to_string().contains("iproute2's `pinning`"),
        "{pinned}"
    );
    let other = load_with("elf_map_extra", ", extra", "1").unwrap_err();
    assert!(other.to_string().contains("non-zero options"), "{other}");
}
