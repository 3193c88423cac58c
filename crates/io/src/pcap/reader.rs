//! Streaming pcap reader: one record at a time, straight into XDP frames.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::format::{PcapHeader, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use crate::{IoError, PacketBatch, PacketBuf, PacketMeta, PacketSource};

/// Read-ahead of [`PcapReader::open`]: big enough that a read syscall
/// carries many small packets, small enough to stay in L2.
const FILE_BUFFER_LEN: usize = 64 * 1024;

/// Reads a classic pcap stream record by record.
///
/// The reader itself never reads ahead: it pulls exactly one record header
/// and then exactly the record's bytes from `R`, so memory in use is one
/// batch of frames plus whatever buffering `R` does. Wrap an unbuffered
/// `R` in a `BufReader` ([`PcapReader::open`] does).
///
/// Every malformed input ends in an [`IoError`] naming the record number
/// and byte offset; the end of the file is only accepted exactly at a
/// record boundary.
#[derive(Debug)]
pub struct PcapReader<R> {
    inner: R,
    header: PcapHeader,
    /// Bytes consumed from `inner` so far.
    offset: u64,
    /// Records fully read so far.
    records: u64,
    ingress_ifindex: u32,
    rx_queue: u32,
    state: ReaderState,
}

#[derive(Debug)]
enum ReaderState {
    Reading,
    /// An error found while a batch already held good packets: those are
    /// delivered first and the error on the next call.
    Pending(IoError),
    /// Clean end of file.
    Finished,
    /// An error was returned; the position in the stream is meaningless now.
    Failed {
        record: u64,
        offset: u64,
    },
}

impl PcapReader<BufReader<File>> {
    /// Opens a capture file for streaming.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, IoError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| IoError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        PcapReader::new(BufReader::with_capacity(FILE_BUFFER_LEN, file))
    }
}

impl<R: Read> PcapReader<R> {
    /// Reads and validates the file header.
    pub fn new(mut inner: R) -> Result<Self, IoError> {
        let mut bytes = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut inner, &mut bytes, 0)?;
        let header = PcapHeader::parse(&bytes, got)?;
        Ok(PcapReader {
            inner,
            header,
            offset: FILE_HEADER_LEN as u64,
            records: 0,
            ingress_ifindex: 0,
            rx_queue: 0,
            state: ReaderState::Reading,
        })
    }

    /// Stamps every packet with this ingress interface and RX queue (what
    /// the program reads from `xdp_md`).
    pub fn with_ingress(mut self, ifindex: u32, rx_queue: u32) -> Self {
        self.ingress_ifindex = ifindex;
        self.rx_queue = rx_queue;
        self
    }

    pub fn header(&self) -> &PcapHeader {
        &self.header
    }

    /// Records read so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// Bytes of the file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Reads the next record into `buf`. `Ok(false)` at a clean end of
    /// file. After an error the reader stays failed.
    pub fn read_packet(&mut self, buf: &mut PacketBuf) -> Result<bool, IoError> {
        match std::mem::replace(&mut self.state, ReaderState::Reading) {
            ReaderState::Reading => {}
            ReaderState::Finished => {
                self.state = ReaderState::Finished;
                return Ok(false);
            }
            ReaderState::Pending(err) => return Err(self.fail(err)),
            ReaderState::Failed { record, offset } => {
                self.state = ReaderState::Failed { record, offset };
                return Err(IoError::Read {
                    offset,
                    source: io::Error::other(format!(
                        "this pcap reader already failed at record {record}"
                    )),
                });
            }
        }
        match self.read_record(buf) {
            Ok(true) => Ok(true),
            Ok(false) => {
                self.state = ReaderState::Finished;
                Ok(false)
            }
            Err(err) => Err(self.fail(err)),
        }
    }

    fn fail(&mut self, err: IoError) -> IoError {
        self.state = ReaderState::Failed {
            record: self.records + 1,
            offset: self.offset,
        };
        err
    }

    fn read_record(&mut self, buf: &mut PacketBuf) -> Result<bool, IoError> {
        let record = self.records + 1;
        let start = self.offset;

        let mut rec = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut rec, start)?;
        if got == 0 {
            return Ok(false);
        }
        if got < RECORD_HEADER_LEN {
            return Err(IoError::PcapTruncatedRecordHeader {
                record,
                offset: start,
                got,
            });
        }
        let order = self.header.byte_order;
        let ts_sec = order.u32_at(&rec, 0);
        let ts_frac = order.u32_at(&rec, 4);
        let caplen = order.u32_at(&rec, 8);
        let wire_len = order.u32_at(&rec, 12);

        let resolution = self.header.resolution;
        if ts_frac >= resolution.units_per_second() {
            return Err(IoError::PcapBadTimestamp {
                record,
                offset: start,
                fraction: ts_frac,
                limit: resolution.units_per_second(),
                resolution: resolution.name(),
            });
        }
        let (limit, limit_name) = self.header.record_limit();
        if caplen > limit {
            return Err(IoError::PcapRecordTooLong {
                record,
                offset: start,
                caplen,
                limit,
                limit_name,
            });
        }

        let data_offset = start + RECORD_HEADER_LEN as u64;
        // `caplen <= MAX_RECORD_LEN`, so this cast cannot truncate.
        let data = buf.prepare(caplen as usize);
        let got = read_full(&mut self.inner, data, data_offset)?;
        if got < data.len() {
            return Err(IoError::PcapTruncatedRecord {
                record,
                offset: start,
                expected: caplen,
                got,
                end_offset: data_offset + got as u64,
            });
        }
        *buf.meta_mut() = PacketMeta {
            timestamp_ns: u64::from(ts_sec) * 1_000_000_000
                + u64::from(ts_frac) * resolution.nanos_per_unit(),
            // Some writers store a wire length below the captured length;
            // the packet cannot have been shorter than what was captured.
            orig_len: wire_len.max(caplen),
            ingress_ifindex: self.ingress_ifindex,
            rx_queue: self.rx_queue,
        };
        self.offset = data_offset + u64::from(caplen);
        self.records = record;
        Ok(true)
    }
}

impl<R: Read> PacketSource for PcapReader<R> {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError> {
        batch.clear();
        while let Some(buf) = batch.push_slot() {
            match self.read_packet(buf) {
                Ok(true) => {}
                Ok(false) => {
                    batch.pop_slot();
                    break;
                }
                Err(err) => {
                    batch.pop_slot();
                    if batch.is_empty() {
                        return Err(err);
                    }
                    // Hand out the good packets first; report on the next call.
                    self.state = ReaderState::Pending(err);
                    break;
                }
            }
        }
        Ok(batch.len())
    }
}

/// Fills `buf` from `r` until it is full or the stream ends, returning how
/// many bytes arrived. `Read::read_exact` would not say how many bytes a
/// truncated file still had, which the error messages need.
fn read_full(r: &mut impl Read, buf: &mut [u8], offset: u64) -> Result<usize, IoError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(IoError::Read {
                    offset: offset + got as u64,
                    source,
                })
            }
        }
    }
    Ok(got)
}
