//! A forked child's first traced system calls carry the child's ids.
//! glibc's child makes system calls (`set_robust_list`) before its atfork
//! handlers run, and the child's own return from the `clone` is a
//! `sys_exit` event: both must see `bpf_get_current_pid_tgid` give the
//! child's pid, as the kernel's tracepoints do, not the parent's ids the
//! runtime cached before the fork (tests/trace/fork_target.c,
//! tests/trace/fork.bpf.c). The truth is the pids the processes print
//! themselves.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, json_report, serial, SRC};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-fork");
        std::fs::create_dir_all(&dir).unwrap();
        cc("fork_target.c", dir.join("fork_target"), &["-O1"], &[]);
        Compile::file(format!("{SRC}/fork.bpf.c")).object_at(dir.join("fork.o"));
        dir
    })
}

/// A hash map of the report as key -> value, both little-endian integers.
fn entries(report: &Value, map: &str) -> BTreeMap<u64, i64> {
    let num = |v: &Value| {
        let b = bpfjet_maps::state::parse_hex(v.as_str().unwrap()).unwrap();
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(&b);
        i64::from_le_bytes(w)
    };
    report["maps"][map]
        .as_array()
        .unwrap_or_else(|| panic!("no {map} map in {report}"))
        .iter()
        .map(|e| (num(&e["key"]) as u64, num(&e["value"])))
        .collect()
}

fn check(engine: &str) {
    let _serial = serial();
    let d = dir();
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join("fork.o"))
        .args(["--json", "--engine", engine, "--"])
        .arg(d.join("fork_target"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = json_report(&out);
    assert_eq!(report["exit_code"], 0, "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid_of = |what: &str| -> Vec<u64> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(what))
            .map(|p| p.trim().parse().unwrap())
            .collect()
    };
    let children = pid_of("child ");
    let parent = pid_of("parent ");
    assert_eq!((children.len(), parent.len()), (3, 1), "{stdout}");
    let parent = parent[0];
    let id = |pid: u64| pid << 32 | pid;

    let clone_exits = entries(&report, "clone_exits");
    for &kid in &children {
        assert_eq!(
            clone_exits.get(&id(kid)),
            Some(&0),
            "the child {kid}'s return from clone under its own ids ({engine}): {clone_exits:?}"
        );
    }
    let last = clone_exits.get(&id(parent));
    assert!(
        last.is_some_and(|&k| children.contains(&(k as u64))),
        "the parent's return from clone is a child's pid ({engine}): {clone_exits:?}"
    );
    assert_eq!(clone_exits.len(), 4, "{clone_exits:?}");

    // set_robust_list: once in each child (glibc's child set-up), under
    // the child's tgid; the parent's own was made before the agent came.
    let robust = entries(&report, "robust");
    let expect: BTreeMap<u64, i64> = children.iter().map(|&k| (k, 1)).collect();
    assert_eq!(robust, expect, "set_robust_list by tgid ({engine})");
}

#[test]
fn forked_child_events_carry_the_childs_ids_interp() {
    check("interp");
}

#[test]
fn forked_child_events_carry_the_childs_ids_jit() {
    check("jit");
}
