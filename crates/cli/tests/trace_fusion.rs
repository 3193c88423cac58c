//! Pairwise fusion keeps the semantics of the hand-off map (docs/TRACING.md,
//! "Pairwise fusion"): the same command (tests/trace/fusion_target.c) traced
//! with `--no-fuse` and fused, on the interpreter and the JIT, must report
//! every map and every ring-buffer record identically. The tools
//! (tests/trace/fusion.bpf.c) cover what a per-thread slot could get wrong:
//! recursion on one thread key (overwrite, `BPF_NOEXIST`, `BPF_EXIST`),
//! `E2BIG` with more threads in flight than entries, calls left by
//! `longjmp` whose entries stay in the map, and two syscall pairs sharing one
//! map. Each expected figure is also checked against its value computed from
//! the target's constants, so both modes cannot be wrong the same way.
//! Every step of the fusion ladder (`--fuse inline`, `fold`,
//! `internalise-calls`, `internalise`) is compared with `--no-fuse`, on the engines where it
//! applies (folding is the JIT's).
//! tests/trace/fusion_refused.bpf.c holds the pairs that must not fuse (a
//! third program reads the map, the key is the process, the exit does not
//! delete, the map is pinned).

mod trace_common;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, json_report, serial, SRC};

struct Fixture {
    dir: PathBuf,
    target: PathBuf,
}

fn target_define(target: &Path) -> String {
    format!("\"{}\"", target.display())
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-fusion");
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("fusion_target");
        cc("fusion_target.c", &target, &["-O1", "-g"], &["-lpthread"]);
        Fixture { dir, target }
    })
}

/// fusion.bpf.c, or fusion_refused.bpf.c with `-DCASE=case`.
fn object(file: &str, case: Option<&str>) -> PathBuf {
    let f = fixture();
    let mut c = bpfjet_testsupport::Compile::file(format!("{SRC}/{file}"))
        .arg("-D__TARGET_ARCH_x86")
        .define("TARGET_EXE", &target_define(&f.target));
    if let Some(case) = case {
        c = c.define("CASE", case);
    }
    c.object()
}

struct Run {
    report: Value,
    stderr: String,
    events: Vec<Vec<u8>>,
}

