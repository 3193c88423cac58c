//! `bpfjet trace` follows the command's process tree as the kernel's
//! tracepoints see it: forked (and vforked: dash runs commands so)
//! children, the programs the tree executes (their agents join the maps
//! the command's agent published), the exit of an `exec` in the new image,
//! and an `exec` of the command's own process (which then writes the
//! report). tests/trace/exec_tree.bpf.c is execsnoop's pattern: the entry
//! of execve/execveat keeps the file by thread, the exit sends it with the
//! result and the comm as a perf-buffer sample. Checked against the kernel
//! running the same object on the same script, with the command in a
//! cgroup of its own (tests/trace/kernel_loader.c), on both engines; and
//! `--no-follow`, where executed programs run untraced. `posix_spawn`
//! children (CLONE_VM|CLONE_VFORK on their own stack) are traced from
//! their start, on their waiting parent's thread block. The CPU slots that
//! make per-CPU values exclusive are one table for the whole tree.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, loader_slots, serial, SRC};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-follow");
        std::fs::create_dir_all(&dir).unwrap();
        cc("exec_target.c", dir.join("exec_target"), &["-O1"], &[]);
        cc("percpu_target.c", dir.join("percpu_target"), &["-O1"], &[]);
        Compile::file(PathBuf::from(format!("{SRC}/percpu_tree.bpf.c")))
            .arg("-D__TARGET_ARCH_x86")
            .object_at(dir.join("percpu_tree.o"));
        Compile::file(PathBuf::from(format!("{SRC}/uprobe_tree.bpf.c")))
            .arg("-D__TARGET_ARCH_x86")
            .object_at(dir.join("uprobe_tree.o"));
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        Compile::file(PathBuf::from(format!("{SRC}/exec_tree.bpf.c")))
            .arg("-D__TARGET_ARCH_x86")
            .object_at(dir.join("exec_tree.o"));
        dir
    })
}

/// Every kind of `exec` a tree makes: a forked command, one whose output
/// is redirected, one that fails (ENOENT, in the shell's child), an
/// `fexecve` (execveat) from an executed program, two `posix_spawn`s (one
/// failing), a program executed with a cleared environment (`env -i`: the
/// settings are carried into it), an `exec` in a subshell, and the
/// command's own process replaced by its last `exec`.
fn script() -> String {
    let target = dir().join("exec_target").display().to_string();
    format!(
        "/bin/true a; /bin/echo hi >/dev/null; /nonexistent/prog 2>/dev/null; \
         {target} /bin/true; {target} spawn || exit 9; env -i /bin/true cleared; \
         (exec /bin/cat /dev/null); exec /bin/true z"
    )
}

/// One sample: (result, system-call number of the record, comm, file).
type Exec = (i32, i32, String, String);

fn samples(path: &Path) -> Vec<Exec> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut rest = &data[..];
    while rest.len() >= 4 {
        let len = u32::from_ne_bytes(rest[..4].try_into().unwrap()) as usize;
        let r = &rest[4..4 + len];
        // struct exec_event: tid, ret, nr, pad, comm[16], file[64] (the
        // kernel's samples come padded to a multiple of 8 with the size).
        assert!(len >= 96, "a short sample: {len} bytes");
        let int = |at: usize| i32::from_ne_bytes(r[at..at + 4].try_into().unwrap());
        let text = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        out.push((int(4), int(8), text(&r[16..32]), text(&r[32..96])));
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes in {}", path.display());
    // Samples of different CPUs' rings are not ordered.
    out.sort();
    out
}

fn trace(engine: &str, extra: &[&str], events: &Path) -> Output {
    let root = bpfjet_runtime::tracing::cgroup::mount().expect("a cgroup v2 hierarchy");
    let _ = std::fs::remove_file(events);
    Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(dir().join("exec_tree.o"))
        .args(["--json", "--engine", engine, "--cgroup-array"])
        .arg(format!("cgroup_filter={}", root.display()))
        .arg("--events")
        .arg(events)
        .args(extra)
        .args(["--", "/bin/sh", "-c", &script()])
        .output()
        .unwrap()
}

