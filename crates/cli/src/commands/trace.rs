//! `bpfjet trace OBJ [--json] [--events FILE] [--engine interp|jit] [--explain] [--no-fuse]
//! -- CMD ARGS...`:
//! run CMD with the trace agent (libbpfjet_trace.so) preloaded; the agent
//! loads OBJ inside CMD's process, attaches its uprobes, uretprobes and
//! syscall tracepoints there and runs them inline. When CMD ends, print
//! every map as bpftrace does (`@name[key]: value`), or with `--json` one
//! object `{"maps": STATE.json, "ringbufs": {NAME: counts}, "perfbufs":
//! {NAME: counts}, "exit_code": n, "fused": [...], "fusable": [...]}`. CMD's exit code is passed through.
//! `--pid PID` attaches to a running process instead (trace_pid.rs).
//!
//! Pairwise fusion (docs/TRACING.md): the entry/exit pairs of OBJ and their
//! hand-off maps are detected (crates/fusion) and reported (`--explain`,
//! `"fusable"`); the agent keeps the hand-off maps per thread (`--fuse`,
//! default `all`; `--no-fuse` = none) and reports in `"fused"` the pairs
//! whose maps it actually kept so.

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_obj::{ProbeFlavor, ProbeTarget, ProgKind};
use bpfjet_probe::symbols;
use clap::Args;
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// BPF object with uprobe/uretprobe/tracepoint/raw_tracepoint programs
    /// (with `--instance`: none, the command follows `--`).
    #[arg(required_unless_present = "instance")]
    pub obj: Option<PathBuf>,
    /// Run what a control plane attached instead of an object: the
    /// programs an unmodified libbpf tool under `bpfjet exec --instance
    /// NAME` linked to uprobes and system-call tracepoints, on its maps
    /// (it reads them and consumes its ring buffers as on the kernel).
    /// The links are read when each process of the command starts.
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// Print one JSON object instead of bpftrace-style map lines.
    #[arg(long)]
    pub json: bool,
    /// Write every ring-buffer record and perf-buffer sample, as consumed,
    /// to FILE: a u32 length (host byte order) then the record's bytes, as
    /// ktrace writes them.
    #[arg(long)]
    pub events: Option<PathBuf>,
    #[arg(long, default_value = "interp", value_parser = ["interp", "jit"])]
    pub engine: String,
    /// Print, on stderr before CMD starts, the entry/exit pairs of OBJ, the
    /// maps that are pure hand-offs between them and why the others (and
    /// the unpaired programs) are not.
    #[arg(long)]
    pub explain: bool,
    /// Do not analyse the object for pairwise fusion: every pair runs
    /// unfused, through its maps (same as `--fuse none`).
    #[arg(long)]
    pub no_fuse: bool,
    /// Ring buffer MAP of OBJ waits for the consumer instead of dropping
    /// when full (bpfjet only; a producer waits at most MS, default 100,
    /// for a consumer that does not move). Repeatable.
    #[arg(long = "ringbuf-backpressure", value_name = "MAP[=MS]",
          value_parser = super::object_args::parse_backpressure)]
    pub ringbuf_backpressure: Vec<(String, u32)>,
    /// Create ring buffer MAP of OBJ with a data area of BYTES instead of
    /// its `max_entries` (as a libbpf skeleton's `bpf_map__set_max_entries`
    /// before load): a power of two and a multiple of the page size, as the
    /// kernel requires. Repeatable.
    #[arg(long = "ringbuf-size", value_name = "MAP=BYTES",
          value_parser = super::object_args::parse_ringbuf_size)]
    pub ringbuf_size: Vec<(String, u64)>,
    /// Set map MAP's max_entries to N before it is created (as a libbpf
    /// tool's `bpf_map__set_max_entries`), e.g. for maps an object leaves
    /// at 0 for its loader to size. Repeatable.
    #[arg(long = "max-entries", value_name = "MAP=N",
          value_parser = super::object_args::parse_max_entries)]
    pub max_entries: Vec<(String, u32)>,
    /// Set map MAP's value size to BYTES before it is created (as a libbpf
    /// tool's `bpf_map__set_value_size`, e.g. for a stack-trace map sized
    /// by its loader). Repeatable.
    #[arg(long = "value-size", value_name = "MAP=BYTES",
          value_parser = super::object_args::parse_max_entries)]
    pub value_size: Vec<(String, u32)>,
    /// Put the cgroup whose cgroup-v2 directory is DIR into slot 0 of
    /// CGROUP_ARRAY map MAP, as a libbpf tool's cgroup filter does with
    /// `bpf_map_update_elem(map, &0, &cgroup_fd)` (`-c DIR`; set the
    /// tool's flag too, e.g. `--global filter_cg=true`). Repeatable.
    #[arg(long = "cgroup-array", value_name = "MAP=DIR", value_parser = super::object_args::parse_name_value)]
    pub cgroup_array: Vec<(String, String)>,
    /// Set global variable NAME (in `.rodata`, `.data` or `.bss`) to VALUE
    /// before load, as a libbpf tool's `obj->rodata->NAME = VALUE` does
    /// (its filters, units, targets): an integer (decimal, `0x` hex), a
    /// bool, an enumerator's name, or a string for a `char` array.
    /// Repeatable.
    #[arg(long = "global", value_name = "NAME=VALUE", value_parser = super::object_args::parse_name_value)]
    pub globals: Vec<(String, String)>,
    /// Do not load program PROG, as a libbpf tool's
    /// `bpf_program__set_autoload(prog, false)` (e.g. the kprobe or fentry
    /// variant it keeps for another kernel, a tracepoint this architecture
    /// lacks). Repeatable.
    #[arg(long = "no-autoload", value_name = "PROG")]
    pub no_autoload: Vec<String>,
    /// Attach program PROG at TARGET (`PATH:SYMBOL[+OFF]`; for `usdt`
    /// `PATH:PROVIDER:NAME`), as a libbpf tool's
    /// `bpf_program__attach_uprobe(prog, ..., PATH, offset)` does for a bare
    /// `SEC("uprobe")` or `SEC("uretprobe")`. Repeatable.
    #[arg(long = "attach", value_name = "PROG=TARGET", value_parser = super::object_args::parse_name_value)]
    pub attach: Vec<(String, String)>,
    /// Which pairwise-fusion steps to apply, each level including the ones
    /// before it (docs/TRACING.md "Pairwise fusion"): `none`; `inline`
    /// (a `sys_enter_X`/`sys_exit_X` pair on a libc wrapper of the fast
    /// path runs through one call-through stub: entry half, the wrapper,
    /// exit half in one frame, no return probe); `fold`
    /// (attach-site constants folded by the JIT: the system-call number of
    /// syscalls tracepoint records); `internalise-calls` (+ hand-off maps
    /// kept per thread, slot operations as calls); `internalise` (+ the
    /// slot operations compiled into the programs by the JIT); `compile`
    /// (+ each eligible pair's entry and exit programs compiled by the JIT
    /// into one native function around the wrapper's call); `all` (the
    /// same as `compile`; on the interpreter, as `internalise`).
    #[arg(long, default_value = "all",
          value_parser = ["none", "inline", "fold", "internalise-calls", "internalise", "compile", "all"])]
    pub fuse: String,
    /// The JIT does not fold loads from frozen `.rodata` to constants (it
    /// does by default, fused or not): to measure what that folding is
    /// worth.
    #[arg(long)]
    pub no_fold_rodata: bool,
    /// `perf_event` programs (libbpf-tools' `profile`) run on samples of
    /// each traced thread's CPU time, HZ per CPU second, as on a
    /// `cpu-clock` event with `sample_freq` HZ (docs/TRACING.md, "Sampling:
    /// perf_event programs").
    #[arg(long, value_name = "HZ", default_value_t = 49,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub sample_freq: u64,
    /// Attach to a running process instead of starting CMD: the agent is
    /// loaded into it with ptrace (docs/TRACING.md "Attaching to a running
    /// process"); the trace ends when it exits, on Ctrl-C/SIGTERM or after
    /// `--duration`, and bpfjet then detaches leaving it running.
    #[arg(long)]
    pub pid: Option<i32>,
    /// With `--pid`: detach after SECS seconds (the process goes on).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// With `--pid` and `--instance`: detach once the instance links
    /// nothing for the process any more (the tracer ended). A control
    /// plane starts this itself for a probe link that names a process
    /// bpfjet does not trace yet (`bpftrace -p PID`).
    #[arg(long)]
    pub until_unlinked: bool,
    /// Trace only the command's own process image: programs it executes
    /// start untraced. By default the whole tree is traced, as the
    /// kernel's probes see it: forked children and the programs the tree
    /// executes run the object's programs on one shared set of maps, and
    /// an `exec`'s exit programs run in the new image (execsnoop). The
    /// agent follows through the environment (`LD_PRELOAD` and
    /// `BPFJET_TRACE_*`, put back into an `exec` that drops them): a
    /// static or set-user-ID program is not traced.
    #[arg(long)]
    pub no_follow: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

