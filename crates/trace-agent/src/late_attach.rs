//! The agent loaded into a running process (`bpfjet trace OBJ --pid PID`).
//!
//! `bpfjet trace --pid` makes the process `dlopen` this library through a
//! per-attach directory: `libbpfjet_trace.so` there is a symbolic link to
//! the real agent, and next to it are [`CONFIG_FILE`] (the settings the
//! preloaded agent reads from the environment, one `NAME=VALUE` a line,
//! plus [`ATTACH_PID`] and [`CONTROL`]) and the control FIFO. The
//! constructor finds the directory through its own loaded path (`dladdr`),
//! so nothing is read from a well-known global path and an unrelated
//! process loading the agent finds no settings.
//!
//! Differences from the preloaded agent:
//! - an attach error is written to the report and the process goes on
//!   untouched by programs (every probe already written is pass-through):
//!   it is someone else's running process, it is never ended;
//! - system-call tracepoints: the constructor installs the hooks and the
//!   SIGSYS handler but dispatches no thread; `bpfjet trace --pid` then
//!   makes every thread of the process call [`bpfjet_late_enable_thread`]
//!   through ptrace (the agent's own threads, [`alive::spawn`], decline),
//!   and threads the process creates later enable themselves in the clone
//!   stub (crates/probe/src/syscalls.rs); at the detach no thread enables
//!   it any more, and each turns it off (the CLI through ptrace, or the
//!   thread at its next trapped call);
//! - a control thread waits on the FIFO: a byte, or end of file (the CLI
//!   went away), detaches — programs stop running (probes become
//!   pass-through, [`crate::alive::detached`]), ring buffers are drained,
//!   and the report is written without an exit status. Patched code and
//!   trampolines stay in the process, executing the displaced instructions
//!   exactly as before.

use crate::config::Config;
use crate::{alive, attach, report};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The settings file next to the agent's loaded path.
pub const CONFIG_FILE: &str = "attach.conf";
/// The process the settings are for (another process loading the same
/// path ignores them).
pub const ATTACH_PID: &str = "BPFJET_TRACE_ATTACH_PID";
/// The control FIFO's path.
pub const CONTROL: &str = "BPFJET_TRACE_CONTROL";

/// The status the process passed to `_exit`, once seen (-1: not seen;
/// statuses are 0..=255 as the parent sees them).
static EXIT_STATUS: AtomicI64 = AtomicI64::new(-1);

/// Records the status of the `_exit` the process is making.
pub fn set_exit_status(status: i32) {
    EXIT_STATUS.store(i64::from(status & 0xff), Ordering::SeqCst);
}

/// The exit status seen by the exit hook, if the process is exiting.
pub fn exit_status() -> Option<i64> {
    let s = EXIT_STATUS.load(Ordering::SeqCst);
    (s >= 0).then_some(s)
}

/// The directory this library was loaded from.
fn loaded_from() -> Option<PathBuf> {
    // SAFETY: dladdr fills `info` for an address inside this library.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = loaded_from as *const () as *const libc::c_void;
    // SAFETY: see above.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated name owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
    path.parent().map(Path::to_path_buf)
}

/// Written next to the settings once every program is attached: `bpfjet
/// trace` tells a running trace from an agent that found no settings.
pub const ATTACHED_FILE: &str = "attached";

/// The settings for this process and their directory, when `bpfjet trace
/// --pid` loaded it.
fn late_settings() -> Option<(Config, Option<PathBuf>, PathBuf)> {
    let dir = loaded_from()?;
    let text = std::fs::read_to_string(dir.join(CONFIG_FILE)).ok()?;
    let vars: std::collections::BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pid = vars.get(ATTACH_PID)?.parse::<u32>().ok()?;
    if pid != std::process::id() {
        return None;
    }
    let cfg = Config::from_vars(|k| vars.get(k).cloned())?;
    Some((cfg, vars.get(CONTROL).map(PathBuf::from), dir))
}

/// Set once the settings of `bpfjet trace --pid` were found: the agent
/// was loaded into a running process.
static LATE: AtomicBool = AtomicBool::new(false);

/// Whether the agent was loaded into a running process.
pub fn is_late() -> bool {
    LATE.load(Ordering::SeqCst)
}

/// Called by `bpfjet trace --pid` in each thread of the process the
/// process had when it attached, through ptrace, after this library's
/// constructor returned (crates/probe/src/inject.rs): the thread's system
/// calls are dispatched from its return on. Returns 0, 1 for one of the
/// agent's own threads (left undispatched: its calls are bpfjet's), or
/// -errno (-EAGAIN: the thread is inside a probe handler; the tracer tries
/// again at another stop).
#[no_mangle]
pub extern "C" fn bpfjet_late_enable_thread() -> i64 {
    if alive::is_agent_work() || alive::is_agent_thread() {
        return 1;
    }
    if alive::is_detached() || attach::agent().is_none() {
        return -(libc::ENOENT as i64);
    }
    bpfjet_probe::syscalls::enable_thread_for_tracer()
}

/// The constructor's work when loaded by `bpfjet trace --pid`; nothing
/// when the settings are not there.
pub fn init() {
    let Some((cfg, control, dir)) = late_settings() else {
        return;
    };
    LATE.store(true, Ordering::SeqCst);
    let started = alive::agent_work(|| attach::start(cfg.clone()));
    if let Err(e) = started {
        alive::detach();
        bpfjet_probe::syscalls::end_dispatch();
        attach::abandon();
        report::write_error(&cfg, &e);
        return;
    }
    if let Err(e) = std::fs::write(dir.join(ATTACHED_FILE), b"") {
        eprintln!("bpfjet trace: {}: {e}", dir.join(ATTACHED_FILE).display());
    }
    if let Some(control) = control {
        let spawned = alive::spawn(
            std::thread::Builder::new().name("bpfjet-control".into()),
            move || wait_for_detach(&control),
        );
        if let Err(e) = spawned {
            eprintln!("bpfjet trace: no control thread ({e}): the trace ends with the process");
        }
    }
}

/// Blocks until the CLI writes to the control FIFO or closes it, then
/// detaches.
fn wait_for_detach(control: &Path) {
    // The CLI holds the FIFO open for reading and writing, so this open
    // does not block and end of file means the CLI is gone.
    if let Ok(mut f) = std::fs::File::open(control) {
        let mut byte = [0u8; 1];
        loop {
            match f.read(&mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
    }
    alive::detach();
    // No thread is dispatched any more (the CLI turns dispatch off in
    // every thread through ptrace once it has the report).
    bpfjet_probe::syscalls::end_dispatch();
    attach::finish();
}
