//! Per-flow packet templates, built once so that generating a packet is a
//! copy of its flow's headers and a copy of the shared payload.
//!
//! Every packet of a flow is byte-identical (TCP sequence numbers do not
//! advance); that is the price of a memcpy-cost generator, and NFs that
//! are driven with it (load balancers, firewalls, counters) key on headers
//! that do not change within a flow anyway.

use std::net::IpAddr;

use super::flows::FlowTuple;
use super::rng::{splitmix64, Rng};
use super::spec::{GenSpec, IpVersion, L4Proto, TcpFlags};
use crate::checksum::{finish, internet_checksum, pseudo_header_v4, pseudo_header_v6, sum_bytes};
use crate::PacketBuf;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
const ICMP_ECHO_REQUEST: u8 = 8;
const ICMPV6_ECHO_REQUEST: u8 = 128;
const DEFAULT_TTL: u8 = 64;
/// Salts that give the per-flow size and TCP sequence draws their own
/// random streams, independent of the packet-order stream.
const SIZE_STREAM: u64 = 0x7369_7a65;
const SEQ_STREAM: u64 = 0x7463_7073;

/// Headers of every flow, stored back to back, and one payload shared by all.
#[derive(Debug, Clone)]
pub struct FlowTemplates {
    header_len: usize,
    headers: Vec<u8>,
    frame_lens: Vec<u16>,
    payload: Vec<u8>,
}

impl FlowTemplates {
    /// Builds the templates of a validated spec.
    pub fn build(spec: &GenSpec) -> Self {
        let header_len = usize::from(spec.header_len());
        let flows = spec.flows as usize;
        // An incrementing pattern rather than zeros, so a checksum bug that
        // ignores the payload cannot pass unnoticed.
        let payload: Vec<u8> = (0..usize::from(spec.size.max) - header_len)
            .map(|i| i as u8)
            .collect();
        // Prefix sums of the payload's 16-bit words let each flow's L4
        // checksum cover its own payload length in O(1).
        let mut word_sums = Vec::with_capacity(payload.len() / 2 + 1);
        word_sums.push(0u64);
        for w in payload.chunks_exact(2) {
            let last = word_sums[word_sums.len() - 1];
            word_sums.push(last + u64::from(u16::from_be_bytes([w[0], w[1]])));
        }
        let payload_sum = |len: usize| -> u64 {
            let mut sum = word_sums[len / 2];
            if len % 2 == 1 {
                sum += u64::from(payload[len - 1]) << 8;
            }
            sum
        };

        let mut size_rng = Rng::new(spec.seed ^ SIZE_STREAM);
        let size_span = u64::from(spec.size.max - spec.size.min) + 1;
        let mut headers = vec![0u8; flows * header_len];
        let mut frame_lens = Vec::with_capacity(flows);
        for (i, header) in headers.chunks_exact_mut(header_len).enumerate() {
            let frame_len = spec.size.min + size_rng.below(size_span) as u16;
            let payload_len = usize::from(frame_len) - header_len;
            let tuple = FlowTuple::nth(spec, i as u32);
            let mut seq_state = spec.seed ^ SEQ_STREAM ^ (i as u64).wrapping_mul(0x9e37_79b9);
            let seq = splitmix64(&mut seq_state);
            write_headers(
                spec,
                &tuple,
                seq,
                payload_len,
                payload_sum(payload_len),
                header,
            );
            frame_lens.push(frame_len);
        }
        FlowTemplates {
            header_len,
            headers,
            frame_lens,
            payload,
        }
    }

    /// Writes `flow`'s packet into `buf` and returns its length.
    #[inline]
    pub fn write_into(&self, flow: usize, buf: &mut PacketBuf) -> usize {
        let h = self.header_len;
        let len = usize::from(self.frame_lens[flow]);
        let data = buf.prepare(len);
        data[..h].copy_from_slice(&self.headers[flow * h..(flow + 1) * h]);
        data[h..].copy_from_slice(&self.payload[..len - h]);
        len
    }
}

