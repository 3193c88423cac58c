//! `bpfjet trace`: the system calls of application signal handlers that
//! interrupt a blocked traced call are traced, as the kernel's tracepoints
//! see them (issue 14). A thread blocked in glibc's `read` (the libc-wrapper
//! fast path, selector ALLOW during the call) and one blocked in a raw
//! `syscall(SYS_read)` (the SIGSYS path, selector ALLOW in the handler) are
//! interrupted by a signal whose handler hits a uprobe and calls getppid
//! and write; the old
//! action read back is the application's (handler, flags, a mask holding
//! SIGSYS); SA_RESETHAND runs once and reads back SIG_DFL; a handler that
//! siglongjmps out of a blocked call leaves the thread dispatched (its
//! later calls are traced). Target: tests/trace/sigblock_target.c, which
//! checks the read-back actions itself (exit 42); counts:
//! sigblock.bpf.c, compared with constants and with the kernel running
//! the same object on the same workload (tests/trace/kernel_loader.c).
//! With `--pid`, the handler was installed before the agent came.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;
use trace_common::{cc, counts, json_report, loader_slots, serial, SRC};

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-sigblock");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| PathBuf::from(format!("{SRC}/{f}"));
        cc(
            "sigblock_target.c",
            dir.join("sigblock_target"),
            &["-O1", "-g", "-pthread"],
            &[],
        );
        Compile::file(src("sigblock.bpf.c"))
            .arg(format!(
                "-DTARGET_EXE=\"{}\"",
                dir.join("sigblock_target").display()
            ))
            .object_at(dir.join("sigblock.o"));
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        dir
    })
}

// Constants of tests/trace/sigblock_target.c.
const ROUNDS: u64 = 20;
const LATER: u64 = 5;
/// SIGUSR1 runs: each round interrupts both readers.
const USR1: u64 = 2 * ROUNDS;
/// Slots of sigblock.bpf.c's `counts`: getppid enter and exit (two per
/// SIGUSR1/SIGHUP run, one per SIGUSR2 run), writes of the handlers,
/// rt_sigreturn (handlers that return), reads of the blocked threads (one
/// per interruption plus the first of each), getegid after the jumps, the
/// uprobe on handler_mark (once per SIGUSR1/SIGHUP run).
const WANT: [u64; 7] = [
    2 * (USR1 + 1) + 2,
    2 * (USR1 + 1) + 2,
    USR1 + 1,
    USR1 + 1,
    2 * (1 + ROUNDS) + 2,
    2 * LATER,
    USR1 + 1,
];

fn values(report: &serde_json::Value) -> Vec<u64> {
    assert_eq!(report["exit_code"], 42, "{report}");
    counts(report)[..WANT.len()].to_vec()
}

/// The kernel's counts on the same workload, or None (reported skipped)
/// when the kernel cannot attach here.
fn kernel_counts() -> Option<Vec<u64>> {
    let d = dir();
    let out = Command::new(d.join("kernel_loader"))
        .arg(d.join("sigblock.o"))
        .arg(d.join("sigblock_target"))
        .output()
        .unwrap();
    let mut slots = loader_slots(&out, "for sigblock.o")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("exit 42"),
        "target under the kernel: {stderr}"
    );
    slots.truncate(WANT.len());
    Some(slots)
}

fn traced(engine: &str) {
    let _serial = serial();
    let d = dir();
    let out: Output = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join("sigblock.o"))
        .args(["--json", "--engine", engine, "--"])
        .arg(d.join("sigblock_target"))
        .output()
        .unwrap();
    let report = json_report(&out);
    let got = values(&report);
    assert_eq!(got, WANT, "bpfjet ({engine})");
    assert!(
        report["syscalls"]["fast_path"].as_u64().unwrap() > 0,
        "the fast path was not used: {report}"
    );
    if let Some(k) = kernel_counts() {
        assert_eq!(got, k, "bpfjet ({engine}) vs kernel");
    }
}

#[test]
fn handler_calls_inside_blocked_calls_count_as_the_kernel_interp() {
    traced("interp");
}

#[test]
fn handler_calls_inside_blocked_calls_count_as_the_kernel_jit() {
    traced("jit");
}

/// `--pid`: SIGUSR1's handler was installed before the agent was loaded.
#[test]
fn handlers_installed_before_a_pid_attach_are_wrapped() {
    let _serial = serial();
    let d = dir();
    let mut target = Command::new(d.join("sigblock_target"))
        .arg("wait")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "ready");
    let mut tracer = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(d.join("sigblock.o"))
        .args(["--json", "--pid", &target.id().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = tracer.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(l) if l.contains("attached to process") => break,
            Ok(l) => seen.push(l),
            Err(_) => {
                let _ = target.kill();
                let _ = target.wait();
                let out = tracer.wait_with_output().unwrap();
                panic!("no attach: {:?}\n{}", out.status, seen.join("\n"));
            }
        }
    }
    let mut stdin = target.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    drop(stdin);
    let status = target.wait().unwrap();
    assert_eq!(status.code(), Some(42), "target under --pid: {status:?}");
    let out = tracer.wait_with_output().unwrap();
    let report = json_report(&out);
    assert_eq!(values(&report), WANT, "bpfjet --pid");
}
