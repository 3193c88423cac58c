//! What a run shows: a live status line while it runs, a summary at the
//! end, and the `--json` object.

use bpfjet_io::run::{RedirectTarget, StatsSnapshot, TopTable, WorkerReport};
use bpfjet_io::OutputRoute;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Prints the status line: refreshed in place on a terminal, one plain
/// line per interval otherwise (both on stderr, so stdout stays the
/// summary or the JSON object).
pub struct StatusLine {
    tty: bool,
    last: StatsSnapshot,
    last_cpu: Duration,
    last_at: Instant,
    printed: bool,
    pub interval: Duration,
}

impl StatusLine {
    pub fn new() -> StatusLine {
        let tty = std::io::stderr().is_terminal();
        StatusLine {
            tty,
            last: StatsSnapshot::default(),
            last_cpu: bpfjet_io::run::process_cpu_time(),
            last_at: Instant::now(),
            printed: false,
            interval: if tty {
                Duration::from_millis(500)
            } else {
                Duration::from_secs(1)
            },
        }
    }

    /// Prints the rates since the previous call.
    pub fn update(&mut self, now: &StatsSnapshot) {
        let at = Instant::now();
        let secs = at.duration_since(self.last_at).as_secs_f64().max(1e-9);
        let cpu = bpfjet_io::run::process_cpu_time();
        let d = now.since(&self.last);
        let cpu_pct = (cpu.saturating_sub(self.last_cpu)).as_secs_f64() / secs * 100.0;
        let line = format!(
            "{:>8.3} Mpps | pkts {} | drop {} pass {} tx {} redir {} abort {} | out-drops {} | cpu {:.0}%",
            d.packets as f64 / secs / 1e6,
            now.packets,
            now.action(OutputRoute::Drop),
            now.action(OutputRoute::Pass),
            now.action(OutputRoute::Tx),
            now.action(OutputRoute::Redirect),
            now.action(OutputRoute::Aborted),
            now.drops,
            cpu_pct,
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.printed = true;
        self.last = *now;
        self.last_cpu = cpu;
        self.last_at = at;
    }

    /// Ends the in-place line so the summary starts on its own line.
    pub fn finish(&mut self) {
        if self.tty && self.printed {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Why the run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    SourceEnded,
    Duration,
    Signal(i32),
    Error,
}

impl StopReason {
    pub fn name(self) -> String {
        match self {
            StopReason::SourceEnded => "source ended".into(),
            StopReason::Duration => "duration elapsed".into(),
            StopReason::Signal(2) => "SIGINT".into(),
            StopReason::Signal(15) => "SIGTERM".into(),
            StopReason::Signal(s) => format!("signal {s}"),
            StopReason::Error => "error".into(),
        }
    }
}

/// Everything the summary reports.
pub struct Summary<'a> {
    pub program: &'a str,
    pub engine: &'a str,
    /// Hot replaces during the run (`program`/`engine` are the last one's).
    pub replaces: usize,
    pub instance: &'a str,
    pub source: &'a str,
    pub staged: bool,
    pub total: &'a WorkerReport,
    pub workers: &'a [WorkerReport],
    pub elapsed: Duration,
    pub stop: StopReason,
    pub errors: &'a [String],
    pub outputs: &'a [String],
    /// `--top N`: the table and N.
    pub top: Option<(&'a TopTable, usize)>,
}

fn target_name(t: &RedirectTarget) -> String {
    t.to_string()
}

impl Summary<'_> {
    fn mpps(&self) -> f64 {
        self.total.packets as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    /// Packets per second of worker CPU time: the per-core rate.
    fn mpps_per_core(&self) -> f64 {
        let cpu = self.total.cpu.as_secs_f64();
        if cpu <= 0.0 {
            return 0.0;
        }
        self.total.packets as f64 / cpu / 1e6
    }

    pub fn print_human(&self) {
        let t = self.total;
        println!(
            "bpfjet run: {} ({}) on {} — {}",
            self.program,
            self.engine,
            self.source,
            self.stop.name()
        );
        println!(
            "  packets   {} in {:.3}s: {:.3} Mpps, {:.3} Mpps per core ({:.3}s worker CPU, {} worker{})",
            t.packets,
            self.elapsed.as_secs_f64(),
            self.mpps(),
            self.mpps_per_core(),
            t.cpu.as_secs_f64(),
            self.workers.len(),
            if self.workers.len() == 1 { "" } else { "s" },
        );
        if self.replaces > 0 {
            println!(
                "  replaced  {} time{} while running (program above is the last)",
                self.replaces,
                if self.replaces == 1 { "" } else { "s" }
            );
        }
        println!(
            "  frames    {}",
            if self.staged {
                "staged through the runtime's frame (program uses frame helpers)"
            } else {
                "run in place"
            }
        );
        print!("  actions  ");
        for r in OutputRoute::ALL {
            let n = t.action(r);
            let pct = if t.packets == 0 {
                0.0
            } else {
                n as f64 * 100.0 / t.packets as f64
            };
            print!(" {} {} ({:.1}%)", r.action_name(), n, pct);
        }
        println!();
        if t.drops > 0 {
            println!("  output drops {}", t.drops);
        }
        if t.ring_drops > 0 {
            println!(
                "  kernel ring drops {} (frames that never reached a worker)",
                t.ring_drops
            );
        }
        let top = t.top_redirect_targets(5);
        if !top.is_empty() {
            let list: Vec<String> = top
                .iter()
                .map(|(target, n)| format!("{} {}", target_name(target), n))
                .collect();
            println!("  top redirect targets: {}", list.join(", "));
        }
        if let Some(f) = &t.first_fault {
            println!("  program faults {} (first: {f})", t.faults);
        }
        if let Some((top, n)) = self.top {
            self.print_top(top, n);
        }
        for o in self.outputs {
            println!("  wrote {o}");
        }
        println!(
            "  maps published as instance '{}' while running",
            self.instance
        );
        for e in self.errors {
            eprintln!("bpfjet: {e}");
        }
    }

    fn pct(&self, n: u64) -> f64 {
        n as f64 * 100.0 / self.total.packets.max(1) as f64
    }

    fn print_top(&self, top: &TopTable, n: usize) {
        println!("  top {n} flows (innermost 5-tuple after the program):");
        println!("    {:>10} {:>6}  {:<9} flow", "packets", "%", "action");
        for ((flow, route), c) in top.top_flows(n) {
            println!(
                "    {c:>10} {:>5.1}%  {:<9} {flow}",
                self.pct(c),
                route.action_name()
            );
        }
        println!(
            "  top {n} destinations (outermost IP destination; behind IP-in-IP: the backend):"
        );
        println!(
            "    {:>10} {:>6}  {:<9} destination",
            "packets", "%", "action"
        );
        for ((dest, encap, route), c) in top.top_dests(n) {
            println!(
                "    {c:>10} {:>5.1}%  {:<9} {dest}{}",
                self.pct(c),
                route.action_name(),
                if encap { " (IP-in-IP)" } else { "" }
            );
        }
        if top.unparsed > 0 {
            println!("    ({} packets were not IPv4/IPv6)", top.unparsed);
        }
    }

    fn top_json(top: &TopTable, n: usize) -> serde_json::Value {
        let flows: Vec<serde_json::Value> = top
            .top_flows(n)
            .into_iter()
            .map(|((f, r), c)| {
                serde_json::json!({
                    "proto": f.proto, "src": f.src.to_string(), "sport": f.sport,
                    "dst": f.dst.to_string(), "dport": f.dport,
                    "action": r.action_name(), "packets": c,
                })
            })
            .collect();
        let dests: Vec<serde_json::Value> = top
            .top_dests(n)
            .into_iter()
            .map(|((d, encap, r), c)| {
                serde_json::json!({
                    "destination": d.to_string(), "encapsulated": encap,
                    "action": r.action_name(), "packets": c,
                })
            })
            .collect();
        serde_json::json!({"flows": flows, "destinations": dests, "unparsed": top.unparsed})
    }

    pub fn json(&self) -> serde_json::Value {
        let t = self.total;
        let actions: serde_json::Map<String, serde_json::Value> = OutputRoute::ALL
            .iter()
            .map(|r| (r.action_name().to_string(), t.action(*r).into()))
            .collect();
        let targets: Vec<serde_json::Value> = t
            .top_redirect_targets(usize::MAX)
            .iter()
            .map(|(target, n)| serde_json::json!({"target": target_name(target), "packets": n}))
            .collect();
        let workers: Vec<serde_json::Value> = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                serde_json::json!({
                    "worker": i,
                    "packets": w.packets,
                    "cpu_s": w.cpu.as_secs_f64(),
                    "actions": OutputRoute::ALL.iter()
                        .map(|r| (r.action_name().to_string(), serde_json::Value::from(w.action(*r))))
                        .collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        serde_json::json!({
            "program": self.program,
            "engine": self.engine,
            "replaces": self.replaces,
            "instance": self.instance,
            "source": self.source,
            "frames": if self.staged { "staged" } else { "in_place" },
            "packets": t.packets,
            "bytes": t.bytes,
            "actions": actions,
            "drops": t.drops,
            "ring_drops": t.ring_drops,
            "faults": t.faults,
            "first_fault": t.first_fault,
            "redirect_targets": targets,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "cpu_s": t.cpu.as_secs_f64(),
            "mpps": self.mpps(),
            "mpps_per_core": self.mpps_per_core(),
            "workers": workers,
            "stopped_by": self.stop.name(),
            "errors": self.errors,
            "outputs": self.outputs,
            "top": self.top.map(|(t, n)| Self::top_json(t, n)),
        })
    }
}
