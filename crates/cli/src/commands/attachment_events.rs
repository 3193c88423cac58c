//! The XDP tracepoints of a data plane (`bpfjet serve-attachment`): the
//! `tp_btf` programs the instance's control planes linked to
//! `xdp_exception`, `xdp_redirect` and `xdp_redirect_err` (xdp-monitor's
//! and xdp-bench's kind), and the `tracepoint/xdp/*` programs linked
//! through perf events (bpftrace's `tracepoint:xdp:*`), compiled with the JIT on the instance's maps and run by
//! every worker on the outcomes that fire them
//! (`bpfjet_runtime::tracing::xdp_events`).
//!
//! The instance's link generation word moves whenever a probe link is
//! made or goes; the data plane then loads the set again, and workers take
//! it at their next packet. A program whose link went stops at once (its
//! record is checked on the generation's move, as in traced processes).

use anyhow::{anyhow, Result};
use bpfjet_runtime::tracing::xdp_events::{EventLink, EventPrograms, XdpEvents};
use bpfjet_runtime::tracing::TracingOptions;
use bpfjet_server::Namespace;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The event programs of one data plane, reloaded when the links change.
pub struct EventWatch {
    events: Arc<XdpEvents>,
    generation: PathBuf,
    seen: Option<u64>,
    /// The perf output events each PERF_EVENT_ARRAY of the programs held
    /// when they were loaded (a perf buffer reader fills the array after
    /// attaching, as xdpdump does): a change loads them again, bound to
    /// the reader's rings.
    perf_bound: Vec<(u32, BTreeMap<u32, String>)>,
    /// `EVENT: PROGRAM@LINK` of the programs running now.
    pub running: Vec<String>,
}

impl EventWatch {
    pub fn new(ns: &Namespace) -> EventWatch {
        EventWatch {
            events: Arc::new(XdpEvents::new()),
            generation: bpfjet_server::links_generation(ns),
            seen: None,
            perf_bound: Vec::new(),
            running: Vec::new(),
        }
    }

    pub fn events(&self) -> &Arc<XdpEvents> {
        &self.events
    }

    /// Runs of the event programs a fault stopped, and the last reason.
    pub fn faults(&self) -> (u64, Option<String>) {
        self.events.get().map_or((0, None), |p| p.object().faults())
    }

    /// Loads the instance's event programs again if its links changed
    /// since the last call; an error names what could not be loaded (the
    /// events then run nothing).
    pub fn refresh(&mut self, ns: &Namespace) -> Result<()> {
        let now = std::fs::read(&self.generation)
            .ok()
            .and_then(|b| {
                b.get(..8)
                    .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            })
            .unwrap_or(0);
        let rebound = self
            .perf_bound
            .iter()
            .any(|(id, bound)| bpfjet_server::perf_bindings(ns, *id) != *bound);
        if self.seen == Some(now) && !rebound {
            return Ok(());
        }
        self.seen = Some(now);
        match load(ns) {
            Ok(Some((programs, running, perf_bound))) => {
                self.events.publish(Some(programs));
                self.running = running;
                self.perf_bound = perf_bound;
                Ok(())
            }
            Ok(None) => {
                self.events.publish(None);
                self.running.clear();
                self.perf_bound.clear();
                Ok(())
            }
            Err(e) => {
                self.events.publish(None);
                self.running.clear();
                self.perf_bound.clear();
                Err(e)
            }
        }
    }
}

/// The programs, their `SECTION: PROGRAM@LINK` lines, and the perf
/// bindings their PERF_EVENT_ARRAYs were bound to.
type Loaded = (
    EventPrograms,
    Vec<String>,
    Vec<(u32, BTreeMap<u32, String>)>,
);

fn load(ns: &Namespace) -> Result<Option<Loaded>> {
    let traced = bpfjet_server::xdp_event_object(ns).map_err(|e| anyhow!(e))?;
    if traced.programs.is_empty() {
        return Ok(None);
    }
    // A PERF_EVENT_ARRAY's output goes to the control plane's readers.
    let perf_bound = traced
        .maps
        .iter()
        .filter(|m| m.map_type() == bpfjet_maps::MapType::PerfEventArray)
        .map(|m| (m.id(), bpfjet_server::perf_bindings(ns, m.id())))
        .collect();
    bpfjet_server::bind_perf_arrays(ns, &traced.maps).map_err(|e| anyhow!(e))?;
    let opts = TracingOptions {
        control_plane: Some((ns.name().to_string(), traced.maps.clone())),
        ..TracingOptions::default()
    };
    let mut tracing =
        bpfjet_jit::load_tracing(&traced.object, &opts, &bpfjet_jit::JitOptions::default())
            .map_err(|e| anyhow!("tp_btf programs: {e}"))?;
    let mut running = Vec::new();
    for p in &traced.programs {
        if let Some(id) = tracing.program_id(&p.name) {
            tracing.set_cookie(id, p.cookie);
            tracing.set_link(id, &p.link_record);
            running.push(format!("{}: {}", p.section, p.name));
        }
    }
    tracing
        .watch_links(&traced.links_generation)
        .map_err(|e| anyhow!("{}: {e}", traced.links_generation.display()))?;
    let links = |name: &str| {
        traced
            .programs
            .iter()
            .find(|p| p.name == name)
            .map(|p| EventLink {
                tracefs: p.tracefs,
                target_prog: p.target_prog,
            })
    };
    let programs = EventPrograms::new(tracing, links).map_err(|e| anyhow!(e))?;
    Ok(Some((programs, running, perf_bound)))
}