impl TraceArgs {
    /// OBJ, which every mode but `--instance` has.
    pub(super) fn object_file(&self) -> Result<&Path> {
        self.obj
            .as_deref()
            .context("no object given: bpfjet trace OBJ -- CMD ARGS...")
    }

    /// `--global`, `--no-autoload` and `--attach`, as the loader applies them.
    pub(super) fn loader_settings(&self) -> bpfjet_obj::LoaderSettings {
        bpfjet_obj::LoaderSettings {
            globals: self.globals.clone(),
            no_autoload: self.no_autoload.clone(),
            attach: self.attach.clone(),
            value_size: self.value_size.clone(),
        }
    }
}

/// The agent's exit status when it could not attach (config.rs).
const AGENT_ERROR_EXIT: i32 = 125;

/// libbpfjet_trace.so: `$BPFJET_TRACE_AGENT`, else next to this binary.
pub(super) fn agent_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("BPFJET_TRACE_AGENT") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating the bpfjet binary")?;
    let lib = exe.with_file_name("libbpfjet_trace.so");
    if !lib.is_file() {
        bail!(
            "{} not found: build it with `cargo build -p bpfjet-trace-agent` (same profile as \
             bpfjet) or set BPFJET_TRACE_AGENT",
            lib.display()
        );
    }
    Ok(lib)
}

