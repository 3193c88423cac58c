//! `bpfjet trace OBJ --pid PID [--duration SECS]`: trace a running,
//! unmodified, dynamically linked process.
//!
//! Everything that can be refused is refused before the process is
//! touched (crates/probe/src/inject.rs `check_target`; here: programs a
//! running process cannot get, probe files it has not loaded). Then a
//! per-attach directory is made with a link to the agent, the settings
//! (`attach.conf`) and a control FIFO; the process is made to `dlopen` the
//! link (ptrace, every thread stopped, `inject_dlopen`); its constructor
//! attaches (crates/trace-agent/src/late_attach.rs). The trace ends when
//! the process exits (the report carries the status it passed to `_exit`),
//! or on SIGINT/SIGTERM/`--duration`: bpfjet writes a byte to the FIFO, the
//! agent stops running programs and writes the report, and the process
//! goes on (`"exit_code": null`).

use super::trace::{
    agent_library, agent_settings, fusion_setup, precheck, print_report, TraceArgs,
};
use anyhow::{anyhow, bail, Context, Result};
use bpfjet_obj::{ProbeFlavor, ProbeTarget, ProgKind};
use bpfjet_probe::inject;
use bpfjet_probe::symbols;
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The run-time addresses `object`'s probes will patch in the process
/// (no thread may be stopped inside the bytes a jump there displaces: it
/// would resume in the middle of the jump). Refuses programs a running
/// process cannot get and probe files it has not loaded (the agent's
/// `dlopen` interposition only works preloaded).
pub(super) fn patch_addresses(
    object: &bpfjet_obj::Object,
    target: &inject::Target,
) -> Result<Vec<u64>> {
    let pid = target.pid;
    let mut all = Vec::new();
    for p in &object.programs {
        let section = &p.section;
        let (path, addrs): (&str, Vec<u64>) = match &p.kind {
            // Every thread is dispatched by an injected call after the
            // agent's constructor (`traces_syscalls`).
            ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. } => continue,
            ProgKind::Probe(probe) => match &probe.target {
                ProbeTarget::Usdt {
                    path,
                    provider,
                    name,
                } => {
                    let file = loaded_file(path, target, section)?;
                    let notes = bpfjet_probe::usdt::read_notes(&file.0)
                        .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                    let pcs = notes
                        .iter()
                        .filter(|n| &n.provider == provider && &n.name == name)
                        .map(|n| file.1.wrapping_add(n.pc))
                        .collect();
                    (path, pcs)
                }
                ProbeTarget::User {
                    path,
                    symbol,
                    offset,
                } => {
                    let file = loaded_file(path, target, section)?;
                    let vaddrs: Vec<u64> = if matches!(
                        probe.flavor,
                        ProbeFlavor::UprobeMulti | ProbeFlavor::UretprobeMulti
                    ) {
                        bpfjet_probe::multi::matching_functions(&file.0, symbol)
                            .map_err(|e| anyhow!("program section {section:?}: {e}"))?
                            .iter()
                            .map(|f| f.vaddr)
                            .collect()
                    } else {
                        vec![
                            symbols::file_symbol(&file.0, symbol)
                                .map_err(|e| anyhow!("program section {section:?}: {e}"))?
                                .vaddr
                                + offset,
                        ]
                    };
                    (
                        path,
                        vaddrs.iter().map(|v| file.1.wrapping_add(*v)).collect(),
                    )
                }
                _ => continue,
            },
            _ => continue,
        };
        if addrs.is_empty() {
            bail!("program section {section:?}: nothing to attach to in {path} of process {pid}");
        }
        all.extend(addrs);
    }
    Ok(all)
}

/// Whether `object` traces system calls (refusing any other tracepoint or
/// kernel probe before the process is touched, as the agent would after
/// loading).
fn traces_syscalls(object: &bpfjet_obj::Object) -> Result<bool> {
    let mut any = false;
    for p in &object.programs {
        match &p.kind {
            ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. } => {
                super::trace::check_syscall_tracepoint(p)?;
                any = true;
            }
            // Kernel probes on system calls' entry points run at the
            // process's system-call hooks.
            ProgKind::Probe(probe) if !probe.flavor.is_user() => {
                bpfjet_probe::ksyscall::syscall_probe(probe)
                    .map_err(|e| anyhow!("program section {:?}: {e}", p.section))?;
                any = true;
            }
            _ => {}
        }
    }
    Ok(any)
}

