//! Generated packets are well-formed (checksums checked by an independent
//! routine), cover exactly the requested flows, follow the requested
//! popularity distribution, and are reproducible from the seed.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use bpfjet_io::gen::FlowTuple;
use bpfjet_io::{Generator, IoError, PacketBatch, PacketSource};
use common::ones_sum;

/// What the test's own parser finds in a generated frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Parsed {
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
    tcp_flags: Option<u8>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parses and checks a frame: lengths consistent, IPv4 header checksum,
/// L4 checksum with pseudo-header. Panics with a reason on any defect.
fn parse_and_verify(frame: &[u8]) -> Parsed {
    assert_eq!(&frame[0..6], &[2, 0, 0, 0, 0, 2], "dmac");
    assert_eq!(&frame[6..12], &[2, 0, 0, 0, 0, 1], "smac");
    let ethertype = be16(frame, 12);
    let ip = &frame[14..];
    let (src, dst, proto, l4, pseudo): (IpAddr, IpAddr, u8, &[u8], Vec<u8>) = match ethertype {
        0x0800 => {
            assert_eq!(ip[0], 0x45);
            assert_eq!(usize::from(be16(ip, 2)), ip.len(), "IPv4 total length");
            assert_eq!(ones_sum(&[&ip[..20]]), 0xffff, "IPv4 header checksum");
            assert_eq!(ip[8], 64, "TTL");
            let src = IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).unwrap());
            let dst = IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap());
            let l4 = &ip[20..];
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[12..20]);
            pseudo.extend_from_slice(&[0, ip[9]]);
            pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            (src, dst, ip[9], l4, pseudo)
        }
        0x86dd => {
            assert_eq!(ip[0] >> 4, 6);
            assert_eq!(
                usize::from(be16(ip, 4)),
                ip.len() - 40,
                "IPv6 payload length"
            );
            let src = IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let dst = IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            let l4 = &ip[40..];
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[8..40]);
            pseudo.extend_from_slice(&(l4.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, ip[6]]);
            (src, dst, ip[6], l4, pseudo)
        }
        other => panic!("ethertype {other:#x}"),
    };
    let (sport, dport, tcp_flags) = match proto {
        17 => {
            assert_eq!(usize::from(be16(l4, 4)), l4.len(), "UDP length");
            assert_ne!(be16(l4, 6), 0, "UDP checksum present");
            assert_eq!(ones_sum(&[&pseudo, l4]), 0xffff, "UDP checksum");
            (be16(l4, 0), be16(l4, 2), None)
        }
        6 => {
            assert_eq!(l4[12] >> 4, 5, "TCP data offset");
            assert_eq!(ones_sum(&[&pseudo, l4]), 0xffff, "TCP checksum");
            (be16(l4, 0), be16(l4, 2), Some(l4[13]))
        }
        1 => {
            assert_eq!(l4[0], 8, "echo request");
            assert_eq!(ones_sum(&[l4]), 0xffff, "ICMP checksum");
            (be16(l4, 4), 0, None)
        }
        58 => {
            assert_eq!(l4[0], 128, "ICMPv6 echo request");
            assert_eq!(ones_sum(&[&pseudo, l4]), 0xffff, "ICMPv6 checksum");
            (be16(l4, 4), 0, None)
        }
        other => panic!("protocol {other}"),
    };
    Parsed {
        src,
        dst,
        proto,
        sport,
        dport,
        tcp_flags,
    }
}

/// Runs a generator to its end, verifying every packet.
fn collect(spec: &str) -> Vec<(Parsed, Vec<u8>)> {
    let mut gen = Generator::from_spec_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut batch = PacketBatch::new();
    let mut out = Vec::new();
    while gen.next_batch(&mut batch).unwrap() > 0 {
        for p in &batch {
            assert_eq!(p.meta().orig_len as usize, p.len());
            assert_eq!(p.data_offset(), 256);
            out.push((parse_and_verify(p.data()), p.data().to_vec()));
        }
    }
    out
}

#[test]
fn every_protocol_and_family_has_valid_checksums() {
    for proto in ["udp", "tcp", "icmp"] {
        for ip in ["4", "6"] {
            for size in ["size=80-1500", "size=9000", "size=1001"] {
                let spec = format!("proto={proto},ip={ip},flows=50,{size},count=300,seed=3");
                let packets = collect(&spec);
                assert_eq!(packets.len(), 300, "{spec}");
                let want_proto = match (proto, ip) {
                    ("udp", _) => 17,
                    ("tcp", _) => 6,
                    ("icmp", "4") => 1,
                    _ => 58,
                };
                assert!(packets.iter().all(|(p, _)| p.proto == want_proto), "{spec}");
            }
        }
    }
}