/// CMD as execvp would find it.
pub(super) fn find_program(cmd: &Path) -> Option<PathBuf> {
    if cmd.components().count() > 1 {
        return Some(cmd.to_path_buf());
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// What can be checked before CMD starts: it is dynamically linked, the
/// object's programs are of a type `trace` attaches, and every uprobe
/// target whose file is known now has its symbol. (The agent checks the
/// rest in the process, before `main`.)
pub(super) fn precheck(args: &TraceArgs, program: Option<&Path>) -> Result<bpfjet_obj::Object> {
    if let Some(program) = program {
        symbols::check_dynamic(program).map_err(|e| anyhow!("{e}"))?;
    }
    let obj = args.object_file()?;
    let mut object = bpfjet_obj::load_file(obj).map_err(|e| anyhow!("{}: {e}", obj.display()))?;
    args.loader_settings()
        .apply(&mut object)
        .map_err(|e| anyhow!("{e}"))?;
    for (map, dir) in &args.cgroup_array {
        let is_cgroup_array = object
            .maps
            .iter()
            .any(|m| &m.name == map && m.map_type == bpfjet_maps::MapType::CgroupArray);
        if !is_cgroup_array {
            bail!("--cgroup-array {map}={dir}: the object has no CGROUP_ARRAY map {map:?}");
        }
        bpfjet_runtime::tracing::cgroup::cgroup_id(Path::new(dir))
            .map_err(|e| anyhow!("--cgroup-array {map}={dir}: {e}"))?;
    }
    for p in &object.programs {
        let section = &p.section;
        match &p.kind {
            ProgKind::Probe(probe) if probe.flavor == ProbeFlavor::Usdt => {
                let ProbeTarget::Usdt {
                    path,
                    provider,
                    name,
                } = &probe.target
                else {
                    bail!(
                        "program {} (section {section:?}): no PATH:PROVIDER:NAME target; a \
                         loader attaches it: give --attach {}=PATH:PROVIDER:NAME (or \
                         --no-autoload {})",
                        p.name,
                        p.name,
                        p.name
                    );
                };
                let file = symbols::resolve_path(path, &[])
                    .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                let notes = bpfjet_probe::usdt::read_notes(&file)
                    .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                if !notes
                    .iter()
                    .any(|n| &n.provider == provider && &n.name == name)
                {
                    bail!(
                        "program section {section:?}: {} has no USDT probe {provider}:{name} \
                         (no such note in .note.stapsdt)",
                        file.display()
                    );
                }
            }
            ProgKind::Probe(probe) if !probe.flavor.is_user() => {
                // Kernel probes: only system calls' entry points run in a
                // process (the traced process's own calls).
                bpfjet_probe::ksyscall::syscall_probe(probe)
                    .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
            }
            ProgKind::Probe(probe) => {
                let multi = matches!(
                    probe.flavor,
                    ProbeFlavor::UprobeMulti | ProbeFlavor::UretprobeMulti
                );
                if !multi && !matches!(probe.flavor, ProbeFlavor::Uprobe | ProbeFlavor::Uretprobe) {
                    bail!(
                        "program section {section:?}: {:?} cannot be attached by bpfjet trace \
                         (uprobe, uretprobe, uprobe.multi, uretprobe.multi and usdt can; \
                         kprobe, kretprobe, ksyscall and kretsyscall on system calls too)",
                        probe.flavor
                    );
                }
                let ProbeTarget::User { path, symbol, .. } = &probe.target else {
                    bail!(
                        "program {} (section {section:?}): no PATH:SYMBOL target; a loader \
                         attaches it: give --attach {}=PATH:SYMBOL (or --no-autoload {})",
                        p.name,
                        p.name,
                        p.name
                    );
                };
                if symbol.is_empty() {
                    bail!(
                        "program section {section:?}: no function named: libbpf's form is \
                         uprobe/PATH:FUNCTION[+OFFSET] (a raw file offset is not supported \
                         either); when a loader attaches it, give --attach {}=PATH:FUNCTION",
                        p.name
                    );
                }
                let file = symbols::resolve_path(path, &[])
                    .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                if multi {
                    bpfjet_probe::multi::matching_functions(&file, symbol)
                        .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                } else {
                    symbols::file_symbol(&file, symbol)
                        .map_err(|e| anyhow!("program section {section:?}: {e}"))?;
                }
            }
            ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. } => {
                check_syscall_tracepoint(p)?;
            }
            ProgKind::PerfEvent if args.pid.is_some() => bail!(
                "program section {section:?}: perf_event programs sample the threads of a \
                 process bpfjet starts (`bpfjet trace OBJ -- CMD`); --pid does not sample a \
                 running process yet"
            ),
            ProgKind::PerfEvent => {}
            _ => bail!(
                "program section {section:?}: not a tracing program type bpfjet trace can attach \
                 (uprobe, uretprobe, uprobe.multi, uretprobe.multi, usdt, ksyscall/NAME, \
                 kretsyscall/NAME, kprobe/__x64_sys_NAME, kretprobe/__x64_sys_NAME, perf_event, \
                 {})",
                bpfjet_obj::SYSCALL_TRACEPOINT_SECTIONS
            ),
        }
    }
    Ok(object)
}

/// Refuses a tracepoint program that is not on the traced process's own
/// system calls, the only tracepoints a process has in userspace (also
/// for `--pid`, before the process is touched).
pub(super) fn check_syscall_tracepoint(p: &bpfjet_obj::Program) -> Result<()> {
    if p.kind.syscall_tracepoint().is_none() {
        bail!(
            "program section {:?}: only the traced process's own system calls can be traced \
             in a process ({})",
            p.section,
            bpfjet_obj::SYSCALL_TRACEPOINT_SECTIONS
        );
    }
    Ok(())
}

/// The pairs of `object` that are fusable: `[{"entry", "exit",
/// "internalised": [MAP...]}]` for each pair with at least one hand-off map.
pub(super) fn fusable(plan: &bpfjet_fusion::FusionPlan) -> Value {
    plan.pairs
        .iter()
        .filter(|p| p.pair_refusal.is_none() && !p.internalised.is_empty())
        .map(|p| {
            serde_json::json!({
                "entry": p.entry,
                "exit": p.exit,
                "internalised": p.internalised.iter().map(|h| h.name.clone()).collect::<Vec<_>>(),
            })
        })
        .collect()
}

pub fn run(args: &TraceArgs) -> Result<ExitCode> {
    if args.until_unlinked && (args.pid.is_none() || args.instance.is_none()) {
        bail!("--until-unlinked applies to --pid with --instance");
    }
    if let (Some(instance), None) = (&args.instance, args.pid) {
        return super::trace_instance::run(args, instance);
    }
    if let Some(pid) = args.pid {
        if !args.command.is_empty() {
            bail!("--pid {pid} attaches to a running process: give no command");
        }
        return super::trace_pid::run(args, pid);
    }
    if args.duration.is_some() {
        bail!("--duration applies to --pid (a command is traced until it ends)");
    }
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: bpfjet trace OBJ -- CMD ARGS...")?;
    let path = find_program(Path::new(program))
        .ok_or_else(|| anyhow!("{}: command not found", program.to_string_lossy()))?;
    let mut object = precheck(args, Some(&path))?;
    let (fuse, plan) = fusion_setup(args, &mut object)?;
    let agent = agent_library()?;
    let report = report_path();
    let mut cmd = agent_command(program, rest, agent);
    cmd.envs(agent_settings(args, fuse, &report)?);
    // The maps the traced tree shares (`--no-follow`: private to the
    // command's process), named after this run.
    let tree = (!args.no_follow).then(|| SharedTree::new(&report));
    if let Some(tree) = &tree {
        cmd.env("BPFJET_TRACE_INSTANCE", &tree.instance);
    }
    let (report, exit_code) = run_traced(cmd, program, &report, || drop(tree))?;
    print_report(args, &plan, &report, Some(exit_code))
}

/// Where this run's agent writes its report (unique per run).
pub(super) fn report_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "bpfjet-trace-{}-{}.json",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

/// `program rest...` with the agent preloaded (before any preload the
/// environment already has).
pub(super) fn agent_command(
    program: &OsString,
    rest: &[OsString],
    agent: PathBuf,
) -> std::process::Command {
    let mut preload = OsString::from(agent.canonicalize().unwrap_or(agent));
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).env("LD_PRELOAD", preload);
    cmd
}

