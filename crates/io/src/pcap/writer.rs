//! Buffered pcap writer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::format::{PcapHeader, TimestampResolution, MAX_RECORD_LEN, RECORD_HEADER_LEN};
use crate::{IoError, PacketMeta, PacketSink};

/// Write buffer of [`PcapWriter::create`]: one syscall per ~1000 small
/// packets.
const FILE_BUFFER_LEN: usize = 64 * 1024;

/// How a [`PcapWriter`] stamps its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapWriterOptions {
    /// Nanoseconds by default: packet timestamps are nanoseconds, and a
    /// microsecond file would lose the rest. Choose microseconds for old
    /// tools that only know the original magic.
    pub resolution: TimestampResolution,
    /// Packets longer than this are cut to it, keeping their wire length
    /// in the record, as libpcap does.
    pub snaplen: u32,
}

impl Default for PcapWriterOptions {
    fn default() -> Self {
        PcapWriterOptions {
            resolution: TimestampResolution::Nanos,
            snaplen: MAX_RECORD_LEN,
        }
    }
}

/// Writes Ethernet packets as a classic pcap stream, little-endian.
///
/// Output is buffered by `W` (a `BufWriter` for [`PcapWriter::create`]); call
/// [`PacketSink::flush`] or [`PcapWriter::into_inner`] to be sure it reached
/// the file: dropping a `BufWriter` swallows write errors.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    inner: W,
    options: PcapWriterOptions,
    packets: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>, options: PcapWriterOptions) -> Result<Self, IoError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| IoError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        PcapWriter::new(BufWriter::with_capacity(FILE_BUFFER_LEN, file), options)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `inner`.
    pub fn new(mut inner: W, options: PcapWriterOptions) -> Result<Self, IoError> {
        // A snaplen of 0 would make every record empty; treat it as "no limit".
        let options = PcapWriterOptions {
            snaplen: if options.snaplen == 0 {
                MAX_RECORD_LEN
            } else {
                options.snaplen
            },
            ..options
        };
        let header = PcapHeader::encode_le(options.resolution, options.snaplen);
        inner
            .write_all(&header)
            .map_err(|source| IoError::Write { source })?;
        Ok(PcapWriter {
            inner,
            options,
            packets: 0,
        })
    }

    /// Appends one record. The record's wire length is the larger of
    /// `meta.orig_len` and the packet's length, so a packet that came from a
    /// truncated capture keeps its original length; a run loop whose program
    /// changed the packet's length should update `orig_len` to match.
    pub fn write_packet(&mut self, pkt: &[u8], meta: &PacketMeta) -> Result<(), IoError> {
        let len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        let caplen = len.min(self.options.snaplen);
        let wire_len = meta.orig_len.max(len);
        // pcap seconds are 32-bit unsigned: good until 2106; saturate after.
        let secs = u32::try_from(meta.timestamp_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let frac = (meta.timestamp_ns % 1_000_000_000) / self.options.resolution.nanos_per_unit();

        let mut rec = [0u8; RECORD_HEADER_LEN];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[4..8].copy_from_slice(&(frac as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&caplen.to_le_bytes());
        rec[12..16].copy_from_slice(&wire_len.to_le_bytes());
        self.inner
            .write_all(&rec)
            .and_then(|()| self.inner.write_all(&pkt[..caplen as usize]))
            .map_err(|source| IoError::Write { source })?;
        self.packets += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn packets_written(&self) -> u64 {
        self.packets
    }

    pub fn options(&self) -> PcapWriterOptions {
        self.options
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W, IoError> {
        self.inner
            .flush()
            .map_err(|source| IoError::Write { source })?;
        Ok(self.inner)
    }
}

impl<W: Write> PacketSink for PcapWriter<W> {
    fn write(&mut self, pkt: &[u8], meta: &PacketMeta) -> Result<(), IoError> {
        self.write_packet(pkt, meta)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.inner
            .flush()
            .map_err(|source| IoError::Write { source })
    }
}
