//! STATE.json applied to the kernel's maps and dumped back: every map kind
//! the oracle supports, plus global data and per-CPU placement.

mod common;

use bpfjet_kernel::{possible_cpus, KernelError, KernelObject, LoadOptions};
use bpfjet_maps::state::{EntryState, MapState};
use common::{object, packet};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;

fn state(json: &str) -> MapState {
    serde_json::from_str(json).expect("test STATE.json")
}

fn open_with_state(name: &str, state: &MapState) -> KernelObject {
    let options = LoadOptions {
        state: Some(state),
        ..LoadOptions::default()
    };
    KernelObject::open_with(object(name), &options).unwrap()
}

/// The same value on every possible CPU, as the dump spells it.
fn on_all_cpus(hex: &str) -> Vec<String> {
    vec![hex.to_string(); possible_cpus()]
}

#[test]
fn array_hash_percpu_round_trip() {
    require_kernel!("array_hash_percpu_round_trip");
    let mut pcpu_values = on_all_cpus("0000000000000000");
    pcpu_values[0] = "0100000000000000".to_string();
    let pcpu_values = serde_json::to_string(&pcpu_values).unwrap();
    let input = state(&format!(
        r#"{{
        "counters": [
            {{"key": "00000000", "value": "0a00000000000000"}},
            {{"key": "01000000", "value": "0000000000000000"}},
            {{"key": "02000000", "value": "0000000000000000"}},
            {{"key": "03000000", "value": "ffffffffffffffff"}}],
        "verdicts": [
            {{"key": "02000000", "value": "03000000"}},
            {{"key": "01000000", "value": "01000000"}}],
        "pcpu_bytes": [
            {{"key": "00000000", "values": {pcpu_values}}},
            {{"key": "01000000", "value": "0200000000000000"}}]
    }}"#
    ));
    let obj = open_with_state("maps", &input);
    let dump = obj.dump_maps().unwrap();

    // The dump normalises: hash keys sorted, per-CPU as `values`.
    let mut expected = input.clone();
    expected.get_mut("verdicts").unwrap().reverse();
    expected.get_mut("pcpu_bytes").unwrap()[1] = EntryState {
        key: "01000000".into(),
        values: Some(on_all_cpus("0200000000000000")),
        ..EntryState::default()
    };
    assert_eq!(dump, expected);

    // And applying the dump to a fresh object reproduces it.
    let again = open_with_state("maps", &dump);
    assert_eq!(again.dump_maps().unwrap(), dump);
}

#[test]
fn state_drives_the_program_and_the_run_shows_in_the_dump() {
    require_kernel!("state_drives_the_program_and_the_run_shows_in_the_dump");
    let obj = KernelObject::open(object("maps")).unwrap();
    let mut pkt = packet();
    pkt[0..4].copy_from_slice(&[7, 0, 0, 0]);
    obj.apply_state(&state(
        r#"{"verdicts": [{"key": "07000000", "value": "01000000"}]}"#,
    ))
    .unwrap();
    let run = obj.test_run("classify", &pkt, 1, Some(0)).unwrap();
    assert_eq!(run.retval, XDP_DROP);
    let dump = obj.dump_maps().unwrap();
    assert_eq!(
        dump["counters"][1].value.as_deref(),
        Some("0100000000000000")
    );
    let bytes = dump["pcpu_bytes"][0].values.as_ref().unwrap();
    assert_eq!(bytes[0], "4000000000000000", "64 bytes counted on CPU 0");
}