/// Waits for this thread's child `pid` to end. `__WNOTHREAD`: another
/// thread of bpfjet may ptrace the child meanwhile (links made while it
/// runs, trace_late_links.rs), and its stops are that thread's to see.
fn wait_own_child(pid: i32) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    loop {
        // SAFETY: waitpid with a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WNOTHREAD) };
        if r == pid {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Runs the traced command to its end and collects the report: the
/// agent's at `report` with the parts the tree's other processes left
/// (`ended` runs once the command has ended, before the parts are read),
/// and the command's exit code. An agent that could not attach is an
/// error naming why.
pub(super) fn run_traced(
    mut cmd: std::process::Command,
    program: &OsString,
    report: &Path,
    ended: impl FnOnce(),
) -> Result<(Value, i32)> {
    // Ctrl-C goes to the traced program (same process group); bpfjet waits
    // for it to end and report.
    // SAFETY: plain signal disposition changes.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot execute {}", program.to_string_lossy()))?;
    let status = wait_own_child(child.id() as i32)
        .with_context(|| format!("waiting for {}", program.to_string_lossy()))?;
    let exit_code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let text = std::fs::read_to_string(report);
    let _ = std::fs::remove_file(report);
    ended();
    let parts = process_parts(report);
    let mut report: Value = match text {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("the agent's report {t:?}"))?,
        Err(_) => {
            bail!(
                "{} ended (status {exit_code}) without a report: killed by a signal, or the agent \
                 did not load (is the program dynamically linked?)",
                program.to_string_lossy()
            )
        }
    };
    if let Some(err) = report.get("error").and_then(Value::as_str) {
        if exit_code == AGENT_ERROR_EXIT {
            bail!("{err} ({} was not started)", program.to_string_lossy());
        }
    }
    add_process_parts(&mut report, parts);
    Ok((report, exit_code))
}

/// The parts the other processes of the traced tree left next to the
/// report (the agent's report.rs `write_process_part`), oldest first,
/// removed.
fn process_parts(report: &Path) -> Vec<Value> {
    let (Some(dir), Some(name)) = (report.parent(), report.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut parts: Vec<(u128, Value)> = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let stamp = rest
            .rsplit('.')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if let Ok(v) = std::fs::read_to_string(e.path())
            .map_err(|_| ())
            .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|_| ()))
        {
            parts.push((stamp, v));
        }
        let _ = std::fs::remove_file(e.path());
    }
    parts.sort_by_key(|(stamp, _)| *stamp);
    parts.into_iter().map(|(_, v)| v).collect()
}

