//! Where packets go after the program: a sink per route.

use std::sync::{Arc, Mutex, PoisonError};

use super::{Egress, EgressCopy, RedirectTarget, Verdict};
use crate::{IoError, OutputRoute, PacketBatch, PcapSplitSink};

/// Takes a processed batch and its verdicts (`verdicts[i]` belongs to
/// `batch.packets()[i]`). A frame whose verdict has `copies: Some(n)`
/// leaves as the next `n` of `copies` (in packet order), not as itself.
pub trait Output {
    /// Consumes the batch; returns how many packets that should have left
    /// (TX, PASS, REDIRECT) could not be delivered and were dropped.
    fn emit(
        &mut self,
        batch: &PacketBatch,
        verdicts: &[Verdict],
        copies: &[EgressCopy],
    ) -> Result<u64, IoError>;

    /// Delivers anything buffered.
    fn finish(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}

impl<O: Output + ?Sized> Output for Box<O> {
    fn emit(
        &mut self,
        batch: &PacketBatch,
        verdicts: &[Verdict],
        copies: &[EgressCopy],
    ) -> Result<u64, IoError> {
        (**self).emit(batch, verdicts, copies)
    }
    fn finish(&mut self) -> Result<(), IoError> {
        (**self).finish()
    }
}

/// Counts and forgets: the generator's "no I/O at all" mode.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullOutput;

impl Output for NullOutput {
    fn emit(&mut self, _: &PacketBatch, _: &[Verdict], _: &[EgressCopy]) -> Result<u64, IoError> {
        Ok(0)
    }
}

/// `--out DIR`: one pcap per action (and per redirect target when the sink
/// is configured so), shared by every worker of a pool. The lock is taken
/// once per batch.
#[derive(Debug, Clone)]
pub struct SplitOutput {
    sink: Arc<Mutex<PcapSplitSink>>,
}

impl SplitOutput {
    pub fn new(sink: PcapSplitSink) -> SplitOutput {
        SplitOutput {
            sink: Arc::new(Mutex::new(sink)),
        }
    }

    /// The sink, for its file list after the run.
    pub fn sink(&self) -> Arc<Mutex<PcapSplitSink>> {
        Arc::clone(&self.sink)
    }
}

impl Output for SplitOutput {
    fn emit(
        &mut self,
        batch: &PacketBatch,
        verdicts: &[Verdict],
        copies: &[EgressCopy],
    ) -> Result<u64, IoError> {
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next_copy = 0;
        for (pkt, verdict) in batch.packets().iter().zip(verdicts) {
            if let Some(n) = verdict.copies() {
                // Each copy goes to its interface's file; none for a
                // frame every entry program dropped.
                let end = (next_copy + n as usize).min(copies.len());
                for c in &copies[next_copy..end] {
                    match c.to {
                        Egress::Ifindex(i) => sink.write_redirect(i, &c.data, pkt.meta())?,
                        // A CPUMAP redirect reaches the stack: pass.pcap.
                        Egress::Stack => sink.write(OutputRoute::Pass, &c.data, pkt.meta())?,
                    };
                }
                next_copy = end;
                continue;
            }
            match (verdict.route, verdict.redirect) {
                (OutputRoute::Redirect, Some(RedirectTarget::Ifindex(ifindex))) => {
                    sink.write_redirect(ifindex, pkt.data(), pkt.meta())?;
                }
                (route, _) => {
                    sink.write(route, pkt.data(), pkt.meta())?;
                }
            }
        }
        Ok(0)
    }

    fn finish(&mut self) -> Result<(), IoError> {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush()
    }
}
