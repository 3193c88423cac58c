//! Kernel probes on system-call entry points under `bpfjet trace`:
//! `ksyscall/NAME`, `kretsyscall/NAME`, `kprobe/__x64_sys_NAME` and
//! `kretprobe/__x64_sys_NAME`, as libbpf programs write them
//! (`BPF_KSYSCALL`, `PT_REGS_PARM*_CORE_SYSCALL`, `BPF_KRETPROBE`), run at
//! the traced process's own system calls and counted exactly
//! (tests/trace/ksyscall_target.c's calls), on both engines, and compared
//! with the kernel running the same object on its kprobes (libbpf's
//! auto-attach, tests/trace/kernel_loader.c). Kernel functions a process
//! never runs are refused before the target starts.

mod trace_common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, loader_slots, run_ok, serial, trace_json, SRC};

// Constants of tests/trace/ksyscall_target.c.
const WRITES: u64 = 300;
const BAD: u64 = 40;
const PPIDS: u64 = 9;
const FORKS: u64 = 3;

/// The build directory, or None (skip reported) without kernel BTF for
/// vmlinux.h.
fn fixture() -> Option<&'static PathBuf> {
    static F: OnceLock<Option<PathBuf>> = OnceLock::new();
    F.get_or_init(|| {
        let vmlinux = bpfjet_obj::core::VMLINUX_BTF;
        if !Path::new(vmlinux).exists() {
            bpfjet_testsupport::report_skip("trace_ksyscall: no kernel BTF for vmlinux.h");
            return None;
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-ksyscall");
        std::fs::create_dir_all(&dir).unwrap();
        let header = Command::new("bpftool")
            .args(["btf", "dump", "file", vmlinux, "format", "c"])
            .output()
            .expect("bpftool (scripts/setup.sh installs it)");
        assert!(header.status.success(), "bpftool btf dump");
        std::fs::write(dir.join("vmlinux.h"), &header.stdout).unwrap();
        let bpf = |src: &str, out: &str| {
            run_ok(
                Command::new("clang-19")
                    .args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86"])
                    .arg(format!("-I{}", dir.display()))
                    .arg("-c")
                    .arg(src)
                    .arg("-o")
                    .arg(dir.join(out)),
                &format!("clang-19 {src}"),
            )
        };
        bpf(&format!("{SRC}/ksyscall.bpf.c"), "ksyscall.o");
        bpf(&format!("{SRC}/ksyscall_pair.bpf.c"), "ksyscall_pair.o");
        bpf(&format!("{SRC}/ksyscall_fuse.bpf.c"), "ksyscall_fuse.o");
        // Kernel functions no process runs, and a probe inside an entry
        // point: refused.
        for (name, section) in [
            ("vfs", "kprobe/vfs_write"),
            ("inside", "kprobe/__x64_sys_write+0x4"),
            ("uapi", "ksyscall/stat"),
        ] {
            let src = dir.join(format!("{name}.bpf.c"));
            std::fs::write(
                &src,
                format!(
                    "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
                     SEC(\"{section}\") int on_it(void *ctx) {{ return 0; }}\n\
                     char LICENSE[] SEC(\"license\") = \"GPL\";\n"
                ),
            )
            .unwrap();
            bpf(src.to_str().unwrap(), &format!("{name}.o"));
        }
        cc(
            "ksyscall_target.c",
            dir.join("target"),
            &["-O1", "-fno-omit-frame-pointer"],
            &[],
        );
        // Bare sections, attached as a loader names them.
        let bare = dir.join("bare.bpf.c");
        std::fs::write(
            &bare,
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             #include \"counts.h\"\n\
             SEC(\"kprobe\") int on_a(void *ctx) { bump(0, 1); return 0; }\n\
             SEC(\"kprobe\") int on_b(void *ctx) { bump(1, 1); return 0; }\n\
             SEC(\"kretprobe\") int on_c(void *ctx) { bump(2, 1); return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        )
        .unwrap();
        run_ok(
            Command::new("clang-19")
                .args(["-O2", "-g", "-target", "bpf", "-I", SRC, "-c"])
                .arg(&bare)
                .arg("-o")
                .arg(dir.join("bare.o")),
            "clang-19 bare.bpf.c",
        );
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        Some(dir)
    })
    .as_ref()
}

/// The `--json` report of the test target traced by `obj` on `engine` at
/// fusion level `fuse`; the target must have succeeded.
fn traced_target(dir: &Path, obj: &Path, engine: &str, fuse: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(obj)
        .args([
            "--json",
            "--engine",
            engine,
            &format!("--fuse={fuse}"),
            "--",
        ])
        .arg(dir.join("target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(report["exit_code"], 0, "{engine} {fuse}: {report}");
    report
}

/// What the counts must be, by slot, but the kernel addresses (9, 12).
fn expected() -> Vec<(usize, u64)> {
    let text = b"abcdefghijklm";
    let (mut bytes, mut firsts) = (0u64, 0u64);
    for i in 0..WRITES as usize {
        let n = (i % 13 + 1) as u64;
        bytes += 2 * n;
        firsts += u64::from(text[i % 7]) + u64::from(text[i % 5]);
    }
    vec![
        (0, 2 * WRITES),
        (1, bytes),
        (2, firsts),
        (3, BAD),
        (4, bytes),
        (5, BAD),
        (6, BAD),
        (7, 2 * WRITES),
        (8, bytes),
        (11, bytes),
        (13, PPIDS),
        (14, 2 * WRITES),
        (15, 1),
        (16, FORKS),
        (17, FORKS),
        (18, 0),
    ]
}

#[test]
fn syscall_kprobes_count_exactly_as_the_kernel() {
    let Some(dir) = fixture() else { return };
    let _serial = serial();
    let obj = dir.join("ksyscall.o");
    let target = dir.join("target");
    let kernel = Command::new(dir.join("kernel_loader"))
        .env("LOADER_SLOTS", "24")
        .arg(&obj)
        .arg(&target)
        .output()
        .unwrap();
    let kernel = loader_slots(&kernel, "for ksyscall.o");
    if let Some(k) = &kernel {
        for (slot, want) in expected() {
            assert_eq!(
                k[slot], want,
                "the kernel's slot {slot} (the test's own expectation)"
            );
        }
    }
    for engine in ["interp", "jit"] {
        let out = trace_json(&obj, engine, &[target.as_os_str()]);
        let report = json_report(&out);
        assert_eq!(
            report["exit_code"],
            0,
            "{engine}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let c = counts(&report);
        for (slot, want) in expected() {
            assert_eq!(c[slot], want, "{engine}: slot {slot} in {report}");
        }
        if let Some(k) = &kernel {
            // The entry point's kernel address: the kernel's own
            // bpf_get_func_ip, from /proc/kallsyms (root reads it).
            assert_eq!(c[9], k[9], "{engine}: kprobe func ip");
            assert_eq!(c[12], k[12], "{engine}: kretprobe func ip");
            assert_eq!(c[10], k[10], "{engine}: PT_REGS_IP - func ip");
            assert_eq!(&c[..19], &k[..19], "{engine}: bpfjet vs kernel");
        }
    }
}

/// A `sys_enter_write`/`sys_exit_write` pair `--fuse compile` would
/// compile into one function, and a `ksyscall/write` on the same call:
/// the pair is left uncompiled, saying why, and every program runs at
/// every call, on both engines and every fusion level.
#[test]
fn a_kernel_probe_keeps_its_calls_pair_from_being_compiled() {
    let Some(dir) = fixture() else { return };
    let _serial = serial();
    let obj = dir.join("ksyscall_pair.o");
    for (engine, fuse) in [
        ("jit", "compile"),
        ("jit", "inline"),
        ("jit", "none"),
        ("interp", "all"),
    ] {
        let report = traced_target(dir, &obj, engine, fuse);
        let c = counts(&report);
        assert_eq!(&c[..3], &[2 * WRITES; 3], "{engine} {fuse}: {report}");
        if fuse == "compile" {
            let refusals = report["fusion_compile_refusals"].to_string();
            assert!(
                refusals.contains("kernel probes on __x64_sys_write"),
                "{engine} {fuse}: {refusals}"
            );
        }
    }
}

/// A `ksyscall/write` + `kretsyscall/write` pair with a hand-off map
/// keyed by the thread is a fusion pair as `sys_enter_write` +
/// `sys_exit_write` is: its map is kept per thread (`internalise`) and,
/// with `--fuse inline`, libc's `write` runs through a call-through stub;
/// every level gives the unfused counts, and the map is left empty.
#[test]
fn a_kernel_probe_pair_fuses_with_the_unfused_results() {
    let Some(dir) = fixture() else { return };
    let _serial = serial();
    let obj = dir.join("ksyscall_fuse.o");
    let bytes: u64 = (0..WRITES).map(|i| 2 * (i % 13 + 1)).sum();
    for (engine, fuse) in [
        ("jit", "none"),
        ("jit", "inline"),
        ("jit", "all"),
        ("interp", "none"),
        ("interp", "all"),
    ] {
        let report = traced_target(dir, &obj, engine, fuse);
        let c = counts(&report);
        assert_eq!(
            &c[..4],
            &[2 * WRITES, 2 * WRITES, 2 * WRITES, bytes],
            "{engine} {fuse}: {report}"
        );
        let fused = report["fused"].to_string();
        let internalised = fused.contains("\"internalised\":[\"sizes\"]");
        assert_eq!(internalised, fuse == "all", "{engine} {fuse}: {fused}");
        let through = fused.contains("\"call_through\"");
        assert_eq!(through, fuse != "none", "{engine} {fuse}: {fused}");
        if fuse == "none" {
            assert_eq!(report["maps"]["sizes"], serde_json::json!([]), "{engine}");
        }
    }
}

/// Bare `SEC("kprobe")`/`SEC("kretprobe")` programs a loader attaches by
/// name (`bpf_program__attach_ksyscall`, `_attach_kprobe`): `--attach`.
#[test]
fn bare_kernel_probes_attach_where_the_command_line_says() {
    let Some(dir) = fixture() else { return };
    let _serial = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(dir.join("bare.o"))
        .args([
            "--json",
            "--attach",
            "on_a=ksyscall/getppid",
            "--attach",
            "on_b=__x64_sys_getppid",
            "--attach",
            "on_c=kretsyscall/getppid",
            "--",
        ])
        .arg(dir.join("target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(report["exit_code"], 0, "{report}");
    assert_eq!(&counts(&report)[..3], &[PPIDS; 3], "{report}");
}

#[test]
fn kernel_functions_a_process_never_runs_are_refused_before_the_target_starts() {
    let Some(dir) = fixture() else { return };
    let _serial = serial();
    let marker = dir.join("started.mark");
    for (obj, needles) in [
        (
            "vfs.o",
            &["kprobe/vfs_write", "vfs_write", "__x64_sys_NAME"][..],
        ),
        ("inside.o", &["kprobe/__x64_sys_write+0x4", "inside"][..]),
        ("uapi.o", &["ksyscall/stat", "__x64_sys_newstat"][..]),
    ] {
        let _ = std::fs::remove_file(&marker);
        let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .arg("trace")
            .arg(dir.join(obj))
            .args(["--", "/usr/bin/touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{obj}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{obj}: {n:?} not in {stderr}");
        }
        assert!(!marker.exists(), "{obj}: the target ran");
    }
}
