//! Pairwise fusion's `compile` rung (docs/TRACING.md "Pairwise fusion"):
//! a `sys_enter_X`/`sys_exit_X` pair compiled into one native function
//! around the wrapper's call reports what the unfused pair reports, with a
//! signal handler calling `read` inside a blocked, traced `read`
//! (tests/trace/fusion_signal_target.c), calls failing with EBADF (the
//! caller's -1 and errno, the exit record's -EBADF) and a thread cancelled
//! while blocked in a traced `read`; a pair that must not be compiled
//! (its system call has a second enter program) is not, and `--explain`
//! says why; the interpreter runs the same object at its own top rung.
//! tests/trace_fusion.rs runs the `compile` rung on its fixture too.

mod trace_common;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, json_report, serial, SRC};

/// The target's constants (fusion_signal_target.c).
const NESTED: u64 = 20;
const PLAIN: u64 = 300;
const BADF: u64 = 10;

fn target() -> &'static PathBuf {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-fusion-compile");
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("fusion_signal_target");
        cc(
            "fusion_signal_target.c",
            &target,
            &["-O1", "-g", "-fexceptions"],
            &["-lpthread"],
        );
        target
    })
}

struct Run {
    report: Value,
    stderr: String,
}

fn trace(engine: &str, fuse: &str) -> Run {
    let obj = bpfjet_testsupport::Compile::file(format!("{SRC}/fusion_signal.bpf.c")).object();
    let mut c = Command::new(env!("CARGO_BIN_EXE_bpfjet"));
    c.arg("trace")
        .arg(&obj)
        .args(["--json", "--explain", "--engine", engine]);
    if fuse == "none" {
        c.arg("--no-fuse");
    } else {
        c.args(["--fuse", fuse]);
    }
    let out = c.arg("--").arg(target()).output().unwrap();
    let report = json_report(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        report["exit_code"], 42,
        "{engine} --fuse {fuse}: the target failed\n{stderr}"
    );
    Run { report, stderr }
}

/// `seen` by slot, without the slots of the helper thread's /proc reads
/// (their number depends on scheduling): 3 (found, other sizes) and 20
/// (read results equal to the count, which include them).
fn seen(report: &Value) -> BTreeMap<u64, u64> {
    let le = |hex: &str| {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .rev()
            .fold(0u64, |v, b| v << 8 | u64::from(b))
    };
    report["maps"]["seen"]
        .as_array()
        .expect("seen is reported")
        .iter()
        .map(|e| {
            (
                le(e["key"].as_str().unwrap()),
                le(e["value"].as_str().unwrap()),
            )
        })
        .filter(|(k, _)| *k != 3 && *k != 20)
        .collect()
}

fn steps(report: &Value) -> BTreeMap<String, Vec<String>> {
    report["fused"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let steps = p["steps"].as_array().into_iter().flatten().map(s).collect();
            (s(&p["entry"]), steps)
        })
        .collect()
}

#[test]
fn compiled_pair_reports_what_the_unfused_pair_reports() {
    let _serial = serial();
    let unfused = trace("jit", "none");
    let want = seen(&unfused.report);
    // Computed from the target's constants: the handler's 16-byte read
    // inside each blocked 1-byte read is traced (application handlers run
    // dispatched, crates/probe/src/signal_handlers.rs) and, as with the
    // kernel, its pair overwrites and deletes the thread's hand-off entry:
    // NESTED 16-byte calls found, NESTED read exits without an entry, no
    // 1-byte call found; the pipe's NESTED writes, the PLAIN calls.
    let g = |k: u64| want.get(&k).copied().unwrap_or(0);
    // Slots: read 1/16/64/7-byte calls found, write 1/64/7-byte found,
    // read and write exits without an entry, write results equal to the
    // count, write entries, read and write results -EBADF.
    assert_eq!(
        [
            g(0),
            g(1),
            g(2),
            g(4),
            g(8),
            g(10),
            g(12),
            g(16),
            g(17),
            g(21),
            g(24),
            g(25),
            g(26)
        ],
        [
            0,
            NESTED,
            PLAIN,
            BADF,
            NESTED,
            PLAIN,
            BADF,
            NESTED,
            0,
            NESTED + PLAIN,
            NESTED + PLAIN + BADF,
            BADF,
            BADF
        ],
        "--no-fuse: {want:?}"
    );
    // The cancelled reader's entry stays (its exit never runs).
    let handoffs = |r: &Value| r["maps"]["args"].as_array().map_or(0, Vec::len);
    assert_eq!(handoffs(&unfused.report), 1, "--no-fuse: args");
    for level in ["compile", "all"] {
        let fused = trace("jit", level);
        assert_eq!(handoffs(&fused.report), 1, "--fuse {level}: args");
        assert_eq!(
            seen(&fused.report),
            want,
            "--fuse {level}: maps differ from --no-fuse\n{}",
            fused.stderr
        );
        let ran = steps(&fused.report);
        let compiled = |entry: &str| {
            ran.get(entry)
                .is_some_and(|s| s.iter().any(|s| s == "compile-pair"))
        };
        assert!(compiled("read_enter"), "--fuse {level}: {ran:?}");
        assert!(
            !compiled("write_enter") && !compiled("write_calls"),
            "--fuse {level}: the write pair has two enter programs: {ran:?}"
        );
        assert!(
            fused.stderr.contains(
                "not compiled into one function: write_enter + write_exit: \
                 write has more than one enter or exit program"
            ),
            "--fuse {level}: --explain does not say why:\n{}",
            fused.stderr
        );
        // The same reason in the JSON report.
        let refusals = fused.report["fusion_compile_refusals"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            refusals
                .iter()
                .filter_map(Value::as_str)
                .any(|r| r.contains(
                    "write_enter + write_exit: write has more than one enter or exit program"
                )),
            "--fuse {level}: fusion_compile_refusals: {refusals:?}"
        );
    }
    // Below the rung nothing is compiled.
    let internalised = trace("jit", "internalise");
    assert_eq!(seen(&internalised.report), want);
    assert!(steps(&internalised.report)
        .values()
        .all(|s| s.iter().all(|s| s != "compile-pair")));
    // The interpreter's top rung keeps each program's own run.
    let interp = trace("interp", "all");
    assert_eq!(seen(&interp.report), want);
    assert!(steps(&interp.report)
        .values()
        .all(|s| s.iter().all(|s| s != "compile-pair")));
    assert!(
        interp.stderr.contains("compile: the interpreter"),
        "{}",
        interp.stderr
    );
}
