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
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, json_report, serial};

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
    let out = Command::new("nm")
        .arg("-S")
        .arg(dir().join("tiny_target"))
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

fn int(hex: &str) -> u64 {
    let b = bpfjet_maps::state::parse_hex(hex).unwrap();
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(&b);
    u64::from_le_bytes(v)
}

type Maps = BTreeMap<String, BTreeMap<u64, u64>>;

fn report_maps(report: &Value) -> Maps {
    ["counts", "by_ip"]
        .iter()
        .map(|m| {
            let kv = report["maps"][m]
                .as_array()
                .unwrap_or_else(|| panic!("no {m} in {report}"))
                .iter()
                .map(|e| {
                    (
                        int(e["key"].as_str().unwrap()),
                        int(e["value"].as_str().unwrap()),
                    )
                })
                .collect();
            (m.to_string(), kv)
        })
        .collect()
}

fn kernel_maps() -> Option<Maps> {
    let d = dir();
    let out = Command::new(d.join("multi_loader"))
        .arg(d.join("tiny.o"))
        .arg(d.join("tiny_target"))
        .output()
        .unwrap();
    if !out.status.success() {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison of int3 entry probes: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    let mut m = Maps::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 3 || !["counts", "by_ip"].contains(&f[0]) {
            continue;
        }
        m.entry(f[0].to_string())
            .or_default()
            .insert(f[1].parse().unwrap(), f[2].parse().unwrap());
    }
    Some(m)
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
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(dir().join("tiny.o"))
        .args(["--json", "--engine", engine, "--"])
        .arg(dir().join("tiny_target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        7,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = report_maps(&report);
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
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(dir().join("tiny_inside.o"))
        .args(["--json", "--engine", "jit", "--"])
        .arg(dir().join("tiny_target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        7,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: Vec<u64> = report["maps"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| int(e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        counts,
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
