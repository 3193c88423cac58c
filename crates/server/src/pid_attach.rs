//! A probe link for one process that bpfjet does not trace yet is taken
//! there, as the kernel attaches a uprobe in a running process.
//!
//! A tracer given a process (`bpftrace -p PID`, `funclatency -p PID`)
//! opens its probes for that pid. On the kernel they fire in the process
//! at once; under `bpfjet exec` the programs run only where bpfjet's agent
//! is. When a link names a process that has no agent, the control plane
//! starts `bpfjet trace --pid PID --instance NAME --until-unlinked` for it
//! (its own session, its messages on the control plane's stderr): it
//! loads the agent with ptrace, takes the links made later too, and
//! detaches once the instance links nothing for the process any more (the
//! tracer ended). Once per process and pid; a process that already has
//! the agent (started under `bpfjet trace`, or attached) gets later links
//! from its own `bpfjet trace`.

//!
//! A link for every process (pid -1, how bpftrace and most tools open
//! their uprobes) reaches, on the kernel, the processes already running
//! the file too. Under `bpfjet exec --attach-running` (environment
//! `BPFJET_ATTACH_RUNNING=1`) the control plane does the same for the
//! running processes whose executable is the probed file
//! ([`ensure_running`]). It is asked for, not done by default: it stops
//! and loads the agent into processes the tool did not name. A shared
//! library's running users are not reached (it would be most of the
//! system); `bpfjet trace --pid` takes one of them.

use crate::namespace::Namespace;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The environment variable `bpfjet exec --attach-running` sets.
pub const ATTACH_RUNNING_ENV: &str = "BPFJET_ATTACH_RUNNING";

/// For a link on `file` that names no process (pid -1 or 0): when asked
/// ([`ATTACH_RUNNING_ENV`]), every running process whose executable is
/// `file`, other than this one and ones a `bpfjet trace` started (their
/// agent is there or on its way), is taken as [`ensure`] takes a process
/// a link names.
pub(crate) fn ensure_running(ns: &Namespace, file: &str) {
    if std::env::var(ATTACH_RUNNING_ENV).as_deref() != Ok("1") {
        return;
    }
    let want = std::fs::canonicalize(file).unwrap_or_else(|_| file.into());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id() as i32;
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Kernel threads and zombies have no executable; a process gone
        // meanwhile neither.
        let Ok(exe) = std::fs::read_link(entry.path().join("exe")) else {
            continue;
        };
        if exe != want {
            continue;
        }
        let started_traced = std::fs::read(entry.path().join("environ"))
            .map(|env| {
                env.split(|&b| b == 0)
                    .any(|var| var.starts_with(b"BPFJET_TRACE_CONTROL_PLANE="))
            })
            .unwrap_or(true);
        if !started_traced {
            ensure(ns, pid, Some(file));
        }
    }
}

/// Processes this control plane started an attach for, or found traced.
static HANDLED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Makes sure process `pid`, which a probe link of this control plane
/// names, runs the instance's links. `file`: the probed file, for a
/// uprobe; a process that does not map it is left alone (the probe
/// cannot fire there; a later link on a file it maps attaches).
pub(crate) fn ensure(ns: &Namespace, pid: i32, file: Option<&str>) {
    if pid <= 0 || pid as u32 == std::process::id() {
        return;
    }
    let Ok(objects) = bpfjet_probe::inject::process_objects(pid) else {
        return;
    };
    if let Some(f) = file {
        // Paths of the process's objects are canonical.
        let want = std::fs::canonicalize(f).unwrap_or_else(|_| f.into());
        if !objects.iter().any(|o| o.path == want) {
            return;
        }
    }
    let mut handled = HANDLED.lock().unwrap_or_else(|e| e.into_inner());
    if !handled.insert(pid) || bpfjet_probe::inject::agent_object(&objects).is_some() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(crate::attach::bpfjet_binary());
    cmd.args(["trace", "--pid", &pid.to_string(), "--instance", ns.name()])
        .arg("--until-unlinked")
        .env_remove("LD_PRELOAD")
        .env("BPFJET_RUN_DIR", ns.run_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    // Its own session: the tracer's Ctrl-C is for the tracer, which ends
    // its links; the attach then detaches by itself.
    // SAFETY: setsid is an async-signal-safe system call.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        })
    };
    match cmd.spawn() {
        Ok(mut child) => {
            // Reaped by a thread: no zombie if the tracer outlives it.
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!(
            "bpfjet: process {pid}: cannot start `bpfjet trace --pid` for the probe links that \
             name it ({e}); set BPFJET_BIN"
        ),
    }
}