/// The tree's counts in one report: runs missed, skipped and faulted add
/// up, trace lines follow the command's own, and `processes` lists every
/// other process that ran programs (a pid twice: an image and the program
/// it executed).
fn add_process_parts(report: &mut Value, parts: Vec<Value>) {
    let Some(r) = report.as_object_mut() else {
        return;
    };
    let mut processes = Vec::new();
    for part in parts {
        for key in ["missed_runs", "skipped_at_thread_exit", "faults"] {
            let sum = r.get(key).and_then(Value::as_u64).unwrap_or(0)
                + part.get(key).and_then(Value::as_u64).unwrap_or(0);
            r.insert(key.to_string(), sum.into());
        }
        // Samples of `perf_event` programs: every process of the tree
        // samples its own threads.
        if let (Some(all), Some(more)) = (
            r.get_mut("perf_event").and_then(Value::as_object_mut),
            part.get("perf_event").and_then(Value::as_object),
        ) {
            for key in ["samples", "missed"] {
                let sum = all.get(key).and_then(Value::as_u64).unwrap_or(0)
                    + more.get(key).and_then(Value::as_u64).unwrap_or(0);
                all.insert(key.to_string(), sum.into());
            }
        }
        if let Some(f) = part.get("last_fault").filter(|f| !f.is_null()) {
            r.insert("last_fault".to_string(), f.clone());
        }
        if let Some(lost) = part.get("trace_lines_lost").and_then(Value::as_object) {
            let all = r
                .entry("trace_lines_lost")
                .or_insert_with(|| serde_json::json!({"busy": 0, "pushed_out": 0}));
            for (k, v) in lost {
                let sum = all.get(k).and_then(Value::as_u64).unwrap_or(0) + v.as_u64().unwrap_or(0);
                all[k] = sum.into();
            }
        }
        if let Some(lines) = part.get("trace_lines").and_then(Value::as_array) {
            if let Some(all) = r
                .entry("trace_lines")
                .or_insert_with(|| Value::Array(Vec::new()))
                .as_array_mut()
            {
                all.extend(lines.iter().cloned());
            }
        }
        processes.push(serde_json::json!({
            "pid": part.get("pid").cloned().unwrap_or(Value::Null),
            "program": part.get("program").cloned().unwrap_or(Value::Null),
        }));
    }
    r.insert("processes".to_string(), Value::Array(processes));
}

/// The shared-memory instance of a traced tree's maps: created by the
/// command's agent, joined by the agents of the programs the tree
/// executes, removed by bpfjet when the command has ended (a descendant
/// still running keeps its mappings; one it executes later runs untraced).
struct SharedTree {
    instance: String,
}

impl SharedTree {
    fn new(report: &Path) -> SharedTree {
        // Unique per run as the report's name is.
        let stem = report
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        SharedTree { instance: stem }
    }
}

