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

/// Builds `tests/trace/<src>` with the system C compiler into `out`:
/// `flags` before the source, `libs` after it (the linker reads them in
/// that order). Its failure fails the test with the compiler's stderr.
#[allow(dead_code)] // not every test binary builds a C target
pub fn cc(src: &str, out: impl AsRef<std::path::Path>, flags: &[&str], libs: &[&str]) {
    run_ok(
        Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(out.as_ref())
            .arg(format!("{SRC}/{src}"))
            .args(libs),
        &format!("cc {src}"),
    );
}

/// Runs a build step; its failure fails the test with its stderr.
#[allow(dead_code)]
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

/// The slots a kernel loader run printed (tests/trace/kernel_loader.c:
/// one "SLOT VALUE" line per slot of `counts`), or None, with the skip
/// reported, when the kernel could not run the object (`what` says which
/// comparison is skipped).
#[allow(dead_code)] // not every test binary compares with the kernel
pub fn loader_slots(out: &Output, what: &str) -> Option<Vec<u64>> {
    if !out.status.success() {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
            .collect(),
    )
}
