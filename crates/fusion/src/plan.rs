//! Which programs of an object form entry/exit pairs, and the verdict on
//! each: the input of `bpfjet trace --explain` and of its `"fused"` report.
//!
//! A pair is an entry and an exit program attached to the same function:
//! `uprobe/PATH:SYMBOL` (at the symbol itself, offset 0) with
//! `uretprobe/PATH:SYMBOL`, or `tracepoint/syscalls/sys_enter_X` with
//! `tracepoint/syscalls/sys_exit_X`. Every entry is paired with every exit
//! of its function; each pair is analysed with all the other programs of the
//! object as third parties, so a map a third program touches stays a map.

use crate::pair::{analyse_pair_sharing, PairReport, Refusal};
use crate::summary::{summarise, MapOp, ProgramSummary, ThreadKey};
use bpfjet_obj::{Object, ProbeFlavor, ProbeTarget, ProgKind};
use std::collections::BTreeMap;

/// Every pair of the object and the programs that were not paired.
#[derive(Clone, Debug, Default)]
pub struct FusionPlan {
    pub pairs: Vec<PairReport>,
    /// One line per program that has no partner or cannot be paired, and why.
    pub unpaired: Vec<String>,
    /// The maps every pair that uses them internalises: what the runtime
    /// keeps per thread, with every instruction of every program that
    /// touches them.
    pub internal_maps: Vec<InternalMap>,
}

/// A map kept per thread instead of in the map: every access of every
/// program is a lookup, update or delete with the current thread's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalMap {
    /// Index in `Object::maps`.
    pub map: usize,
    pub name: String,
    pub key: ThreadKey,
    /// Every use: (program name, instruction slot, operation).
    pub sites: Vec<(String, usize, MapOp)>,
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
        // A kernel probe on a system call's entry point runs at the same
        // event as `sys_enter_NAME` (its return probe as `sys_exit_NAME`):
        // `ksyscall/NAME`, `kprobe/__x64_sys_NAME` (bpfjet_probe::ksyscall).
        ProgKind::Probe(probe) if !probe.flavor.is_user() => {
            let entry = probe.syscall_entry()?;
            let side = if entry.ret { Side::Exit } else { Side::Entry };
            Ok((format!("syscall {}", entry.syscall), side))
        }
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
        ProgKind::Tracepoint { category, name } if category == "raw_syscalls" => Err(format!(
            "tracepoint/raw_syscalls/{name} runs for every system call; only per-call \
             sys_enter_X/sys_exit_X tracepoints are paired"
        )),
        _ => Err("not an entry or exit tracing program".into()),
    }
}

