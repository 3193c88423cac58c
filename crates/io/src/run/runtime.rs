//! The runtime's per-worker runner as a [`FrameProgram`].

use std::sync::Arc;

use bpfjet_runtime::tracing::xdp_events::{EventSite, XdpEvents};
use bpfjet_runtime::worker::{FrameVerdict, RedirectTo, RunFrameError, XdpRunner};

use super::{FrameMut, FrameProgram, ProgramFault, RedirectTarget, Verdict};

impl FrameProgram for XdpRunner {
    #[inline]
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        let v = XdpRunner::run(self, frame.buf, frame.data_start, frame.data_end);
        verdict(frame, v)
    }
}

#[inline]
fn verdict(
    frame: &mut FrameMut<'_>,
    v: Result<FrameVerdict, RunFrameError>,
) -> Result<Verdict, ProgramFault> {
    let v = v.map_err(|e| ProgramFault(e.to_string()))?;
    frame.data_start = v.data_start;
    frame.data_end = v.data_end;
    Ok(Verdict::from_retval(
        u64::from(v.action),
        v.redirect.map(redirect_target),
    ))
}

/// An [`XdpRunner`] whose outcomes fire the XDP tracepoints for the
/// `tp_btf` programs a control plane attached to them
/// (`bpfjet_runtime::tracing::xdp_events`): one atomic load per packet
/// while none is attached.
pub struct EventedRunner {
    runner: XdpRunner,
    events: Arc<XdpEvents>,
    site: EventSite,
}

impl EventedRunner {
    pub fn new(runner: XdpRunner, events: Arc<XdpEvents>, site: EventSite) -> EventedRunner {
        EventedRunner {
            runner,
            events,
            site,
        }
    }
}

impl FrameProgram for EventedRunner {
    #[inline]
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        let v = self.runner.run(frame.buf, frame.data_start, frame.data_end);
        if let Some(programs) = self.events.get() {
            match &v {
                Ok(v) => programs.fire(&mut self.site, Ok(v)),
                // A fault stops the program: aborted, as the data plane
                // counts it. Frames the program never ran on fire nothing.
                Err(RunFrameError::Fault(_)) => programs.fire(&mut self.site, Err(())),
                Err(_) => {}
            }
        }
        verdict(frame, v)
    }
}

fn redirect_target(to: RedirectTo) -> RedirectTarget {
    match to {
        RedirectTo::Ifindex(i) => RedirectTarget::Ifindex(i),
        RedirectTo::Xsk(q) => RedirectTarget::XskQueue(q),
        RedirectTo::Cpu(c) => RedirectTarget::Cpu(c),
        RedirectTo::Broadcast => RedirectTarget::Unknown,
    }
}
