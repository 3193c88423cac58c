//! `perf_event` programs under `bpfjet trace`: a sampling profiler in the
//! shape of libbpf-tools' `profile` (tests/trace/sample.bpf.c) runs on
//! samples of each traced thread's CPU time (`--sample-freq`), in the
//! sampled thread, with the interrupted registers.
//!
//! The oracle is the target's own CPU time: tests/trace/sample_target.c
//! burns CPU in `spin()` on its main thread, a second thread and a forked
//! child, and prints each one's CPU time; at F Hz each must have about
//! F × its CPU seconds samples (a `cpu-clock` event at `sample_freq` F
//! gives a thread that many). Every sample must be where the thread was:
//! in `spin()` (the target is built without PIE so its addresses are
//! known), with a user stack walked from there through `work()`, and no
//! kernel stack (-EFAULT, as the kernel answers for a user-mode sample).
//! The kernel runs the same object on a `cpu-clock` event of the target
//! at the same frequency (tests/trace/kernel_loader.c, inherited by its
//! threads and child) and is held to the same law in its own run: samples
//! per CPU second, user stacks, no kernel stack, the period.

mod trace_common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, clang_bpf, counts, hex_u64, json_report, loader_slots, serial};

const FREQ: u64 = 200;

struct Fixture {
    dir: PathBuf,
    /// `[start, end)` of spin() and of work() in the target.
    spin: (u64, u64),
    work: (u64, u64),
}

fn symbol_range(binary: &Path, name: &str) -> (u64, u64) {
    let (start, size) = trace_common::symbol_sizes(binary)
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("no {name} in nm -S {}", binary.display()));
    (start, start + size)
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-perf-event");
        std::fs::create_dir_all(&dir).unwrap();
        clang_bpf("sample.bpf.c", dir.join("sample.o"));
        clang_bpf("sample_mix.bpf.c", dir.join("sample_mix.o"));
        cc(
            "sample_mix_target.c",
            dir.join("mix"),
            &["-O1"],
            &["-lpthread"],
        );
        let target = dir.join("target");
        cc(
            "sample_target.c",
            &target,
            // -O0: every function keeps its frame pointer (at -O1 gcc
            // leaves the leaf spin() without one).
            &["-O0", "-no-pie", "-fno-omit-frame-pointer"],
            &["-lpthread"],
        );
        cc(
            "sample_threads.c",
            dir.join("threads"),
            &["-O1"],
            &["-lpthread"],
        );
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        Fixture {
            spin: symbol_range(&target, "spin"),
            work: symbol_range(&target, "work"),
            dir,
        }
    })
}

fn trace(f: &Fixture, engine: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(f.dir.join("sample.o"))
        .args(["--json", "--engine", engine])
        .args(["--sample-freq", &FREQ.to_string()])
        .args(["--global", &format!("spin_lo={:#x}", f.spin.0)])
        .args(["--global", &format!("spin_hi={:#x}", f.spin.1)])
        .args(extra)
        .arg("--")
        .arg(f.dir.join("target"))
        .arg("60000000")
        .output()
        .unwrap()
}

/// The "cpu TID NS" lines of the target (its threads' CPU time).
fn cpu_times(stderr: &str) -> BTreeMap<u64, u64> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("cpu "))
        .map(|l| {
            let mut w = l.split_whitespace().map(|v| v.parse::<u64>().unwrap());
            (w.next().unwrap(), w.next().unwrap())
        })
        .collect()
}

/// Whether `got` samples are F × `ns` of CPU time: expiries are seen at
/// scheduler ticks (bpfjet's timers) or the period adapts (the kernel's
/// frequency mode), and the last period may be cut off.
fn about_right(got: u64, ns: u64) -> bool {
    let want = ns * FREQ / 1_000_000_000;
    got + 2 >= want * 3 / 4 && got <= want * 11 / 10 + 2
}

