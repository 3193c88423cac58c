//! Classic libpcap capture files: a streaming reader, a buffered writer and a
//! sink that files packets by XDP action.
//!
//! Written by hand rather than on a pcap crate: the format is two fixed-size
//! headers, and owning the parser lets the reader copy each record straight
//! into an XDP frame (no intermediate `Vec` per packet) and report corruption
//! with the byte offset and record number, which is the whole point of a
//! clear error on a multi-gigabyte capture.
//!
//! pcapng is detected and refused with a conversion hint.

mod format;
mod reader;
mod split;
mod writer;

pub use format::{ByteOrder, PcapHeader, TimestampResolution, LINKTYPE_ETHERNET, MAX_RECORD_LEN};
pub use reader::PcapReader;
pub use split::{PcapSplitSink, SplitOptions};
pub use writer::{PcapWriter, PcapWriterOptions};
