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

/// `bpfjet trace OBJ --json --engine ENGINE -- CMD ARGS...`: its output.
#[allow(dead_code)]
pub fn trace_json(obj: &std::path::Path, engine: &str, cmd: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(obj)
        .args(["--json", "--engine", engine, "--"])
        .args(cmd)
        .output()
        .unwrap()
}

/// A little-endian key or value of a report, hex as the report writes it
/// (up to 8 bytes), as a u64.
#[allow(dead_code)]
pub fn hex_u64(hex: &str) -> u64 {
    let b = bpfjet_maps::state::parse_hex(hex).unwrap();
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(&b);
    u64::from_le_bytes(v)
}

/// Maps of u64 keys to u64 values, by name.
#[allow(dead_code)]
pub type U64Maps = std::collections::BTreeMap<String, std::collections::BTreeMap<u64, u64>>;

/// The maps `names` of a `--json` report as [`U64Maps`].
#[allow(dead_code)]
pub fn report_maps(report: &Value, names: &[&str]) -> U64Maps {
    names
        .iter()
        .map(|m| {
            let kv = report["maps"][m]
                .as_array()
                .unwrap_or_else(|| panic!("no {m} in {report}"))
                .iter()
                .map(|e| {
                    (
                        hex_u64(e["key"].as_str().unwrap()),
                        hex_u64(e["value"].as_str().unwrap()),
                    )
                })
                .collect();
            (m.to_string(), kv)
        })
        .collect()
}

/// tests/trace/multi_loader.c (built in `dir`) run on the kernel with
/// `dir/obj` around `dir/target`: the maps `names` it printed, as
/// [`multi_loader_maps`].
#[allow(dead_code)]
pub fn kernel_multi_maps(
    dir: &std::path::Path,
    obj: &str,
    target: &str,
    names: &[&str],
    what: &str,
) -> Option<U64Maps> {
    let out = Command::new(dir.join("multi_loader"))
        .arg(dir.join(obj))
        .arg(dir.join(target))
        .output()
        .unwrap();
    multi_loader_maps(&out, names, what)
}

/// The maps `names` as tests/trace/multi_loader.c prints them (`MAP KEY
/// VALUE` lines among its link lines) after running its command on the
/// kernel, or None, with the skip reported, when the kernel could not.
#[allow(dead_code)]
pub fn multi_loader_maps(out: &Output, names: &[&str], what: &str) -> Option<U64Maps> {
    if !out.status.success() {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison of {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    let mut m = U64Maps::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 3 || !names.contains(&f[0]) {
            continue;
        }
        m.entry(f[0].to_string())
            .or_default()
            .insert(f[1].parse().unwrap(), f[2].parse().unwrap());
    }
    Some(m)
}

/// Builds `tests/trace/<src>` for the BPF target with clang-19 into `out`
/// (the architecture's UAPI headers on the include path).
#[allow(dead_code)]
pub fn clang_bpf(src: &str, out: impl AsRef<std::path::Path>) {
    run_ok(
        Command::new("clang-19")
            .args(["-O2", "-g", "-target", "bpf"])
            .args(["-I/usr/include/x86_64-linux-gnu", "-c"])
            .arg(format!("{SRC}/{src}"))
            .arg("-o")
            .arg(out.as_ref()),
        &format!("clang-19 {src}"),
    );
}

/// The sized symbols of `binary` (`nm -S`): name -> (address, size).
#[allow(dead_code)]
pub fn symbol_sizes(binary: &std::path::Path) -> std::collections::BTreeMap<String, (u64, u64)> {
    let out = Command::new("nm")
        .arg("-S")
        .arg(binary)
        .output()
        .expect("nm (binutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                (
                    f[3].to_string(),
                    (
                        u64::from_str_radix(f[0], 16).unwrap(),
                        u64::from_str_radix(f[1], 16).unwrap(),
                    ),
                )
            })
        })
        .collect()
}
