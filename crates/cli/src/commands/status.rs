//! `bpfjet status [--instance NAME] [--json]`: the XDP attachments made
//! through `bpfjet exec` (netlink `IFLA_XDP` or XDP links) and their data
//! planes: interface, mode, program, link, process, engine, counters.

use anyhow::{anyhow, Result};
use bpfjet_server::attach::{Attachment, DataPlaneStatus};
use bpfjet_server::{BpfjetBackend, Namespace};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Only this instance (default: every instance under the run directory).
    #[arg(long)]
    pub instance: Option<String>,
    /// One JSON array of attachments.
    #[arg(long)]
    pub json: bool,
}

fn run_dir() -> PathBuf {
    std::env::var_os("BPFJET_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/bpfjet"))
}

/// Instances with attachment records under `run`.
fn instances(run: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(run)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().join("attach").is_dir())
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn mode_name(a: &Attachment) -> &'static str {
    if a.attached_mode() == 2 {
        "skb"
    } else {
        "native"
    }
}

fn json(instance: &str, a: &Attachment, s: Option<&DataPlaneStatus>) -> serde_json::Value {
    serde_json::json!({
        "instance": instance,
        "ifname": a.ifname,
        "ifindex": a.ifindex,
        "mode": mode_name(a),
        "prog_id": a.prog_id,
        "link_id": a.link_id,
        "data_plane": s,
    })
}

pub fn run(args: &StatusArgs) -> Result<ExitCode> {
    let run = run_dir();
    let names = match &args.instance {
        Some(n) => vec![n.clone()],
        None => instances(&run),
    };
    let mut rows = Vec::new();
    for name in &names {
        if !run.join(name).is_dir() {
            if args.instance.is_some() {
                return Err(anyhow!("no instance {name} under {}", run.display()));
            }
            continue;
        }
        // What holders that were killed left (a link's last fd: its
        // attachment) goes before it is listed.
        BpfjetBackend::new(Namespace::open(name, &run).map_err(|e| anyhow!(e))?).sweep();
        let ns = Namespace::open(name, &run).map_err(|e| anyhow!(e))?;
        for a in ns.attachments() {
            let mut s = ns.data_plane_status(a.ifindex);
            // A data plane that died without a word (killed) still says
            // what it said last: report it gone.
            if let Some(st) = s.as_mut() {
                let alive = st.pid != 0
                    // SAFETY: signal 0 only checks the pid exists.
                    && unsafe { libc::kill(st.pid as i32, 0) } == 0;
                if !alive && matches!(st.state.as_str(), "starting" | "running") {
                    st.state = "exited".into();
                }
            }
            rows.push((name.clone(), a, s));
        }
    }
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, a, s)| json(n, a, s.as_ref()))
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no attachments");
        return Ok(ExitCode::SUCCESS);
    }
    for (name, a, s) in &rows {
        let link = if a.link_id != 0 {
            format!(" link {}", a.link_id)
        } else {
            " netlink".to_string()
        };
        println!(
            "{name}: {} (ifindex {}) {} prog {}{link}",
            a.ifname,
            a.ifindex,
            mode_name(a),
            a.prog_id
        );
        match s {
            Some(s) => {
                println!(
                    "  data plane pid {} {} {} (program {} {}, {} replace(s)) {}",
                    s.pid, s.state, s.engine, s.prog_id, s.prog_name, s.replaces, s.describe
                );
                println!(
                    "  packets {} pass {} drop {} tx {} redirect {} aborted {}",
                    s.packets, s.pass, s.drop, s.tx, s.redirect, s.aborted
                );
                for t in &s.tracepoints {
                    println!("  fires {t}");
                }
                if !s.error.is_empty() {
                    println!("  error: {}", s.error);
                }
            }
            None => println!("  data plane: no status"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
