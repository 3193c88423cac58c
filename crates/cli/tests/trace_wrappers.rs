//! The system-call fast path on libc's wrappers is exact: a C program
//! (tests/trace/wrappers_target.c) calls every covered wrapper once
//! succeeding and once failing inside a window, keeps its own record of
//! the calls and their raw results (the result, or -errno), and checks
//! what it sees (errno, data). A sys_enter/sys_exit program
//! (tests/trace/wrappers.bpf.c) counts the window's calls and sums their
//! results by number, under `bpfjet trace` and on the kernel's tracepoints
//! (libbpf loader tests/trace/kernel_loader.c). Per number: the counts are
//! the program's record and equal in both, the sums are each run's record
//! (descriptor and process numbers differ between the runs), the program's
//! checks hold in both, and under bpfjet the window's calls took the fast
//! path. Once with an exit program (the full return) and once with entries
//! only (the quick return).

mod trace_common;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, serial, SRC};

/// Slots per table of the program's `counts` (entries, exits, sums).
const NR: usize = 512;

fn fixture() -> &'static PathBuf {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-wrappers");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| format!("{SRC}/{f}");
        cc(
            "wrappers_target.c",
            dir.join("wrappers_target"),
            &["-O1"],
            &[],
        );
        for (out, defines) in [("full.o", &["-DEXITS"][..]), ("entries.o", &[][..])] {
            bpfjet_testsupport::clang::Compile::file(src("wrappers.bpf.c"))
                .arg("-D__TARGET_ARCH_x86")
                .args(defines)
                .object_at(dir.join(out));
        }
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        dir
    })
}

/// A fresh directory for one run of the target, and its record file.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let d = fixture().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let record = fixture().join(format!("{name}.record"));
    let _ = std::fs::remove_file(&record);
    (d, record)
}

/// The target's record: number → (calls, summed raw results).
fn record(path: &Path) -> BTreeMap<usize, (u64, i64)> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let v: Vec<i64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0] as usize, (v[1] as u64, v[2]))
        })
        .collect()
}

/// Checks a run's counts against its record: every number's entries (and
/// with `exits`, exits and summed results) are the record's, and no other
/// call was seen in the window.
fn matches_record(who: &str, c: &[u64], rec: &BTreeMap<usize, (u64, i64)>, exits: bool) {
    assert_eq!(c.len(), 3 * NR, "{who}: counts slots");
    for nr in 0..NR {
        let (calls, sum) = rec.get(&nr).copied().unwrap_or((0, 0));
        assert_eq!(c[nr], calls, "{who}: entries of system call {nr}");
        if exits {
            assert_eq!(c[NR + nr], calls, "{who}: exits of system call {nr}");
            assert_eq!(
                c[2 * NR + nr] as i64,
                sum,
                "{who}: summed results of system call {nr}"
            );
        }
    }
}

fn check(obj: &str, exits: bool) {
    let _serial = serial();
    let d = fixture();
    let target = d.join("wrappers_target");
    let (dir, rec_path) = scratch(&format!("bpfjet-{obj}"));
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join(obj))
        .args(["--json", "--engine", "jit", "--"])
        .arg(&target)
        .arg(&dir)
        .arg(&rec_path)
        .output()
        .unwrap();
    let report: Value = json_report(&out);
    assert_eq!(
        report["exit_code"],
        0,
        "the target's checks under bpfjet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = record(&rec_path);
    let c = counts(&report);
    matches_record(&format!("bpfjet {obj}"), &c, &rec, exits);
    // Every window call but the one raw syscall(SYS_getpid) (and the two
    // markers) went through a covered wrapper: no signal.
    let window: u64 = rec.values().map(|v| v.0).sum();
    let fast = report["syscalls"]["fast_path"].as_u64().unwrap();
    assert!(
        fast >= window - 1,
        "fast path {fast}, window {window}: {}",
        report["syscalls"]
    );
    assert!(
        rec.len() >= 60,
        "the target covers {} system calls",
        rec.len()
    );
    // Those calls ran in the wrappers' copies inside the allowed range
    // (bpfjet_probe::exempt_copy): every attached wrapper has one.
    let copies = &report["syscalls"]["wrapper_copies"];
    assert!(
        copies["copied"].as_u64().unwrap() >= 100
            && copies["not_copied"].as_object().unwrap().is_empty(),
        "wrappers without a copy: {copies}"
    );

    let (kdir, krec_path) = scratch(&format!("kernel-{obj}"));
    let kout = Command::new(d.join("kernel_loader"))
        .env("LOADER_SLOTS", (3 * NR).to_string())
        .arg(d.join(obj))
        .arg(&target)
        .arg(&kdir)
        .arg(&krec_path)
        .output()
        .unwrap();
    if !kout.status.success() {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison of the wrapper fast path: {}",
            String::from_utf8_lossy(&kout.stderr)
        ));
        return;
    }
    let stderr = String::from_utf8_lossy(&kout.stderr);
    assert!(
        stderr.contains("exit 0"),
        "the target's checks, kernel: {stderr}"
    );
    let k: Vec<u64> = String::from_utf8_lossy(&kout.stdout)
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    let krec = record(&krec_path);
    matches_record(&format!("kernel {obj}"), &k, &krec, exits);
    // The same calls in both runs.
    let calls = |r: &BTreeMap<usize, (u64, i64)>| -> Vec<(usize, u64)> {
        r.iter().map(|(nr, v)| (*nr, v.0)).collect()
    };
    assert_eq!(
        calls(&rec),
        calls(&krec),
        "bpfjet vs kernel: calls by number"
    );
    assert_eq!(&c[..2 * NR], &k[..2 * NR], "bpfjet vs kernel: counts");
}

#[test]
fn wrapper_fast_path_is_exact_with_exit_programs() {
    check("full.o", true);
}

#[test]
fn wrapper_fast_path_is_exact_with_entry_programs_only() {
    check("entries.o", false);
}
