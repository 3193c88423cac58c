//! Which 5-tuple each generated flow has.

use std::net::IpAddr;

use super::spec::{GenSpec, L4Proto};

/// The identity of one generated flow. For ICMP, `sport` is the echo
/// identifier and `dport` is unused (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    pub proto: L4Proto,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl FlowTuple {
    /// Flow `i` of `spec` (`i < spec.flows`).
    ///
    /// Flows go round-robin over the destinations, then through the source
    /// hosts, and only then through source ports, so that the first flows
    /// differ in source address, the field most NFs hash or match on.
    /// `GenSpec::validate` guarantees the walk never wraps, so every index
    /// yields a distinct tuple.
    pub fn nth(spec: &GenSpec, i: u32) -> FlowTuple {
        let dsts = spec.dst.len().max(1) as u128;
        let i = u128::from(i);
        let target = spec.dst[(i % dsts) as usize];
        let rest = i / dsts;
        let hosts = spec.src.usable_hosts().max(1);
        let src = spec.src.host(rest % hosts);
        let port_step = (rest / hosts) % u128::from(spec.sport.len());
        let sport = spec.sport.lo.wrapping_add(port_step as u16);
        let dport = match spec.proto {
            L4Proto::Icmp => 0,
            L4Proto::Tcp | L4Proto::Udp => target.port,
        };
        FlowTuple {
            proto: spec.proto,
            src,
            dst: target.addr,
            sport,
            dport,
        }
    }
}
