//! The consuming side of the data plane.

use crate::{IoError, PacketMeta};

/// Something that takes packets after the program ran: a pcap file, later a
/// TX ring.
///
/// Sinks may buffer; nothing is guaranteed to have reached its destination
/// until [`PacketSink::flush`] returned `Ok`.
pub trait PacketSink {
    fn write(&mut self, pkt: &[u8], meta: &PacketMeta) -> Result<(), IoError>;
    fn flush(&mut self) -> Result<(), IoError>;
}

impl<S: PacketSink + ?Sized> PacketSink for &mut S {
    fn write(&mut self, pkt: &[u8], meta: &PacketMeta) -> Result<(), IoError> {
        (**self).write(pkt, meta)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        (**self).flush()
    }
}

impl<S: PacketSink + ?Sized> PacketSink for Box<S> {
    fn write(&mut self, pkt: &[u8], meta: &PacketMeta) -> Result<(), IoError> {
        (**self).write(pkt, meta)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        (**self).flush()
    }
}
