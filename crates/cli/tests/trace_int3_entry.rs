//! Entry and return probes on functions shorter than the 5-byte jump
//! (tests/trace/tiny_target.c: `ret`, `xor eax,eax; ret`, `lea; ret`):
//! bpfjet puts an `int3` over the first byte, runs the probe's entry in its
//! SIGTRAP handler and executes the replaced instruction out of line
//! (crates/probe/src/breakpoint.rs `attach_entry`), where it used to
//! refuse the function. Counts, arguments, return values and hits per
//! `bpf_get_func_ip` must equal the kernel's uprobes on the same object
//! (tests/trace/multi_loader.c attaching its uprobe.multi sections), and
//! the known calls of the target. A uprobe inside a function where no
//! jump can go and the instruction is not a `nop` is an int3 too.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use trace_common::{
    cc, counts, json_report, kernel_multi_maps, report_maps, serial, trace_json, U64Maps,
};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-int3-entry");
        std::fs::create_dir_all(&dir).unwrap();
        cc(
            "tiny_target.c",
            dir.join("tiny_target"),
            &["-O2", "-no-pie", "-fno-pie"],
            &[],
        );
        cc(
            "multi_loader.c",
            dir.join("multi_loader"),
            &["-O1"],
            &["-lbpf", "-lelf"],
        );
        let exe = format!("-DTARGET_EXE=\"{}\"", dir.join("tiny_target").display());
        for name in ["tiny", "tiny_inside"] {
            Compile::file(PathBuf::from(format!("{}/{name}.bpf.c", trace_common::SRC)))
                .arg("-D__TARGET_ARCH_x86")
                .arg(&exe)
                .object_at(dir.join(format!("{name}.o")));
        }
        dir
    })
}

/// Symbol sizes of the target (`nm -S`): name -> (address, size).
fn symbols() -> BTreeMap<String, (u64, u64)> {
    trace_common::symbol_sizes(&dir().join("tiny_target"))
}

const MAPS: &[&str] = &["counts", "by_ip"];

fn kernel_maps() -> Option<U64Maps> {
    kernel_multi_maps(dir(), "tiny.o", "tiny_target", MAPS, "int3 entry probes")
}

/// `bpfjet trace OBJ` of the target on `engine`: its report, the target
/// having exited 7 (its own check of its results).
fn traced(obj: &str, engine: &str) -> serde_json::Value {
    let d = dir();
    let target = d.join("tiny_target");
    let out = trace_json(&d.join(obj), engine, &[target.as_os_str()]);
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        7,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

fn check(engine: &str) {
    let _serial = serial();
    let syms = symbols();
    for f in ["tiny_zero", "tiny_inc", "tiny_void"] {
        let (_, size) = syms[f];
        assert!(
            size < 5,
            "{f} is {size} bytes: the test needs functions shorter than a jump"
        );
    }
    let report = traced("tiny.o", engine);
    // The report lists the int3s, why, and their hits (entries).
    let int3 = report["int3_probes"].as_array().unwrap();
    assert_eq!(int3.len(), 3, "{int3:?}");
    for p in int3 {
        assert_eq!(p["hits"], 100, "{p}");
        assert!(p["why"].as_str().unwrap().contains("too short"), "{p}");
    }
    let got = report_maps(&report, MAPS);
    // 100 calls of each: 300 entries, tiny_inc's arguments 0..99, 300
    // returns, return values 0 (tiny_zero) and 1..100 (tiny_inc).
    let counts: Vec<u64> = got["counts"].values().copied().collect();
    assert_eq!(&counts[..4], &[300, 4950, 300, 5050], "bpfjet ({engine})");
    let by_ip: BTreeMap<u64, u64> = ["tiny_zero", "tiny_inc", "tiny_void"]
        .iter()
        .map(|f| (syms[*f].0, 200))
        .collect();
    assert_eq!(got["by_ip"], by_ip, "bpfjet ({engine}) hits per func ip");
    if let Some(k) = kernel_maps() {
        assert_eq!(got, k, "bpfjet ({engine}) vs the kernel's uprobes");
    }
}

/// A uprobe at `loop_sum+2`, an `add` followed by the loop's branch
/// target: an int3 that executes the `add` out of line, hit once per call
/// with the argument in rdi; the function's results stay right (the
/// target checks them: exit code 7).
#[test]
fn int3_inside_a_function_runs_the_replaced_instruction() {
    let _serial = serial();
    let report = traced("tiny_inside.o", "jit");
    let int3 = report["int3_probes"].as_array().unwrap();
    assert_eq!(int3.len(), 1, "{int3:?}");
    assert!(
        int3[0]["why"]
            .as_str()
            .unwrap()
            .starts_with("loop_sum+0x2: "),
        "{int3:?}"
    );
    assert_eq!(
        counts(&report),
        vec![100, 5050],
        "hits and the sum of n at loop_sum+2"
    );
}

#[test]
fn short_functions_interpreter_match_kernel() {
    check("interp");
}

#[test]
fn short_functions_jit_match_kernel() {
    check("jit");
}
