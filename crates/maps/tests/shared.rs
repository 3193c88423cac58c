//! Maps shared between processes: an instance published in /dev/shm, a
//! control plane in a child process (this test binary re-run with an
//! environment variable) that sees and changes what the parent does.

use bpfjet_maps::spec::update;
use bpfjet_maps::state::{EntryState, InnerMapState, MapState};
use bpfjet_maps::{Instance, InstanceResolver, MapOptions, MapSpec, MapType, RingbufConsumer};
use std::process::Command;

const CHILD_ENV: &str = "BPFJET_MAPS_TEST_CHILD";

fn unique(tag: &str) -> String {
    format!("t{}-{tag}", std::process::id())
}

/// Run `test` of this binary in a child with `CHILD_ENV=role:instance`.
fn spawn_child(test: &str, role: &str, instance: &str) -> bool {
    let exe = std::env::current_exe().expect("test binary");
    let st = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{role}:{instance}"))
        .status()
        .expect("spawn child");
    st.success()
}

/// The child's half; does nothing in the parent run.
#[test]
fn child_control_plane() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (role, instance) = arg.split_once(':').expect("role:instance");
    let inst = Instance::open(instance).expect("open instance");
    match role {
        "counter" => {
            // See the parent's write, then write back.
            let m = inst.map_by_name("counters").expect("map");
            assert_eq!(
                m.lookup_copy(&1u32.to_ne_bytes()).unwrap(),
                41u64.to_ne_bytes()
            );
            m.update_elem(&2u32.to_ne_bytes(), &42u64.to_ne_bytes(), update::ANY)
                .unwrap();
            let h = inst.map_by_name("flows").expect("hash");
            assert_eq!(h.lookup_copy(b"flow-a").unwrap(), [1; 8]);
            h.update_elem(b"flow-b", &[2; 8], update::NOEXIST).unwrap();
            // An inner map created by the control plane, stored in the outer map.
            let outer = inst.map_by_name("outer").expect("outer");
            let inner = inst
                .create_inner_map(&MapSpec::new("inner", MapType::Hash, 4, 4, 8))
                .expect("inner");
            inner
                .update_elem(&7u32.to_ne_bytes(), &70u32.to_ne_bytes(), 0)
                .unwrap();
            outer
                .update_elem(&0u32.to_ne_bytes(), &inner.id().to_ne_bytes(), 0)
                .unwrap();
            // Ring buffer records from the parent.
            let rb = inst.map_by_name("events").expect("ringbuf");
            let mut c = RingbufConsumer::new(rb).unwrap();
            let mut got = vec![];
            c.poll(|r| got.push(r.to_vec()));
            assert_eq!(got, vec![b"hello".to_vec(), b"world!!".to_vec()]);
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn two_processes_share_maps() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let name = unique("share");
    let inst = Instance::create(&name, 2).expect("create instance");
    let opts = MapOptions::default();
    let arr = inst
        .create_map(&MapSpec::new("counters", MapType::Array, 4, 8, 4), &opts)
        .unwrap();
    let hash = inst
        .create_map(&MapSpec::new("flows", MapType::Hash, 6, 8, 16), &opts)
        .unwrap();
    let mut outer_spec = MapSpec::new("outer", MapType::ArrayOfMaps, 4, 4, 2);
    outer_spec.inner = Some(Box::new(MapSpec::new("", MapType::Hash, 4, 4, 8)));
    let outer = inst.create_map(&outer_spec, &opts).unwrap();
    let rb = inst
        .create_map(&MapSpec::new("events", MapType::Ringbuf, 0, 0, 4096), &opts)
        .unwrap();
    assert!(std::path::Path::new(&format!("/dev/shm/bpfjet.{name}.registry")).exists());

    arr.update(&1u32.to_ne_bytes(), &41u64.to_ne_bytes(), 0, 0)
        .unwrap();
    hash.update(b"flow-a", &[1; 8], 0, 1).unwrap();
    rb.ringbuf_output(b"hello", 0).unwrap();
    rb.ringbuf_output(b"world!!", 0).unwrap();

    assert!(
        spawn_child("child_control_plane", "counter", &name),
        "child failed"
    );

    // The parent's data-plane pointer sees the child's write.
    let p = arr.lookup(&2u32.to_ne_bytes(), 0).unwrap();
    // SAFETY: 8-byte array value.
    assert_eq!(unsafe { (p as *const u64).read() }, 42);
    assert_eq!(hash.lookup_copy(b"flow-b").unwrap(), [2; 8]);
    assert_eq!(rb.ringbuf_query(0), 0, "child consumed the records");
    // The data plane resolves the inner map id the control plane stored.
    let id_ptr = outer.lookup(&0u32.to_ne_bytes(), 0).unwrap();
    // SAFETY: 4-byte id.
    let id = unsafe { (id_ptr as *const u32).read() };
    let inner = inst.map_by_id(id).expect("inner map by id");
    assert_eq!(
        inner.lookup_copy(&7u32.to_ne_bytes()).unwrap(),
        70u32.to_ne_bytes()
    );
    let names: Vec<String> = inst.list().into_iter().map(|m| m.name).collect();
    assert_eq!(names, vec!["counters", "flows", "outer", "events", "inner"]);

    drop((arr, hash, outer, rb, inner));
    drop(inst);
    assert!(!std::path::Path::new(&format!("/dev/shm/bpfjet.{name}.registry")).exists());
    assert!(!std::path::Path::new(&format!("/dev/shm/bpfjet.{name}.{id}")).exists());
    assert!(Instance::open(&name).is_err());
}

#[test]
fn duplicate_instance_is_refused() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let name = unique("dup");
    let a = Instance::create(&name, 1).unwrap();
    assert_eq!(Instance::create(&name, 1).unwrap_err().errno(), 17);
    drop(a);
    assert!(Instance::create(&name, 1).is_ok());
    assert!(Instance::create("bad/name", 1).is_err());
}

