//! The runtime's per-worker runner as a [`FrameProgram`].

use bpfjet_runtime::worker::{RedirectTo, XdpRunner};

use super::{FrameMut, FrameProgram, ProgramFault, RedirectTarget, Verdict};

impl FrameProgram for XdpRunner {
    #[inline]
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        let v = XdpRunner::run(self, frame.buf, frame.data_start, frame.data_end)
            .map_err(|e| ProgramFault(e.to_string()))?;
        frame.data_start = v.data_start;
        frame.data_end = v.data_end;
        Ok(Verdict::from_retval(
            u64::from(v.action),
            v.redirect.map(redirect_target),
        ))
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