#[test]
fn samples_follow_each_threads_cpu_time_where_it_runs() {
    let f = fixture();
    let _serial = serial();
    let kernel = Command::new(f.dir.join("kernel_loader"))
        .env("LOADER_SLOTS", "7")
        .env("LOADER_SAMPLE_FREQ", FREQ.to_string())
        .arg(f.dir.join("sample.o"))
        .arg(f.dir.join("target"))
        .arg("60000000")
        .output()
        .unwrap();
    if let Some(k) = loader_slots(&kernel, "of perf_event samples") {
        let cpu = cpu_times(&String::from_utf8_lossy(&kernel.stderr));
        assert_eq!(cpu.len(), 3, "the kernel's run: three threads report");
        let ns: u64 = cpu.values().sum();
        assert!(
            about_right(k[0], ns),
            "the kernel: {} samples for {ns} ns of CPU at {FREQ} Hz",
            k[0]
        );
        assert_eq!(k[2], k[0], "the kernel: every sample has a user stack");
        assert_eq!(k[4], 1_000_000_000 / FREQ, "the kernel's sample_period");
        assert!(
            k[5] * 10 >= k[0] * 9,
            "the kernel: the target runs in user mode ({} of {})",
            k[5],
            k[0]
        );
    }
    for engine in ["interp", "jit"] {
        let out = trace(f, engine, &[]);
        let report = json_report(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(report["exit_code"], 0, "{engine}: {stderr}");
        assert_eq!(report["faults"], 0, "{engine}: {report}");
        // The target's threads and their CPU time.
        let cpu = cpu_times(&stderr);
        assert_eq!(cpu.len(), 3, "{engine}: three threads report: {stderr}");
        let by_tid: BTreeMap<u64, u64> = report["maps"]["by_tid"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    hex_u64(e["key"].as_str().unwrap()),
                    hex_u64(e["value"].as_str().unwrap()),
                )
            })
            .collect();
        for (tid, ns) in &cpu {
            let want = ns * FREQ / 1_000_000_000;
            let got = by_tid.get(tid).copied().unwrap_or(0);
            assert!(
                want >= 10,
                "{engine}: thread {tid} ran too short ({ns} ns) to be sampled"
            );
            assert!(
                about_right(got, *ns),
                "{engine}: thread {tid}: {got} samples for {ns} ns of CPU at {FREQ} Hz \
                 (about {want})"
            );
        }
        let c = counts(&report);
        let samples = c[0];
        assert_eq!(
            report["perf_event"]["samples"].as_u64(),
            Some(samples),
            "{engine}: the report's samples (summed over the tree) are the program's runs"
        );
        assert_eq!(report["perf_event"]["frequency"], FREQ, "{engine}");
        // Where the threads were: spin() is nearly all of their CPU time.
        assert!(
            c[1] * 10 >= samples * 9,
            "{engine}: {} of {samples} samples in spin()",
            c[1]
        );
        assert_eq!(c[2], samples, "{engine}: every sample has a user stack");
        assert_eq!(c[3], samples, "{engine}: no kernel stack: -EFAULT");
        assert_eq!(c[4], 1_000_000_000 / FREQ, "{engine}: sample_period");
        assert_eq!(c[5], samples, "{engine}: user-mode cs");
        // The user stacks walk from spin() into work() (frame pointers).
        let stacks = report["maps"]["stacks"].as_array().unwrap();
        let mut in_spin = 0;
        for s in stacks {
            let b = bpfjet_maps::state::parse_hex(s["value"].as_str().unwrap()).unwrap();
            let frame = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            if (f.spin.0..f.spin.1).contains(&frame(0)) {
                in_spin += 1;
                assert!(
                    (f.work.0..f.work.1).contains(&frame(1)),
                    "{engine}: a stack from spin() returns to {:#x}, not into work() {:#x?}",
                    frame(1),
                    f.work
                );
            }
        }
        assert!(
            in_spin > 0,
            "{engine}: no stack starts in spin(): {stacks:?}"
        );
    }
}

#[test]
fn a_running_process_is_not_sampled_and_says_so() {
    let f = fixture();
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(f.dir.join("sample.o"))
        .args(["--pid", &std::process::id().to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "--pid with a perf_event program: {stderr}"
    );
    assert!(
        stderr.contains("\"perf_event\"") && stderr.contains("--pid does not sample"),
        "{stderr}"
    );
}

#[test]
fn an_exited_threads_timer_goes_with_it() {
    let f = fixture();
    let _serial = serial();
    // 300 threads one after another under a limit of 64 queued signals
    // (each timer holds one): every thread still gets a timer.
    let out = Command::new("prlimit")
        .arg("--sigpending=64")
        .arg(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(f.dir.join("sample.o"))
        .args(["--json", "--sample-freq", "1000", "--"])
        .arg(f.dir.join("threads"))
        .arg("300")
        .output()
        .unwrap();
    let report = json_report(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(report["exit_code"], 0, "{stderr}");
    assert!(
        !stderr.contains("not sampled"),
        "threads went without a timer: {stderr}"
    );
    assert!(
        report["perf_event"]["samples"].as_u64().is_some(),
        "{report}"
    );
}

#[test]
fn samples_inside_system_call_hooks_leave_their_programs_exact() {
    let f = fixture();
    let _serial = serial();
    for engine in ["interp", "jit"] {
        let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .arg("trace")
            .arg(f.dir.join("sample_mix.o"))
            .args(["--json", "--engine", engine, "--sample-freq", "997", "--"])
            .arg(f.dir.join("mix"))
            .output()
            .unwrap();
        let report = json_report(&out);
        assert_eq!(report["exit_code"], 0, "{engine}: {report}");
        let c = counts(&report);
        // Every getppid of the four threads returned through its program,
        // and no run was skipped: a sample neither recurses into a
        // program run it interrupts nor makes a system call of its own
        // (its signal's return included) that the programs would see.
        assert_eq!(c[2], 4 * 50_000, "{engine}: getppid returns");
        assert_eq!(report["missed_runs"], 0, "{engine}: {report}");
        assert!(c[0] >= c[2], "{engine}: calls entered {}", c[0]);
        assert!(c[1] > 0, "{engine}: no sample ran");
        assert_eq!(
            report["perf_event"]["samples"].as_u64(),
            Some(c[1]),
            "{engine}"
        );
    }
}
