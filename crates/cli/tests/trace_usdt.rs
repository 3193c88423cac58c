//! `bpfjet trace` on USDT probes (`<sys/sdt.h>`): a C target and a shared
//! library compiled at test time (tests/trace/usdt_target.c, usdt_lib.c),
//! programs written against libbpf's usdt.bpf.h unchanged
//! (tests/trace/usdt.bpf.c: `BPF_USDT`, `bpf_usdt_arg`, `bpf_usdt_arg_cnt`),
//! every count checked against constants of the target and against the
//! kernel running the same object on its own USDT uprobes through libbpf
//! (tests/trace/kernel_loader.c): register, constant and memory arguments of
//! every size and sign, a semaphore-guarded probe (fired only while a tracer
//! raised its semaphore), probes hit by 4 threads, a probe in a library.
//! `frame` (built at -O0, a leaf without `sub rsp`) keeps its arguments in
//! the red zone under its stack pointer: they read right only because the
//! jump patch's trampoline steps below the red zone before saving anything.
//! Bad input: an unknown probe, an object without usdt.bpf.h's maps.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, loader_slots, serial, SRC};

/// A BPF object from C through testsupport (clang lookup, standard
/// flags, compile-once), copied into `dir` as `out`.
fn bpf(dir: &Path, c: Compile, out: &str) {
    c.arg("-D__TARGET_ARCH_x86").object_at(dir.join(out));
}

/// Builds the target, its library, the objects and the kernel loader once.
fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-usdt");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| PathBuf::from(format!("{SRC}/{f}"));
        cc("usdt_lib.c", dir.join("libusdt_lib.so"), &["-O2", "-g", "-fPIC", "-shared"], &[]);
        cc("usdt_target.c", dir.join("usdt_target"), &["-O2", "-g"], &[&format!("-L{}", dir.display()), "-lusdt_lib", &format!("-Wl,-rpath,{}", dir.display()), "-lpthread"]);
        let exe = format!("-DTARGET_EXE=\"{}\"", dir.join("usdt_target").display());
        let lib = format!("-DTARGET_LIB=\"{}\"", dir.join("libusdt_lib.so").display());
        bpf(&dir, Compile::file(src("usdt.bpf.c")).args(&[&exe, &lib]), "usdt.o");
        let unknown = Compile::text(
            "unknown",
            "#include <stdbool.h>\n#include <linux/bpf.h>\n#include <linux/ptrace.h>\n\
             #include <bpf/bpf_helpers.h>\n#include <bpf/usdt.bpf.h>\n\
             SEC(\"usdt/\" TARGET_EXE \":bpfjet:no_such_probe\") int on_none(struct pt_regs *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        );
        bpf(&dir, unknown.arg(&exe), "unknown.o");
        let no_maps = Compile::text(
            "no_maps",
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             SEC(\"usdt/\" TARGET_EXE \":bpfjet:tick\") int on_tick(void *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        );
        bpf(&dir, no_maps.arg(&exe), "no_maps.o");
        cc("kernel_loader.c", dir.join("kernel_loader"), &["-O1"], &["-lbpf"]);
        dir
    })
}

fn trace(obj: &str, engine: &str) -> Output {
    let d = dir();
    Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join(obj))
        .args(["--json", "--engine", engine, "--"])
        .arg(d.join("usdt_target"))
        .output()
        .unwrap()
}

/// The kernel's counts (libbpf attaching the same object's USDT programs),
/// or None with SKIPPED printed.
fn kernel_counts() -> Option<Vec<u64>> {
    let d = dir();
    let out = Command::new(d.join("kernel_loader"))
        .arg(d.join("usdt.o"))
        .arg(d.join("usdt_target"))
        .output()
        .unwrap();
    loader_slots(&out, "of the USDT programs")
}

/// The counts usdt.bpf.c must leave, from the constants of usdt_target.c.
fn expected() -> Vec<u64> {
    let sum = |it: &mut dyn Iterator<Item = i64>| it.fold(0u64, |a, v| a.wrapping_add(v as u64));
    let (ticks, frames, guards, threads, per_thread, lib_steps) =
        (500i64, 300i64, 200, 4, 2500, 100i64);
    vec![
        ticks as u64,
        sum(&mut (0..ticks)),
        sum(&mut (0..ticks).map(|i| ((i * 3) as u8) as i64)),
        sum(&mut (0..ticks).map(|i| (-i) as i16 as i64)),
        sum(&mut (0..ticks)),
        5 * ticks as u64,
        frames as u64,
        sum(&mut (0..frames)),
        sum(&mut (0..frames).map(|i| -i)),
        sum(&mut (0..frames).map(|i| (i - 150) as i16 as i64)),
        sum(&mut (0..frames).map(|i| (i - 100) as i8 as i64)),
        sum(&mut (0..frames).map(|i| 2 * i)),
        guards,
        threads * per_thread,
        sum(&mut (0..lib_steps).map(|x| 7 * x)),
        // bpf_usdt_arg_cnt: tick 5, frame 5, guarded 1, thread 2, step 2.
        (5 * ticks + 5 * frames) as u64 + guards + 2 * threads * per_thread + 2 * lib_steps as u64,
    ]
}

fn check(engine: &str) {
    let _serial = serial();
    let out = trace("usdt.o", engine);
    let report = json_report(&out);
    // 41: the target saw its guarded probe's semaphore raised every time.
    assert_eq!(
        report["exit_code"],
        41,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = counts(&report);
    assert_eq!(c, expected(), "bpfjet ({engine}) counts");
    // Both patch kinds are exercised: the guarded probe's nop is followed
    // by the target of the semaphore test's branch (an int3), the others
    // take a jump.
    let probes = report["usdt"].as_array().expect("usdt in the report");
    assert_eq!(probes.len(), 5, "{probes:?}");
    let kind = |name: &str| {
        probes
            .iter()
            .find(|p| p["probe"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("{name} not in {probes:?}"))["patch"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(kind(":bpfjet:guarded"), "int3", "{probes:?}");
    assert_eq!(kind(":bpfjet:frame"), "jump", "{probes:?}");
    let hits: u64 = probes.iter().map(|p| p["hits"].as_u64().unwrap()).sum();
    assert_eq!(hits, 500 + 300 + 200 + 10000 + 100);
    if let Some(k) = kernel_counts() {
        assert_eq!(c, k, "bpfjet ({engine}) vs the kernel");
    }
}

#[test]
fn usdt_interpreter_matches_kernel() {
    check("interp");
}

#[test]
fn usdt_jit_matches_kernel() {
    check("jit");
}

#[test]
fn unknown_usdt_probe_is_refused_before_start() {
    let out = trace("unknown.o", "interp");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bpfjet:no_such_probe") && err.contains(".note.stapsdt"),
        "{err}"
    );
}

#[test]
fn usdt_without_libbpf_maps_is_refused() {
    let out = trace("no_maps.o", "interp");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("__bpf_usdt_specs") && err.contains("usdt.bpf.h"),
        "{err}"
    );
    assert!(err.contains("was not started"), "{err}");
}