#[test]
fn minimum_sizes_are_header_only_packets() {
    for (spec, len) in [
        ("proto=udp,size=42", 42),
        ("proto=tcp,size=54", 54),
        ("proto=icmp,ip=6,size=62", 62),
        ("proto=tcp,ip=6", 74),
        ("proto=udp", 64),
    ] {
        let packets = collect(&format!("{spec},count=5"));
        assert!(packets.iter().all(|(_, b)| b.len() == len), "{spec}");
    }
}

#[test]
fn sizes_stay_in_range_and_vary() {
    let packets = collect("flows=200,size=100-200,count=2000");
    let sizes: HashSet<usize> = packets.iter().map(|(_, b)| b.len()).collect();
    assert!(sizes.iter().all(|s| (100..=200).contains(s)));
    assert!(sizes.len() > 50, "only {} distinct sizes", sizes.len());
}

#[test]
fn observed_flow_count_equals_flows() {
    for (spec, flows) in [
        ("flows=1000,count=40000", 1000),
        ("proto=tcp,ip=6,flows=333,count=20000", 333),
        // Three VIPs, two source hosts: the walk moves on to source ports.
        ("dst=10.0.0.1:80;10.0.0.2:443;10.0.0.3:53,src=172.16.0.0/30,sport=5000-5009,flows=60,count=5000", 60),
        ("proto=icmp,src=10.1.1.1,sport=1-100,flows=100,count=10000", 100),
    ] {
        let packets = collect(spec);
        let tuples: HashSet<Parsed> = packets.iter().map(|(p, _)| *p).collect();
        assert_eq!(tuples.len(), flows, "{spec}");
    }
}

#[test]
fn destinations_sources_and_ports_follow_the_spec() {
    let packets = collect(
        "dst=10.0.0.1:80;10.0.0.2:443,src=172.16.0.0/30,sport=5000-5009,flows=40,count=4000",
    );
    let dsts: HashSet<(IpAddr, u16)> = packets.iter().map(|(p, _)| (p.dst, p.dport)).collect();
    assert_eq!(
        dsts,
        HashSet::from([
            ("10.0.0.1".parse().unwrap(), 80),
            ("10.0.0.2".parse().unwrap(), 443)
        ])
    );
    // A /30 has two usable hosts: .1 and .2 (network and broadcast skipped).
    let srcs: HashSet<IpAddr> = packets.iter().map(|(p, _)| p.src).collect();
    assert_eq!(
        srcs,
        HashSet::from(["172.16.0.1".parse().unwrap(), "172.16.0.2".parse().unwrap()])
    );
    assert!(packets
        .iter()
        .all(|(p, _)| (5000..=5009).contains(&p.sport)));
}

#[test]
fn tcp_flags_are_set() {
    let syn = collect("proto=tcp,flags=syn,count=3");
    assert!(syn.iter().all(|(p, _)| p.tcp_flags == Some(0x02)));
    let synack = collect("proto=tcp,flags=syn|ack,count=3");
    assert!(synack.iter().all(|(p, _)| p.tcp_flags == Some(0x12)));
    let default = collect("proto=tcp,count=3");
    assert!(default.iter().all(|(p, _)| p.tcp_flags == Some(0x10)));
}

#[test]
fn count_is_exact_and_unbounded_keeps_going() {
    let mut gen = Generator::from_spec_str("count=100").unwrap();
    let mut batch = PacketBatch::with_capacity(64);
    assert_eq!(gen.next_batch(&mut batch).unwrap(), 64);
    assert_eq!(gen.next_batch(&mut batch).unwrap(), 36);
    assert_eq!(gen.next_batch(&mut batch).unwrap(), 0);
    assert_eq!(gen.next_batch(&mut batch).unwrap(), 0);
    assert_eq!(gen.generated(), 100);
    assert_eq!(collect("count=0").len(), 0);

    let mut gen = Generator::from_spec_str("count=unbounded")
        .unwrap()
        .with_ingress(5, 2);
    for _ in 0..100 {
        assert_eq!(gen.next_batch(&mut batch).unwrap(), 64);
    }
    assert_eq!(gen.remaining(), None);
    let meta = batch.packets()[63].meta();
    assert_eq!((meta.ingress_ifindex, meta.rx_queue), (5, 2));
    assert_eq!(meta.timestamp_ns, (100 * 64 - 1) * 1_000);
}

