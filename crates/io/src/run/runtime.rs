//! The runtime's per-worker runner as a [`FrameProgram`].

use std::sync::Arc;

use bpfjet_runtime::tracing::xdp_events::{EventSite, XdpEvents};
use bpfjet_runtime::worker::{FrameVerdict, RedirectTo, RunFrameError, XdpRunner};

use super::{EgressCopy, FrameMut, FrameProgram, ProgramFault, RedirectTarget, Verdict};

impl FrameProgram for XdpRunner {
    #[inline]
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        match XdpRunner::run(self, frame.buf, frame.data_start, frame.data_end) {
            Ok(v) if v.copies() => egress(self, frame, v),
            v => verdict(frame, v),
        }
    }

    fn take_copies(&mut self, out: &mut Vec<EgressCopy>) -> u32 {
        XdpRunner::take_copies(self, out)
    }

    fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        XdpRunner::recycle(self, sent);
    }

    fn begin_batch(&mut self) {
        XdpRunner::begin_batch(self);
    }

    fn end_batch(&mut self) {
        XdpRunner::end_batch(self);
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

/// A frame whose verdict [`FrameVerdict::copies`]: the runner makes them,
/// the verdict says how many. Out of line: every other frame skips it.
#[inline(never)]
fn egress(
    runner: &mut XdpRunner,
    frame: &mut FrameMut<'_>,
    v: FrameVerdict,
) -> Result<Verdict, ProgramFault> {
    let made = runner.egress(frame.buf, &v);
    let mut out = verdict(frame, made.map(|()| v))?;
    out.set_copies(runner.pending_copies());
    Ok(out)
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
        let programs = self.events.get();
        // fentry/fexit programs on this program: the frame before and after.
        let traced = programs.filter(|p| p.traces(&self.site));
        let base = frame.buf.as_ptr() as u64;
        if let Some(p) = traced {
            p.entry(
                &mut self.site,
                base,
                base + frame.data_start as u64,
                base + frame.data_end as u64,
            );
        }
        let v = self.runner.run(frame.buf, frame.data_start, frame.data_end);
        if let (Some(p), Ok(v)) = (traced, &v) {
            p.exit(
                &mut self.site,
                v.action,
                base,
                base + v.data_start as u64,
                base + v.data_end as u64,
            );
        }
        if let Some(programs) = programs {
            match &v {
                Ok(v) => programs.fire(&mut self.site, Ok(v)),
                // A fault stops the program: aborted, as the data plane
                // counts it. Frames the program never ran on fire nothing.
                Err(RunFrameError::Fault(_)) => programs.fire(&mut self.site, Err(())),
                Err(_) => {}
            }
        }
        // Entry programs and copies after the redirect's events, as the
        // kernel runs them when it flushes the device's queue.
        match v {
            Ok(v) if v.copies() => egress(&mut self.runner, frame, v),
            v => verdict(frame, v),
        }
    }

    fn take_copies(&mut self, out: &mut Vec<EgressCopy>) -> u32 {
        self.runner.take_copies(out)
    }

    fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        self.runner.recycle(sent);
    }

    fn begin_batch(&mut self) {
        self.runner.begin_batch();
    }

    fn end_batch(&mut self) {
        self.runner.end_batch();
    }
}

fn redirect_target(to: RedirectTo) -> RedirectTarget {
    match to {
        RedirectTo::Ifindex(i) | RedirectTo::EntryProgram { ifindex: i, .. } => {
            RedirectTarget::Ifindex(i)
        }
        RedirectTo::Xsk(q) => RedirectTarget::XskQueue(q),
        RedirectTo::Cpu(c) => RedirectTarget::Cpu(c),
        RedirectTo::Broadcast { .. } => RedirectTarget::Broadcast,
    }
}