/// Refuses system-call tracing in a process that handles or ignores
/// SIGSYS itself (seccomp `SECCOMP_RET_TRAP` users, its own dispatch):
/// bpfjet's handler would replace its action, and stays after the detach.
fn check_sigsys(pid: i32) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("/proc/{pid}/status"))?;
    let bit = 1u64 << (libc::SIGSYS - 1);
    for (field, what) in [("SigCgt:", "handles"), ("SigIgn:", "ignores")] {
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/status: no {field} line"))?;
        if mask & bit != 0 {
            bail!(
                "--pid {pid}: the process {what} SIGSYS itself ({field} has it): system-call \
                 tracing needs bpfjet's own SIGSYS handler, which would replace its action for \
                 good; nothing was changed"
            );
        }
    }
    Ok(())
}

/// The agent's function `bpfjet trace --pid` makes every thread of the
/// process call to dispatch its system calls
/// (crates/trace-agent/src/late_attach.rs).
pub(super) const ENABLE_THREAD: &str = "bpfjet_late_enable_thread";

/// After the agent detached (or failed to attach every thread): Syscall
/// User Dispatch off in every thread, through ptrace. Says what it did.
fn end_dispatch(pid: i32) -> String {
    match inject::disable_dispatch(pid) {
        Ok(n) => format!("system-call dispatch turned off in {n} threads"),
        Err(e) => format!(
            "system-call dispatch could not be turned off through ptrace ({e}): each thread \
             turns it off at its next system call"
        ),
    }
}

/// PATH of a probe section as a file the process has mapped, and its load
/// bias there.
fn loaded_file(path: &str, target: &inject::Target, section: &str) -> Result<(PathBuf, u64)> {
    let file = symbols::resolve_path(path, &target.objects)
        .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
    let canon = file.canonicalize().unwrap_or(file.clone());
    target
        .objects
        .iter()
        .find(|o| o.path.canonicalize().unwrap_or(o.path.clone()) == canon)
        .map(|o| (canon.clone(), o.bias))
        .ok_or_else(|| {
            anyhow!(
                "program section {section:?}: {} is not loaded in process {}: with --pid only \
                 files the process has already mapped can be probed (a library it loads later \
                 is not seen: the agent's dlopen interposition needs it preloaded)",
                file.display(),
                target.pid
            )
        })
}