/// Fills one flow's Ethernet, IP and L4 headers (checksums included).
fn write_headers(
    spec: &GenSpec,
    tuple: &FlowTuple,
    seq: u64,
    payload_len: usize,
    payload_sum: u64,
    out: &mut [u8],
) {
    out[0..6].copy_from_slice(&spec.dmac.0);
    out[6..12].copy_from_slice(&spec.smac.0);
    let l4_header_len = usize::from(spec.proto.header_len());
    let l4_len = l4_header_len + payload_len;
    let ethertype = match spec.ip {
        IpVersion::V4 => ETHERTYPE_IPV4,
        IpVersion::V6 => ETHERTYPE_IPV6,
    };
    out[12..14].copy_from_slice(&ethertype.to_be_bytes());
    let (l3, l4) = out[14..].split_at_mut(usize::from(spec.ip.header_len()));

    let pseudo = match (spec.ip, tuple.src, tuple.dst) {
        (_, IpAddr::V4(src), IpAddr::V4(dst)) => {
            let protocol = match spec.proto {
                L4Proto::Tcp => IPPROTO_TCP,
                L4Proto::Udp => IPPROTO_UDP,
                L4Proto::Icmp => IPPROTO_ICMP,
            };
            l3[0] = 0x45; // version 4, 5-word header
            l3[1] = 0;
            l3[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            // ID 0 with Don't Fragment: RFC 6864 lets atomic datagrams
            // carry any ID, and a constant keeps the template per flow.
            l3[4..6].copy_from_slice(&[0, 0]);
            l3[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
            l3[8] = DEFAULT_TTL;
            l3[9] = protocol;
            l3[10..12].copy_from_slice(&[0, 0]);
            l3[12..16].copy_from_slice(&src.octets());
            l3[16..20].copy_from_slice(&dst.octets());
            let csum = internet_checksum(l3);
            l3[10..12].copy_from_slice(&csum.to_be_bytes());
            match spec.proto {
                // ICMPv4 has no pseudo-header.
                L4Proto::Icmp => 0,
                _ => pseudo_header_v4(src.octets(), dst.octets(), protocol, l4_len as u16),
            }
        }
        (_, IpAddr::V6(src), IpAddr::V6(dst)) => {
            let next_header = match spec.proto {
                L4Proto::Tcp => IPPROTO_TCP,
                L4Proto::Udp => IPPROTO_UDP,
                L4Proto::Icmp => IPPROTO_ICMPV6,
            };
            l3[0..4].copy_from_slice(&0x6000_0000u32.to_be_bytes());
            l3[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l3[6] = next_header;
            l3[7] = DEFAULT_TTL;
            l3[8..24].copy_from_slice(&src.octets());
            l3[24..40].copy_from_slice(&dst.octets());
            pseudo_header_v6(src.octets(), dst.octets(), next_header, l4_len as u32)
        }
        // validate() guarantees the families match; leave zeros otherwise.
        _ => 0,
    };

    let l4 = &mut l4[..l4_header_len];
    let csum_at = match spec.proto {
        L4Proto::Udp => {
            l4[0..2].copy_from_slice(&tuple.sport.to_be_bytes());
            l4[2..4].copy_from_slice(&tuple.dport.to_be_bytes());
            l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            6
        }
        L4Proto::Tcp => {
            l4[0..2].copy_from_slice(&tuple.sport.to_be_bytes());
            l4[2..4].copy_from_slice(&tuple.dport.to_be_bytes());
            l4[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
            let ack = if spec.tcp_flags.0 & TcpFlags::ACK != 0 {
                (seq >> 32) as u32
            } else {
                0
            };
            l4[8..12].copy_from_slice(&ack.to_be_bytes());
            l4[12] = 5 << 4; // data offset: 5 words, no options
            l4[13] = spec.tcp_flags.0;
            l4[14..16].copy_from_slice(&u16::MAX.to_be_bytes()); // window
            l4[18..20].copy_from_slice(&[0, 0]); // urgent pointer
            16
        }
        L4Proto::Icmp => {
            l4[0] = match spec.ip {
                IpVersion::V4 => ICMP_ECHO_REQUEST,
                IpVersion::V6 => ICMPV6_ECHO_REQUEST,
            };
            l4[1] = 0;
            l4[4..6].copy_from_slice(&tuple.sport.to_be_bytes()); // identifier
            l4[6..8].copy_from_slice(&1u16.to_be_bytes()); // sequence
            2
        }
    };
    l4[csum_at..csum_at + 2].copy_from_slice(&[0, 0]);
    let mut csum = finish(sum_bytes(l4, pseudo) + payload_sum);
    // UDP reserves 0 for "no checksum"; a computed 0 is sent as its
    // ones' complement twin (RFC 768).
    if spec.proto == L4Proto::Udp && csum == 0 {
        csum = 0xffff;
    }
    l4[csum_at..csum_at + 2].copy_from_slice(&csum.to_be_bytes());
}
