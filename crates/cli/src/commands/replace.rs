//! `bpfjet replace --instance NAME NEW.o [--prog P] [--json] [--timeout SECS]`:
//! hot-swaps the program of a running `bpfjet run` between batches.
//!
//! The running process loads, verifies and compiles NEW.o itself (so the
//! object path is resolved here, to an absolute one), reusing the maps
//! whose name and layout are unchanged. Exit 0: every worker runs the new
//! program; exit 1: refused (the old program keeps running) or the
//! instance could not be reached; 2: bad command line.

use super::run::control::{request, ReplaceLoad, Reply, Request};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ReplaceArgs {
    /// The running instance (`bpfjet run --name`, by default the object's file stem).
    #[arg(long)]
    pub instance: String,
    /// The new BPF ELF object.
    pub obj: PathBuf,
    /// Program to run (default: the object's first XDP program).
    #[arg(long)]
    pub prog: Option<String>,
    /// Print the reply as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the instance to load, verify, compile and swap.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub object_args: super::object_args::ObjectArgs,
}

pub fn run(args: &ReplaceArgs) -> Result<ExitCode> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let object = std::fs::canonicalize(&args.obj)
        .with_context(|| format!("resolving {}", args.obj.display()))?;
    let reply = request(
        &args.instance,
        &Request::Replace {
            object,
            prog: args.prog.clone(),
            load: ReplaceLoad {
                prog_type: args
                    .object_args
                    .prog_type
                    .as_ref()
                    .map(|k| k.name().to_string()),
                max_entries: args.object_args.max_entries.clone(),
                btf: args
                    .object_args
                    .btf
                    .as_deref()
                    .map(std::fs::canonicalize)
                    .transpose()
                    .context("resolving --btf")?,
                globals: args.object_args.globals.clone(),
            },
        },
        Duration::from_secs_f64(args.timeout),
    )?;
    if args.json {
        println!("{}", serde_json::to_string(&reply)?);
    } else {
        print_human(&args.instance, &reply);
    }
    Ok(if reply.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_human(instance: &str, reply: &Reply) {
    if !reply.ok {
        eprintln!(
            "bpfjet: replace refused, '{instance}' keeps its program: {}",
            reply.error.as_deref().unwrap_or("no reason given")
        );
        return;
    }
    println!(
        "replaced: '{instance}' runs {} ({}), generation {}, every worker switched in {:.2} ms",
        reply.program.as_deref().unwrap_or("?"),
        reply.engine.as_deref().unwrap_or("?"),
        reply.generation.unwrap_or(0),
        reply.switch_ms.unwrap_or(0.0)
    );
    if let Some(m) = &reply.maps {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        println!("  maps kept     {}", list(&m.kept));
        println!("  maps created  {}", list(&m.created));
        println!("  maps dropped  {}", list(&m.dropped));
    }
}
