//! The seam between the run loop and an execution engine.

use std::fmt;

use super::{EgressCopy, Verdict};
use crate::{PacketBuf, PacketMeta};

/// One frame handed to a program: the whole buffer (headroom, data,
/// tailroom) and where the packet lies in it. The program may move
/// `data_start`/`data_end` (`bpf_xdp_adjust_head`/`_tail`) within `buf`;
/// the runner writes the new bounds back.
#[derive(Debug)]
pub struct FrameMut<'a> {
    pub buf: &'a mut [u8],
    pub data_start: usize,
    pub data_end: usize,
    /// `xdp_md.ingress_ifindex` / `rx_queue_index`.
    pub ingress_ifindex: u32,
    pub rx_queue: u32,
}

impl<'a> FrameMut<'a> {
    /// A view of `pkt` for one run; see [`FrameMut::finish`].
    pub fn of(pkt: &'a mut PacketBuf) -> FrameMut<'a> {
        let (start, len) = (pkt.data_offset(), pkt.len());
        let PacketMeta {
            ingress_ifindex,
            rx_queue,
            ..
        } = *pkt.meta();
        FrameMut {
            buf: pkt.frame_mut(),
            data_start: start,
            data_end: start + len,
            ingress_ifindex,
            rx_queue,
        }
    }
}

/// A program fault: the engine stopped the program (an out-of-bounds access
/// in bounds-checked mode, an unknown helper argument, ...). The run loop
/// counts the packet as `XDP_ABORTED`, as the kernel does with a program
/// exception, and keeps the first message for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramFault(pub String);

impl fmt::Display for ProgramFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProgramFault {}

/// Runs an XDP program on frames, in place. One value per worker thread:
/// it owns the engine's per-run scratch state and its CPU slot.
pub trait FrameProgram {
    /// Runs the program on `frame`, updating `frame.data_start`/`data_end`
    /// when the program moved them.
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault>;

    /// Called by the run loops before every batch (and on idle rounds),
    /// never inside one: where a hot replace swaps the program
    /// ([`SwitchableProgram`](super::SwitchableProgram)).
    fn at_batch_boundary(&mut self) {}

    /// Called by the run loops before a batch's first run and after its
    /// last: a runner whose program has timers holds its CPU slot for the
    /// batch (`bpfjet_runtime::cpu_exclusion`), once instead of per run.
    fn begin_batch(&mut self) {}

    fn end_batch(&mut self) {}

    /// The copies of the last frame whose verdict has
    /// [`Verdict::copies`], appended to `out`; returns how many.
    fn take_copies(&mut self, _out: &mut Vec<EgressCopy>) -> u32 {
        0
    }

    /// Copies taken with [`FrameProgram::take_copies`] and sent, given
    /// back for their buffers; `sent` ends empty.
    fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        sent.clear();
    }

    /// Runs the program on a batch buffer and moves its data window.
    fn run_packet(&mut self, pkt: &mut PacketBuf) -> Result<Verdict, ProgramFault> {
        let mut frame = FrameMut::of(pkt);
        let verdict = self.run(&mut frame)?;
        let (start, end) = (frame.data_start, frame.data_end);
        pkt.set_data_range(start, end)
            .map_err(|e| ProgramFault(format!("engine returned a bad data range: {e}")))?;
        Ok(verdict)
    }
}

impl<P: FrameProgram + ?Sized> FrameProgram for Box<P> {
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        (**self).run(frame)
    }
    fn at_batch_boundary(&mut self) {
        (**self).at_batch_boundary();
    }

    fn begin_batch(&mut self) {
        (**self).begin_batch();
    }

    fn end_batch(&mut self) {
        (**self).end_batch();
    }

    fn take_copies(&mut self, out: &mut Vec<EgressCopy>) -> u32 {
        (**self).take_copies(out)
    }

    fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        (**self).recycle(sent);
    }
}

/// A closure as a program (tests, fixed-verdict benchmarks).
pub struct FnProgram<F>(pub F);

impl<F> FrameProgram for FnProgram<F>
where
    F: FnMut(&mut FrameMut<'_>) -> Result<Verdict, ProgramFault>,
{
    fn run(&mut self, frame: &mut FrameMut<'_>) -> Result<Verdict, ProgramFault> {
        (self.0)(frame)
    }
}
