//! Which programs of an object form entry/exit pairs, and the verdict on
//! each: the input of `bpfjet trace --explain` and of its `"fused"` report.
//!
//! A pair is an entry and an exit program attached to the same function:
//! `uprobe/PATH:SYMBOL` (at the symbol itself, offset 0) with
//! `uretprobe/PATH:SYMBOL`, or `tracepoint/syscalls/sys_enter_X` with
//! `tracepoint/syscalls/sys_exit_X`. Every entry is paired with every exit
//! of its function; each pair is analysed with all the other programs of the
//! object as third parties, so a map a third program touches stays a map.

use crate::pair::{analyse_pair, PairReport};
use crate::summary::{summarise, ProgramSummary};
use bpfjet_obj::{Object, ProbeFlavor, ProbeTarget, ProgKind};
use std::collections::BTreeMap;

/// Every pair of the object and the programs that were not paired.
#[derive(Clone, Debug, Default)]
pub struct FusionPlan {
    pub pairs: Vec<PairReport>,
    /// One line per program that has no partner or cannot be paired, and why.
    pub unpaired: Vec<String>,
}

impl FusionPlan {
    /// `--explain`: every pair's findings, then the programs left alone.
    pub fn explain(&self) -> Vec<String> {
        let mut out: Vec<String> = self.pairs.iter().flat_map(PairReport::explain).collect();
        out.extend(self.unpaired.iter().cloned());
        out
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Entry,
    Exit,
}

/// The function a program is attached to and on which side, or why it is
/// not part of a pair.
fn attach_point(kind: &ProgKind) -> Result<(String, Side), String> {
    match kind {
        ProgKind::Probe(probe) => {
            let ProbeTarget::User {
                path,
                symbol,
                offset,
            } = &probe.target
            else {
                return Err("not a PATH:SYMBOL user probe".into());
            };
            if symbol.is_empty() {
                return Err("a raw file offset has no function".into());
            }
            let side = match probe.flavor {
                ProbeFlavor::Uprobe if *offset == 0 => Side::Entry,
                ProbeFlavor::Uprobe => {
                    return Err(format!(
                        "attached inside {symbol} (+{offset}), not at its entry"
                    ))
                }
                ProbeFlavor::Uretprobe => Side::Exit,
                f => return Err(format!("{f:?} has no entry/exit partner")),
            };
            Ok((format!("{path}:{symbol}"), side))
        }
        ProgKind::Tracepoint { category, name } if category == "syscalls" => {
            if let Some(sys) = name.strip_prefix("sys_enter_") {
                Ok((format!("syscall {sys}"), Side::Entry))
            } else if let Some(sys) = name.strip_prefix("sys_exit_") {
                Ok((format!("syscall {sys}"), Side::Exit))
            } else {
                Err(format!(
                    "tracepoint syscalls/{name} is neither an entry nor an exit"
                ))
            }
        }
        ProgKind::RawTracepoint { name } => Err(format!(
            "raw_tracepoint/{name} runs for every system call; only per-call \
             sys_enter_X/sys_exit_X tracepoints are paired"
        )),
        _ => Err("not an entry or exit tracing program".into()),
    }
}

/// Pairs the programs of `obj` and analyses each pair. `exposed` names
/// maps visible outside the programs (see [`analyse_pair`]).
pub fn plan(obj: &Object, exposed: &dyn Fn(&bpfjet_maps::MapSpec) -> Option<String>) -> FusionPlan {
    let mut summaries: Vec<(&str, Option<ProgramSummary>)> = Vec::new();
    let mut plan = FusionPlan::default();
    for p in &obj.programs {
        match summarise(p, &obj.maps) {
            Ok(s) => summaries.push((p.name.as_str(), Some(s))),
            Err(e) => {
                summaries.push((p.name.as_str(), None));
                plan.unpaired.push(format!("{}: not analysed: {e}", p.name));
            }
        }
    }
    // Function -> (entries, exits), by program index, in object order.
    let mut functions: BTreeMap<String, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, p) in obj.programs.iter().enumerate() {
        match attach_point(&p.kind) {
            Ok((f, side)) => {
                let e = functions.entry(f).or_default();
                if side == Side::Entry {
                    e.0.push(i);
                } else {
                    e.1.push(i);
                }
            }
            Err(why) => plan.unpaired.push(format!("{}: not paired: {why}", p.name)),
        }
    }
    for (function, (entries, exits)) in &functions {
        if entries.is_empty() || exits.is_empty() {
            for &i in entries.iter().chain(exits) {
                plan.unpaired.push(format!(
                    "{}: not paired: no {} program on {function}",
                    obj.programs[i].name,
                    if entries.is_empty() { "entry" } else { "exit" }
                ));
            }
            continue;
        }
        for &e in entries {
            for &x in exits {
                let (Some(es), Some(xs)) = (&summaries[e].1, &summaries[x].1) else {
                    continue;
                };
                // A program that could not be analysed may use any map:
                // no pair sharing an object with one is fused.
                if let Some((name, _)) = summaries.iter().find(|(_, s)| s.is_none()) {
                    plan.pairs.push(PairReport {
                        entry: summaries[e].0.to_string(),
                        exit: summaries[x].0.to_string(),
                        internalised: Vec::new(),
                        refused: Vec::new(),
                        pair_refusal: Some(format!(
                            "program {name} could not be analysed, so any map may be shared with it"
                        )),
                    });
                    continue;
                }
                let others: Vec<(&str, &ProgramSummary)> = summaries
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != e && *i != x)
                    .filter_map(|(_, (n, s))| s.as_ref().map(|s| (*n, s)))
                    .collect();
                plan.pairs.push(analyse_pair(
                    &obj.maps,
                    (summaries[e].0, es),
                    (summaries[x].0, xs),
                    &others,
                    exposed,
                ));
            }
        }
    }
    plan
}