#[test]
fn same_seed_same_packets_other_seed_other_order() {
    let spec = "flows=500,dist=zipf:1.1,size=64-512,count=5000";
    let a = collect(&format!("{spec},seed=7"));
    let b = collect(&format!("{spec},seed=7"));
    let c = collect(&format!("{spec},seed=8"));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// Maps each packet back to its flow index through the generator's own
/// flow table (which `observed_flow_count_equals_flows` checks separately).
fn flow_counts(spec: &str, flows: u32) -> Vec<u64> {
    let mut gen = Generator::from_spec_str(spec).unwrap();
    let index: HashMap<(IpAddr, u16, u16), usize> = (0..flows)
        .map(|i| {
            let t: FlowTuple = gen.flow_tuple(i).unwrap();
            ((t.src, t.sport, t.dport), i as usize)
        })
        .collect();
    assert!(gen.flow_tuple(flows).is_none());
    let mut counts = vec![0u64; flows as usize];
    let mut batch = PacketBatch::new();
    while gen.next_batch(&mut batch).unwrap() > 0 {
        for p in &batch {
            let d = p.data();
            let src = IpAddr::from(<[u8; 4]>::try_from(&d[26..30]).unwrap());
            counts[index[&(src, be16(d, 34), be16(d, 36))]] += 1;
        }
    }
    counts
}

/// Upper 0.1% quantile of chi-square with `df` degrees of freedom
/// (Wilson-Hilferty approximation, accurate to ~1% for df >= 10).
fn chi_square_critical(df: f64) -> f64 {
    let z = 3.090; // standard normal 99.9% quantile
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

fn chi_square(counts: &[u64], probabilities: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(probabilities)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

fn zipf_probabilities(flows: usize, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=flows).map(|k| 1.0 / (k as f64).powf(s)).collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

#[test]
fn zipf_frequencies_pass_chi_square() {
    // Few enough flows that every expected count is well above 5.
    for (flows, s, seed) in [(50u32, 1.1, 7u64), (100, 0.8, 1), (30, 2.0, 99)] {
        let counts = flow_counts(
            &format!("flows={flows},dist=zipf:{s},count=200000,seed={seed}"),
            flows,
        );
        let p = zipf_probabilities(flows as usize, s);
        let stat = chi_square(&counts, &p);
        let critical = chi_square_critical(f64::from(flows - 1));
        assert!(
            stat < critical,
            "zipf:{s} over {flows}: chi2 {stat:.1} >= {critical:.1}"
        );
        // Rank order holds at the head of the distribution.
        assert!(counts[0] > counts[1] && counts[1] > counts[3], "{counts:?}");
    }
}

#[test]
fn zipf_rank_frequency_slope_is_minus_s() {
    // Least-squares slope of log(count) against log(rank) over the ranks
    // whose counts are large enough to have little sampling noise.
    let s = 1.1;
    let counts = flow_counts(
        &format!("flows=10000,dist=zipf:{s},count=1000000,seed=3"),
        10_000,
    );
    let points: Vec<(f64, f64)> = counts
        .iter()
        .take(100)
        .enumerate()
        .map(|(i, &c)| (((i + 1) as f64).ln(), (c as f64).ln()))
        .collect();
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / points.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    assert!((slope + s).abs() < 0.05, "slope {slope}");
}

#[test]
fn uniform_frequencies_pass_chi_square() {
    let flows = 200u32;
    let counts = flow_counts(&format!("flows={flows},count=200000,seed=5"), flows);
    let p = vec![1.0 / f64::from(flows); flows as usize];
    let stat = chi_square(&counts, &p);
    assert!(
        stat < chi_square_critical(f64::from(flows - 1)),
        "chi2 {stat}"
    );
}

#[test]
fn bad_specs_are_errors_not_panics() {
    for spec in [
        "flows=99999999999",
        "size=1-2-3",
        "dst=",
        "dist=zipf:",
        "ip=6,dst=1.2.3.4",
    ] {
        match Generator::from_spec_str(spec) {
            Err(IoError::GenSpec { .. }) => {}
            other => panic!("{spec}: {other:?}"),
        }
    }
}
