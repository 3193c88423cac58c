//! What the `bpfjet trace` test binaries share: where their C sources are,
//! building a helper target, one target run at a time, and the `--json`
//! report of a run.

use serde_json::Value;
use std::process::{Command, Output};

/// The C targets and BPF programs of the tracing tests.
pub const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/trace");

/// Runs of a target one at a time: the kernel's uprobes on a file are
/// installed in every process mapping it, and an int3 the kernel placed in
/// a function bpfjet is patching makes both wrong.
static TARGET_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    TARGET_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a build step; its failure fails the test with its stderr.
#[allow(dead_code)] // trace_fusion builds through its own fixture
pub fn run_ok(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `--json` report: the last line of stdout that is a JSON object.
pub fn json_report(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "no JSON report; status {:?}\nstdout: {stdout}\nstderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// The leading u64 of every value of the report's `counts` map, in key
/// order (the counters the tracing test programs keep). Not every test
/// binary reads that map.
#[allow(dead_code)]
pub fn counts(report: &Value) -> Vec<u64> {
    report["maps"]["counts"]
        .as_array()
        .unwrap_or_else(|| panic!("no counts map in {report}"))
        .iter()
        .map(|e| {
            let b = bpfjet_maps::state::parse_hex(e["value"].as_str().unwrap()).unwrap();
            u64::from_le_bytes(b[..8].try_into().unwrap())
        })
        .collect()
}