impl Drop for SharedTree {
    fn drop(&mut self) {
        let _ = bpfjet_maps::Instance::remove_stale(&self.instance);
        // Notes of the agents' exec_note.rs that no image took (an `exec`
        // of a static program, or of one started without the agent).
        let prefix = format!("bpfjet.{}.", self.instance);
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// The ring-buffer sizes of `--ringbuf-size` applied to `object`, the
/// fusion level, and the pairwise-fusion plan (printed with `--explain`).
pub(super) fn fusion_setup<'a>(
    args: &'a TraceArgs,
    object: &mut bpfjet_obj::Object,
) -> Result<(&'a str, bpfjet_fusion::FusionPlan)> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    for (map, bytes) in &args.ringbuf_size {
        object
            .resize_ringbuf(map, *bytes, page)
            .map_err(|e| anyhow!("--ringbuf-size {map}={bytes}: {e}"))?;
    }
    for (map, n) in &args.max_entries {
        object
            .set_max_entries(map, *n)
            .map_err(|e| anyhow!("--max-entries {map}={n}: {e}"))?;
    }
    // bpfjet trace loads OBJ alone and no control plane can open its maps
    // (no pinning by path, no server), so only pinning by name (refused in
    // crates/fusion) exposes a map.
    let fuse = if args.no_fuse {
        "none"
    } else {
        args.fuse.as_str()
    };
    let internalise = matches!(
        fuse,
        "internalise-calls" | "internalise" | "compile" | "all"
    );
    let plan = if internalise {
        bpfjet_fusion::plan(object, &|_| None)
    } else {
        bpfjet_fusion::FusionPlan::default()
    };
    if args.explain {
        if fuse != "none" {
            eprintln!(
                "bpfjet trace: fusion: inline: sys_enter_X/sys_exit_X pairs on the libc \
                 wrappers of the fast path run through one call-through stub (entry half, \
                 the wrapper, exit half in one frame; no return probe, no shadow stack); \
                 the report's \"fused\"[i].call_through names the wrappers"
            );
        }
        if !matches!(fuse, "none" | "inline") && args.engine == "jit" {
            eprintln!(
                "bpfjet trace: fusion: fold: the JIT folds the system-call number of \
                 sys_enter_X/sys_exit_X records (ctx->id) to a constant"
            );
        }
        if !internalise {
            eprintln!(
                "bpfjet trace: fusion: --fuse {fuse}: hand-offs not analysed, every map stays a map"
            );
        } else {
            for line in plan.explain() {
                eprintln!("bpfjet trace: fusion: {line}");
            }
            for m in &plan.internal_maps {
                let programs: std::collections::BTreeSet<&str> =
                    m.sites.iter().map(|(p, _, _)| p.as_str()).collect();
                eprintln!(
                    "bpfjet trace: fusion: internalise: map {} kept per thread (key {}); \
                     {} map calls in {} rewritten after verification into per-thread slot \
                     operations (no hashing, no bucket lock)",
                    m.name,
                    m.key.describe(),
                    m.sites.len(),
                    programs.into_iter().collect::<Vec<_>>().join(", ")
                );
            }
            if fuse == "internalise-calls" || args.engine != "jit" {
                eprintln!("bpfjet trace: fusion: slot operations run as calls into the runtime");
            } else {
                eprintln!(
                    "bpfjet trace: fusion: slot operations compiled into the programs (loads \
                     and stores on the thread's slot, no call)"
                );
            }
            if matches!(fuse, "compile" | "all") && args.engine != "jit" {
                eprintln!(
                    "bpfjet trace: fusion: compile: the interpreter runs each program of a \
                     pair on its own (compiling a pair into one function is the JIT's)"
                );
            }
            if matches!(fuse, "compile" | "all") && args.engine == "jit" {
                eprintln!(
                    "bpfjet trace: fusion: compile: each sys_enter_X/sys_exit_X pair on a \
                     call-through stub runs as one native function (both programs inlined, \
                     the wrapper called between the halves, one bpf_get_current_pid_tgid); \
                     the report's \"fused\"[i].steps says \"compile-pair\""
                );
            }
            eprintln!(
                "bpfjet trace: fusion: not implemented: call-through and one-function \
                 compilation for uprobe/uretprobe pairs"
            );
        }
    }
    Ok((fuse, plan))
}