/// The kernel's samples and counts, with the command in a cgroup of its
/// own, or None (skip reported).
fn kernel() -> Option<(Vec<Exec>, Vec<u64>)> {
    let root = bpfjet_runtime::tracing::cgroup::mount()?;
    let cgroup = root.join(format!("bpfjet-follow-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&cgroup) {
        bpfjet_testsupport::report_skip(format!(
            "trace_follow: kernel comparison: cannot create {}: {e}",
            cgroup.display()
        ));
        return None;
    }
    let events = dir().join("kernel_events.bin");
    let out = Command::new(dir().join("kernel_loader"))
        .arg(dir().join("exec_tree.o"))
        .args(["/bin/sh", "-c", &script()])
        .env("LOADER_SLOTS", "5")
        .env("LOADER_CGROUP", &cgroup)
        .env("LOADER_EVENTS", &events)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&cgroup);
    let slots = loader_slots(&out, "of exec through a process tree")?;
    Some((samples(&events), slots))
}

#[test]
fn exec_is_followed_through_the_tree_as_the_kernel_sees_it() {
    let _serial = serial();
    if bpfjet_runtime::tracing::cgroup::mount().is_none() {
        bpfjet_testsupport::report_skip("trace_follow: no cgroup v2 hierarchy mounted");
        return;
    }
    let target = dir().join("exec_target").display().to_string();
    let s = |v: &str| v.to_string();
    // What the script's execs are, by the kernel's ABI: a successful
    // execveat returns through sys_exit_execve (59); comm is the new
    // image's; the failed exec returns -ENOENT in the shell's child.
    let mut expected: Vec<Exec> = vec![
        (0, 59, s("true"), s("/bin/true")),
        (0, 59, s("echo"), s("/bin/echo")),
        (-2, 59, s("sh"), s("/nonexistent/prog")),
        (0, 59, s("exec_target"), target.clone()),
        (0, 59, s("true"), s("")),
        (0, 59, s("exec_target"), target),
        (-2, 59, s("exec_target"), s("/nonexistent/spawned")),
        (0, 59, s("true"), s("/bin/true")),
        (0, 59, s("env"), s("/usr/bin/env")),
        (0, 59, s("true"), s("/bin/true")),
        (0, 59, s("cat"), s("/bin/cat")),
        (0, 59, s("true"), s("/bin/true")),
    ];
    expected.sort();
    // execve entries, execveat entries, successful exits, failed exits,
    // exits without an entry.
    let expected_counts = vec![11, 1, 10, 2, 0];
    if let Some((mut k_samples, k_counts)) = kernel() {
        // The kernel also sees the command's own exec, which bpfjet's
        // agent (loaded by it) cannot.
        let root_exec = (0, 59, s("sh"), s("/bin/sh"));
        let at = k_samples.iter().position(|e| *e == root_exec);
        assert!(at.is_some(), "the kernel's samples: {k_samples:?}");
        k_samples.remove(at.unwrap());
        assert_eq!(k_samples, expected, "the kernel's samples");
        assert_eq!(k_counts, vec![12, 1, 11, 2, 0], "the kernel's counts");
    }
    let events = dir().join("events.bin");
    for engine in ["interp", "jit"] {
        let out = trace(engine, &[], &events);
        assert!(out.status.success(), "{engine}: {out:?}");
        let report = json_report(&out);
        assert_eq!(samples(&events), expected, "{engine}: samples");
        assert_eq!(counts(&report)[..5], expected_counts, "{engine}: counts");
        let perf = &report["perfbufs"]["events"];
        assert_eq!(
            (perf["produced"].as_u64(), perf["consumed"].as_u64()),
            (Some(12), Some(12)),
            "{engine}: counted across the command's two images: {perf}"
        );
        // Every executed program's agent left its part of the report.
        let programs: Vec<&str> = report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["program"].as_str())
            .collect();
        for p in ["/bin/echo", "/bin/cat", "/bin/true"] {
            assert!(programs.contains(&p), "{engine}: {p} in {programs:?}");
        }
        // The hand-off crosses the image: fusion leaves it in the map.
        let pending = report["maps"]["pending"].as_array().unwrap();
        assert!(pending.is_empty(), "{engine}: {pending:?}");
    }
    // Nothing of the run's shared memory is left behind.
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("bpfjet.bpfjet-trace-"))
        .collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// `--no-follow`: the execs the command's process and its forked children
