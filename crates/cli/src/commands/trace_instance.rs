//! `bpfjet trace --instance NAME -- CMD ARGS...`: run CMD with the
//! programs a control plane linked in `bpf()` instance NAME.
//!
//! An unmodified libbpf tool runs under `bpfjet exec --instance NAME`: its
//! maps are the instance's, its programs are verified by bpfjet, and its
//! uprobe and tracepoint attachments are links in the instance
//! (crates/server, perf_events.rs and probe_links.rs). The agent in CMD
//! (and in every program CMD's tree executes) loads the programs of those
//! links on the instance's maps and attaches them where the links say; the
//! tool reads the maps and consumes its ring buffers as it would on the
//! kernel. The report at the end is the maps the programs use, as for an
//! object.

use super::trace::{
    agent_command, agent_library, find_program, print_report, report_path, run_traced, TraceArgs,
};
use anyhow::{anyhow, bail, Context, Result};
use bpfjet_probe::symbols;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// The options that shape an object before load or its fusion: a control
/// plane has done its loading.
pub(super) fn refuse_object_options(args: &TraceArgs) -> Result<()> {
    let given = [
        ("--events", args.events.is_some()),
        ("--explain", args.explain),
        (
            "--ringbuf-backpressure",
            !args.ringbuf_backpressure.is_empty(),
        ),
        ("--ringbuf-size", !args.ringbuf_size.is_empty()),
        ("--max-entries", !args.max_entries.is_empty()),
        ("--value-size", !args.value_size.is_empty()),
        ("--cgroup-array", !args.cgroup_array.is_empty()),
        ("--global", !args.globals.is_empty()),
        ("--no-autoload", !args.no_autoload.is_empty()),
        ("--attach", !args.attach.is_empty()),
    ];
    if let Some((name, _)) = given.iter().find(|(_, on)| *on) {
        bail!(
            "{name} does not apply with --instance: the control plane loaded, sized and attached \
             the programs (and consumes their buffers)"
        );
    }
    Ok(())
}

/// The instance's run directory (`$BPFJET_RUN_DIR`, as `bpfjet exec`).
pub(super) fn run_dir() -> String {
    std::env::var("BPFJET_RUN_DIR").unwrap_or_else(|_| "/run/bpfjet".into())
}

/// What a process with id `pid` will run of the instance's probe links,
/// checked before it is touched: a link to a program bpfjet cannot attach
/// in a process is an error; none at all is a warning (`what` says what
/// then runs untraced).
pub(super) fn checked_object(instance: &str, pid: u32, what: &str) -> Result<bpfjet_obj::Object> {
    let ns = bpfjet_server::Namespace::open(instance, Path::new(&run_dir()))
        .map_err(|e| anyhow!("instance {instance}: {e}"))?;
    let traced =
        bpfjet_server::traced_object(&ns, pid).map_err(|e| anyhow!("instance {instance}: {e}"))?;
    if traced.programs.is_empty() {
        eprintln!(
            "bpfjet trace: instance {instance} has no probe links (is the tool running under \
             `bpfjet exec --instance {instance}`, and has it attached?): {what} starts untraced \
             (links made while it runs reach it)"
        );
    }
    for p in &traced.object.programs {
        if p.kind.syscall_tracepoint().is_none() && p.kind.probe().is_none() {
            bail!(
                "instance {instance}: program {} is linked to {:?}, which bpfjet trace cannot \
                 attach in a process",
                p.name,
                p.section
            );
        }
    }
    Ok(traced.object)
}

/// The agent's settings for a control plane's programs (the environment
/// of a command, or the settings file of `--pid`).
pub(super) fn agent_settings(
    args: &TraceArgs,
    instance: &str,
    report: &Path,
) -> Vec<(&'static str, OsString)> {
    vec![
        ("BPFJET_TRACE_CONTROL_PLANE", instance.into()),
        ("BPFJET_RUN_DIR", run_dir().into()),
        ("BPFJET_TRACE_ENGINE", args.engine.clone().into()),
        ("BPFJET_TRACE_REPORT", report.into()),
        (
            "BPFJET_TRACE_FOLD_RODATA",
            if args.no_fold_rodata { "0" } else { "1" }.into(),
        ),
    ]
}

pub fn run(args: &TraceArgs, instance: &str) -> Result<ExitCode> {
    refuse_object_options(args)?;
    // After `--` clap gives the first word to the OBJ slot.
    let mut words: Vec<OsString> = args
        .obj
        .iter()
        .map(|p| p.clone().into_os_string())
        .collect();
    words.extend(args.command.iter().cloned());
    let (program, rest) = words
        .split_first()
        .context("no command given: bpfjet trace --instance NAME -- CMD ARGS...")?;
    let path = find_program(Path::new(program))
        .ok_or_else(|| anyhow!("{}: command not found", program.to_string_lossy()))?;
    symbols::check_dynamic(&path).map_err(|e| anyhow!("{e}"))?;
    // Links for a given process id cannot name a command not started yet.
    checked_object(instance, 0, &program.to_string_lossy())?;
    let agent = agent_library()?;
    let report = report_path();
    let mut cmd = agent_command(program, rest, agent.clone());
    cmd.envs(agent_settings(args, instance, &report));
    // Links the control plane makes while the command runs reach its
    // running processes (trace_late_links.rs).
    let watch = super::trace_late_links::watch(
        instance,
        Path::new(&run_dir()),
        &agent,
        super::trace_late_links::Targets::Tree,
    );
    let (report, exit_code) = run_traced(cmd, program, &report, || ())?;
    drop(watch);
    print_report(
        args,
        &bpfjet_fusion::FusionPlan::default(),
        &without_maps(args, report),
        Some(exit_code),
    )
}

/// The report as `bpfjet trace --instance` prints it: the maps are the
/// control plane's, which prints them as it likes; `--json` keeps them.
pub(super) fn without_maps(args: &TraceArgs, mut report: serde_json::Value) -> serde_json::Value {
    if !args.json {
        if let Some(r) = report.as_object_mut() {
            r.remove("maps");
        }
    }
    report
}
