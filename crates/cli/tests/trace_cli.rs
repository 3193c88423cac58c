//! `bpfjet trace`: uprobes, uretprobes and syscall tracepoints attached
//! inside a C program compiled at test time, counted exactly (every count
//! is a constant of tests/trace/target.c) and compared with the kernel
//! running the same object on its own uprobes and tracepoints (libbpf
//! loader tests/trace/kernel_loader.c). Bad input: a missing symbol, a
//! static binary, --pid: a clear error and the target never starts.

mod trace_common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use trace_common::{cc, counts, json_report, loader_slots, run_ok, serial, SRC};

struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn bpf(dir: &Path, src: &str, out: &str, defines: &[String]) {
    let mut c = Command::new("clang-19");
    c.args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86"])
        .arg("-I/usr/include/x86_64-linux-gnu")
        .args(defines)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(dir.join(out));
    run_ok(&mut c, &format!("clang-19 {src}"));
}

/// Builds the targets, objects and the kernel loader once.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cli");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| format!("{SRC}/{f}");
        cc("target_lib.c", dir.join("libtrace_target.so"), &["-O1", "-g", "-fPIC", "-shared"], &[]);
        cc("target.c", dir.join("target"), &["-O1", "-g"], &[&format!("-L{}", dir.display()), "-ltrace_target", &format!("-Wl,-rpath,{}", dir.display()), "-lpthread"]);
        // A statically linked variant (without the library's functions).
        let static_src = dir.join("static_target.c");
        std::fs::write(
            &static_src,
            "__attribute__((noinline)) int work(int x) { return x + 1; }\n\
             int main(void) { return work(41) == 42 ? 0 : 1; }\n",
        )
        .unwrap();
        run_ok(
            Command::new("cc")
                .args(["-O1", "-static", "-o"])
                .arg(dir.join("target_static"))
                .arg(&static_src),
            "cc -static",
        );
        let exe = format!("-DTARGET_EXE=\"{}\"", dir.join("target").display());
        let lib = format!("-DTARGET_LIB=\"{}\"", dir.join("libtrace_target.so").display());
        bpf(&dir, &src("probes.bpf.c"), "probes.o", &[exe.clone(), lib]);
        bpf(&dir, &src("syscalls.bpf.c"), "syscalls.o", &[]);
        bpf(&dir, &src("ringbuf.bpf.c"), "ringbuf.o", &[]);
        bpf(&dir, &src("bigrec.bpf.c"), "bigrec.o", &[]);
        bpf(&dir, &src("perfbuf.bpf.c"), "perfbuf.o", &[]);
        bpf(&dir, &src("perfbuf.bpf.c"), "perfbuf_fill.o", &["-DFILL".into()]);
        bpf(&dir, &src("perfbuf.bpf.c"), "perfbuf_nobig.o", &["-DNO_BIG".into()]);
        let static_exe = format!("-DTARGET_EXE=\"{}\"", dir.join("target_static").display());
        let missing = dir.join("missing.bpf.c");
        std::fs::write(
            &missing,
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             SEC(\"uprobe/\" TARGET_EXE \":no_such_function\") int on_missing(void *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        )
        .unwrap();
        bpf(&dir, missing.to_str().unwrap(), "missing.o", std::slice::from_ref(&exe));
        let on_static = dir.join("on_static.bpf.c");
        std::fs::write(
            &on_static,
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             SEC(\"uprobe/\" TARGET_EXE \":work\") int on_work(void *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        )
        .unwrap();
        bpf(&dir, on_static.to_str().unwrap(), "on_static.o", &[static_exe]);
        let kprobe = dir.join("kprobe.bpf.c");
        std::fs::write(
            &kprobe,
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             SEC(\"kprobe/do_sys_openat2\") int on_open(void *ctx) { return 0; }\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
        )
        .unwrap();
        bpf(&dir, kprobe.to_str().unwrap(), "kprobe.o", &[]);
        cc("exit_writes_target.c", dir.join("exit_writes_target"), &["-O1"], &[]);
        for name in ["sched_tp", "unsized", "cgroup", "loader", "exit_writes"] {
            bpf(&dir, &src(&format!("{name}.bpf.c")), &format!("{name}.o"), &[]);
        }
        cc("kernel_loader.c", dir.join("kernel_loader"), &["-O1"], &["-lbpf"]);
        Fixture { dir }
    })
}

fn bpfjet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bpfjet"))
}

fn trace(obj: &str, engine: &str, target: &[&str]) -> Output {
    let f = fixture();
    let mut c = bpfjet();
    c.arg("trace")
        .arg(f.path(obj))
        .args(["--json", "--engine", engine, "--"])
        .args(target);
    c.output().unwrap()
}

/// The `counts` array of a `--json` report, by slot.
/// The kernel's counts for the same object and target, or None (with
/// SKIPPED printed) when the kernel cannot attach here.
fn kernel_counts(obj: &str) -> Option<Vec<u64>> {
    let f = fixture();
    let out = Command::new(f.path("kernel_loader"))
        .arg(f.path(obj))
        .arg(f.path("target"))
        .output()
        .unwrap();
    loader_slots(&out, &format!("for {obj}"))
}

// Constants of tests/trace/target.c.
const WORK: u64 = 1000 + 8 * 5000;
const LIB_WORK: u64 = 300 * 3;
const REC: u64 = 21 * 10;
const DIVE: u64 = 7 * 25;
const WRITES: u64 = 2000;

fn check_probes(engine: &str) {
    let _serial = serial();
    let out = trace(
        "probes.o",
        engine,
        &[fixture().path("target").to_str().unwrap()],
    );
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        42,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(42));
    let c = counts(&report);
    // work(x) returns x + 1: sum over main's and the threads' calls.
    let ret_sum: u64 = (1..=1000u64).sum::<u64>() + 8 * (1..=5000u64).sum::<u64>();
    let want = [
        WORK,
        WORK,
        ret_sum,
        LIB_WORK,
        LIB_WORK,
        REC,
        REC,
        DIVE,
        0,
        (-14i64) as u64, // probe_read_user of an unmapped address: -EFAULT
        1,
    ];
    assert_eq!(&c[..want.len()], &want[..], "bpfjet ({engine}) counts");
    if let Some(k) = kernel_counts("probes.o") {
        assert_eq!(
            &c[..want.len()],
            &k[..want.len()],
            "bpfjet ({engine}) vs kernel"
        );
    }
}

