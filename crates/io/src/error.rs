//! One error type for every source and sink, with enough context (file
//! offset, record number, spec key) to act on without a debugger.

use std::io;
use std::path::PathBuf;

/// Record numbers in pcap errors count from 1, like Wireshark's frame
/// numbers, so a message can be checked against `tcpdump -r` or Wireshark
/// directly. Byte offsets count from 0 at the start of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },

    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },

    #[error("read failed at byte offset {offset}: {source}")]
    Read { offset: u64, source: io::Error },

    #[error("write failed: {source}")]
    Write { source: io::Error },

    #[error(
        "pcap: the file is pcapng, which is not supported; \
         convert it with `editcap -F pcap IN OUT`"
    )]
    PcapNg,

    #[error("pcap: not a pcap file: magic {magic:#010x} at byte offset 0{hint}")]
    PcapBadMagic { magic: u32, hint: &'static str },

    #[error("pcap: truncated file header: the file ends after {got} of 24 bytes")]
    PcapTruncatedFileHeader { got: usize },

    #[error("pcap: unsupported format version {major}.{minor} (classic pcap is 2.x)")]
    PcapUnsupportedVersion { major: u16, minor: u16 },

    #[error(
        "pcap: link type {link_type} ({name}) is not supported; XDP programs \
         see Ethernet frames, so the capture must be Ethernet (1, EN10MB)"
    )]
    PcapUnsupportedLinkType { link_type: u32, name: &'static str },

    #[error(
        "pcap: record {record} at byte offset {offset}: truncated record header: \
         the file ends after {got} of 16 bytes"
    )]
    PcapTruncatedRecordHeader {
        record: u64,
        offset: u64,
        got: usize,
    },

    #[error(
        "pcap: record {record} at byte offset {offset}: captured length {caplen} \
         exceeds {limit_name} ({limit} bytes); the file is corrupt"
    )]
    PcapRecordTooLong {
        record: u64,
        offset: u64,
        caplen: u32,
        limit: u32,
        limit_name: &'static str,
    },

    #[error(
        "pcap: record {record} at byte offset {offset}: truncated packet data: \
         the record header announces {expected} bytes, the file ends after {got} \
         (at byte offset {end_offset})"
    )]
    PcapTruncatedRecord {
        record: u64,
        offset: u64,
        expected: u32,
        got: usize,
        end_offset: u64,
    },

    #[error(
        "pcap: record {record} at byte offset {offset}: timestamp fraction {fraction} \
         is not below {limit} ({resolution} resolution); the file is corrupt"
    )]
    PcapBadTimestamp {
        record: u64,
        offset: u64,
        fraction: u32,
        limit: u32,
        resolution: &'static str,
    },

    #[error("gen spec: `{key}`: {message}")]
    GenSpec { key: String, message: String },

    #[error("cannot start a worker thread: {source}")]
    Spawn { source: io::Error },

    #[error("packet data range {start}..{end} does not fit the {frame_len}-byte frame")]
    DataRange {
        start: usize,
        end: usize,
        frame_len: usize,
    },
}

impl IoError {
    pub(crate) fn spec(key: &str, message: impl Into<String>) -> Self {
        IoError::GenSpec {
            key: key.to_string(),
            message: message.into(),
        }
    }
}
