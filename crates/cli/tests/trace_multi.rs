//! `bpfjet trace` on `uprobe.multi/PATH:PATTERN` and `uretprobe.multi`:
//! libbpf's glob (`*`, `?`) over a C target compiled at test time
//! (tests/trace/multi_target.c, without PIE so function addresses are the
//! same in every run), every matching function attached — an alias is a
//! second match at the same address, run twice per call as in the kernel —
//! `bpf_get_func_ip` the matched function's address and
//! `bpf_get_attach_cookie` 0 (libbpf's auto-attach passes no cookies).
//! Checked against constants of the target, the ELF's symbol addresses,
//! and the kernel running the same object on uprobe-multi links
//! (tests/trace/multi_loader.c). Bad input: a pattern matching nothing.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use trace_common::{
    cc, json_report, kernel_multi_maps, report_maps, serial, trace_json, U64Maps, SRC,
};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-multi");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| PathBuf::from(format!("{SRC}/{f}"));
        cc(
            "multi_target.c",
            dir.join("multi_target"),
            &["-O1", "-g", "-no-pie", "-fno-pie"],
            &[],
        );
        cc(
            "multi_loader.c",
            dir.join("multi_loader"),
            &["-O1"],
            &["-lbpf", "-lelf"],
        );
        let exe = format!("-DTARGET_EXE=\"{}\"", dir.join("multi_target").display());
        Compile::file(src("multi.bpf.c"))
            .arg("-D__TARGET_ARCH_x86")
            .arg(&exe)
            .object_at(dir.join("multi.o"));
        Compile::text(
            "nomatch",
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             SEC(\"uprobe.multi/\" TARGET_EXE \":zz_*\") int on_none(void *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        )
        .arg(&exe)
        .object_at(dir.join("nomatch.o"));
        dir
    })
}

fn trace(obj: &str, engine: &str) -> Output {
    let d = dir();
    let target = d.join("multi_target");
    trace_json(&d.join(obj), engine, &[target.as_os_str()])
}

const MAPS: &[&str] = &["counts", "by_ip"];

fn kernel_maps() -> Option<U64Maps> {
    kernel_multi_maps(dir(), "multi.o", "multi_target", MAPS, "uprobe.multi")
}

/// Function addresses of the target, from `nm`.
fn symbol(name: &str) -> u64 {
    trace_common::symbol_sizes(&dir().join("multi_target"))
        .get(name)
        .map(|&(address, _)| address)
        .unwrap_or_else(|| panic!("{name} not in the target's symbols"))
}

fn check(engine: &str) {
    let _serial = serial();
    let out = trace("multi.o", engine);
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        7,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = report_maps(&report, MAPS);
    let s = |n: u64| n * (n - 1) / 2;
    let counts: Vec<u64> = got["counts"].values().copied().collect();
    // mf_* matches mf_alpha and its alias mf_alias (2 × 100 calls), mf_beta
    // (200) and mf_gamma (300); mf_?e* only mf_beta; m?_gamm? mf_gamma.
    assert_eq!(
        &counts[..6],
        &[700, 2 * s(100) + s(200) + s(300), 0, 200, 2 * s(200), 300],
        "bpfjet ({engine})"
    );
    let by_ip: BTreeMap<u64, u64> = [
        (symbol("mf_alpha"), 200),
        (symbol("mf_beta"), 200 + 200),
        (symbol("mf_gamma"), 300),
    ]
    .into();
    assert_eq!(
        got["by_ip"], by_ip,
        "bpfjet ({engine}) hits per bpf_get_func_ip"
    );
    if let Some(k) = kernel_maps() {
        assert_eq!(
            got, k,
            "bpfjet ({engine}) vs the kernel's uprobe-multi links"
        );
    }
}

#[test]
fn uprobe_multi_interpreter_matches_kernel() {
    check("interp");
}

#[test]
fn uprobe_multi_jit_matches_kernel() {
    check("jit");
}

#[test]
fn pattern_matching_nothing_is_refused_before_start() {
    let out = trace("nomatch.o", "interp");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("zz_*") && err.contains("no function matches"),
        "{err}"
    );
}
