//! The producing side of the data plane.

use crate::{IoError, PacketBatch};

/// Something that produces packets in batches: a pcap file, the generator,
/// later an AF_XDP socket.
///
/// `next_batch` clears `batch`, fills it from the front with up to
/// `batch.capacity()` packets and returns how many it wrote (equal to
/// `batch.len()`). `Ok(0)` means the source is exhausted; a source that
/// merely has nothing *yet* (a live interface) must block or poll rather
/// than return 0. Buffers are reused from batch to batch, so a steady-state
/// source allocates nothing per packet.
pub trait PacketSource {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError>;
}

impl<S: PacketSource + ?Sized> PacketSource for &mut S {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError> {
        (**self).next_batch(batch)
    }
}

impl<S: PacketSource + ?Sized> PacketSource for Box<S> {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError> {
        (**self).next_batch(batch)
    }
}
