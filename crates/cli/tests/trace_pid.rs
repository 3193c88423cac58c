//! `bpfjet trace OBJ --pid PID`: attaching to a running, unmodified
//! process (tests/trace/pid_target.c, pid.bpf.c, compiled at test time).
//! The target is started normally and driven through its stdin, so the
//! number of calls it makes while bpfjet is attached is known exactly:
//! - counts until the process exits: a uprobe, a uretprobe (with the sum
//!   of arguments and return values) and a uprobe on libc's `write` count
//!   exactly the calls made after the attach, none before, and the ring
//!   buffer (`--events`) carries one record per call; the target's output,
//!   results and exit status are unchanged;
//! - a detach (SIGINT, `--duration`) while the target keeps running: the
//!   counts are those of the window, `exit_code` is null, and the target
//!   goes on working and exits normally afterwards;
//! - attaching while every worker is calling the probed function;
//! - attaching to a process whose one thread is nearly always taking a
//!   signal (tests/trace/signal_loop_target.c);
//! - a thread holding the loader's lock (in a `dl_iterate_phdr` callback)
//!   when the process is stopped: the injected `dlopen` waits, the other
//!   threads are resumed after a while, the attach completes;
//! - a thread whose stack returns into the bytes a patch would displace
//!   (tests/trace/hazard_target.c): no safe point, refused untouched;
//! - system-call tracepoints (tests/trace/pid_sys_target.c,
//!   pid_syscount.bpf.c): every existing thread and a thread created after
//!   the attach are dispatched; the counts of a window are exactly the
//!   calls the target reports, and the kernel's tracepoints count the same
//!   workload the same (tests/trace/kernel_loader.c); after the detach no
//!   thread has dispatch on and the target works on; until the exit;
//!   a process using Syscall User Dispatch itself, handling SIGSYS, with
//!   two threads sharing a thread pointer or with a thread that stays in
//!   libc's allocator, is refused untouched; an object the agent refuses
//!   after loading dispatches no thread; bpfjet killed, each
//!   thread turns dispatch off itself;
//! - bad input, refused before the target is touched: no such process, a
//!   static program, a stripped one, a process already traced, a 32-bit
//!   program, a tracepoint other than a system call's, no permission.

mod trace_common;
use bpfjet_testsupport::clang::Compile;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;
use trace_common::{cc, counts, json_report, run_ok, serial, SRC};

const WORKERS: u64 = 3;

fn dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-pid");
        std::fs::create_dir_all(&dir).unwrap();
        let src = |f: &str| PathBuf::from(format!("{SRC}/{f}"));
        let target = dir.join("pid_target");
        cc("pid_target.c", &target, &["-O2", "-pthread"], &[]);
        let stripped = dir.join("pid_target_stripped");
        run_ok(
            Command::new("strip")
                .arg("--strip-all")
                .arg("-o")
                .arg(&stripped)
                .arg(&target),
            "strip pid_target",
        );
        for (t, o) in [(&target, "pid.o"), (&stripped, "pid_stripped.o")] {
            Compile::file(src("pid.bpf.c"))
                .arg("-D__TARGET_ARCH_x86")
                .arg(format!("-DPID_TARGET=\"{}\"", t.display()))
                .object_at(dir.join(o));
        }
        Compile::file(src("pid_sched.bpf.c")).object_at(dir.join("pid_sched.o"));
        cc(
            "pid_sys_target.c",
            dir.join("pid_sys_target"),
            &["-O2", "-pthread"],
            &[],
        );
        Compile::file(src("pid_syscount.bpf.c")).object_at(dir.join("pid_syscount.o"));
        Compile::file(src("pid_sys_refused.bpf.c")).object_at(dir.join("pid_sys_refused.o"));
        cc(
            "kernel_loader.c",
            dir.join("kernel_loader"),
            &["-O1"],
            &["-lbpf"],
        );
        cc(
            "signal_loop_target.c",
            dir.join("signal_loop_target"),
            &["-O2"],
            &[],
        );
        let hazard = dir.join("hazard_target");
        cc("hazard_target.c", &hazard, &["-O2"], &[]);
        Compile::file(src("hazard.bpf.c"))
            .arg("-D__TARGET_ARCH_x86")
            .arg(format!("-DHAZARD_TARGET=\"{}\"", hazard.display()))
            .object_at(dir.join("hazard.o"));
        dir
    })
}

