//! The table and the JSON object `bench` prints.

use super::engines::Sample;
use super::stats::{max, median, min, ratio};
use super::Mode;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use std::path::Path;

/// One engine's figures over all rounds.
pub struct Row {
    pub name: String,
    pub iters: u64,
    pub action: Option<u32>,
    /// Medians over the rounds (ns per packet).
    pub raw: f64,
    pub net: f64,
    pub empty: f64,
    /// Spread of the raw cost over the rounds.
    pub min: f64,
    pub max: f64,
    pub notes: Vec<String>,
}

impl Row {
    pub fn new(
        name: &str,
        iters: u64,
        action: Option<u32>,
        samples: &[Sample],
        notes: Vec<String>,
    ) -> Row {
        let raw: Vec<f64> = samples.iter().map(Sample::raw).collect();
        let net: Vec<f64> = samples.iter().map(Sample::net).collect();
        let empty: Vec<f64> = samples.iter().map(|s| s.empty).collect();
        Row {
            name: name.to_string(),
            iters,
            action,
            raw: median(&raw),
            net: median(&net),
            empty: median(&empty),
            min: min(&raw),
            max: max(&raw),
            notes,
        }
    }

    fn mpps(&self) -> f64 {
        if self.raw > 0.0 {
            1e3 / self.raw
        } else {
            f64::NAN
        }
    }
}

pub struct Summary<'a> {
    pub object: &'a Path,
    pub program: &'a str,
    pub packet_len: usize,
    pub mode: Mode,
    pub rounds: u32,
    pub cpu: usize,
    pub rows: &'a [Row],
}

fn action_name(action: Option<u32>) -> String {
    match action {
        Some(a) => bpfjet_runtime::xdp::action::name(a)
            .map(str::to_string)
            .unwrap_or_else(|| a.to_string()),
        None => "-".into(),
    }
}

fn num(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{r:.2}x"))
}

impl Summary<'_> {
    fn kernel(&self) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == "kernel")
    }

    /// Engines whose action differs from the kernel's (the figures then
    /// compare different paths).
    fn action_mismatches(&self) -> Vec<String> {
        let Some(k) = self.kernel() else {
            return Vec::new();
        };
        self.rows
            .iter()
            .filter(|r| r.action.is_some() && k.action.is_some() && r.action != k.action)
            .map(|r| {
                format!(
                    "warning: {} returned {} but the kernel {}",
                    r.name,
                    action_name(r.action),
                    action_name(k.action)
                )
            })
            .collect()
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "bench {} --prog {}: {}-byte packet, {} packets, {} rounds, CPU {}",
            self.object.display(),
            self.program,
            self.packet_len,
            self.mode.name(),
            self.rounds,
            self.cpu
        );
        let _ = writeln!(
            out,
            "{:<8} {:>10} {:>8} {:>11} {:>21} {:>10} {:>9} {:>8} {:>9} {:>10}",
            "engine",
            "iters",
            "action",
            "ns/pkt",
            "(min..max)",
            "net ns",
            "empty ns",
            "Mpps",
            "x kernel",
            "net x kern"
        );
        let kernel = self.kernel();
        for r in self.rows {
            let (rr, nr) = match kernel {
                Some(k) => (ratio(k.raw, r.raw), ratio(k.net, r.net)),
                None => (None, None),
            };
            let _ = writeln!(
                out,
                "{:<8} {:>10} {:>8} {:>11.2} {:>21} {:>10.2} {:>9.2} {:>8.2} {:>9} {:>10}",
                r.name,
                r.iters,
                action_name(r.action),
                r.raw,
                format!("({:.2}..{:.2})", r.min, r.max),
                r.net,
                r.empty,
                r.mpps(),
                fmt_ratio(rr),
                fmt_ratio(nr),
            );
        }
        for r in self.rows {
            for n in &r.notes {
                let _ = writeln!(out, "{n}");
            }
        }
        for w in self.action_mismatches() {
            let _ = writeln!(out, "{w}");
        }
        out
    }

    pub fn json(&self) -> Value {
        let mut engines = Map::new();
        let mut ratios = Map::new();
        let mut net_ratios = Map::new();
        let kernel = self.kernel();
        for r in self.rows {
            engines.insert(
                r.name.clone(),
                json!({
                    "ns_per_pkt": num(r.raw),
                    "net_ns": num(r.net),
                    "min": num(r.min),
                    "max": num(r.max),
                    "empty_ns": num(r.empty),
                    "mpps": num(r.mpps()),
                    "iters": r.iters,
                    "action": r.action.map(|a| action_name(Some(a))),
                    "notes": r.notes,
                }),
            );
            if let Some(k) = kernel {
                ratios.insert(r.name.clone(), ratio(k.raw, r.raw).map_or(Value::Null, num));
                net_ratios.insert(r.name.clone(), ratio(k.net, r.net).map_or(Value::Null, num));
            }
        }
        json!({
            "object": self.object.display().to_string(),
            "program": self.program,
            "packet_len": self.packet_len,
            "mode": self.mode.name(),
            "rounds": self.rounds,
            "cpu": self.cpu,
            "engines": engines,
            "ratio_vs_kernel": ratios,
            "net_ratio_vs_kernel": net_ratios,
            "warnings": self.action_mismatches(),
        })
    }
}
