//! `--top N`: which flows and destinations the traffic went to, by action.
//!
//! An [`Output`] wrapper that parses each packet as the program left it:
//! the flow is the innermost IPv4/IPv6 5-tuple, the destination the
//! outermost IP destination, so for a load balancer that encapsulates
//! (IP-in-IP, like Katran) the destination is the backend it chose. Each
//! worker counts in its own table and merges it into the shared one when
//! it finishes, so the batch loop takes no lock for it.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Output, Verdict};
use crate::{IoError, OutputRoute, PacketBatch};

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const IPPROTO_IPIP: u8 = 4;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_IPV6: u8 = 41;

/// A 5-tuple (ports 0 for protocols without them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flow {
    pub proto: u8,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
}

impl fmt::Display for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = match self.proto {
            IPPROTO_TCP => "tcp".to_string(),
            IPPROTO_UDP => "udp".to_string(),
            p => format!("proto {p}"),
        };
        let at = |ip: IpAddr, port: u16| match ip {
            IpAddr::V4(a) => format!("{a}:{port}"),
            IpAddr::V6(a) => format!("[{a}]:{port}"),
        };
        write!(
            f,
            "{proto} {} -> {}",
            at(self.src, self.sport),
            at(self.dst, self.dport)
        )
    }
}

/// What one packet parsed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// The innermost 5-tuple.
    pub flow: Flow,
    /// The outermost IP destination.
    pub dest: IpAddr,
    /// An IP-in-IP header was found.
    pub encapsulated: bool,
}

/// One IP header at `off`: (src, dst, protocol, payload offset).
fn ip_header(p: &[u8], off: usize, v6: bool) -> Option<(IpAddr, IpAddr, u8, usize)> {
    if v6 {
        let h = p.get(off..off + 40)?;
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
        Some((src.into(), dst.into(), h[6], off + 40))
    } else {
        let h = p.get(off..off + 20)?;
        let ihl = usize::from(h[0] & 0x0f) * 4;
        if ihl < 20 {
            return None;
        }
        let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
        let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
        Some((src.into(), dst.into(), h[9], off + ihl))
    }
}

/// Parses Ethernet (one optional VLAN tag), IPv4/IPv6, up to one level of
/// IP-in-IP, and TCP/UDP ports. None for anything else (ARP, truncated).
pub fn parse(p: &[u8]) -> Option<Parsed> {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*p.get(off)?, *p.get(off + 1)?]);
    off += 2;
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        ethertype = u16::from_be_bytes([*p.get(off + 2)?, *p.get(off + 3)?]);
        off += 4;
    }
    let v6 = match ethertype {
        ETH_P_IP => false,
        ETH_P_IPV6 => true,
        _ => return None,
    };
    let (mut src, dest, mut proto, mut l4) = ip_header(p, off, v6)?;
    let mut dst = dest;
    let mut encapsulated = false;
    if proto == IPPROTO_IPIP || proto == IPPROTO_IPV6 {
        let (s, d, pr, o) = ip_header(p, l4, proto == IPPROTO_IPV6)?;
        (src, dst, proto, l4) = (s, d, pr, o);
        encapsulated = true;
    }
    let (sport, dport) = match proto {
        IPPROTO_TCP | IPPROTO_UDP => {
            let h = p.get(l4..l4 + 4)?;
            (
                u16::from_be_bytes([h[0], h[1]]),
                u16::from_be_bytes([h[2], h[3]]),
            )
        }
        _ => (0, 0),
    };
    Some(Parsed {
        flow: Flow {
            proto,
            src,
            sport,
            dst,
            dport,
        },
        dest,
        encapsulated,
    })
}

/// Packet counts by flow and by destination, each with the action.
#[derive(Debug, Default, Clone)]
pub struct TopTable {
    pub flows: HashMap<(Flow, OutputRoute), u64>,
    pub dests: HashMap<(IpAddr, bool, OutputRoute), u64>,
    /// Packets that were not IP (or were truncated).
    pub unparsed: u64,
}

impl TopTable {
    fn merge(&mut self, o: &TopTable) {
        for (k, n) in &o.flows {
            *self.flows.entry(*k).or_default() += n;
        }
        for (k, n) in &o.dests {
            *self.dests.entry(*k).or_default() += n;
        }
        self.unparsed += o.unparsed;
    }