#[test]
fn rodata_from_state_changes_the_verdict() {
    require_kernel!("rodata_from_state_changes_the_verdict");
    let plain = KernelObject::open(object("globals")).unwrap();
    assert_eq!(
        plain
            .test_run("configured", &packet(), 1, None)
            .unwrap()
            .retval,
        XDP_PASS
    );

    let drop = state(r#"{".rodata": [{"key": "00000000", "value": "01000000"}]}"#);
    let obj = open_with_state("globals", &drop);
    assert_eq!(
        obj.test_run("configured", &packet(), 3, None)
            .unwrap()
            .retval,
        XDP_DROP
    );

    let dump = obj.dump_maps().unwrap();
    assert_eq!(dump[".rodata"], drop[".rodata"]);
    assert_eq!(
        dump[".bss"][0].value.as_deref(),
        Some("03000000"),
        "three runs"
    );

    // Frozen after load: the same contents are accepted, others are refused.
    obj.apply_state(&drop).unwrap();
    let err = obj
        .apply_state(&state(
            r#"{".rodata": [{"key": "00000000", "value": "02000000"}]}"#,
        ))
        .unwrap_err();
    assert!(err.to_string().contains("frozen"), "{err}");
}

#[test]
fn prog_entry_feeds_a_tail_call() {
    require_kernel!("prog_entry_feeds_a_tail_call");
    let empty = KernelObject::open(object("tail_call")).unwrap();
    assert_eq!(
        empty
            .test_run("dispatcher", &packet(), 1, None)
            .unwrap()
            .retval,
        XDP_PASS
    );
    assert_eq!(empty.dump_maps().unwrap()["jump_table"], vec![]);

    let table = state(r#"{"jump_table": [{"key": "01000000", "prog": "dropper"}]}"#);
    let obj = open_with_state("tail_call", &table);
    assert_eq!(
        obj.test_run("dispatcher", &packet(), 1, None)
            .unwrap()
            .retval,
        XDP_DROP
    );
    assert_eq!(obj.dump_maps().unwrap(), table);
}

#[test]
fn inner_entry_creates_a_nested_map() {
    require_kernel!("inner_entry_creates_a_nested_map");
    let empty = KernelObject::open(object("map_in_map")).unwrap();
    assert_eq!(
        empty
            .test_run("lookup_nested", &packet(), 1, None)
            .unwrap()
            .retval,
        XDP_PASS
    );

    let nested = state(
        r#"{"tables": [{"key": "00000000", "inner": {
            "type": "array", "key_size": 4, "value_size": 4, "max_entries": 4, "flags": 0,
            "entries": [
                {"key": "00000000", "value": "01000000"},
                {"key": "01000000", "value": "00000000"},
                {"key": "02000000", "value": "00000000"},
                {"key": "03000000", "value": "00000000"}]}}]}"#,
    );
    let obj = open_with_state("map_in_map", &nested);
    assert_eq!(
        obj.test_run("lookup_nested", &packet(), 1, None)
            .unwrap()
            .retval,
        XDP_DROP
    );
    assert_eq!(obj.dump_maps().unwrap(), nested);
}

#[test]
fn cpu_option_selects_the_per_cpu_slot() {
    require_kernel!("cpu_option_selects_the_per_cpu_slot");
    if possible_cpus() < 2 {
        common::skip(
            "cpu_option_selects_the_per_cpu_slot",
            "needs 2 possible CPUs",
        );
        return;
    }
    let obj = KernelObject::open(object("cpu_id")).unwrap();
    assert_eq!(
        obj.test_run("which_cpu", &packet(), 1, Some(1))
            .unwrap()
            .retval,
        1
    );
    assert_eq!(
        obj.test_run("which_cpu", &packet(), 2, Some(0))
            .unwrap()
            .retval,
        0
    );
    let runs = obj.dump_maps().unwrap()["runs_here"][0]
        .values
        .clone()
        .unwrap();
    assert_eq!(runs[0], "02000000");
    assert_eq!(runs[1], "01000000");
}

#[test]
fn state_errors_name_map_and_entry() {
    require_kernel!("state_errors_name_map_and_entry");
    let obj = KernelObject::open(object("maps")).unwrap();

    let err = obj.apply_state(&state(r#"{"nope": []}"#)).unwrap_err();
    assert!(matches!(err, KernelError::MapNotFound { .. }), "{err}");
    assert!(
        err.to_string().contains("counters"),
        "lists the maps: {err}"
    );

    let err = obj
        .apply_state(&state(
            r#"{"verdicts": [{"key": "01000000", "value": "01000000"},
                             {"key": "0100", "value": "01000000"}]}"#,
        ))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("verdicts")
            && message.contains("entry 1")
            && message.contains("expected 4, got 2"),
        "{message}"
    );

    let too_few = vec!["0000000000000000"; possible_cpus() + 1];
    let err = obj
        .apply_state(&state(&format!(
            r#"{{"pcpu_bytes": [{{"key": "00000000", "values": {}}}]}}"#,
            serde_json::to_string(&too_few).unwrap()
        )))
        .unwrap_err();
    assert!(err.to_string().contains("possible CPUs"), "{err}");

    let err = obj
        .apply_state(&state(
            r#"{"counters": [{"key": "00000000", "prog": "classify"}]}"#,
        ))
        .unwrap_err();
    assert!(err.to_string().contains("PROG_ARRAY"), "{err}");
}

#[test]
fn incompatible_inner_map_is_explained() {
    require_kernel!("incompatible_inner_map_is_explained");
    let obj = KernelObject::open(object("map_in_map")).unwrap();
    let err = obj
        .apply_state(&state(
            r#"{"tables": [{"key": "01000000", "inner": {
                "type": "array", "key_size": 4, "value_size": 8, "max_entries": 4}}]}"#,
        ))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("tables") && message.contains("template"),
        "{message}"
    );
}
