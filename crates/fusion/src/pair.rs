//! Which maps of an entry/exit pair are pure hand-offs, and why the others
//! are not.

use crate::summary::{MapOp, MapUse, ProgramSummary, ThreadKey};
use bpfjet_maps::spec::Pinning;
use bpfjet_maps::{MapSpec, MapType};

/// A map the pair may keep in the thread instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// Index in `Object::maps`.
    pub map: usize,
    pub name: String,
    pub key: ThreadKey,
}

/// A map both programs use that stays a map, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub map: String,
    pub why: String,
}

/// The verdict on one entry/exit pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairReport {
    pub entry: String,
    pub exit: String,
    pub internalised: Vec<Handoff>,
    pub refused: Vec<Refusal>,
    /// Set when nothing of the pair may be fused, whatever the maps.
    pub pair_refusal: Option<String>,
}

impl PairReport {
    /// One line per finding, for `--explain`.
    pub fn explain(&self) -> Vec<String> {
        let mut out = Vec::new();
        let pair = format!("{} + {}", self.entry, self.exit);
        if let Some(why) = &self.pair_refusal {
            out.push(format!("{pair}: not fused: {why}"));
            return out;
        }
        for h in &self.internalised {
            out.push(format!(
                "{pair}: map {} is a hand-off keyed by {}: internalised",
                h.name,
                h.key.describe()
            ));
        }
        for r in &self.refused {
            out.push(format!("{pair}: map {} stays a map: {}", r.map, r.why));
        }
        if self.internalised.is_empty() && self.refused.is_empty() {
            out.push(format!("{pair}: no map shared by the pair"));
        }
        out
    }
}

/// Decides, for each map both `entry` and `exit` use, whether it is a pure
/// hand-off between them. `others` are every other program that runs with
/// them (of any object of the deployment); `exposed` names maps visible
/// outside the programs (e.g. given to a control plane) and says how.
pub fn analyse_pair(
    maps: &[MapSpec],
    entry: (&str, &ProgramSummary),
    exit: (&str, &ProgramSummary),
    others: &[(&str, &ProgramSummary)],
    exposed: &dyn Fn(&MapSpec) -> Option<String>,
) -> PairReport {
    analyse_pair_sharing(maps, entry, exit, others, exposed, &|_, _| false)
}

/// [`analyse_pair`] where a third program's use of a map is tolerated when
/// `shared(program, map)` says so: the plan tolerates the programs of
/// *other pairs* that use the map only with the current thread's key (fsdist
/// and rw_tracer share one map between their read and write pairs), and then
/// checks that every such pair internalises the map too
/// ([`crate::plan::plan`]).
pub fn analyse_pair_sharing(
    maps: &[MapSpec],
    entry: (&str, &ProgramSummary),
    exit: (&str, &ProgramSummary),
    others: &[(&str, &ProgramSummary)],
    exposed: &dyn Fn(&MapSpec) -> Option<String>,
    shared: &dyn Fn(&str, usize) -> bool,
) -> PairReport {
    let mut report = PairReport {
        entry: entry.0.to_string(),
        exit: exit.0.to_string(),
        internalised: Vec::new(),
        refused: Vec::new(),
        pair_refusal: None,
    };
    for (name, s) in [entry, exit] {
        if s.tail_calls {
            report.pair_refusal = Some(format!(
                "{name} tail-calls, so what runs after it is not known"
            ));
            return report;
        }
    }
    for (&m, entry_uses) in &entry.1.uses {
        let exit_uses = exit.1.uses_of(m);
        if exit_uses.is_empty() {
            continue;
        }
        let Some(spec) = maps.get(m) else { continue };
        match handoff_key(spec, entry_uses, exit_uses, others, m, exposed, shared) {
            Ok(key) => report.internalised.push(Handoff {
                map: m,
                name: spec.name.clone(),
                key,
            }),
            Err(why) => report.refused.push(Refusal {
                map: spec.name.clone(),
                why,
            }),
        }
    }
    report
}

