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
use bpfjet_runtime::tracing::xdp_events::{EventPrograms, XdpEvents};
use bpfjet_runtime::tracing::TracingOptions;
use bpfjet_server::Namespace;
use std::path::PathBuf;
use std::sync::Arc;

/// The event programs of one data plane, reloaded when the links change.
pub struct EventWatch {
    events: Arc<XdpEvents>,
    generation: PathBuf,
    seen: Option<u64>,
    /// `EVENT: PROGRAM@LINK` of the programs running now.
    pub running: Vec<String>,
}

impl EventWatch {
    pub fn new(ns: &Namespace) -> EventWatch {
        EventWatch {
            events: Arc::new(XdpEvents::new()),
            generation: bpfjet_server::links_generation(ns),
            seen: None,
            running: Vec::new(),
        }
    }

    pub fn events(&self) -> &Arc<XdpEvents> {
        &self.events
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
        if self.seen == Some(now) {
            return Ok(());
        }
        self.seen = Some(now);
        match load(ns) {
            Ok(Some((programs, running))) => {
                self.events.publish(Some(programs));
                self.running = running;
                Ok(())
            }
            Ok(None) => {
                self.events.publish(None);
                self.running.clear();
                Ok(())
            }
            Err(e) => {
                self.events.publish(None);
                self.running.clear();
                Err(e)
            }
        }
    }
}

fn load(ns: &Namespace) -> Result<Option<(EventPrograms, Vec<String>)>> {
    let traced = bpfjet_server::xdp_event_object(ns).map_err(|e| anyhow!(e))?;
    if traced.programs.is_empty() {
        return Ok(None);
    }
    // A PERF_EVENT_ARRAY's output goes to the control plane's readers.
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
    let tracefs = |name: &str| {
        traced
            .programs
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.tracefs)
    };
    let programs = EventPrograms::new(tracing, tracefs).map_err(|e| anyhow!(e))?;
    Ok(Some((programs, running)))
}
