//! `bpfjet trace` on a library the program loads later with `dlopen`
//! (tests/trace/dl_target.c, dl_lib.c, compiled at test time): a uprobe, a
//! uretprobe and a USDT probe on a file that is not loaded when the agent
//! starts attach when `dlopen` loads it, are forgotten when `dlclose`
//! unloads it, and attach again on the next `dlopen` — every count checked
//! against the target's constants and the kernel's uprobes on the same
//! file (tests/trace/kernel_loader.c), on the interpreter and the JIT.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, loader_slots, serial, SRC};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-dlopen");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| PathBuf::from(format!("{SRC}/{f}"));
        let lib = dir.join("libdl_lib.so");
        cc("dl_lib.c", &lib, &["-O2", "-g", "-fPIC", "-shared"], &[]);
        let define = format!("-DDL_LIB=\"{}\"", lib.display());
        cc(
            "dl_target.c",
            dir.join("dl_target"),
            &["-O1", "-g", &define],
            &[],
        );
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        Compile::file(src("dl.bpf.c"))
            .arg("-D__TARGET_ARCH_x86")
            .arg(&define)
            .object_at(dir.join("dl.o"));
        dir
    })
}

fn kernel_counts() -> Option<Vec<u64>> {
    let d = dir();
    let out = Command::new(d.join("kernel_loader"))
        .arg(d.join("dl.o"))
        .arg(d.join("dl_target"))
        .output()
        .unwrap();
    loader_slots(&out, "of probes on a dlopen'ed library")
}

fn check(engine: &str) {
    let _serial = serial();
    let d = dir();
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join("dl.o"))
        .args(["--json", "--engine", engine, "--"])
        .arg(d.join("dl_target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        9,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // dl_target.c: dl_work(i) for i in 0..50, unloaded, then 50..120.
    let calls = 120u64;
    let args: u64 = (0..calls).sum();
    let rets: u64 = (0..calls).map(|i| 3 * i + 1).sum();
    let c = counts(&report);
    assert_eq!(
        &c[..6],
        &[calls, args, calls, rets, calls, args],
        "bpfjet ({engine})"
    );
    // Two loads, two unloads: 2 patches each (dl_work's entry/return, the
    // USDT probe), attached and forgotten.
    let events = report["dlopen"].as_array().expect("dlopen in the report");
    let lib = d.join("libdl_lib.so").display().to_string();
    let kinds: Vec<(&str, u64)> = events
        .iter()
        .map(|e| {
            if e["loaded"] == lib.as_str() {
                assert_eq!(e["errors"], serde_json::json!([]), "{e}");
                ("loaded", e["attached"].as_u64().unwrap())
            } else {
                assert_eq!(e["unloaded"], lib.as_str(), "{e}");
                ("unloaded", e["forgotten"].as_u64().unwrap())
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("loaded", 2),
            ("unloaded", 2),
            ("loaded", 2),
            ("unloaded", 2)
        ],
        "{events:?}"
    );
    if let Some(k) = kernel_counts() {
        assert_eq!(&c[..6], &k[..6], "bpfjet ({engine}) vs the kernel");
    }
}

#[test]
fn dlopened_library_probes_interpreter() {
    check("interp");
}

#[test]
fn dlopened_library_probes_jit() {
    check("jit");
}