    /// The `n` busiest flows, most packets first.
    pub fn top_flows(&self, n: usize) -> Vec<((Flow, OutputRoute), u64)> {
        top(&self.flows, n)
    }

    /// The `n` busiest destinations `(address, encapsulated, action)`.
    pub fn top_dests(&self, n: usize) -> Vec<((IpAddr, bool, OutputRoute), u64)> {
        top(&self.dests, n)
    }
}

fn top<K: Copy + Ord>(m: &HashMap<K, u64>, n: usize) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = m.iter().map(|(k, c)| (*k, *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// Counts every packet into a worker-local table, then passes the batch on.
pub struct TopOutput<O> {
    inner: O,
    local: TopTable,
    shared: Arc<Mutex<TopTable>>,
}

impl<O: Output> TopOutput<O> {
    /// Wraps `inner`; `shared` receives this worker's counts at `finish`.
    pub fn new(inner: O, shared: Arc<Mutex<TopTable>>) -> TopOutput<O> {
        TopOutput {
            inner,
            local: TopTable::default(),
            shared,
        }
    }
}

impl<O: Output> Output for TopOutput<O> {
    fn emit(
        &mut self,
        batch: &PacketBatch,
        verdicts: &[Verdict],
        copies: &[super::EgressCopy],
    ) -> Result<u64, IoError> {
        for (pkt, v) in batch.packets().iter().zip(verdicts) {
            match parse(pkt.data()) {
                Some(p) => {
                    *self.local.flows.entry((p.flow, v.route)).or_default() += 1;
                    *self
                        .local
                        .dests
                        .entry((p.dest, p.encapsulated, v.route))
                        .or_default() += 1;
                }
                None => self.local.unparsed += 1,
            }
        }
        self.inner.emit(batch, verdicts, copies)
    }

    fn finish(&mut self) -> Result<(), IoError> {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(&std::mem::take(&mut self.local));
        self.inner.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&ethertype.to_be_bytes());
        p
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        h
    }

    #[test]
    fn plain_udp_flow_and_destination() {
        let mut p = eth(ETH_P_IP);
        p.extend(ipv4(IPPROTO_UDP, [10, 0, 0, 1], [10, 0, 0, 2]));
        p.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0]);
        let parsed = parse(&p).unwrap();
        assert_eq!(parsed.flow.to_string(), "udp 10.0.0.1:1234 -> 10.0.0.2:53");
        assert_eq!(parsed.dest, IpAddr::from([10, 0, 0, 2]));
        assert!(!parsed.encapsulated);
    }

    #[test]
    fn ip_in_ip_gives_the_inner_flow_and_the_outer_destination() {
        let mut p = eth(ETH_P_IP);
        p.extend(ipv4(IPPROTO_IPIP, [172, 16, 0, 1], [10, 1, 1, 7]));
        p.extend(ipv4(IPPROTO_TCP, [192, 0, 2, 9], [10, 200, 1, 1]));
        p.extend_from_slice(&[0x30, 0x39, 0x00, 0x50]);
        let parsed = parse(&p).unwrap();
        assert_eq!(
            parsed.flow.to_string(),
            "tcp 192.0.2.9:12345 -> 10.200.1.1:80"
        );
        assert_eq!(parsed.dest, IpAddr::from([10, 1, 1, 7]));
        assert!(parsed.encapsulated);
    }

    #[test]
    fn non_ip_and_truncated_packets_do_not_parse() {
        assert_eq!(parse(&eth(0x0806)), None);
        let mut p = eth(ETH_P_IP);
        p.extend_from_slice(&[0x45, 0, 0]);
        assert_eq!(parse(&p), None);
    }

    #[test]
    fn workers_merge_on_finish_and_top_sorts_by_packets() {
        let shared = Arc::new(Mutex::new(TopTable::default()));
        let flow = |port| Flow {
            proto: IPPROTO_UDP,
            src: IpAddr::from([1, 1, 1, 1]),
            sport: port,
            dst: IpAddr::from([2, 2, 2, 2]),
            dport: 53,
        };
        for (port, n) in [(1, 3u64), (2, 5)] {
            let mut out = TopOutput::new(super::super::NullOutput, Arc::clone(&shared));
            out.local.flows.insert((flow(port), OutputRoute::Tx), n);
            out.finish().unwrap();
        }
        let t = shared.lock().unwrap();
        let top = t.top_flows(1);
        assert_eq!(top, vec![((flow(2), OutputRoute::Tx), 5)]);
    }
}