/// `bpfjet trace` of the target with `--fuse LEVEL` (`none`: `--no-fuse`).
fn trace(obj: &Path, engine: &str, fuse: &str) -> Run {
    let f = fixture();
    let events = f.dir.join(format!(
        "{}-{engine}-{fuse}.events",
        obj.file_stem().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&events);
    let mut c = Command::new(env!("CARGO_BIN_EXE_bpfjet"));
    c.arg("trace")
        .arg(obj)
        .args(["--json", "--explain", "--engine", engine, "--events"])
        .arg(&events);
    if fuse == "none" {
        c.arg("--no-fuse");
    } else {
        c.args(["--fuse", fuse]);
    }
    let out = c.arg("--").arg(&f.target).output().unwrap();
    let report = json_report(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        report["exit_code"], 42,
        "{engine} --fuse {fuse}: the target failed\n{stderr}"
    );
    let data = std::fs::read(&events).unwrap_or_default();
    let mut records = Vec::new();
    let mut rest = &data[..];
    while rest.len() >= 4 {
        let len = u32::from_ne_bytes(rest[..4].try_into().unwrap()) as usize;
        records.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    Run {
        report,
        stderr,
        events: records,
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    let hex: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

/// Map `name` of a report as key -> value (u64, little-endian).
fn entries(report: &Value, name: &str) -> BTreeMap<u64, u64> {
    report["maps"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no map {name} in {}", report["maps"]))
        .iter()
        .map(|e| {
            let v = e["value"].as_str().unwrap_or_else(|| panic!("{e}"));
            (
                le_u64(&hex_bytes(e["key"].as_str().unwrap())),
                le_u64(&hex_bytes(v)),
            )
        })
        .collect()
}

/// Every map of the report; a map keyed by the thread keeps only its
/// values, sorted (thread ids differ between runs, what they hold may not).
fn comparable(report: &Value, thread_keyed: &[&str]) -> BTreeMap<String, Value> {
    let maps = report["maps"]
        .as_object()
        .unwrap_or_else(|| panic!("no maps in {report}"));
    maps.iter()
        .map(|(name, dump)| {
            let v = if thread_keyed.contains(&name.as_str()) {
                let mut values: Vec<u64> = entries(report, name).into_values().collect();
                values.sort_unstable();
                serde_json::json!({ "values": values })
            } else {
                dump.clone()
            };
            (name.clone(), v)
        })
        .collect()
}

/// The maps `"fused"` says were internalised.
fn internalised(report: &Value) -> Vec<String> {
    let mut maps: Vec<String> = report["fused"]
        .as_array()
        .unwrap_or_else(|| panic!("no \"fused\" in {report}"))
        .iter()
        .flat_map(|p| p["internalised"].as_array().cloned().unwrap_or_default())
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    maps.sort();
    maps.dedup();
    maps
}

const HANDOFFS: [&str; 7] = [
    "held",
    "jumps",
    "rec_depth",
    "rec_ex",
    "rec_ne",
    "rw_args",
    "work_args",
];

// Slots of fusion.bpf.c's `stats` and `update_rc`.
const S_WORK_FOUND: u64 = 0;
const S_WORK_MISSED: u64 = 1;
const S_WORK_SUM: u64 = 2;
const S_REC_FOUND: u64 = 3;
const S_REC_SUM: u64 = 4;
const S_REC_MISSED: u64 = 5;
const S_REC_DEL_OK: u64 = 6;
const S_REC_DEL_ENOENT: u64 = 7;
const S_NE_FOUND: u64 = 8;
const S_NE_SUM: u64 = 9;
const S_NE_MISSED: u64 = 10;
const S_EX_FOUND: u64 = 11;
const S_EX_MISSED: u64 = 12;
const S_EX_DEL_ENOENT: u64 = 13;
const S_HOLD_FOUND: u64 = 14;
const S_HOLD_SUM: u64 = 15;
const S_HOLD_MISSED: u64 = 16;
const S_JUMP_RETURNED: u64 = 17;
const S_READ_SAME: u64 = 18;
const S_WRITE_SAME: u64 = 19;
const S_READ_FOUND: u64 = 20;
const S_WRITE_FOUND: u64 = 21;
const OP_WORK: u64 = 0;
const OP_NOEXIST: u64 = 1;
const OP_EXIST: u64 = 2;
const OP_HOLD: u64 = 3;
const EEXIST: u64 = 17;
const ENOENT: u64 = 2;
const E2BIG: u64 = 7;

/// What the map semantics give for fusion_target.c, whoever runs it.
fn check_figures(label: &str, r: &Run) {
    let stats = entries(&r.report, "stats");
    let rc = entries(&r.report, "update_rc");
    let s = |slot| stats.get(&slot).copied().unwrap_or(0);
    let u = |op: u64, errno: u64| rc.get(&(op * 32 + errno)).copied().unwrap_or(0);
    // work(i) for i < 500, then work(7): stores i, returns 3i + 1.
    let work_sum: u64 = (0..500u64).map(|i| 7 * i + 3 * i + 1).sum::<u64>() + 7 * 7 + 22;
    // rec(d), d = 0..5: d + 1 activations; only the innermost (depth 0,
    // returning 1) finds the value, which it deletes.
    let got = [
        s(S_WORK_FOUND),
        s(S_WORK_MISSED),
        s(S_WORK_SUM),
        u(OP_WORK, 0),
        s(S_REC_FOUND),
        s(S_REC_SUM),
        s(S_REC_MISSED),
        s(S_REC_DEL_OK),
        s(S_REC_DEL_ENOENT),
        s(S_NE_FOUND),
        s(S_NE_SUM),
        s(S_NE_MISSED),
        u(OP_NOEXIST, 0),
        u(OP_NOEXIST, EEXIST),
        s(S_EX_FOUND),
        s(S_EX_MISSED),
        s(S_EX_DEL_ENOENT),
        u(OP_EXIST, ENOENT),
        s(S_HOLD_FOUND),
        s(S_HOLD_SUM),
        s(S_HOLD_MISSED),
        u(OP_HOLD, 0),
        u(OP_HOLD, E2BIG),
        s(S_JUMP_RETURNED),
    ];
    let want = [
        501,
        0,
        work_sum,
        501,
        6,
        600,
        15,
        6,
        15,
        // NOEXIST: the outer entry's depth d survives the inner entries.
        6,
        15 + 600,
        15,
        6,
        15,
        0,
        21,
        21,
        21,
        // 8 holders, 4 entries: hold(x) returns x + 100.
        4,
        400,
        4,
        4,
        4,
        0,
    ];
    assert_eq!(got, want, "{label}: stats\n{}", r.stderr);
    // The longjmp'd calls: the main thread's last entry and one per jumper.
    let mut left: Vec<u64> = entries(&r.report, "jumps").into_values().collect();
    left.sort_unstable();
    assert_eq!(left, [1002, 2000, 2001], "{label}: entries left by longjmp");
    assert!(
        s(S_READ_FOUND) >= 500 && s(S_READ_SAME) == s(S_READ_FOUND),
        "{label}: reads {} / {}",
        s(S_READ_SAME),
        s(S_READ_FOUND)
    );
    assert!(
        s(S_WRITE_FOUND) >= 500 && s(S_WRITE_SAME) == s(S_WRITE_FOUND),
        "{label}: writes {} / {}",
        s(S_WRITE_SAME),
        s(S_WRITE_FOUND)
    );
    assert_eq!(r.events.len(), 501, "{label}: ring-buffer records");
}

/// The ladder's levels that change anything on `engine`.
fn levels(engine: &str) -> &'static [&'static str] {
    if engine == "jit" {
        &[
            "inline",
            "fold",
            "internalise-calls",
            "internalise",
            "compile",
        ]
    } else {
        &["inline", "internalise-calls", "internalise"]
    }
}

/// The pairs' steps of a report: (entry, exit) -> steps.
fn steps(report: &Value) -> BTreeMap<(String, String), Vec<String>> {
    report["fused"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let steps = p["steps"].as_array().into_iter().flatten().map(s).collect();
            ((s(&p["entry"]), s(&p["exit"])), steps)
        })
        .collect()
}

fn fused_equals_unfused(engine: &str) {
    let _serial = serial();
    let obj = object("fusion.bpf.c", None);
    let unfused = trace(&obj, engine, "none");
    check_figures(&format!("{engine} --no-fuse"), &unfused);
    assert_eq!(internalised(&unfused.report), Vec::<String>::new());
    assert_eq!(
        steps(&unfused.report),
        BTreeMap::new(),
        "--no-fuse ran fused"
    );
    for &level in levels(engine) {
        let fused = trace(&obj, engine, level);
        check_figures(&format!("{engine} --fuse {level}"), &fused);
        assert_eq!(
            comparable(&unfused.report, &HANDOFFS),
            comparable(&fused.report, &HANDOFFS),
            "{engine}: maps differ between --no-fuse and --fuse {level}"
        );
        assert_eq!(
            unfused.events, fused.events,
            "{engine}: ring-buffer records differ between --no-fuse and --fuse {level}"
        );
        assert_eq!(
            unfused.report["ringbufs"], fused.report["ringbufs"],
            "{engine}: ring-buffer counts, --fuse {level}"
        );
        // What ran: every hand-off map of every pair once internalising,
        // none before; the syscall pairs' record number folded on the JIT.
        let want: Vec<String> = if matches!(level, "inline" | "fold") {
            Vec::new()
        } else {
            HANDOFFS.iter().map(|s| s.to_string()).collect()
        };
        assert_eq!(
            internalised(&fused.report),
            want,
            "{engine} --fuse {level}: what ran fused\n{}",
            fused.stderr
        );
        let ran = steps(&fused.report);
        let folded = ran
            .iter()
            .filter(|(_, s)| s.iter().any(|s| s == "fold-attach-site"))
            .count();
        if level == "inline" {
            assert_eq!(folded, 0, "inline folds nothing: {ran:?}");
        } else if engine == "jit" {
            assert!(
                folded >= 2,
                "{level}: the two syscall pairs are not folded: {ran:?}"
            );
        } else {
            assert_eq!(folded, 0, "{level}: the interpreter folds nothing: {ran:?}");
        }
        // Every level from `inline` on runs the two syscall pairs (read and
        // write) through the wrappers' call-through stubs.
        let through: BTreeMap<String, Vec<String>> = fused.report["fused"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                p["steps"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s == "inline-call-through"))
            })
            .map(|p| {
                let wrappers = p["call_through"].as_array().into_iter().flatten();
                (
                    p["entry"].as_str().unwrap_or_default().to_string(),
                    wrappers
                        .map(|w| w.as_str().unwrap_or_default().to_string())
                        .collect(),
                )
            })
            .collect();
        assert!(
            through.values().any(|w| w.iter().any(|w| w == "read"))
                && through.values().any(|w| w.iter().any(|w| w == "write")),
            "{engine} --fuse {level}: read and write run through call-through stubs: {}",
            fused.report["fused"]
        );
        assert!(
            fused.report["syscalls"]["fast_path"].as_u64() >= Some(1000),
            "{engine} --fuse {level}: the target's reads and writes took the fast path: {}",
            fused.report["syscalls"]
        );
        let inlined = ran
            .values()
            .any(|s| s.iter().any(|s| s == "inline-slot-ops"));
        assert_eq!(
            inlined,
            engine == "jit" && matches!(level, "internalise" | "compile"),
            "{engine} --fuse {level}: slot operations compiled in: {ran:?}"
        );
    }
}

#[test]
fn fused_runs_report_what_unfused_runs_report_interp() {
    fused_equals_unfused("interp");
}

#[test]
fn fused_runs_report_what_unfused_runs_report_jit() {
    fused_equals_unfused("jit");
}

/// Each case keeps `work_args` a map, says why, and reports the same
/// fused or not.
#[test]
fn maps_that_must_stay_maps_are_not_internalised() {
    let _serial = serial();
    let cases = [
        ("CASE_THIRD", "program peek_entry also uses it"),
        ("CASE_TGID", "process id"),
        ("CASE_KEEP", "does not delete it"),
        ("CASE_PINNED", "pinned by name"),
    ];
    for (case, why) in cases {
        let obj = bpfjet_testsupport::Compile::file(format!("{SRC}/fusion_refused.bpf.c"))
            .arg("-D__TARGET_ARCH_x86")
            .define("TARGET_EXE", &target_define(&fixture().target))
            .define("CASE", case)
            .object();
        let unfused = trace(&obj, "interp", "none");
        let fused = trace(&obj, "interp", "all");
        assert!(
            internalised(&fused.report).is_empty(),
            "{case}: {}",
            fused.report["fused"]
        );
        assert!(
            fused.stderr.contains("map work_args stays a map") && fused.stderr.contains(why),
            "{case}: --explain does not say {why:?}:\n{}",
            fused.stderr
        );
        // The per-process key is the same in both runs' single process only
        // by value; compare what the key holds.
        let keyed: &[&str] = &["work_args"];
        assert_eq!(
            comparable(&unfused.report, keyed),
            comparable(&fused.report, keyed),
            "{case}: maps differ between --no-fuse and fused"
        );
        let stats = entries(&fused.report, "stats");
        assert_eq!(stats.get(&1), Some(&501), "{case}: work() returns seen");
    }
}

/// The tools of examples/trace/ (CO-RE, built by `make -C examples trace`),
/// with fsdist — the paper's tool — first: each of their entry/exit pairs
/// runs fused (fsdist's and rw_tracer's read and write pairs share one
/// map), and they report what they report unfused. Latencies differ run to
/// run, so histograms are compared by their totals per operation; sizes,
/// outcomes and events' (op, fd, count, ret) exactly.
#[test]
fn example_tools_run_fused_and_report_what_they_report_unfused() {
    let _serial = serial();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bpfjet_testsupport::report_skip(
            "example tools: no /sys/kernel/btf/vmlinux to build the CO-RE tools",
        );
        return;
    }
    let made = Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("examples"))
        .arg("trace")
        .status()
        .expect("make");
    assert!(made.success(), "make -C examples trace failed");
    let cases: [(&str, &[&str]); 4] = [
        ("fsdist", &["starts"]),
        ("funclatency", &["starts"]),
        ("bytes_per_call", &["asked"]),
        ("rw_tracer", &["inflight"]),
    ];
    for (tool, handoffs) in cases {
        let obj = root.join(format!("build/examples/trace/{tool}.o"));
        let unfused = trace(&obj, "jit", "none");
        // The paper's tool climbs the whole ladder; the others run at the top.
        let ladder: &[&str] = if tool == "fsdist" {
            levels("jit")
        } else {
            &["all"]
        };
        for &level in ladder {
            let fused = trace(&obj, "jit", level);
            let want: &[&str] = if matches!(level, "inline" | "fold") {
                &[]
            } else {
                handoffs
            };
            assert_eq!(
                internalised(&fused.report),
                want,
                "{tool} --fuse {level}: what ran fused\n{}",
                fused.stderr
            );
            let view = |r: &Run| -> Value {
                let maps = &r.report["maps"];
                let mut v = serde_json::Map::new();
                for (name, dump) in maps.as_object().unwrap() {
                    if handoffs.contains(&name.as_str()) {
                        // Entries of calls in flight at exit, by count.
                        v.insert(name.clone(), dump.as_array().map_or(0, Vec::len).into());
                    } else if name == "hist" && tool == "fsdist" {
                        let h = entries(&r.report, "hist");
                        let reads: u64 = h.range(..32).map(|(_, n)| n).sum();
                        let writes: u64 = h.range(32..).map(|(_, n)| n).sum();
                        v.insert(name.clone(), serde_json::json!([reads, writes]));
                    } else if name == "hist" {
                        v.insert(
                            name.clone(),
                            entries(&r.report, name).values().sum::<u64>().into(),
                        );
                    } else if name != "rb_stats" {
                        v.insert(name.clone(), dump.clone());
                    }
                }
                // rw_tracer's struct rw_event: op at 28, fd at 32, count at
                // 48, ret at 56 (timestamps, ids and buffer addresses vary).
                // Only the target's descriptors (fusion_target.c's ZERO_FD,
                // NULL_FD): the agent's own writes of the events file vary.
                let events: Vec<Vec<u8>> = r
                    .events
                    .iter()
                    .filter(|e| e.len() >= 64 && matches!(le_u64(&e[32..40]), 100 | 101))
                    .map(|e| [&e[28..40], &e[48..64]].concat())
                    .collect();
                v.insert("events".into(), serde_json::json!(events));
                Value::Object(v)
            };
            assert_eq!(
                view(&unfused),
                view(&fused),
                "{tool}: --no-fuse and --fuse {level} differ"
            );
            if tool == "fsdist" {
                let h = entries(&fused.report, "hist");
                assert!(
                    h.range(..32).map(|(_, n)| n).sum::<u64>() >= 500
                        && h.range(32..).map(|(_, n)| n).sum::<u64>() >= 500,
                    "fsdist --fuse {level}: fusion_target's 500 reads and 500 writes: {h:?}"
                );
            }
        }
    }
}
