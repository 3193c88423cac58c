//! Synthetic traffic in memory (`--gen SPEC`): NFs driven at full speed
//! with no I/O at all.
//!
//! The spec language is documented in [`spec`]. Building a [`Generator`]
//! precomputes every flow's headers with their checksums; producing a
//! packet then draws a flow (uniform or Zipf), copies its headers and the
//! shared payload into the frame, and stamps the metadata.

mod flows;
pub mod rng;
pub mod spec;
mod template;
pub mod zipf;

pub use flows::FlowTuple;
pub use spec::{
    FlowDist, GenSpec, IpVersion, L4Proto, MacAddr, PortRange, SizeRange, SrcPrefix, Target,
    TcpFlags, MAX_FLOWS, MAX_FRAME_SIZE,
};

use crate::{IoError, PacketBatch, PacketMeta, PacketSource};
use rng::Rng;
use template::FlowTemplates;
use zipf::{FlowSampler, ZipfTable};

/// Spacing of generated timestamps: packet `n` is stamped `n` µs after
/// zero, so a generated run written to pcap replays in order at a nominal
/// 1 Mpps.
const TIMESTAMP_STEP_NS: u64 = 1_000;

/// A [`PacketSource`] of synthetic packets.
#[derive(Debug, Clone)]
pub struct Generator {
    spec: GenSpec,
    templates: FlowTemplates,
    sampler: FlowSampler,
    rng: Rng,
    generated: u64,
    ingress_ifindex: u32,
    rx_queue: u32,
    /// Flow indices of the batch being built, kept to avoid an allocation
    /// per batch.
    flow_scratch: Vec<u32>,
}

impl Generator {
    /// Validates `spec` and precomputes its templates (about 90 bytes and a
    /// few hundred nanoseconds per flow).
    pub fn new(spec: &GenSpec) -> Result<Self, IoError> {
        spec.validate()?;
        let templates = FlowTemplates::build(spec);
        let sampler = match spec.dist {
            FlowDist::Uniform => FlowSampler::Uniform {
                flows: u64::from(spec.flows),
            },
            FlowDist::Zipf { s } => FlowSampler::Zipf(ZipfTable::new(spec.flows as usize, s)),
        };
        Ok(Generator {
            spec: spec.clone(),
            templates,
            sampler,
            rng: Rng::new(spec.seed),
            generated: 0,
            ingress_ifindex: 0,
            rx_queue: 0,
            flow_scratch: Vec::new(),
        })
    }

    /// Parses `spec` (see [`spec`]) and builds the generator.
    pub fn from_spec_str(spec: &str) -> Result<Self, IoError> {
        Generator::new(&GenSpec::parse(spec)?)
    }

    /// Stamps every packet with this ingress interface and RX queue.
    pub fn with_ingress(mut self, ifindex: u32, rx_queue: u32) -> Self {
        self.ingress_ifindex = ifindex;
        self.rx_queue = rx_queue;
        self
    }

    pub fn spec(&self) -> &GenSpec {
        &self.spec
    }

    /// The 5-tuple of flow `flow`, for reports ("top flows").
    pub fn flow_tuple(&self, flow: u32) -> Option<FlowTuple> {
        (flow < self.spec.flows).then(|| FlowTuple::nth(&self.spec, flow))
    }

    /// Packets produced so far.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// Packets still to come; `None` when unbounded.
    pub fn remaining(&self) -> Option<u64> {
        self.spec.count.map(|c| c.saturating_sub(self.generated))
    }
}

impl PacketSource for Generator {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError> {
        batch.clear();
        let room = batch.capacity() as u64;
        let n = self.remaining().map_or(room, |r| r.min(room)) as usize;
        // Draw the whole batch's flows before copying any packet: with many
        // flows each draw is a cache miss in the Zipf table, and draws that
        // do not wait on each other's copies let the CPU overlap the misses.
        self.flow_scratch.clear();
        for _ in 0..n {
            let flow = self.sampler.sample(&mut self.rng);
            self.flow_scratch.push(flow as u32);
        }
        for &flow in &self.flow_scratch {
            let Some(buf) = batch.push_slot() else { break };
            let len = self.templates.write_into(flow as usize, buf);
            *buf.meta_mut() = PacketMeta {
                timestamp_ns: self.generated.wrapping_mul(TIMESTAMP_STEP_NS),
                orig_len: len as u32,
                ingress_ifindex: self.ingress_ifindex,
                rx_queue: self.rx_queue,
            };
            self.generated += 1;
        }
        Ok(batch.len())
    }
}