/// The per-attach directory: the agent's link, settings and FIFO.
struct RunDir(PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_report(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    // A report being written does not parse yet.
    serde_json::from_str(&text).ok()
}

fn process_exited(pidfd: libc::c_int, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd: pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours.
    let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    r > 0 && pfd.revents & libc::POLLIN != 0
}

pub fn run(args: &TraceArgs, pid: i32) -> Result<ExitCode> {
    let target = inject::check_target(pid).map_err(|e| anyhow!(e))?;
    // `--instance`: what a control plane linked, instead of an object.
    let instance = args.instance.as_deref();
    if instance.is_some() && args.obj.is_some() {
        bail!("--pid {pid} --instance: give no object and no command");
    }
    let mut object = match instance {
        Some(name) => {
            super::trace_instance::refuse_object_options(args)?;
            super::trace_instance::checked_object(name, pid as u32, &format!("process {pid}"))?
        }
        None => precheck(args, None)?,
    };
    let syscalls = traces_syscalls(&object)?;
    let mut patched = patch_addresses(&object, &target)?;
    // What the agent patches by itself: the system-call fast path's libc
    // wrappers, or libc's `_exit` (the exit hook without system calls).
    patched.extend(if syscalls {
        inject::libc_functions(
            &target,
            &bpfjet_probe::fast_syscalls::wrapper_names().collect::<Vec<_>>(),
        )
    } else {
        inject::libc_functions(&target, &["_exit"])
    });
    let mut hazards = inject::patch_hazards(pid, &patched).map_err(|e| anyhow!(e))?;
    if syscalls {
        check_sigsys(pid)?;
        hazards.allocator = inject::allocator_hazards(&target).map_err(|e| anyhow!(e))?;
    }
    let (fuse, plan) = match instance {
        // The control plane can read every map: nothing is fused.
        Some(_) => ("none", bpfjet_fusion::FusionPlan::default()),
        None => fusion_setup(args, &mut object)?,
    };
    let agent = agent_library()?;
    let agent = agent.canonicalize().unwrap_or(agent);
    if let Some(d) = args.duration {
        if !(d.is_finite() && d >= 0.0) {
            bail!("--duration {d}: not a number of seconds");
        }
    }

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        RunDir(std::env::temp_dir().join(format!("bpfjet-attach-{}-{nanos}", std::process::id())));
    std::fs::create_dir(&dir.0).with_context(|| dir.0.display().to_string())?;
    // The process (maybe another user) reads the settings and writes the
    // report here.
    let _ = std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755));
    let owner = std::fs::metadata(format!("/proc/{pid}"))
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.uid(), m.gid())
        })
        .ok();
    let link = dir.0.join("libbpfjet_trace.so");
    std::os::unix::fs::symlink(&agent, &link).context("linking the agent")?;
    let report = dir.0.join("report.json");
    let control = dir.0.join("control");
    let c = std::ffi::CString::new(control.as_os_str().as_encoded_bytes())?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        bail!(
            "mkfifo {}: {}",
            control.display(),
            std::io::Error::last_os_error()
        );
    }
    if let Some((uid, gid)) = owner {
        for p in [&dir.0, &control] {
            let _ = std::os::unix::fs::chown(p, Some(uid), Some(gid));
        }
    }
    // Read and write: opening never blocks, the agent's open does not
    // either, and the agent sees end of file when bpfjet is gone.
    let mut fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&control)
        .with_context(|| control.display().to_string())?;
    let mut conf = String::new();
    let settings = match instance {
        Some(name) => super::trace_instance::agent_settings(args, name, &report),
        None => agent_settings(args, fuse, &report)?,
    };
    for (k, v) in settings {
        let v = v.to_string_lossy();
        if v.contains('\n') {
            bail!("{k}: a path with a newline");
        }
        conf.push_str(&format!("{k}={v}\n"));
    }
    conf.push_str(&format!("BPFJET_TRACE_ATTACH_PID={pid}\n"));
    conf.push_str(&format!("BPFJET_TRACE_CONTROL={}\n", control.display()));
    std::fs::write(dir.0.join("attach.conf"), conf).context("writing the agent's settings")?;

    // SAFETY: pidfd_open has no memory arguments.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if pidfd < 0 {
        bail!(
            "--pid {pid}: pidfd_open: {}",
            std::io::Error::last_os_error()
        );
    }
    // A Ctrl-C during the injection must not kill bpfjet with the process's
    // thread in the middle of an injected call: noted and acted on after.
    // SAFETY: the handler only stores an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_stop_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_stop_signal as *const () as libc::sighandler_t,
        );
    }
    let injected =
        inject::inject_dlopen_then(&target, &link, &hazards, syscalls.then_some(ENABLE_THREAD));
    let agent_error = || {
        read_report(&report).and_then(|r| r.get("error").and_then(Value::as_str).map(String::from))
    };
    let (injected, dispatched) = match injected {
        Ok(r) => r,
        // The agent refused the object (no thread was dispatched: the
        // per-thread calls found it detached).
        Err(_) if agent_error().is_some() => bail!(
            "{} (nothing runs in process {pid}; the agent stays loaded there, inactive)",
            agent_error().unwrap_or_default()
        ),
        Err(e) if dir.0.join("attached").exists() => {
            // The agent attached but not every thread could be dispatched:
            // it detaches, and dispatch is turned off where it was on.
            let _ = fifo.write_all(b"d");
            let deadline = Instant::now() + Duration::from_secs(10);
            while read_report(&report).is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            bail!(
                "{e} (the agent detached: nothing runs in process {pid}, {}; the agent stays \
                 loaded there, inactive)",
                end_dispatch(pid)
            );
        }
        Err(e) => bail!(e),
    };
    if injected.handle == 0 {
        bail!(
            "--pid {pid}: dlopen({}) failed in the process (nothing was attached)",
            agent.display()
        );
    }
    // An attach error was written before dlopen returned.
    if let Some(r) = read_report(&report) {
        if let Some(err) = r.get("error").and_then(Value::as_str) {
            bail!("{err} (nothing runs in process {pid}; the agent stays loaded there, inactive)");
        }
    }
    if !dir.0.join("attached").exists() {
        bail!(
            "--pid {pid}: the agent was loaded but did not attach: it found no settings in {} \
             (does the process see another /tmp, a private one or another mount namespace? set \
             TMPDIR to a directory it shares). It stays loaded there, inactive.",
            dir.0.display()
        );
    }
    eprintln!(
        "bpfjet trace: attached to process {pid} ({}; {} threads stopped for {:.1} ms{}{}{})",
        target.exe.display(),
        injected.threads,
        injected.stopped_for.as_secs_f64() * 1e3,
        match &dispatched {
            Some(d) => format!(
                "; system calls dispatched in {} threads in {:.1} ms{}",
                d.done,
                d.took.as_secs_f64() * 1e3,
                if d.retries > 0 {
                    format!(" ({} retries)", d.retries)
                } else {
                    String::new()
                }
            ),
            None => String::new(),
        },
        if injected.retries > 0 {
            format!(", {} retries for a safe point", injected.retries)
        } else {
            String::new()
        },
        if injected.others_resumed {
            "; the other threads had to be resumed while the agent loaded"
        } else {
            ""
        }
    );

    // Links the control plane makes from now on reach the process too.
    let watch = instance.map(|name| {
        super::trace_late_links::watch(
            name,
            Path::new(&super::trace_instance::run_dir()),
            &agent,
            super::trace_late_links::Targets::Pid(pid),
        )
    });
    let started = Instant::now();
    let limit = args.duration.map(Duration::from_secs_f64);
    // `--until-unlinked`: the instance's links for the process, looked at
    // every 250 ms.
    let links_for_pid = instance.filter(|_| args.until_unlinked).and_then(|name| {
        bpfjet_server::Namespace::open(name, Path::new(&super::trace_instance::run_dir())).ok()
    });
    let mut looked = Instant::now();
    let exited = loop {
        if process_exited(pidfd, 50) {
            break true;
        }
        if STOP.load(Ordering::SeqCst) || limit.is_some_and(|l| started.elapsed() >= l) {
            break false;
        }
        if let Some(ns) = &links_for_pid {
            if looked.elapsed() >= Duration::from_millis(250) {
                looked = Instant::now();
                if bpfjet_server::traced_object(ns, pid as u32).is_ok_and(|t| t.programs.is_empty())
                {
                    eprintln!("bpfjet trace: process {pid}: no probe links for it any more");
                    break false;
                }
            }
        }
    };
    drop(watch);
    if !exited {
        // Detach: the agent stops running programs and reports.
        let _ = fifo.write_all(b"d");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = loop {
        if let Some(r) = read_report(&report) {
            break r;
        }
        let gone = process_exited(pidfd, 20);
        if (gone && read_report(&report).is_none() && exited) || Instant::now() > deadline {
            // The report is written in the exit path before the process
            // is gone; none means it was killed.
            if let Some(r) = read_report(&report) {
                break r;
            }
            bail!(
                "process {pid} {} without a report (killed by a signal?)",
                if gone {
                    "ended"
                } else {
                    "did not answer the detach"
                }
            );
        }
    };
    drop(fifo);
    // SAFETY: our descriptor.
    unsafe { libc::close(pidfd) };
    let exit_code = if exited {
        report
            .get("exit_status")
            .and_then(Value::as_i64)
            .map(|s| s as i32)
    } else {
        None
    };
    if !exited {
        // A control plane's links made while attached may have brought
        // system-call tracepoints (crates/trace-agent/src/late_links.rs).
        let dispatch = if syscalls || instance.is_some() {
            format!("; {}", end_dispatch(pid))
        } else {
            String::new()
        };
        eprintln!(
            "bpfjet trace: detached from process {pid}; it goes on (probes stay patched, \
             pass-through{dispatch})"
        );
    }
    let report = match instance {
        Some(_) => super::trace_instance::without_maps(args, report),
        None => report,
    };
    print_report(args, &plan, &report, exit_code)
}
