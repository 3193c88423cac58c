//! `bpfjet exec [--instance NAME] -- CMD ARGS...`: run an unmodified program
//! with its `bpf()` calls served by bpfjet (libbpfjet.so preloaded).

use anyhow::{bail, Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The bpfjet instance whose objects (maps, programs, pins) the program
    /// shares with other `bpfjet exec` processes and `bpfjet map --name`.
    #[arg(long, default_value = "exec")]
    pub instance: String,
    /// A uprobe link for every process (pid -1, as bpftrace's and most
    /// tools' uprobes are, `-p` or not) also reaches the processes already
    /// running whose executable is the probed file, as the kernel's uprobe
    /// does: bpfjet loads its agent into each with ptrace (`bpfjet trace
    /// --pid PID --instance NAME --until-unlinked`) and detaches once the
    /// tool's links are gone. Off by default, since it stops processes the
    /// tool did not name; a shared library's running users are not reached
    /// (take one with `bpfjet trace --pid`)
    #[arg(long)]
    pub attach_running: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// libbpfjet.so: `$BPFJET_PRELOAD`, else next to this binary (cargo puts
/// both in `target/<profile>/`).
fn preload_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("BPFJET_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating the bpfjet binary")?;
    let lib = exe.with_file_name("libbpfjet.so");
    if !lib.is_file() {
        bail!(
            "{} not found: build it with `cargo build -p bpfjet-preload` (same profile as bpfjet) \
             or set BPFJET_PRELOAD",
            lib.display()
        );
    }
    Ok(lib)
}

pub fn run(args: &ExecArgs) -> Result<ExitCode> {
    // The name becomes part of shared-memory and directory names.
    if args.instance.is_empty()
        || !args
            .instance
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!(
            "instance name {:?}: use letters, digits, '-' and '_'",
            args.instance
        );
    }
    let lib = preload_library()?;
    let mut preload = OsString::from(lib.canonicalize().unwrap_or(lib));
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let (program, rest) = args.command.split_first().context("no command given")?;
    let mut cmd = std::process::Command::new(program);
    if args.attach_running {
        cmd.env(bpfjet_server::ATTACH_RUNNING_ENV, "1");
    } else {
        // Not inherited from a caller's environment either: asked for
        // on this command line or not at all.
        cmd.env_remove(bpfjet_server::ATTACH_RUNNING_ENV);
    }
    let err = cmd
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env("BPFJET_INSTANCE", &args.instance)
        // The data plane an XDP attach starts is this binary.
        .env(
            "BPFJET_BIN",
            std::env::current_exe().context("locating the bpfjet binary")?,
        )
        .exec();
    bail!("cannot execute {}: {err}", program.to_string_lossy())
}