/// Every (entry, exit) pair of `obj` by program name, analysed or not, in
/// the order [`plan`] reports them.
pub fn pairs(obj: &Object) -> Vec<(String, String)> {
    let mut functions: BTreeMap<String, (Vec<&str>, Vec<&str>)> = BTreeMap::new();
    for p in &obj.programs {
        if let Ok((f, side)) = attach_point(&p.kind) {
            let e = functions.entry(f).or_default();
            if side == Side::Entry {
                e.0.push(&p.name);
            } else {
                e.1.push(&p.name);
            }
        }
    }
    functions
        .values()
        .flat_map(|(entries, exits)| {
            entries
                .iter()
                .flat_map(move |e| exits.iter().map(move |x| (e.to_string(), x.to_string())))
        })
        .collect()
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
    // Programs that are the entry or exit of some pair: their thread-keyed
    // uses of a map do not stop another pair from internalising it (the
    // consistency pass below then requires their own pair to agree).
    let paired: Vec<bool> = (0..obj.programs.len())
        .map(|i| {
            functions.values().any(|(en, ex)| {
                !en.is_empty() && !ex.is_empty() && (en.contains(&i) || ex.contains(&i))
            })
        })
        .collect();
    let shared = |name: &str, m: usize| {
        summaries.iter().enumerate().any(|(i, (n, s))| {
            *n == name
                && paired[i]
                && s.as_ref().is_some_and(|s| {
                    s.uses_of(m).iter().all(|u| {
                        !matches!(u.op, MapOp::Other(_))
                            && u.key.is_some_and(|k| k != ThreadKey::Tgid)
                    })
                })
        })
    };
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
                let refuse = |why: String| PairReport {
                    entry: summaries[e].0.to_string(),
                    exit: summaries[x].0.to_string(),
                    internalised: Vec::new(),
                    refused: Vec::new(),
                    pair_refusal: Some(why),
                };
                // A successful exec returns in the new image, where this
                // image's per-thread values are gone: execsnoop's hand-off
                // must stay in the map the new image's exit reads.
                if let Some(call) = IMAGE_REPLACING
                    .iter()
                    .find(|c| function.strip_prefix("syscall ") == Some(**c))
                {
                    plan.pairs.push(refuse(format!(
                        "the exit of a successful {call} runs in the new process image, \
                         which a value kept per thread in this image does not reach"
                    )));
                    continue;
                }
                // A program that could not be analysed may use any map:
                // no pair sharing an object with one is fused.
                if let Some((name, _)) = summaries.iter().find(|(_, s)| s.is_none()) {
                    plan.pairs.push(refuse(format!(
                        "program {name} could not be analysed, so any map may be shared with it"
                    )));
                    continue;
                }
                let others: Vec<(&str, &ProgramSummary)> = summaries
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != e && *i != x)
                    .filter_map(|(_, (n, s))| s.as_ref().map(|s| (*n, s)))
                    .collect();
                plan.pairs.push(analyse_pair_sharing(
                    &obj.maps,
                    (summaries[e].0, es),
                    (summaries[x].0, xs),
                    &others,
                    exposed,
                    &shared,
                ));
            }
        }
    }
    agree_across_pairs(&mut plan, &summaries);
    plan.internal_maps = internal_maps(&plan, obj, &summaries);
    plan
}

/// System calls whose successful return is in another process image.
const IMAGE_REPLACING: [&str; 2] = ["execve", "execveat"];

/// A map internalised by one pair but also used by a program outside any
/// pair that internalises it, or by pairs that disagree (one refuses it,
/// another keys it differently), stays a map everywhere.
fn agree_across_pairs(plan: &mut FusionPlan, summaries: &[(&str, Option<ProgramSummary>)]) {
    loop {
        let mut demote: Option<(usize, String)> = None;
        'maps: for p in &plan.pairs {
            for h in &p.internalised {
                let m = h.map;
                for (name, s) in summaries {
                    let Some(s) = s else { continue };
                    if s.uses_of(m).is_empty() {
                        continue;
                    }
                    let agrees = plan.pairs.iter().any(|q| {
                        (q.entry == *name || q.exit == *name)
                            && q.internalised.iter().any(|g| g.map == m && g.key == h.key)
                    });
                    if !agrees {
                        demote = Some((
                            m,
                            format!(
                                "program {name} also uses it and no pair of {name} \
                                 internalises it with the same key"
                            ),
                        ));
                        break 'maps;
                    }
                }
            }
        }
        let Some((m, why)) = demote else { return };
        for p in &mut plan.pairs {
            if let Some(i) = p.internalised.iter().position(|h| h.map == m) {
                let h = p.internalised.remove(i);
                p.refused.push(Refusal {
                    map: h.name,
                    why: why.clone(),
                });
            }
        }
    }
}

fn internal_maps(
    plan: &FusionPlan,
    obj: &Object,
    summaries: &[(&str, Option<ProgramSummary>)],
) -> Vec<InternalMap> {
    let mut out: Vec<InternalMap> = Vec::new();
    for h in plan.pairs.iter().flat_map(|p| &p.internalised) {
        if out.iter().any(|i| i.map == h.map) {
            continue;
        }
        let sites = summaries
            .iter()
            .filter_map(|(n, s)| s.as_ref().map(|s| (n, s)))
            .flat_map(|(n, s)| {
                s.uses_of(h.map)
                    .iter()
                    .map(|u| (n.to_string(), u.slot, u.op.clone()))
            })
            .collect();
        out.push(InternalMap {
            map: h.map,
            name: obj.maps[h.map].name.clone(),
            key: h.key,
            sites,
        });
    }
    out
}
