//! pcap writer and reader agree with each other and with hand-crafted
//! files of both byte orders and both timestamp resolutions.

mod common;

use bpfjet_io::pcap::{ByteOrder, PcapWriterOptions, TimestampResolution};
use bpfjet_io::{PacketBatch, PacketMeta, PacketSink, PacketSource, PcapReader, PcapWriter};
use common::{file_header, packet, record, Endian, TempDir};

fn read_all(bytes: &[u8]) -> Vec<(Vec<u8>, PacketMeta)> {
    let mut reader = PcapReader::new(bytes).expect("header");
    let mut batch = PacketBatch::with_capacity(3);
    let mut out = Vec::new();
    loop {
        let n = reader.next_batch(&mut batch).expect("read");
        assert_eq!(n, batch.len());
        if n == 0 {
            break;
        }
        for p in &batch {
            out.push((p.data().to_vec(), *p.meta()));
        }
    }
    out
}

fn sample_packets() -> Vec<(Vec<u8>, PacketMeta)> {
    [
        (60usize, 1_700_000_000_123_456_789u64),
        (1514, 1_700_000_001_000_000_001),
        (0, 5),
        (9000, 0),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(len, ts))| {
        (
            packet(len, i as u8),
            PacketMeta {
                timestamp_ns: ts,
                orig_len: len as u32,
                ..PacketMeta::default()
            },
        )
    })
    .collect()
}

#[test]
fn nanosecond_round_trip_keeps_bytes_and_timestamps() {
    let packets = sample_packets();
    let mut writer = PcapWriter::new(Vec::new(), PcapWriterOptions::default()).unwrap();
    for (data, meta) in &packets {
        writer.write(data, meta).unwrap();
    }
    assert_eq!(writer.packets_written(), packets.len() as u64);
    let bytes = writer.into_inner().unwrap();
    assert_eq!(read_all(&bytes), packets);
}

#[test]
fn microsecond_round_trip_truncates_to_microseconds() {
    let packets = sample_packets();
    let options = PcapWriterOptions {
        resolution: TimestampResolution::Micros,
        ..PcapWriterOptions::default()
    };
    let mut writer = PcapWriter::new(Vec::new(), options).unwrap();
    for (data, meta) in &packets {
        writer.write(data, meta).unwrap();
    }
    let bytes = writer.into_inner().unwrap();
    let reader = PcapReader::new(&bytes[..]).unwrap();
    assert_eq!(reader.header().resolution, TimestampResolution::Micros);
    let expected: Vec<_> = packets
        .iter()
        .map(|(d, m)| {
            let mut m = *m;
            m.timestamp_ns -= m.timestamp_ns % 1_000;
            (d.clone(), m)
        })
        .collect();
    assert_eq!(read_all(&bytes), expected);
}

#[test]
fn writer_output_matches_the_format_byte_for_byte() {
    let mut expected = file_header(Endian::Little, true, 262_144, 1);
    record(
        &mut expected,
        Endian::Little,
        7,
        123_456_789,
        &packet(60, 3),
        60,
    );
    record(&mut expected, Endian::Little, 8, 0, &packet(20, 9), 100);

    let mut writer = PcapWriter::new(Vec::new(), PcapWriterOptions::default()).unwrap();
    let meta = |ts, orig_len| PacketMeta {
        timestamp_ns: ts,
        orig_len,
        ..PacketMeta::default()
    };
    writer
        .write_packet(&packet(60, 3), &meta(7_123_456_789, 60))
        .unwrap();
    // A packet from a truncated capture keeps its original wire length.
    writer
        .write_packet(&packet(20, 9), &meta(8_000_000_000, 100))
        .unwrap();
    assert_eq!(writer.into_inner().unwrap(), expected);
}

#[test]
fn writer_cuts_packets_at_its_snaplen() {
    let options = PcapWriterOptions {
        snaplen: 16,
        ..PcapWriterOptions::default()
    };
    let mut writer = PcapWriter::new(Vec::new(), options).unwrap();
    writer
        .write_packet(&packet(60, 0), &PacketMeta::default())
        .unwrap();
    let got = read_all(&writer.into_inner().unwrap());
    assert_eq!(got[0].0, packet(16, 0));
    assert_eq!(got[0].1.orig_len, 60);
}

#[test]
fn big_and_little_endian_files_read_the_same() {
    for nanos in [false, true] {
        let frac = if nanos { 999_999_999 } else { 999_999 };
        let unit = if nanos { 1 } else { 1_000 };
        let mut files = Vec::new();
        for endian in [Endian::Big, Endian::Little] {
            let mut f = file_header(endian, nanos, 65_535, 1);
            record(&mut f, endian, 1, frac, &packet(64, 1), 64);
            record(&mut f, endian, 0x0102_0304, 0, &packet(33, 2), 1500);
            files.push(f);
        }
        let (big, little) = (read_all(&files[0]), read_all(&files[1]));
        assert_eq!(big, little, "nanos={nanos}");
        assert_eq!(big.len(), 2);
        assert_eq!(big[0].0, packet(64, 1));
        assert_eq!(big[0].1.timestamp_ns, 1_000_000_000 + frac as u64 * unit);
        assert_eq!(big[1].1.timestamp_ns, 0x0102_0304 * 1_000_000_000);
        assert_eq!(big[1].1.orig_len, 1500);

        let header = *PcapReader::new(&files[0][..]).unwrap().header();
        assert_eq!(header.byte_order, ByteOrder::Big);
        assert_eq!(header.snaplen, 65_535);
        let expected = if nanos {
            TimestampResolution::Nanos
        } else {
            TimestampResolution::Micros
        };
        assert_eq!(header.resolution, expected);
    }
}

#[test]
fn packets_land_in_xdp_frames_with_headroom() {
    let mut f = file_header(Endian::Little, false, 0, 1);
    record(&mut f, Endian::Little, 0, 0, &packet(60, 0), 60);
    let mut reader = PcapReader::new(&f[..]).unwrap().with_ingress(7, 3);
    let mut batch = PacketBatch::new();
    assert_eq!(reader.next_batch(&mut batch).unwrap(), 1);
    let p = &batch.packets()[0];
    assert_eq!(p.data_offset(), 256);
    assert!(p.tailroom() >= 256);
    assert_eq!((p.meta().ingress_ifindex, p.meta().rx_queue), (7, 3));
    // The end is sticky.
    assert_eq!(reader.next_batch(&mut batch).unwrap(), 0);
    assert_eq!(reader.next_batch(&mut batch).unwrap(), 0);
}

#[test]
fn files_on_disk_round_trip() {
    let dir = TempDir::new("roundtrip");
    let path = dir.path().join("t.pcap");
    let packets = sample_packets();
    let mut writer = PcapWriter::create(&path, PcapWriterOptions::default()).unwrap();
    for (data, meta) in &packets {
        writer.write(data, meta).unwrap();
    }
    writer.flush().unwrap();
    drop(writer);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(read_all(&bytes), packets);

    let mut reader = PcapReader::open(&path).unwrap();
    let mut batch = PacketBatch::new();
    assert_eq!(reader.next_batch(&mut batch).unwrap(), packets.len());
    assert_eq!(reader.offset(), bytes.len() as u64);

    let missing = PcapReader::open(dir.path().join("nope.pcap")).unwrap_err();
    assert!(missing.to_string().contains("nope.pcap"), "{missing}");
}