#[test]
fn state_apply_and_dump_roundtrip() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let inst = Instance::anonymous(2).unwrap();
    let opts = MapOptions::default();
    inst.create_map(&MapSpec::new("vip_map", MapType::Hash, 4, 8, 16), &opts)
        .unwrap();
    inst.create_map(&MapSpec::new("pcpu", MapType::PercpuArray, 4, 8, 2), &opts)
        .unwrap();
    inst.create_map(&MapSpec::new("jmp", MapType::ProgArray, 4, 4, 4), &opts)
        .unwrap();
    let mut outer = MapSpec::new("lru_mapping", MapType::ArrayOfMaps, 4, 4, 2);
    outer.inner = Some(Box::new(MapSpec::new("", MapType::LruHash, 8, 4, 100)));
    inst.create_map(&outer, &opts).unwrap();
    let state: MapState = serde_json::from_str(
        r#"{
        "vip_map": [{"key": "0ac80101", "value": "0100000000000000"}],
        "pcpu": [{"key": "00000000", "values": ["0100000000000000", "0200000000000000"]},
                 {"key": "01000000", "value": "0300000000000000"}],
        "jmp": [{"key": "02000000", "prog": "xdp_b"}],
        "lru_mapping": [{"key": "01000000", "inner": {"type": "lru_hash", "key_size": 8,
            "value_size": 4, "max_entries": 100,
            "entries": [{"key": "0102030405060708", "value": "aabbccdd"}]}}]
    }"#,
    )
    .unwrap();
    let progs = vec!["xdp_a".to_string(), "xdp_b".to_string()];
    let r = InstanceResolver {
        instance: &inst,
        progs: &progs,
    };
    inst.apply_state(&state, &r).expect("apply");
    let jmp = inst.map_by_name("jmp").unwrap();
    assert_eq!(
        jmp.lookup_copy(&2u32.to_ne_bytes()).unwrap(),
        1u32.to_ne_bytes()
    );
    let dumped = inst.dump_state(&r).unwrap();
    assert_eq!(dumped["vip_map"], state["vip_map"]);
    assert_eq!(dumped["jmp"], state["jmp"]);
    assert_eq!(dumped["lru_mapping"], state["lru_mapping"]);
    assert_eq!(
        dumped["pcpu"][1].values.as_ref().unwrap(),
        &vec!["0300000000000000".to_string(); 2]
    );
    // Errors name the map and the entry.
    let bad: MapState =
        serde_json::from_str(r#"{"vip_map": [{"key": "0a", "value": "00"}]}"#).unwrap();
    let e = inst.apply_state(&bad, &r).unwrap_err();
    assert!(e.to_string().contains("vip_map"), "{e}");
    let wrong = MapState::from([(
        "lru_mapping".to_string(),
        vec![EntryState {
            key: "00000000".into(),
            inner: Some(InnerMapState {
                map_type: "array".into(),
                key_size: 4,
                value_size: 4,
                max_entries: 1,
                ..Default::default()
            }),
            ..Default::default()
        }],
    )]);
    assert!(inst.apply_state(&wrong, &r).is_err());
}
