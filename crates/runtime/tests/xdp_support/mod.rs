//! Shared by the `xdp_*` test suites: compiling the C test programs,
//! loading an object into bpfjet and (when possible) into the kernel with
//! the same state, and comparing the two engines.
#![allow(dead_code)]

use bpfjet_kernel::{KernelObject, LoadOptions};
use bpfjet_maps::state::{to_hex, EntryState, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions, TestRunResult};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const CLANG: &str = "/usr/bin/clang-19";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compile `tests/progs/<name>.c` into an object file (once per test
/// process, bpfjet-testsupport's clang and flags plus `-Wall`).
pub fn build(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/progs/{name}.c"));
    bpfjet_testsupport::Compile::file(src).arg("-Wall").object()
}

/// A corpus object built by `make -C examples`.
pub fn corpus_object(name: &str) -> PathBuf {
    let path = workspace().join(format!("build/examples/xdp/{name}.o"));
    if !path.exists() {
        let status = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(workspace().join("examples"))
            .status()
            .expect("run make -C examples");
        assert!(status.success(), "make -C examples failed");
    }
    assert!(
        path.exists(),
        "{} missing after make -C examples",
        path.display()
    );
    path
}

/// STATE.json setting `cfg`'s 16 signed words.
pub fn cfg_state(vals: &[i64]) -> MapState {
    let mut bytes = Vec::new();
    for i in 0..16 {
        bytes.extend_from_slice(&vals.get(i).copied().unwrap_or(0).to_le_bytes());
    }
    let mut s = MapState::new();
    s.insert(
        "cfg".into(),
        vec![EntryState {
            key: "00000000".into(),
            value: Some(to_hex(&bytes)),
            ..EntryState::default()
        }],
    );
    s
}

/// The 16 words of `out` in a dump.
pub fn out_vals(state: &MapState) -> Vec<i64> {
    let hex = state["out"][0].value.as_deref().expect("out value");
    let bytes = bpfjet_maps::state::parse_hex(hex).expect("hex");
    bytes
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Loads for helper-semantics tests in the bounds-checked interpreter: these
/// tests pin each helper's behaviour against the kernel, including programs
/// bpfjet's verifier does not accept yet (bpf_spin_lock needs BTF-described
/// map values, a documented verifier gap); the verifier has its own
/// differential suite, and the corpus tests run verified.
pub fn load_ours(path: &Path, state: Option<&MapState>) -> LoadedObject {
    let obj = bpfjet_obj::load_file(path).expect("parse object");
    LoadedObject::load(
        &obj,
        &ObjectOptions {
            state: state.cloned(),
            unverified: true,
            ..ObjectOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("bpfjet load of {}: {e}", path.display()))
}

/// The kernel engine, or None (with a loud SKIPPED line) without privileges.
pub fn load_kernel(path: &Path, state: Option<&MapState>, why: &str) -> Option<KernelObject> {
    if let Err(e) = bpfjet_kernel::kernel_available() {
        bpfjet_testsupport::report_skip(format!("kernel comparison for {why}: {e}"));
        return None;
    }
    let obj = KernelObject::open_with(
        path,
        &LoadOptions {
            state,
            ..LoadOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    Some(obj)
}

/// A deterministic Ethernet frame of `len` bytes.
pub fn packet(len: usize) -> Vec<u8> {
    bpfjet_testsupport::packet::scrambled(len)
}

pub fn run_ours(obj: &LoadedObject, prog: &str, pkt: &[u8], cpu: usize) -> TestRunResult {
    obj.test_run(
        prog,
        pkt,
        &TestRunOptions {
            cpu,
            ..TestRunOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("bpfjet test run of {prog}: {e}"))
}

/// Drop maps whose contents are nondeterministic by nature.
pub fn without(mut state: MapState, maps: &[&str]) -> MapState {
    for m in maps {
        state.remove(*m);
    }
    state
}

/// Run `prog` on both engines (each already holding the same state) and
/// require the same action, output bytes and maps (minus `ignore`).
/// Returns bpfjet's result and dump.
pub fn run_both(
    ours: &LoadedObject,
    kernel: Option<&KernelObject>,
    prog: &str,
    pkt: &[u8],
    cpu: usize,
    ignore: &[&str],
    label: &str,
) -> (TestRunResult, MapState) {
    let mine = run_ours(ours, prog, pkt, cpu);
    let my_dump = ours.dump_state().expect("bpfjet dump");
    if let Some(k) = kernel {
        let theirs = k
            .test_run(prog, pkt, 1, Some(cpu))
            .unwrap_or_else(|e| panic!("kernel test run of {prog}: {e}"));
        assert_eq!(
            mine.retval, theirs.retval,
            "{label}: action differs from the kernel"
        );
        assert_eq!(
            to_hex(&mine.data_out),
            to_hex(&theirs.data_out),
            "{label}: output packet differs from the kernel"
        );
        let their_dump = k.dump_maps().expect("kernel dump");
        assert_eq!(
            serde_json::to_string_pretty(&without(my_dump.clone(), ignore)).unwrap(),
            serde_json::to_string_pretty(&without(their_dump, ignore)).unwrap(),
            "{label}: maps differ from the kernel"
        );
    }
    (mine, my_dump)
}