/// The agent's settings (the environment of a preloaded agent, the
/// attach file of `--pid`): `BPFJET_TRACE_*` names and values.
pub(super) fn agent_settings(
    args: &TraceArgs,
    fuse: &str,
    report: &Path,
) -> Result<Vec<(&'static str, OsString)>> {
    let file = args.object_file()?;
    let obj = file
        .canonicalize()
        .with_context(|| file.display().to_string())?;
    let mut vars: Vec<(&'static str, OsString)> = vec![
        ("BPFJET_TRACE_OBJ", obj.into()),
        ("BPFJET_TRACE_ENGINE", args.engine.clone().into()),
        ("BPFJET_TRACE_REPORT", report.into()),
        ("BPFJET_TRACE_FUSE", fuse.into()),
        (
            "BPFJET_TRACE_FOLD_RODATA",
            if args.no_fold_rodata { "0" } else { "1" }.into(),
        ),
        (
            "BPFJET_TRACE_SAMPLE_FREQ",
            args.sample_freq.to_string().into(),
        ),
    ];
    // The repeatable MAP=VALUE options, as the agent's config reads them.
    fn pairs<T: std::fmt::Display>(list: &[(String, T)]) -> String {
        let items: Vec<String> = list.iter().map(|(map, v)| format!("{map}={v}")).collect();
        items.join(",")
    }
    for (name, list) in [
        (
            "BPFJET_TRACE_BACKPRESSURE",
            pairs(&args.ringbuf_backpressure),
        ),
        ("BPFJET_TRACE_RINGBUF_SIZE", pairs(&args.ringbuf_size)),
        ("BPFJET_TRACE_MAX_ENTRIES", pairs(&args.max_entries)),
        ("BPFJET_TRACE_CGROUP_ARRAY", pairs(&args.cgroup_array)),
    ] {
        if !list.is_empty() {
            vars.push((name, list.into()));
        }
    }
    let [globals, no_autoload, attach, value_size] = args.loader_settings().encode();
    for (name, list) in [
        ("BPFJET_TRACE_GLOBALS", globals),
        ("BPFJET_TRACE_NO_AUTOLOAD", no_autoload),
        ("BPFJET_TRACE_ATTACH", attach),
        ("BPFJET_TRACE_VALUE_SIZE", value_size),
    ] {
        if !list.is_empty() {
            vars.push((name, list.into()));
        }
    }
    if let Some(ev) = &args.events {
        let ev = std::path::absolute(ev).unwrap_or_else(|_| ev.clone());
        vars.push(("BPFJET_TRACE_EVENTS", ev.into()));
    }
    Ok(vars)
}

/// Prints the agent's report as `bpfjet trace` does (`--json` or map
/// lines). `exit_code`: the traced process's, None when bpfjet detached
/// from a process that goes on (`--pid`); bpfjet's own exit status is
/// that code, or 0.
pub(super) fn print_report(
    args: &TraceArgs,
    plan: &bpfjet_fusion::FusionPlan,
    report: &Value,
    exit_code: Option<i32>,
) -> Result<ExitCode> {
    if let Some(err) = report.get("error").and_then(Value::as_str) {
        bail!("{err}");
    }
    for (key, what) in [
        ("missed_runs", "runs skipped (recursion)"),
        ("faults", "runs faulted"),
        (
            "skipped_at_thread_exit",
            "runs skipped in exiting threads (docs/TRACING.md, Known limits)",
        ),
    ] {
        if let Some(n) = report.get(key).and_then(Value::as_u64).filter(|&n| n > 0) {
            eprintln!("bpfjet trace: {n} {what}");
        }
    }
    if let Some(f) = report.get("last_fault").and_then(Value::as_str) {
        eprintln!("bpfjet trace: last fault: {f}");
    }
    if let Some(pe) = report.get("perf_event").filter(|_| !args.json) {
        if let (Some(n), Some(hz)) = (pe["samples"].as_u64(), pe["frequency"].as_u64()) {
            eprintln!(
                "bpfjet trace: perf_event: {n} samples at {hz} Hz of CPU time, {} skipped (the \
                 thread was in another bpfjet handler)",
                pe["missed"].as_u64().unwrap_or(0)
            );
        }
    }
    // Probes that cost a signal per hit, said once (the JSON lists them).
    if let Some(int3) = report.get("int3_probes").and_then(Value::as_array) {
        if !args.json && !int3.is_empty() {
            eprintln!(
                "bpfjet trace: {} probe(s) are int3 traps (a signal per hit), where no jump \
                 fits: {}",
                int3.len(),
                int3.iter()
                    .filter_map(|p| p["why"].as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    if let Some(refusals) = report.get("fusion_refusals").and_then(Value::as_array) {
        for r in refusals.iter().filter_map(Value::as_str) {
            eprintln!("bpfjet trace: fusion: kept as a map: {r}");
        }
    }
    if args.explain {
        let why = report
            .get("fusion_compile_refusals")
            .and_then(Value::as_array);
        for r in why.into_iter().flatten().filter_map(Value::as_str) {
            eprintln!("bpfjet trace: fusion: not compiled into one function: {r}");
        }
    }
    let fused = report
        .get("fused")
        .cloned()
        .unwrap_or_else(|| Value::Array(Vec::new()));
    if args.explain {
        for p in fused.as_array().into_iter().flatten() {
            eprintln!(
                "bpfjet trace: fusion: ran fused: {} + {}: steps {}, internalised {}",
                p["entry"].as_str().unwrap_or("?"),
                p["exit"].as_str().unwrap_or("?"),
                p["steps"],
                p["internalised"]
            );
        }
    }
    let maps = report.get("maps").cloned().unwrap_or(Value::Null);
    // Ring buffers and perf buffers: {NAME: {produced, consumed, dropped}}.
    let counts = |key: &str| {
        let mut out = serde_json::Map::new();
        if let Some(rb) = report.get(key).and_then(Value::as_object) {
            for (name, s) in rb {
                out.insert(
                    name.clone(),
                    serde_json::json!({
                        "produced": s["produced"], "consumed": s["consumed"], "dropped": s["dropped"],
                    }),
                );
            }
        }
        out
    };
    let ringbufs = counts("ringbufs");
    let perfbufs = counts("perfbufs");
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "maps": maps,
                "ringbufs": ringbufs,
                "perfbufs": perfbufs,
                "exit_code": exit_code,
                "syscalls": report.get("syscalls").cloned().unwrap_or(Value::Null),
                "fused": fused,
                "fusion": report.get("fusion").cloned().unwrap_or(Value::Null),
                "fusable": fusable(plan),
                "fusion_compile_refusals": report
                    .get("fusion_compile_refusals")
                    .cloned()
                    .unwrap_or_else(|| Value::Array(Vec::new())),
                "usdt": report.get("usdt").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
                "int3_probes": report.get("int3_probes").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
                "dlopen": report.get("dlopen").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
                "missed_runs": report.get("missed_runs").cloned().unwrap_or(Value::Null),
                "faults": report.get("faults").cloned().unwrap_or(Value::Null),
                "last_fault": report.get("last_fault").cloned().unwrap_or(Value::Null),
                "trace_lines": report.get("trace_lines").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
                "trace_lines_lost": report.get("trace_lines_lost").cloned().unwrap_or(Value::Null),
                "processes": report.get("processes").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
                "perf_event": report.get("perf_event").cloned().unwrap_or(Value::Null),
            })
        );
    } else {
        if let Some(lines) = report.get("trace_lines").and_then(Value::as_array) {
            for l in lines.iter().filter_map(Value::as_str) {
                println!("{l}");
            }
        }
        if let Some(lost) = report.get("trace_lines_lost") {
            let count = |k: &str| lost.get(k).and_then(Value::as_u64).unwrap_or(0);
            if count("busy") + count("pushed_out") > 0 {
                eprintln!(
                    "bpfjet trace: trace lines lost: {} pushed out by newer lines (the report \
                     keeps the last ones), {} given up behind a busy line buffer",
                    count("pushed_out"),
                    count("busy")
                );
            }
        }
        print_maps(&maps);
        for (kind, bufs) in [("ringbuf", &ringbufs), ("perfbuf", &perfbufs)] {
            for (name, s) in bufs {
                println!(
                    "{kind} {name}: produced {} consumed {} dropped {}",
                    s["produced"], s["consumed"], s["dropped"]
                );
            }
        }
    }
    Ok(ExitCode::from(exit_code.unwrap_or(0).clamp(0, 255) as u8))
}