/// The target, driven line by line.
struct Target {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Target {
    fn start(program: &Path) -> Target {
        Target::start_command(Command::new(program))
    }

    fn start_command(mut cmd: Command) -> Target {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut t = Target {
            child,
            stdin,
            stdout,
        };
        assert_eq!(t.line(), "ready");
        t
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    fn send(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }

    /// `run N`: the workers' calls, checked complete and correct.
    fn run(&mut self, rounds: u64) {
        let l = self.send(&format!("run {rounds}"));
        assert_eq!(l, format!("done {} 0", rounds * WORKERS), "target: {l}");
    }

    /// `exit`: the normal end, status 7.
    fn exit(mut self) {
        assert_eq!(self.send("exit"), "bye");
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(7), "target status {status:?}");
    }

    fn agent_loaded(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/maps", self.pid()))
            .unwrap()
            .contains("libbpfjet_trace")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bpfjet trace OBJ --pid PID --json ARGS`, running; returns once it
/// says it attached.
struct Tracer {
    child: Child,
    stderr: mpsc::Receiver<String>,
    /// The "attached to process" line.
    attached: String,
}

impl Tracer {
    fn attach(obj: &Path, pid: i32, args: &[&str]) -> Tracer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .arg("trace")
            .arg(obj)
            .args(["--json", "--pid", &pid.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut seen = Vec::new();
        let attached = loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(l) if l.contains("attached to process") => break l,
                Ok(l) => seen.push(l),
                Err(_) => {
                    let out = child.wait_with_output().unwrap();
                    panic!(
                        "bpfjet trace --pid did not attach: {:?}\nstderr: {}\nstdout: {}",
                        out.status,
                        seen.join("\n"),
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
            }
        };
        Tracer {
            child,
            stderr: rx,
            attached,
        }
    }

    fn finish(self) -> (Value, Output) {
        let out = self.child.wait_with_output().unwrap();
        let err: Vec<String> = self.stderr.try_iter().collect();
        assert!(
            out.status.success() || out.status.code() == Some(7),
            "bpfjet trace --pid: {:?}\n{}",
            out.status,
            err.join("\n")
        );
        (json_report(&out), out)
    }
}

/// The counts `run N` (once, attached) leaves: entries, sum of arguments,
/// returns, sum of results, writes on the pipe.
fn expected(rounds: u64) -> Vec<u64> {
    let calls = rounds * WORKERS;
    let args: u64 = WORKERS * (0..rounds).sum::<u64>();
    let rets: u64 = WORKERS * (0..rounds).map(|i| 3 * i + 1).sum::<u64>();
    vec![calls, args, calls, rets, calls]
}

fn until_exit(engine: &str) {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    // Before the attach: not counted.
    target.run(200);
    let events = d.join(format!("events-{engine}"));
    let tracer = Tracer::attach(
        &d.join("pid.o"),
        target.pid(),
        &["--engine", engine, "--events", events.to_str().unwrap()],
    );
    target.run(1000);
    target.exit();
    let (report, _) = tracer.finish();
    assert_eq!(report["exit_code"], 7, "{report}");
    let want = expected(1000);
    assert_eq!(&counts(&report)[..5], &want[..], "{engine}");
    // The ring buffer, consumed by the agent's thread started in the
    // running process: every record, each an argument of pid_work.
    let rb = &report["ringbufs"]["events"];
    assert_eq!(rb["produced"], want[0], "{rb}");
    assert_eq!(rb["consumed"], want[0], "{rb}");
    assert_eq!(rb["dropped"], 0, "{rb}");
    let bytes = std::fs::read(&events).unwrap();
    let mut args = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(len, 8);
        args.push(u64::from_le_bytes(
            bytes[at + 4..at + 12].try_into().unwrap(),
        ));
        at += 4 + len;
    }
    assert_eq!(args.len() as u64, want[0]);
    assert_eq!(args.iter().sum::<u64>(), want[1]);
}

#[test]
fn attach_counts_until_the_process_exits_interpreter() {
    until_exit("interp");
}

#[test]
fn attach_counts_until_the_process_exits_jit() {
    until_exit("jit");
}

#[test]
fn a_thread_holding_the_loader_lock_delays_the_attach_without_deadlock() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    // The holder sleeps 2 s inside dl_iterate_phdr; stopped by the attach,
    // it keeps the lock the injected dlopen waits for until bpfjet resumes
    // the other threads (after inject::SOLO_TIMEOUT).
    assert_eq!(target.send("hold 2"), "holding");
    let tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &[]);
    assert!(
        tracer.attached.contains("had to be resumed"),
        "{}",
        tracer.attached
    );
    target.run(100);
    target.exit();
    let (report, _) = tracer.finish();
    assert_eq!(report["exit_code"], 7, "{report}");
    assert_eq!(&counts(&report)[..5], &expected(100)[..]);
}

#[test]
fn detach_on_sigint_leaves_the_process_running() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    target.run(50);
    let tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &[]);
    target.run(700);
    // SAFETY: a signal to our child.
    unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
    let (report, out) = tracer.finish();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(report["exit_code"], Value::Null, "{report}");
    assert_eq!(&counts(&report)[..5], &expected(700)[..]);
    // Pass-through afterwards: the same results, the normal end.
    target.run(300);
    target.run(10);
    target.exit();
}

#[test]
fn detach_after_duration_while_threads_call_the_probed_function() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    assert_eq!(target.send("spin"), "spinning");
    let tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &["--duration", "1"]);
    let (report, _) = tracer.finish();
    assert_eq!(report["exit_code"], Value::Null, "{report}");
    let l = target.send("stop");
    let f: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(f[1], 0, "results changed by the probes: {l}");
    let c = counts(&report);
    assert!(
        c[0] > 0 && c[0] <= f[0],
        "entries {} of {} calls",
        c[0],
        f[0]
    );
    // A call entered before the attach has no return probe; one entered
    // before the detach may return after it: at most one per worker.
    assert!(c[2] <= c[0] + WORKERS && c[0] <= c[2] + WORKERS, "{c:?}");
    target.run(100);
    target.exit();
}

#[test]
fn the_process_goes_on_when_bpfjet_is_killed() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    let mut tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &[]);
    target.run(100);
    // SIGKILL: bpfjet cannot say anything; the agent sees its control
    // FIFO closed, stops running programs and writes its report.
    let cli = tracer.child.id();
    tracer.child.kill().unwrap();
    tracer.child.wait().unwrap();
    let report = report_left_by_agent(cli);
    assert_eq!(report["exit_status"], Value::Null, "{report}");
    assert_eq!(&counts(&report)[..5], &expected(100)[..]);
    // Programs no longer run; the process works on.
    target.run(100);
    target.exit();
}

/// The report the agent wrote after bpfjet (process `cli`) was killed, in
/// the attach directory nobody removed (removed now).
fn report_left_by_agent(cli: u32) -> Value {
    let prefix = format!("bpfjet-attach-{cli}-");
    let report = (0..500)
        .find_map(|_| {
            let found = std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .filter_map(Result::ok)
                .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .and_then(|e| std::fs::read_to_string(e.path().join("report.json")).ok())
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
            if found.is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            found
        })
        .expect("the agent wrote no report after bpfjet was killed");
    for e in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    report
}

#[test]
fn a_process_killed_while_traced_is_an_error() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    let tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &[]);
    target.run(10);
    target.child.kill().unwrap();
    target.child.wait().unwrap();
    let status = tracer.child.wait_with_output().unwrap().status;
    assert!(!status.success());
    let lines: Vec<String> = tracer.stderr.iter().collect();
    assert!(
        lines.iter().any(|l| l.contains("without a report")),
        "{lines:?}"
    );
}

#[test]
fn refuses_a_stopped_process() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("pid_target"));
    // SAFETY: signals to our child.
    unsafe { libc::kill(target.pid(), libc::SIGSTOP) };
    while !std::fs::read_to_string(format!("/proc/{}/status", target.pid()))
        .unwrap()
        .contains("State:\tT")
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let err = refused(&d.join("pid.o"), target.pid());
    assert!(err.contains("is stopped"), "{err}");
    // SAFETY: as above.
    unsafe { libc::kill(target.pid(), libc::SIGCONT) };
    untouched(target);
}

/// `bpfjet trace OBJ --pid PID` that must fail; returns its stderr.
fn refused(obj: &Path, pid: i32) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .arg("trace")
        .arg(obj)
        .args(["--pid", &pid.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--pid {pid} was accepted");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A refusal left the target untouched and working.
fn untouched(mut target: Target) {
    assert!(!target.agent_loaded());
    target.run(10);
    target.exit();
}

#[test]
fn refuses_while_a_frame_returns_into_the_bytes_to_patch() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("hazard_target"));
    let err = refused(&d.join("hazard.o"), target.pid());
    assert!(
        err.contains("no safe point") && err.contains("returning into bytes a patch displaces"),
        "{err}"
    );
    assert!(!target.agent_loaded());
    // Still in its callee, untouched: alive and not traced.
    let status = std::fs::read_to_string(format!("/proc/{}/status", target.pid())).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
}

#[test]
fn an_agent_the_process_cannot_load_leaves_it_untouched() {
    let _serial = serial();
    let d = dir();
    // The target sees an empty tmpfs where bpfjet makes its attach
    // directory: its dlopen of the agent fails.
    let hidden = d.join("hidden-tmp");
    std::fs::create_dir_all(&hidden).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs none {} && exec {}",
            hidden.display(),
            d.join("pid_target").display()
        ));
    if !Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        bpfjet_testsupport::report_skip("no mount namespaces (unshare -m)");
        return;
    }
    let target = Target::start_command(cmd);
    let out = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .env("TMPDIR", &hidden)
        .arg("trace")
        .arg(d.join("pid.o"))
        .args(["--pid", &target.pid().to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("failed in the process"), "{err}");
    // The thread that made the call was put back: the process works on.
    untouched(target);
}

#[test]
fn no_such_process() {
    let d = dir();
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    let err = refused(&d.join("pid.o"), pid);
    assert!(err.contains("no such process"), "{err}");
}

#[test]
fn refuses_tracepoints_other_than_system_calls() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("pid_target"));
    let err = refused(&d.join("pid_sched.o"), target.pid());
    assert!(
        err.contains("tracepoint/sched/sched_switch")
            && err.contains("only the traced process's own system calls"),
        "{err}"
    );
    untouched(target);
}

#[test]
fn refuses_a_stripped_program() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("pid_target_stripped"));
    let err = refused(&d.join("pid_stripped.o"), target.pid());
    assert!(err.contains("stripped"), "{err}");
    untouched(target);
}

#[test]
fn refuses_a_static_program() {
    let _serial = serial();
    let d = dir();
    let stat = d.join("pid_target_static");
    let built = Command::new("cc")
        .args(["-O2", "-static", "-pthread", "-o"])
        .arg(&stat)
        .arg(format!("{SRC}/pid_target.c"))
        .status()
        .unwrap();
    if !built.success() {
        bpfjet_testsupport::report_skip("no static libc to build a static target");
        return;
    }
    let target = Target::start(&stat);
    let err = refused(&d.join("pid.o"), target.pid());
    assert!(err.contains("statically linked"), "{err}");
    drop(target);
}

#[test]
fn refuses_a_process_already_traced() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("pid_target"));
    let pid = target.pid();
    // SAFETY: this test thread becomes the main thread's tracer.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) };
    assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
    let err = refused(&d.join("pid.o"), pid);
    // SAFETY: as above.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) };
    assert!(
        // TracerPid is the tracing thread.
        // SAFETY: gettid has no preconditions.
        err.contains(&format!("already traced by task {}", unsafe {
            libc::gettid()
        })),
        "{err}"
    );
    untouched(target);
}

#[test]
fn refuses_a_second_attach() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_target"));
    let tracer = Tracer::attach(&d.join("pid.o"), target.pid(), &["--duration", "0"]);
    tracer.finish();
    let err = refused(&d.join("pid.o"), target.pid());
    assert!(err.contains("already loaded"), "{err}");
    target.run(10);
    target.exit();
}

#[test]
fn refuses_a_32_bit_program() {
    let _serial = serial();
    let d = dir();
    let asm = d.join("pause32.s");
    std::fs::write(
        &asm,
        ".globl _start\n_start:\n movl $29, %eax\n int $0x80\n jmp _start\n",
    )
    .unwrap();
    let obj = d.join("pause32.o");
    let exe = d.join("pause32");
    let ok = Command::new("as")
        .args(["--32", "-o"])
        .arg(&obj)
        .arg(&asm)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("ld")
            .args(["-m", "elf_i386", "-o"])
            .arg(&exe)
            .arg(&obj)
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        bpfjet_testsupport::report_skip("binutils cannot build a 32-bit program here");
        return;
    }
    let mut child = Command::new(&exe).spawn().unwrap();
    let err = refused(&d.join("pid.o"), child.id() as i32);
    let _ = child.kill();
    let _ = child.wait();
    assert!(err.contains("32-bit"), "{err}");
}

#[test]
fn refuses_without_permission() {
    let _serial = serial();
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        bpfjet_testsupport::report_skip("not root: cannot run bpfjet as another user");
        return;
    }
    let d = dir();
    let target = Target::start(&d.join("pid_target"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bpfjet"));
    cmd.arg("trace")
        .arg(d.join("pid.o"))
        .args(["--pid", &target.pid().to_string()]);
    // Run as nobody: a root process is not theirs to ptrace.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => {
            bpfjet_testsupport::report_skip(format!(
                "user nobody cannot run the bpfjet binary: {e}"
            ));
            return;
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && err.contains("pid.o") {
        bpfjet_testsupport::report_skip(format!("user nobody cannot read the test's files: {err}"));
        return;
    }
    assert!(!out.status.success(), "accepted as nobody");
    assert!(
        err.contains("permission") || err.contains("not permitted"),
        "{err}"
    );
    assert!(err.contains("ptrace_scope"), "{err}");
    untouched(target);
}

/// `pid_sys_target`'s answer to `go N` / `spawn N`: the calls it made.
fn sys_calls(line: &str, word: &str) -> [u64; 3] {
    let f: Vec<&str> = line.split_whitespace().collect();
    assert!(f.len() == 4 && f[0] == word, "target: {line}");
    [f[1], f[2], f[3]].map(|x| x.parse().unwrap())
}

/// `by_nr` of pid_syscount.bpf.c: system call number -> entries.
fn by_nr(report: &Value) -> std::collections::BTreeMap<u64, u64> {
    report["maps"]["by_nr"]
        .as_array()
        .unwrap_or_else(|| panic!("no by_nr map in {report}"))
        .iter()
        .map(|e| {
            let k = bpfjet_maps::state::parse_hex(e["key"].as_str().unwrap()).unwrap();
            let v = bpfjet_maps::state::parse_hex(e["value"].as_str().unwrap()).unwrap();
            (
                u64::from_le_bytes(k[..8].try_into().unwrap()),
                u64::from_le_bytes(v[..8].try_into().unwrap()),
            )
        })
        .collect()
}

/// The workload of the window: `go GO` (every worker), `spawn SPAWN` (a
/// thread created now), `fork 100` (a child process); the calls the
/// target reports, summed.
const GO: u64 = 400;
const SPAWN: u64 = 250;

fn sys_window(target: &mut Target) -> u64 {
    let go = sys_calls(&target.send(&format!("go {GO}")), "done");
    assert_eq!(go, [GO * WORKERS; 3]);
    let spawned = sys_calls(&target.send(&format!("spawn {SPAWN}")), "spawned");
    assert_eq!(spawned, [SPAWN; 3]);
    // A child process's calls are not the process's (the kernel's
    // tracepoints filter on the process too): not counted.
    assert_eq!(target.send("fork 100"), "forked 0");
    GO * WORKERS + SPAWN
}

/// Syscall User Dispatch is off in every thread of `pid`.
fn dispatch_off_everywhere(pid: i32) {
    let states = bpfjet_probe::inject::dispatch_states(pid).unwrap();
    assert!(!states.is_empty());
    for (tid, cfg) in states {
        assert_eq!(cfg.mode, 0, "thread {tid} still dispatched: {cfg:?}");
    }
}

/// The kernel's counts of the same workload, the target run under the
/// kernel's tracepoints from its start (tests/trace/kernel_loader.c).
fn kernel_sys_counts() -> Option<Vec<u64>> {
    let d = dir();
    let mut child = Command::new(d.join("kernel_loader"))
        .arg(d.join("pid_syscount.o"))
        .arg(d.join("pid_sys_target"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    write!(
        child.stdin.take().unwrap(),
        "go {GO}\nspawn {SPAWN}\nfork 100\nexit\n"
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains("bye") {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison of system-call tracepoints: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    // The loader's "SLOT VALUE" lines, after the target's own.
    Some(
        stdout
            .lines()
            .filter_map(|l| {
                let f: Vec<u64> = l
                    .split_whitespace()
                    .map(|x| x.parse().ok())
                    .collect::<Option<_>>()?;
                (f.len() == 2).then(|| f[1])
            })
            .collect(),
    )
}

/// `fuse`: the default (`all`: the read pair runs through a call-through
/// stub on libc's `read`, its hand-off map kept per thread) or
/// `--no-fuse` (entry and return probes on the wrappers).
fn syscalls_window(engine: &str, fuse: &[&str]) {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    // Before the attach: not counted.
    sys_calls(&target.send("go 100"), "done");
    let args: Vec<&str> = ["--engine", engine].iter().chain(fuse).copied().collect();
    let tracer = Tracer::attach(&d.join("pid_syscount.o"), target.pid(), &args);
    assert!(
        tracer
            .attached
            .contains(&format!("dispatched in {} threads", WORKERS + 1)),
        "{}",
        tracer.attached
    );
    let calls = sys_window(&mut target);
    // SAFETY: a signal to our child.
    unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
    let (report, _) = tracer.finish();
    assert_eq!(report["exit_code"], Value::Null, "{report}");
    // Writes on the pipe, reads of it, getpid entries, getpid exits with
    // the process's id, reads returning one byte: the target's own counts
    // of the window, every thread (the spawned one too).
    let c = counts(&report);
    assert_eq!(&c[..5], &[calls; 5], "{engine} {fuse:?}: {report}");
    if fuse.is_empty() {
        // The read pair ran fused through libc's read in the process.
        let fused = report["fused"].to_string();
        assert!(
            fused.contains("exit_read") && fused.contains("\"read\""),
            "{fused}"
        );
    }
    assert_eq!(
        by_nr(&report).get(&(libc::SYS_getpid as u64)),
        Some(&calls),
        "{report}"
    );
    // Reads and writes through libc's wrappers took the fast path (the
    // wrapper patched in the running process), getpid the signal.
    let sys = &report["syscalls"];
    assert!(
        sys["fast_path"].as_u64().unwrap() >= 2 * calls && sys["signal"].as_u64().unwrap() >= calls,
        "{sys}"
    );
    if engine == "jit" {
        if let Some(k) = kernel_sys_counts() {
            assert_eq!(k, c[..5].to_vec(), "kernel {k:?}, bpfjet {c:?}");
        }
    }
    // Detached: dispatch is off in every thread, and the process works on.
    dispatch_off_everywhere(target.pid());
    assert_eq!(sys_calls(&target.send("go 50"), "done"), [50 * WORKERS; 3]);
    assert_eq!(sys_calls(&target.send("spawn 20"), "spawned"), [20; 3]);
    dispatch_off_everywhere(target.pid());
    target.exit();
}

#[test]
fn syscall_tracepoints_count_every_thread_of_a_running_process_interpreter() {
    syscalls_window("interp", &["--no-fuse"]);
}

#[test]
fn syscall_tracepoints_count_every_thread_of_a_running_process_jit() {
    syscalls_window("jit", &[]);
}

#[test]
fn syscall_tracepoints_count_until_the_process_exits() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    let tracer = Tracer::attach(&d.join("pid_syscount.o"), target.pid(), &[]);
    let calls = sys_window(&mut target);
    target.exit();
    let (report, _) = tracer.finish();
    assert_eq!(report["exit_code"], 7, "{report}");
    assert_eq!(&counts(&report)[..5], &[calls; 5], "{report}");
}

/// A process whose only thread is nearly always being delivered a signal
/// (tests/trace/signal_loop_target.c): the attach waits for a stop that
/// is not a signal's instead of giving up, and its system calls are
/// counted (`raise` is a `tgkill`).
#[test]
fn attaches_to_a_thread_that_is_always_taking_signals() {
    let _serial = serial();
    let d = dir();
    let target = Target::start(&d.join("signal_loop_target"));
    let tracer = Tracer::attach(
        &d.join("pid_syscount.o"),
        target.pid(),
        &["--engine", "jit", "--duration", "1"],
    );
    let (report, _) = tracer.finish();
    let nr = by_nr(&report);
    let tgkill = nr.get(&(libc::SYS_tgkill as u64)).copied().unwrap_or(0);
    assert!(tgkill > 0, "no tgkill counted: {nr:?}");
}

#[test]
fn refuses_a_process_using_syscall_user_dispatch_itself() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    assert_eq!(target.send("sud"), "sud");
    let err = refused(&d.join("pid_syscount.o"), target.pid());
    assert!(
        err.contains("already uses Syscall User Dispatch") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(!target.agent_loaded());
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    target.exit();
}

#[test]
fn syscall_dispatch_ends_in_each_thread_when_bpfjet_is_killed() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    let mut tracer = Tracer::attach(&d.join("pid_syscount.o"), target.pid(), &[]);
    let calls = sys_window(&mut target);
    let cli = tracer.child.id();
    tracer.child.kill().unwrap();
    tracer.child.wait().unwrap();
    // Nobody turns dispatch off through ptrace: the agent, seeing its
    // control FIFO closed, detaches and writes its report.
    let report = report_left_by_agent(cli);
    assert_eq!(&counts(&report)[..5], &[calls; 5], "{report}");
    // Each thread turns dispatch off at its next trapped call: the workers
    // at their getpid, the main thread at the calls creating the new
    // thread (clone3 at least), which starts without it.
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    assert_eq!(sys_calls(&target.send("spawn 5"), "spawned"), [5; 3]);
    dispatch_off_everywhere(target.pid());
    target.exit();
}

#[test]
fn refuses_system_calls_while_a_thread_stays_in_the_allocator() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    // A thread whose stack holds an address inside malloc at every stop:
    // its injected call, which allocates, could wait for an arena lock it
    // holds itself.
    assert_eq!(target.send("inmalloc"), "inmalloc");
    let err = refused(&d.join("pid_syscount.o"), target.pid());
    assert!(
        err.contains("no safe point") && err.contains("has a frame in libc's allocator"),
        "{err}"
    );
    assert!(!target.agent_loaded());
    let status = std::fs::read_to_string(format!("/proc/{}/status", target.pid())).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    dispatch_off_everywhere(target.pid());
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    target.exit();
}

#[test]
fn refuses_system_calls_in_a_process_handling_sigsys() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    assert_eq!(target.send("sigsys"), "sigsys");
    let err = refused(&d.join("pid_syscount.o"), target.pid());
    assert!(
        err.contains("handles SIGSYS itself") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(!target.agent_loaded());
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    target.exit();
}

#[test]
fn refuses_system_calls_when_threads_share_a_thread_pointer() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    assert_eq!(target.send("rawclone"), "rawclone");
    let err = refused(&d.join("pid_syscount.o"), target.pid());
    assert!(
        err.contains("share one thread pointer") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(!target.agent_loaded());
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    target.exit();
}

#[test]
fn an_object_the_agent_refuses_dispatches_no_thread() {
    let _serial = serial();
    let d = dir();
    let mut target = Target::start(&d.join("pid_sys_target"));
    let err = refused(&d.join("pid_sys_refused.o"), target.pid());
    // The agent's own error, not the per-thread calls' (which found it
    // detached and dispatched nothing).
    assert!(
        err.contains("a uretprobe attaches to a function's entry") && err.contains("inactive"),
        "{err}"
    );
    dispatch_off_everywhere(target.pid());
    assert_eq!(sys_calls(&target.send("go 10"), "done"), [10 * WORKERS; 3]);
    assert_eq!(sys_calls(&target.send("spawn 5"), "spawned"), [5; 3]);
    target.exit();
}
