//! Packet sources and sinks for the bpfjet data plane.
//!
//! Everything here works without the runtime: a source fills a
//! [`PacketBatch`] of reusable, XDP-ready buffers (headroom before the data,
//! tailroom after it, so `bpf_xdp_adjust_head`/`_tail` run in place), and a
//! sink consumes the packets the program let through.
//!
//! - [`pcap`]: streaming classic-pcap reader and buffered writer, and
//!   [`pcap::PcapSplitSink`], which files packets by XDP action.
//! - [`gen`]: synthetic traffic from a spec string (`--gen SPEC`), built from
//!   precomputed per-flow templates so a packet costs about one memcpy.
//! - [`checksum`]: the Internet checksum used by the generator.
//! - [`run`]: the run loop: batches through an XDP program, verdicts
//!   counted and routed, one worker thread per CPU slot.

pub mod afxdp;
pub mod batch;
pub mod checksum;
pub mod error;
pub mod gen;
pub mod meta;
pub mod pcap;
pub mod route;
pub mod run;
pub mod sink;
pub mod source;

pub use batch::{BufferLayout, PacketBatch, PacketBuf, DEFAULT_BATCH_SIZE};
pub use error::IoError;
pub use gen::{GenSpec, Generator};
pub use meta::PacketMeta;
pub use pcap::{PcapReader, PcapSplitSink, PcapWriter};
pub use route::OutputRoute;
pub use sink::PacketSink;
pub use source::PacketSource;