/// make enter (their entry programs run), but the new images are not
/// traced; the failed exec returns in the traced child; the report is
/// written when the command's process replaces itself.
#[test]
fn no_follow_traces_the_command_image_only() {
    let _serial = serial();
    if bpfjet_runtime::tracing::cgroup::mount().is_none() {
        bpfjet_testsupport::report_skip("trace_follow: no cgroup v2 hierarchy mounted");
        return;
    }
    let events = dir().join("events_no_follow.bin");
    let out = trace("interp", &["--no-follow"], &events);
    assert!(out.status.success(), "{out:?}");
    let report = json_report(&out);
    // The shell's children enter their execs (the executed exec_target's
    // own spawns are not seen).
    assert_eq!(counts(&report)[..5], [8, 0, 0, 1, 0]);
    assert_eq!(
        samples(&events),
        vec![(-2, 59, "sh".to_string(), "/nonexistent/prog".to_string())]
    );
    // Seven execs that succeeded, each entry left by an image that ended.
    assert_eq!(report["maps"]["pending"].as_array().unwrap().len(), 7);
}

/// Five processes of one tree (three forked, one executed) bump a per-CPU
/// counter without an atomic, all at once, 20,000 times each: the sum is
/// exact only if no two processes ever run on one CPU slot together (each
/// process had its own table before, and the sum came out 81,184).
#[test]
fn per_cpu_values_are_exclusive_across_the_tree() {
    let _serial = serial();
    for engine in ["interp", "jit"] {
        let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .arg("trace")
            .arg(dir().join("percpu_tree.o"))
            .args(["--json", "--engine", engine, "--"])
            .arg(dir().join("percpu_target"))
            .arg("20000")
            .output()
            .unwrap();
        assert!(out.status.success(), "{engine}: {out:?}");
        let report = json_report(&out);
        let sum: u64 = report["maps"]["calls"][0]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let b = bpfjet_maps::state::parse_hex(v.as_str().unwrap()).unwrap();
                u64::from_le_bytes(b[..8].try_into().unwrap())
            })
            .sum();
        assert_eq!(sum, 5 * 20_000, "{engine}");
    }
}

/// With uprobes only (no system call traced, so no dispatch): the tree is
/// followed the same way, and with `--no-follow` an `exec` of the
/// command's own process still leaves a report (libc's exec functions are
/// hooked to see the image end).
#[test]
fn uprobes_follow_the_tree_too() {
    let _serial = serial();
    let run = |extra: &[&str], cmd: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .arg("trace")
            .arg(dir().join("uprobe_tree.o"))
            .args(["--json"])
            .args(extra)
            .arg("--")
            .args(cmd)
            .output()
            .unwrap();
        assert!(out.status.success(), "{extra:?} {cmd:?}: {out:?}");
        counts(&json_report(&out))[0]
    };
    let target = dir().join("percpu_target").display().to_string();
    for engine in ["interp", "jit"] {
        // Four processes of this image and one executed program.
        assert_eq!(
            run(&["--engine", engine], &[&target, "1000"]),
            5000,
            "{engine}"
        );
        assert_eq!(
            run(&["--engine", engine, "--no-follow"], &[&target, "1000"]),
            4000,
            "{engine} --no-follow"
        );
    }
    // The command's process replaces itself: its 300 calls after the exec
    // are counted when followed; without, the report is written at the
    // exec, before them (what the shell calls itself is in both).
    let script = format!("exec {target} leaf 300");
    let followed = run(&[], &["/bin/sh", "-c", &script]);
    let not = run(&["--no-follow"], &["/bin/sh", "-c", &script]);
    assert_eq!(followed - not, 300, "{followed} followed, {not} not");
    // Through a cleared environment (the settings are carried by the hook
    // on libc's exec functions).
    let cleared = |n: &str| {
        run(
            &[],
            &["/bin/sh", "-c", &format!("env -i {target} leaf {n}")],
        )
    };
    assert_eq!(cleared("200") - cleared("0"), 200);
}
