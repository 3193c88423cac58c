//! Every helper the JIT compiles in, exercised by one program of
//! `tests/progs/inline_helpers.c`: the JIT with inlining must produce what
//! the reference interpreter produces (action, packet, maps, over several
//! runs so that map updates feed back), and the inlined helpers must really
//! have left the trampoline.
//!
//! The C file is compiled with clang-19 at test time; without it the test
//! fails and says to run scripts/setup.sh.

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::{EntryState, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::PathBuf;

mod fixtures;

fn object() -> PathBuf {
    fixtures::test_prog("inline_helpers")
}

fn state() -> MapState {
    let entry = |k: u32, v: u64| EntryState {
        key: hex(&k.to_le_bytes()),
        value: Some(hex(&v.to_le_bytes())),
        ..EntryState::default()
    };
    let mut s = MapState::new();
    s.insert(
        "arr".into(),
        (0..8).map(|i| entry(i, u64::from(i) * 10)).collect(),
    );
    s.insert(
        "h4".into(),
        vec![entry(0, 100), entry(3, 103), entry(9, 109)],
    );
    s
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn packet() -> Vec<u8> {
    (0..80u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(5))
        .collect()
}

/// Helper calls left on the trampoline in the optimized IR.
fn trampoline_calls(obj: &JitObject, prog: &str, inline: bool) -> usize {
    obj.dump(prog, DumpStage::OptimizedIr, inline)
        .unwrap()
        .matches("@bpfjet_jit_helper(")
        .count()
        .saturating_sub(1) // the declaration
}

const RUNS: u32 = 3;

fn check(prog: &str, fully_inlined: bool) {
    let path = object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let opts = ObjectOptions {
        state: Some(state()),
        ..ObjectOptions::default()
    };
    let run = TestRunOptions::default();
    let reference = LoadedObject::load(&obj, &opts).unwrap();
    let fast = JitObject::load(&obj, &opts, &JitOptions::uncached()).unwrap();
    for i in 0..RUNS {
        let want = reference.test_run(prog, &packet(), &run).unwrap();
        let got = fast
            .test_run(prog, &packet(), &run, XdpEngine::Jit)
            .unwrap();
        assert_eq!(got.retval, want.retval, "{prog} run {i}: action");
        assert_eq!(got.data_out, want.data_out, "{prog} run {i}: packet");
        assert_eq!(
            fast.loaded().dump_state().unwrap(),
            reference.dump_state().unwrap(),
            "{prog} run {i}: maps"
        );
    }
    let inlined = trampoline_calls(&fast, prog, true);
    let plain = trampoline_calls(&fast, prog, false);
    assert!(
        inlined < plain,
        "{prog}: {inlined} trampoline calls with inlining, {plain} without"
    );
    if fully_inlined {
        assert_eq!(inlined, 0, "{prog}: helper calls left on the trampoline");
    }
}

#[test]
fn array_lookup_with_variable_keys() {
    check("array_var_key", true);
}

#[test]
fn array_lookup_with_a_constant_key() {
    check("array_const_key", true);
}

#[test]
fn percpu_array_lookup_and_cpu_id() {
    check("percpu_array", true);
}

#[test]
fn hash_lookup_4_byte_keys() {
    check("hash_k4", true);
}

#[test]
fn hash_lookup_12_byte_keys() {
    check("hash_k12", false);
}

#[test]
fn lru_lookup_6_byte_keys() {
    check("lru_k6", false);
}

#[test]
fn csum_diff() {
    check("csum", true);
}

#[test]
fn xdp_load_and_store_bytes() {
    check("load_store_bytes", true);
}

#[test]
fn strncmp_against_rodata() {
    check("strings", true);
}

#[test]
fn rodata_folds() {
    // No helper calls at all: the constant-folded load is checked by value.
    let path = object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let opts = ObjectOptions::default();
    let reference = LoadedObject::load(&obj, &opts).unwrap();
    let fast = JitObject::load(&obj, &opts, &JitOptions::uncached()).unwrap();
    let run = TestRunOptions::default();
    let want = reference.test_run("rodata", &packet(), &run).unwrap();
    let got = fast
        .test_run("rodata", &packet(), &run, XdpEngine::Jit)
        .unwrap();
    assert_eq!((got.retval, got.data_out), (want.retval, want.data_out));
    let ir = fast.dump("rodata", DumpStage::OptimizedIr, true).unwrap();
    // Folded loads leave the constant copy of `.rodata` unused, and LLVM
    // drops it; without folding it would still be read.
    assert!(
        !ir.contains("@bpfjet_frozen_"),
        "the .rodata loads did not fold:\n{ir}"
    );
}

#[test]
fn ktime() {
    check("clock", true);
}

#[test]
fn bpf_loop_with_a_known_callback() {
    check("loop", true);
}

#[test]
fn map_values_do_not_alias_across_maps() {
    check("two_maps", true);
    let obj = bpfjet_obj::load_file(object()).unwrap();
    let fast = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = fast.dump("two_maps", DumpStage::OptimizedIr, true).unwrap();
    // The CPU slot is loaded once for both per-CPU lookups.
    let cpu_loads = ir
        .lines()
        .filter(|l| l.contains("= load i64") && l.contains("%cpup"))
        .count();
    assert_eq!(cpu_loads, 1, "CPU slot loads in two_maps:\n{ir}");
    // The array value (`arr`, the object's first map) is read once: the
    // program reads it three times, around stores to the per-CPU values,
    // which LLVM now knows are another map's memory.
    let arr_addrs: Vec<String> = ir
        .lines()
        .filter(|l| l.contains("getelementptr") && l.contains("i8, ptr @bpfjet_map_0_values,"))
        .filter_map(|l| l.trim().split_once(" = ").map(|(name, _)| name.to_string()))
        .collect();
    let arr_loads = ir
        .lines()
        .filter(|l| {
            l.contains("= load i64, ptr ")
                && arr_addrs.iter().any(|a| l.contains(&format!("ptr {a},")))
        })
        .count();
    assert_eq!(arr_loads, 1, "loads of the array value in two_maps:\n{ir}");
    // The keys are masked in range, so the program's null checks of the
    // three lookups fold away (the addresses are in-bounds steps from the
    // map symbols, known non-null).
    let null_checks = ir.lines().filter(|l| l.contains(", null")).count();
    assert_eq!(null_checks, 0, "null checks left in two_maps:\n{ir}");
}

/// Lookups whose keys are out of range at run time still give NULL: the
/// in-bounds address is only taken when the key is in range.
#[test]
fn percpu_array_out_of_range_keys() {
    // Keys 0..7 every run: four of them out of range, each seen as NULL
    // (the sum folds in which lookups failed), as the interpreter sees it.
    check("percpu_out_of_range", true);
}