fn handoff_key(
    spec: &MapSpec,
    entry: &[MapUse],
    exit: &[MapUse],
    others: &[(&str, &ProgramSummary)],
    m: usize,
    exposed: &dyn Fn(&MapSpec) -> Option<String>,
    shared: &dyn Fn(&str, usize) -> bool,
) -> Result<ThreadKey, String> {
    match spec.map_type {
        MapType::Hash => {}
        MapType::LruHash => {
            return Err(
                "an LRU hash map: when it is full an update evicts some other thread's \
                 entry, which per-thread storage would not reproduce"
                    .into(),
            )
        }
        MapType::PercpuHash | MapType::LruPercpuHash => {
            return Err(
                "a per-CPU map: a thread that changes CPU between entry and exit \
                        misses its value, which fused code would not reproduce"
                    .into(),
            )
        }
        t => return Err(format!("a {t:?} map, not a hash map keyed by thread")),
    }
    for u in entry.iter().chain(exit) {
        if let MapOp::Other(what) = &u.op {
            return Err(format!("used otherwise at slot {}: {what}", u.slot));
        }
    }
    let mut key = None;
    key = entry_role(key, entry, "entry program")?;
    key = exit_role(key, exit, "exit program")?;
    let key = key.ok_or("no key")?;
    if key == ThreadKey::Tgid {
        return Err(format!(
            "its key is {}: threads of one process share the entry",
            key.describe()
        ));
    }
    for (name, s) in others {
        if !s.uses_of(m).is_empty() && !shared(name, m) {
            return Err(format!("program {name} also uses it"));
        }
    }
    if spec.pinning == Pinning::ByName {
        return Err("pinned by name: other loaders and control planes can open it".into());
    }
    if let Some(how) = exposed(spec) {
        return Err(how);
    }
    Ok(key)
}

/// An entry's uses: updates only, all with one key.
fn entry_role(
    mut key: Option<ThreadKey>,
    uses: &[MapUse],
    side: &str,
) -> Result<Option<ThreadKey>, String> {
    for u in uses {
        if !matches!(u.op, MapOp::Update { .. }) {
            return Err(format!(
                "the {side} also {} it (slot {})",
                verb(&u.op),
                u.slot
            ));
        }
        key = same_key(key, u, side)?;
    }
    Ok(key)
}

/// An exit's uses: lookups and deletes (both), all with one key.
fn exit_role(
    mut key: Option<ThreadKey>,
    uses: &[MapUse],
    side: &str,
) -> Result<Option<ThreadKey>, String> {
    let (mut looks_up, mut deletes) = (false, false);
    for u in uses {
        match u.op {
            MapOp::Lookup => looks_up = true,
            MapOp::Delete => deletes = true,
            _ => {
                return Err(format!(
                    "the {side} also {} it (slot {})",
                    verb(&u.op),
                    u.slot
                ))
            }
        }
        key = same_key(key, u, side)?;
    }
    if !looks_up {
        return Err(format!("the {side} does not look it up"));
    }
    if !deletes {
        return Err(format!(
            "the {side} does not delete it: it keeps state between calls"
        ));
    }
    Ok(key)
}

fn same_key(seen: Option<ThreadKey>, u: &MapUse, side: &str) -> Result<Option<ThreadKey>, String> {
    let Some(k) = u.key else {
        return Err(format!(
            "the {side}'s key at slot {} is not derived from the thread",
            u.slot
        ));
    };
    match seen {
        Some(s) if s != k => Err(format!(
            "the {side} uses another key at slot {} ({} vs {})",
            u.slot,
            k.describe(),
            s.describe()
        )),
        _ => Ok(Some(k)),
    }
}

fn verb(op: &MapOp) -> &'static str {
    match op {
        MapOp::Lookup => "looks up",
        MapOp::Update { .. } => "updates",
        MapOp::Delete => "deletes from",
        MapOp::Other(_) => "uses",
    }
}
