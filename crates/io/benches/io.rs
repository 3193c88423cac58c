//! Throughput of the I/O paths that do not touch the network: generating
//! packets, parsing a pcap stream, writing a pcap stream. Figures are
//! packets per second ("elem/s" in criterion's output).

use std::hint::black_box;
use std::io::{self, BufWriter};
use std::time::Duration;

use bpfjet_io::pcap::PcapWriterOptions;
use bpfjet_io::{Generator, PacketBatch, PacketMeta, PacketSource, PcapReader, PcapWriter};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Packets per pcap iteration: big enough to amortise setup, small enough
/// to stay in cache so the figure is the parser's, not the memory's.
const PCAP_PACKETS: usize = 10_000;

fn generate(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate");
    for (name, spec) in [
        (
            "udp64_uniform_1k_flows",
            "proto=udp,size=64,flows=1000,count=unbounded",
        ),
        (
            "udp64_uniform_1M_flows",
            "proto=udp,size=64,flows=1000000,count=unbounded",
        ),
        (
            "udp64_zipf1.1_1M_flows",
            "proto=udp,size=64,flows=1000000,dist=zipf:1.1,count=unbounded",
        ),
        (
            "tcp6_1500_uniform_10k_flows",
            "proto=tcp,ip=6,size=1500,flows=10000,count=unbounded",
        ),
    ] {
        let mut gen = Generator::from_spec_str(spec).expect("valid spec");
        let mut batch = PacketBatch::new();
        group.throughput(Throughput::Elements(batch.capacity() as u64));
        group.bench_function(name, |b| {
            b.iter(|| black_box(gen.next_batch(&mut batch).expect("generate")))
        });
    }
    group.finish();
}

/// A capture of generated packets, in memory.
fn capture(spec: &str) -> Vec<u8> {
    let mut gen = Generator::from_spec_str(spec).expect("valid spec");
    let mut writer = PcapWriter::new(Vec::new(), PcapWriterOptions::default()).expect("header");
    let mut batch = PacketBatch::new();
    while gen.next_batch(&mut batch).expect("generate") > 0 {
        for p in &batch {
            writer.write_packet(p.data(), p.meta()).expect("write");
        }
    }
    writer.into_inner().expect("flush")
}

fn pcap_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("pcap_read");
    group.throughput(Throughput::Elements(PCAP_PACKETS as u64));
    for (name, size) in [("64B", 64), ("1500B", 1500)] {
        let file = capture(&format!("flows=100,size={size},count={PCAP_PACKETS}"));
        let mut batch = PacketBatch::new();
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut reader = PcapReader::new(&file[..]).expect("header");
                let mut packets = 0;
                loop {
                    let n = reader.next_batch(&mut batch).expect("read");
                    if n == 0 {
                        break;
                    }
                    packets += n;
                }
                black_box(packets)
            })
        });
    }
    group.finish();
}

fn pcap_write(c: &mut Criterion) {
    let mut group = c.benchmark_group("pcap_write");
    group.throughput(Throughput::Elements(PCAP_PACKETS as u64));
    for (name, size) in [("64B", 64usize), ("1500B", 1500)] {
        let pkt = vec![0x5au8; size];
        let meta = PacketMeta {
            timestamp_ns: 1_700_000_000_000_000_000,
            orig_len: size as u32,
            ..PacketMeta::default()
        };
        // The buffered path of a real file, minus the disk: what the
        // writer itself costs.
        group.bench_function(name, |b| {
            b.iter(|| {
                let sink = BufWriter::with_capacity(64 * 1024, io::sink());
                let mut writer =
                    PcapWriter::new(sink, PcapWriterOptions::default()).expect("header");
                for i in 0..PCAP_PACKETS {
                    let meta = PacketMeta {
                        timestamp_ns: meta.timestamp_ns + i as u64,
                        ..meta
                    };
                    writer.write_packet(&pkt, &meta).expect("write");
                }
                black_box(writer.packets_written())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = generate, pcap_read, pcap_write
}
criterion_main!(benches);