/// A STATE.json hex field as bpftrace shows scalars: little-endian unsigned
/// integers for 1/2/4/8-byte fields, hex otherwise.
fn show(hex: &str) -> String {
    let Ok(bytes) = bpfjet_maps::state::parse_hex(hex) else {
        return hex.to_string();
    };
    match bytes.len() {
        1 | 2 | 4 | 8 => {
            let mut v = [0u8; 8];
            v[..bytes.len()].copy_from_slice(&bytes);
            u64::from_le_bytes(v).to_string()
        }
        _ => hex.to_string(),
    }
}

/// Per-CPU values summed (as bpftrace's count/sum) when they are integers.
fn show_values(values: &[Value]) -> String {
    let parsed: Vec<Option<u64>> = values
        .iter()
        .map(|v| v.as_str().and_then(|h| show(h).parse().ok()))
        .collect();
    if parsed.iter().all(Option::is_some) {
        parsed.iter().map(|v| v.unwrap()).sum::<u64>().to_string()
    } else {
        let shown: Vec<String> = values.iter().filter_map(Value::as_str).map(show).collect();
        format!("[{}]", shown.join(", "))
    }
}

fn print_maps(maps: &Value) {
    let Some(maps) = maps.as_object() else { return };
    for (name, entries) in maps {
        // Global-data sections (.bss, .data, .rodata) are not bpftrace maps.
        if name.starts_with('.')
            || name.contains(".bss")
            || name.contains(".data")
            || name.contains(".rodata")
        {
            continue;
        }
        let Some(entries) = entries.as_array() else {
            continue;
        };
        let scalar = entries.len() == 1;
        for e in entries {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let value = if let Some(v) = e.get("value").and_then(Value::as_str) {
                show(v)
            } else if let Some(vs) = e.get("values").and_then(Value::as_array) {
                show_values(vs)
            } else {
                e.to_string()
            };
            if scalar && show(key) == "0" {
                println!("@{name}: {value}");
            } else {
                println!("@{name}[{}]: {value}", show(key));
            }
        }
        println!();
    }
}