#[test]
fn uprobes_count_exactly_as_the_kernel_interp() {
    check_probes("interp");
}

#[test]
fn uprobes_count_exactly_as_the_kernel_jit() {
    check_probes("jit");
}

#[test]
fn syscall_tracepoints_count_exactly_as_the_kernel() {
    let _serial = serial();
    let out = trace(
        "syscalls.o",
        "interp",
        &[fixture().path("target").to_str().unwrap()],
    );
    let report = json_report(&out);
    assert_eq!(
        report["exit_code"],
        42,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = counts(&report);
    let want = [WRITES, WRITES, 7 * WRITES, WRITES, WRITES];
    assert_eq!(&c[..5], &want[..]);
    if let Some(k) = kernel_counts("syscalls.o") {
        assert_eq!(&c[..5], &k[..5], "bpfjet vs kernel");
    }
}

#[test]
fn text_output_is_bpftrace_style() {
    let _serial = serial();
    let f = fixture();
    let out = bpfjet()
        .arg("trace")
        .arg(f.path("syscalls.o"))
        .arg("--")
        .arg(f.path("target"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("@counts[0]: {WRITES}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("@counts[2]: {}", 7 * WRITES)),
        "{stdout}"
    );
}

/// `bpfjet trace OBJ ARGS...` (ARGS include `--` and the command).
fn trace_args(obj: &Path, args: &[&str]) -> Output {
    bpfjet().arg("trace").arg(obj).args(args).output().unwrap()
}

/// `bpfjet trace OBJ -- target mark FILE`: the file exists only if the
/// target ran.
fn trace_marked(obj: &str, mark: &str) -> (Output, PathBuf) {
    let f = fixture();
    let marker = f.path(mark);
    let _ = std::fs::remove_file(&marker);
    let target = f.path("target");
    let args = [
        "--",
        target.to_str().unwrap(),
        "mark",
        marker.to_str().unwrap(),
    ];
    (trace_args(&f.path(obj), &args), marker)
}

fn assert_not_started(out: &Output, needles: &[&str], marker: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in: {stderr}");
    }
    assert!(!marker.exists(), "the target ran: {stderr}");
}

#[test]
fn missing_symbol_is_an_error_before_the_target_starts() {
    let _serial = serial();
    let (out, marker) = trace_marked("missing.o", "missing.mark");
    assert_not_started(&out, &["no_such_function", "uprobe/"], &marker);
}

#[test]
fn static_binary_is_an_error_before_the_target_starts() {
    let _serial = serial();
    let f = fixture();
    let out = bpfjet()
        .arg("trace")
        .arg(f.path("on_static.o"))
        .arg("--")
        .arg(f.path("target_static"))
        .output()
        .unwrap();
    assert_not_started(&out, &["statically linked"], &f.path("never"));
}

#[test]
fn kernel_probe_is_an_unsupported_type_error() {
    let _serial = serial();
    let (out, marker) = trace_marked("kprobe.o", "kprobe.mark");
    assert_not_started(
        &out,
        &["kprobe/do_sys_openat2", "do_sys_openat2", "__x64_sys_NAME"],
        &marker,
    );
}

#[test]
fn a_tracepoint_outside_the_processs_system_calls_is_refused_before_the_target_starts() {
    let _serial = serial();
    let (out, marker) = trace_marked("sched_tp.o", "sched.mark");
    let needles = [
        "tracepoint/sched/sched_switch",
        "tracepoint/raw_syscalls/sys_enter|sys_exit",
    ];
    assert_not_started(&out, &needles, &marker);
}

#[test]
fn max_entries_sizes_a_map_the_object_leaves_at_zero() {
    let _serial = serial();
    let obj = fixture().path("unsized.o");
    let refused = |args: &[&str], needle: &str| {
        let out = trace_args(&obj, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(needle), "{stderr}");
    };
    refused(&["--", "/bin/true"], "--max-entries");
    refused(&["--max-entries", "nope=16", "--", "/bin/true"], "nope");
    let report = json_report(&trace_args(
        &obj,
        &["--max-entries", "calls=16", "--json", "--", "/bin/true"],
    ));
    assert!(report["maps"]["calls"].is_array(), "{report}");
}

/// What a libbpf tool's user space does between open and load, given on
/// the command line: bare `SEC("uprobe")` programs attached (one at two
/// functions, a kprobe-section one as a uprobe), globals set, a stack map
/// sized, a program left out. Without them the object is refused before
/// the target starts, naming what is missing.
#[test]
fn loader_settings_attach_set_size_and_leave_out() {
    let _serial = serial();
    let f = fixture();
    let obj = f.path("loader.o");
    let target = f.path("target");
    let work = format!("{}:work", target.display());
    let lib_work = format!("{}:lib_work", f.path("libtrace_target.so").display());
    let attach = [
        format!("on_entry={work}"),
        format!("on_entry={lib_work}"),
        format!("on_return={work}"),
        format!("as_uprobe=uprobe/{work}"),
    ];
    let mut full: Vec<String> = Vec::new();
    for a in &attach {
        full.extend(["--attach".into(), a.clone()]);
    }
    full.extend(
        [
            "--no-autoload",
            "elsewhere",
            "--global",
            "weight=3",
            "--global",
            "tag=xyz",
            "--global",
            "count_returns=true",
            "--global",
            "bias=-2",
            "--value-size",
            "stacks=800",
        ]
        .map(String::from),
    );
    let run = |extra: &[String], more: &[&str]| {
        let mut args: Vec<&str> = extra.iter().map(String::as_str).collect();
        args.extend(more);
        args.extend(["--", target.to_str().unwrap()]);
        trace_args(&obj, &args)
    };
    let refused = |extra: &[String], needle: &str| {
        let out = run(extra, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(needle),
            "{needle:?}: {stderr}"
        );
        assert!(
            stderr.contains("was not started") || !stderr.contains("exit"),
            "{stderr}"
        );
    };
    let without = |drop: &str| -> Vec<String> {
        let mut v = full.clone();
        let at = v.iter().position(|a| a == drop).unwrap();
        v.drain(at - 1..=at);
        v
    };
    refused(&without("elsewhere"), "sync_file_range2");
    refused(&without("stacks=800"), "--value-size");
    refused(&without(&attach[2]), "on_return");
    let with = |arg: &str| -> Vec<String> {
        let mut v = full.clone();
        v.extend(["--global".into(), arg.into()]);
        v
    };
    refused(&with("nope=1"), "no global variable \"nope\"");
    refused(&with("tag=eight888"), "do not fit");
    refused(&with("weight=-1"), "does not fit");
    let mut kprobe_form = full.clone();
    kprobe_form[7] = format!("as_uprobe={work}");
    refused(&kprobe_form, "uprobe/");
    for engine in ["interp", "jit"] {
        let out = run(&full, &["--json", "--engine", engine]);
        let report = json_report(&out);
        assert_eq!(report["exit_code"], 42, "{engine}: {report}");
        let c = counts(&report);
        assert_eq!(
            &c[..3],
            &[3 * (WORK + LIB_WORK), WORK + LIB_WORK, WORK],
            "{engine}: {report}"
        );
        assert!(
            c[3] > 0 && c[3] <= WORK + LIB_WORK,
            "{engine}: stack ids {}",
            c[3]
        );
        assert_eq!(
            c[4], WORK,
            "{engine}: the kprobe-section program as a uprobe"
        );
        assert_eq!(
            c[5],
            (-2i64 * (WORK + LIB_WORK) as i64) as u64,
            "{engine}: a signed global"
        );
    }
}

/// `bpf_get_current_task` read with `BPF_CORE_READ` (vmlinux.h from the
/// running kernel's BTF): the fields a process knows read as the kernel
/// holds them for the thread, any other byte faults.
#[test]
fn current_task_reads_as_the_kernels_task() {
    let _serial = serial();
    let f = fixture();
    let vmlinux = bpfjet_obj::core::VMLINUX_BTF;
    if !Path::new(vmlinux).exists() {
        bpfjet_testsupport::report_skip("current_task_reads_as_the_kernels_task: no kernel BTF");
        return;
    }
    let header = Command::new("bpftool")
        .args(["btf", "dump", "file", vmlinux, "format", "c"])
        .output()
        .expect("bpftool (scripts/setup.sh installs it)");
    assert!(header.status.success(), "bpftool btf dump");
    let inc = f.path("vmlinux-inc");
    std::fs::create_dir_all(&inc).unwrap();
    std::fs::write(inc.join("vmlinux.h"), &header.stdout).unwrap();
    bpf(
        &f.dir,
        &format!("{SRC}/task.bpf.c"),
        "task.o",
        &[format!("-I{}", inc.display())],
    );
    use std::os::unix::fs::MetadataExt;
    let mnt = std::fs::metadata("/proc/self/ns/mnt").unwrap().ino();
    // SAFETY: getuid cannot fail.
    let uid = u64::from(unsafe { libc::getuid() });
    for engine in ["interp", "jit"] {
        let child = bpfjet()
            .arg("trace")
            .arg(f.path("task.o"))
            .args(["--json", "--engine", engine, "--", "/bin/true"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The traced process is bpfjet's child.
        let bpfjet_pid = u64::from(child.id());
        let out = child.wait_with_output().unwrap();
        let report = json_report(&out);
        let c = counts(&report);
        assert_eq!(
            c[0], c[1],
            "{engine}: a single-threaded process: tgid = pid"
        );
        assert_ne!(c[0], 0, "{engine}: {report}");
        assert_eq!(c[2], bpfjet_pid, "{engine}: real_parent->tgid");
        assert_eq!(c[3], mnt, "{engine}: nsproxy->mnt_ns->ns.inum");
        assert_eq!(c[4], uid, "{engine}: cred->uid.val");
        assert_eq!(c[5] as i64, -14, "{engine}: an unfilled field faults");
        assert_eq!(c[6], 1, "{engine}: comm");
        assert_eq!(c[7], c[0], "{engine}: group_leader->tgid");
    }
}

/// An empty cgroup array (libbpf-tools declare one for a filter): the
/// kernel's answers, -EAGAIN for an empty slot, -E2BIG past the end.
#[test]
fn cgroup_array_answers_as_the_kernels_empty_one() {
    let _serial = serial();
    let obj = fixture().path("cgroup.o");
    for engine in ["interp", "jit"] {
        let args = ["--engine", engine, "--json", "--", "/bin/true"];
        let report = json_report(&trace_args(&obj, &args));
        let answer = |i: usize| {
            let hex = report["maps"]["answers"][i]["value"]
                .as_str()
                .expect("answer");
            let v = bpfjet_maps::state::parse_hex(hex).unwrap();
            i64::from_le_bytes(v[..8].try_into().unwrap())
        };
        assert_eq!((answer(0), answer(1)), (-11, -7), "{engine}: {report}");
    }
}

/// A cgroup in the array (`--cgroup-array`, what a tool's `-c DIR` does):
/// the helper answers 1 while the thread is in that cgroup or below it, 0
/// when not; a directory off the cgroup v2 hierarchy is refused before the
/// target starts.
#[test]
fn cgroup_array_holds_a_cgroup_given_on_the_command_line() {
    let _serial = serial();
    let obj = fixture().path("cgroup.o");
    // The hierarchy as the helper finds it.
    let Some(root) = bpfjet_runtime::tracing::cgroup::mount() else {
        bpfjet_testsupport::report_skip(
            "cgroup_array_holds_a_cgroup: no cgroup v2 hierarchy mounted",
        );
        return;
    };
    let child = root.join(format!("bpfjet-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&child) {
        bpfjet_testsupport::report_skip(format!(
            "cgroup_array_holds_a_cgroup: cannot create {}: {e}",
            child.display()
        ));
        return;
    }
    let answer = |dir: &Path, script: &str| {
        let arg = format!("cgroup_map={}", dir.display());
        let out = trace_args(
            &obj,
            &[
                "--cgroup-array",
                &arg,
                "--json",
                "--",
                "/bin/sh",
                "-c",
                script,
            ],
        );
        let report = json_report(&out);
        let hex = report["maps"]["answers"][0]["value"]
            .as_str()
            .expect("answer")
            .to_string();
        let v = bpfjet_maps::state::parse_hex(&hex).unwrap();
        i64::from_le_bytes(v[..8].try_into().unwrap())
    };
    let procs = child.join("cgroup.procs");
    let moved = format!("echo $$ > {}", procs.display());
    let results = (
        answer(root, "true"),
        answer(&child, "true"),
        answer(&child, &moved),
    );
    let refused = trace_args(
        &obj,
        &["--cgroup-array", "cgroup_map=/tmp", "--", "/bin/true"],
    );
    let _ = std::fs::remove_dir(&child);
    assert_eq!(
        results,
        (1, 0, 1),
        "under the root; not under a child; moved into it"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("cgroup v2"),
        "{stderr}"
    );
}

/// Return probes on a function and on the one it tail-calls (`jmp`, as
/// `realloc(NULL, n)` ends in `malloc`): both returns are seen, innermost
/// first, with their values, as the kernel chains such uretprobes; before,
/// the caller's frame was taken for an abandoned one and the process
/// aborted.
#[test]
fn return_probes_survive_tail_calls() {
    let _serial = serial();
    let f = fixture();
    let exe = f.path("tail_target");
    cc("tail_target.c", &exe, &["-O2", "-g"], &[]);
    let objdump = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&exe)
        .output()
        .expect("objdump");
    let text = String::from_utf8_lossy(&objdump.stdout);
    let outer = text.split("<outer>:").nth(1).unwrap_or_default();
    let outer = &outer[..outer.find("\n\n").unwrap_or(outer.len())];
    assert!(
        outer.contains("jmp") && outer.contains("<inner>"),
        "no tail call: {outer}"
    );
    bpf(
        &f.dir,
        &format!("{SRC}/tail.bpf.c"),
        "tail.o",
        &[format!("-DTARGET_EXE=\"{}\"", exe.display())],
    );
    // outer(i): 1000 calls, 500 (odd i) end in inner(i) = i + 1.
    let inner_sum: u64 = (1..=1000u64).filter(|i| i % 2 == 1).map(|i| i + 1).sum();
    let outer_sum: u64 = (1..=1000u64)
        .map(|i| if i % 2 == 1 { i + 1 } else { i })
        .sum();
    let want = [1000, 1000, 500, 500, outer_sum, inner_sum];
    for engine in ["interp", "jit"] {
        let out = bpfjet()
            .arg("trace")
            .arg(f.path("tail.o"))
            .args(["--json", "--engine", engine, "--"])
            .arg(&exe)
            .output()
            .unwrap();
        let report = json_report(&out);
        assert_eq!(report["exit_code"], 42, "{engine}: {report}");
        assert_eq!(&counts(&report)[..6], &want[..], "{engine}");
    }
}

#[test]
fn pid_with_a_command_and_duration_without_pid_are_refused() {
    // `--pid` itself is tested in trace_pid.rs.
    let out = bpfjet()
        .args(["trace", "x.o", "--pid", "1", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("give no command"), "{stderr}");
    let out = bpfjet()
        .args(["trace", "x.o", "--duration", "1", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--duration applies to --pid"), "{stderr}");
}

#[test]
fn ring_buffer_records_reach_the_events_file_in_order() {
    let _serial = serial();
    let f = fixture();
    let events = f.path("events.bin");
    let _ = std::fs::remove_file(&events);
    let out = bpfjet()
        .arg("trace")
        .arg(f.path("ringbuf.o"))
        .arg("--json")
        .arg("--events")
        .arg(&events)
        .arg("--")
        .arg(f.path("target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(report["exit_code"], 42);
    assert_eq!(
        report["ringbufs"]["events"],
        serde_json::json!({"produced": WRITES, "consumed": WRITES, "dropped": 0})
    );
    // Records as ktrace writes them: u32 length (host order), then the bytes.
    let data = std::fs::read(&events).unwrap();
    let mut records = Vec::new();
    let mut rest = &data[..];
    while rest.len() >= 4 {
        let len = u32::from_ne_bytes(rest[..4].try_into().unwrap()) as usize;
        records.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes in the events file");
    assert_eq!(records.len() as u64, WRITES);
    for (i, r) in records.iter().enumerate() {
        // struct event { u64 seq; u64 count; }, little-endian.
        let mut want = (i as u64).to_le_bytes().to_vec();
        want.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(r, &want, "record {i}");
    }
}

/// The records of an events file: u32 length (host order), then the bytes.
fn event_records(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    let mut records = Vec::new();
    let mut rest = &data[..];
    while rest.len() >= 4 {
        let len = u32::from_ne_bytes(rest[..4].try_into().unwrap()) as usize;
        records.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes in the events file");
    records
}

/// `bpf_perf_event_output` to a PERF_EVENT_ARRAY (libbpf-tools' perf
/// buffers): the agent reads every CPU ring, writes each sample to the
/// events file as a ring buffer's record and counts them in "perfbufs";
/// a lost sample (PERF_RECORD_LOST) is counted as dropped. tests/trace/
/// perfbuf.bpf.c: one 16-byte sample per write, plus a record larger than
/// a CPU ring (always lost) every tenth write; with FILL, 30,000-byte
/// samples of which a ring holds two (lost whenever the consumer lags).
#[test]
fn perf_buffer_samples_reach_the_events_file_and_losses_are_counted() {
    let _serial = serial();
    let f = fixture();
    let events = f.path("perf_events.bin");
    let run = |obj: &str, engine: &str, json: bool| {
        let _ = std::fs::remove_file(&events);
        let mut c = bpfjet();
        c.arg("trace").arg(f.path(obj));
        if json {
            c.arg("--json");
        }
        c.args(["--engine", engine, "--events"])
            .arg(&events)
            .arg("--")
            .arg(f.path("target"));
        c.output().unwrap()
    };
    for engine in ["interp", "jit"] {
        let report = json_report(&run("perfbuf.o", engine, true));
        assert_eq!(report["exit_code"], 42, "{engine}");
        assert_eq!(report["ringbufs"], serde_json::json!({}), "{engine}");
        let lost = WRITES / 10;
        assert_eq!(
            report["perfbufs"]["events"],
            serde_json::json!({"produced": WRITES, "consumed": WRITES, "dropped": lost}),
            "{engine}"
        );
        assert_eq!(counts(&report), vec![WRITES, 0, 0, lost], "{engine}");
        // struct event { u64 seq; u64 count; }, little-endian; samples of
        // different CPU rings are not ordered, so by sequence number.
        let mut records = event_records(&events);
        assert_eq!(records.len() as u64, WRITES, "{engine}");
        records.sort_by_key(|r| u64::from_le_bytes(r[..8].try_into().unwrap()));
        for (i, r) in records.iter().enumerate() {
            let mut want = (i as u64).to_le_bytes().to_vec();
            want.extend_from_slice(&7u64.to_le_bytes());
            assert_eq!(r, &want, "{engine}: record {i}");
        }

        // Full rings: every output either reaches the file or is counted
        // as dropped, as the program saw it.
        let report = json_report(&run("perfbuf_fill.o", engine, true));
        assert_eq!(report["exit_code"], 42, "{engine}");
        let c = counts(&report);
        assert_eq!(c[0] + c[1], WRITES, "{engine}: {c:?}");
        assert!(c[0] >= 2, "{engine}: the first two samples fit: {c:?}");
        assert!(
            c[1] > 0,
            "{engine}: 30,000-byte samples never filled a ring: {c:?}"
        );
        assert_eq!(
            report["perfbufs"]["events"],
            serde_json::json!({"produced": c[0], "consumed": c[0], "dropped": c[1]}),
            "{engine}"
        );
        let records = event_records(&events);
        assert_eq!(records.len() as u64, c[0], "{engine}");
        let mut seqs: Vec<u64> = records
            .iter()
            .map(|r| {
                assert_eq!(r.len(), 30000, "{engine}");
                u64::from_le_bytes(r[..8].try_into().unwrap())
            })
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len() as u64, c[0], "{engine}: duplicate samples");
        assert!(seqs.iter().all(|&s| s < WRITES), "{engine}: {seqs:?}");
    }
    // Text output: a line per perf buffer, as for ring buffers.
    let out = run("perfbuf.o", "interp", false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "perfbuf events: produced {WRITES} consumed {WRITES} dropped {}",
            WRITES / 10
        )),
        "{stdout}"
    );
}

/// The kernel on its own tracepoint with libbpf's perf buffer
/// (kernel_loader.c) and bpfjet see the same samples and counts, without
/// the record larger than a ring (the kernel cannot carry it). The kernel
/// hands a consumer each sample padded so that its u32 size and data take
/// a multiple of 8 bytes (16 bytes of data arrive as 20); bpfjet writes the
/// data as the program output it.
#[test]
fn perf_buffer_samples_match_the_kernel() {
    let _serial = serial();
    let f = fixture();
    let kernel_events = f.path("perf_kernel_events.bin");
    let _ = std::fs::remove_file(&kernel_events);
    let out = Command::new(f.path("kernel_loader"))
        .arg(f.path("perfbuf_nobig.o"))
        .arg(f.path("target"))
        .env("LOADER_SLOTS", "4")
        .env("LOADER_EVENTS", &kernel_events)
        .output()
        .unwrap();
    let Some(kernel) = loader_slots(&out, "for perfbuf_nobig.o") else {
        return;
    };
    assert_eq!(kernel, vec![WRITES, 0, 0, 0]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("perfbuf {WRITES} 0")), "{stderr}");
    let mut kernel_records = event_records(&kernel_events);
    for r in &kernel_records {
        assert_eq!(r.len(), 20, "the kernel's padded sample");
    }
    kernel_records.sort_by_key(|r| u64::from_le_bytes(r[..8].try_into().unwrap()));
    let kernel_data: Vec<&[u8]> = kernel_records.iter().map(|r| &r[..16]).collect();

    let events = f.path("perf_events.bin");
    for engine in ["interp", "jit"] {
        let _ = std::fs::remove_file(&events);
        let out = bpfjet()
            .arg("trace")
            .arg(f.path("perfbuf_nobig.o"))
            .args(["--json", "--engine", engine, "--events"])
            .arg(&events)
            .arg("--")
            .arg(f.path("target"))
            .output()
            .unwrap();
        let report = json_report(&out);
        assert_eq!(counts(&report), kernel, "{engine}");
        assert_eq!(
            report["perfbufs"]["events"],
            serde_json::json!({"produced": WRITES, "consumed": WRITES, "dropped": 0}),
            "{engine}"
        );
        let mut records = event_records(&events);
        records.sort_by_key(|r| u64::from_le_bytes(r[..8].try_into().unwrap()));
        let data: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
        assert_eq!(data, kernel_data, "{engine}");
    }
}

/// `--ringbuf-backpressure` puts the ring in backpressure mode inside the
/// traced process (every record still arrives); a map that is not a ring
/// buffer of the object is an error before the target starts.
#[test]
fn ring_buffer_backpressure_is_set_in_the_process_or_refused_before_start() {
    let _serial = serial();
    let f = fixture();
    let out = bpfjet()
        .arg("trace")
        .arg(f.path("ringbuf.o"))
        .args(["--json", "--ringbuf-backpressure", "events=500", "--"])
        .arg(f.path("target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    assert_eq!(report["exit_code"], 42);
    assert_eq!(
        report["ringbufs"]["events"],
        serde_json::json!({"produced": WRITES, "consumed": WRITES, "dropped": 0})
    );

    let marker = f.path("backpressure.mark");
    let _ = std::fs::remove_file(&marker);
    let out = bpfjet()
        .arg("trace")
        .arg(f.path("ringbuf.o"))
        .args(["--ringbuf-backpressure", "no_such_ring", "--"])
        .arg(f.path("target"))
        .arg("mark")
        .arg(&marker)
        .output()
        .unwrap();
    assert_not_started(&out, &["--ringbuf-backpressure no_such_ring"], &marker);
}

/// `--ringbuf-size` creates the ring with the given size before load (as
/// a libbpf skeleton's `bpf_map__set_max_entries`): a 6,000-byte record
/// never fits the object's 4 KiB ring and fits a 16 KiB one; sizes the
/// kernel would refuse, and maps that are not ring buffers, are errors
/// before the target starts.
#[test]
fn ring_buffer_size_is_set_before_load_or_refused_before_start() {
    let _serial = serial();
    let f = fixture();
    let run = |extra: &[&str]| {
        let out = bpfjet()
            .arg("trace")
            .arg(f.path("bigrec.o"))
            .arg("--json")
            .args(extra)
            .arg("--")
            .arg(f.path("target"))
            .output()
            .unwrap();
        let report = json_report(&out);
        assert_eq!(report["exit_code"], 42, "{report}");
        report
    };
    // The object's size: every reservation fails.
    let report = run(&[]);
    assert_eq!(counts(&report), vec![0, WRITES]);
    assert_eq!(report["ringbufs"]["events"]["produced"], 0);
    // 16 KiB: the records fit (how many find room depends on how fast the
    // consumer empties the ring; the first always does), and the ring's
    // counters agree with the program's.
    let report = run(&["--ringbuf-size", "events=16384"]);
    let c = counts(&report);
    assert_eq!(c[0] + c[1], WRITES, "{c:?}");
    assert!(c[0] > 0, "no record fitted a 16 KiB ring: {c:?}");
    let rb = &report["ringbufs"]["events"];
    assert_eq!(rb["produced"], c[0]);
    assert_eq!(rb["consumed"], c[0]);
    assert_eq!(rb["dropped"], c[1]);

    for (arg, needle) in [
        ("events=20000", "power of two"),
        ("events=1024", "page size"),
        ("counts=16384", "not a RINGBUF"),
        ("nothere=16384", "no map \"nothere\""),
        ("events", "expected MAP=BYTES"),
    ] {
        let marker = f.path("ringbuf_size.mark");
        let _ = std::fs::remove_file(&marker);
        let out = bpfjet()
            .arg("trace")
            .arg(f.path("bigrec.o"))
            .args(["--ringbuf-size", arg, "--"])
            .arg(f.path("target"))
            .arg("mark")
            .arg(&marker)
            .output()
            .unwrap();
        assert_not_started(&out, &[needle], &marker);
    }
}

/// The main thread's system calls after `exit()` destroyed its
/// thread-locals (stdio's flush, an atexit handler's write) run their
/// programs, as the kernel's tracepoints see them: the run states are kept
/// past the destruction. They were skipped and counted as
/// `skipped_at_thread_exit` before.
#[test]
fn writes_after_exit_destroyed_thread_locals_are_traced() {
    let _serial = serial();
    let f = fixture();
    let target = f.path("exit_writes_target");
    let expected = vec![3, 3, 6 + 20 + 5];
    let out = Command::new(f.path("kernel_loader"))
        .arg(f.path("exit_writes.o"))
        .arg(&target)
        .env("LOADER_SLOTS", "3")
        .output()
        .unwrap();
    if let Some(kernel) = loader_slots(&out, "of writes at exit") {
        assert_eq!(kernel, expected, "the kernel");
    }
    for engine in ["interp", "jit"] {
        let out = trace("exit_writes.o", engine, &[target.to_str().unwrap()]);
        let report = json_report(&out);
        assert_eq!(counts(&report)[..3], expected, "{engine}");
    }
}

/// `bpf_printk` lines of the traced process reach the report
/// (`"trace_lines"`), from a program on a system call's entry, where the
/// line is formatted and kept without allocating (the hook may run inside
/// the traced process's allocator), on both engines. Arguments no
/// verifier checked (an unmapped `%s`) print as empty, as in the kernel.
#[test]
fn printk_lines_of_a_system_call_hook_reach_the_report() {
    let _serial = serial();
    let f = fixture();
    let src = f.path("printk.bpf.c");
    std::fs::write(
        &src,
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         struct write_args { __u64 pad; long nr; long fd; const char *buf; long count; };\n\
         SEC(\"tracepoint/syscalls/sys_enter_write\")\n\
         int on_write(struct write_args *ctx) {\n\
             if (ctx->fd != 1) return 0;\n\
             bpf_printk(\"write fd=%ld count=%ld [%s]\", ctx->fd, ctx->count, (char *)16);\n\
             bpf_printk(\"%s|%-4d|%x|%c|%lu\", \"five\", 5, 255, 'z', ctx->count);\n\
             return 0;\n\
         }\n\
         char LICENSE[] SEC(\"license\") = \"GPL\";\n",
    )
    .unwrap();
    bpf(&f.dir, src.to_str().unwrap(), "printk.o", &[]);
    for engine in ["interp", "jit"] {
        let out = trace("printk.o", engine, &["/bin/echo", "hello"]);
        let report = json_report(&out);
        let lines: Vec<&str> = report["trace_lines"]
            .as_array()
            .unwrap_or_else(|| panic!("{engine}: no trace_lines: {report}"))
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        assert_eq!(
            lines,
            ["write fd=1 count=6 []", "five|5   |ff|z|6"],
            "{engine}: {report}"
        );
        assert_eq!(
            report["trace_lines_lost"],
            serde_json::json!({"busy": 0, "pushed_out": 0}),
            "{engine}"
        );
    }
}
