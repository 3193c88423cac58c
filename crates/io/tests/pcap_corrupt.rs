//! Every malformed capture ends in a precise error: never a panic, never a
//! silent early end.

mod common;

use std::io::{self, Read};

use bpfjet_io::{IoError, PacketBatch, PacketSource, PcapReader};
use common::{file_header, packet, record, Endian};

const LE: Endian = Endian::Little;

/// Reads until the end or the first error; returns packets read and the
/// error, if any.
fn drain(bytes: &[u8]) -> (usize, Option<IoError>) {
    let mut reader = match PcapReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (0, Some(e)),
    };
    let mut batch = PacketBatch::with_capacity(4);
    let mut packets = 0;
    loop {
        match reader.next_batch(&mut batch) {
            Ok(0) => return (packets, None),
            Ok(n) => packets += n,
            Err(e) => return (packets, Some(e)),
        }
    }
}

fn header_error(bytes: &[u8]) -> IoError {
    PcapReader::new(bytes).expect_err("header must be refused")
}

fn two_good_records() -> Vec<u8> {
    let mut f = file_header(LE, false, 1500, 1);
    record(&mut f, LE, 1, 0, &packet(60, 0), 60);
    record(&mut f, LE, 2, 0, &packet(100, 0), 100);
    f
}

#[test]
fn empty_and_short_headers_are_truncated() {
    for len in [0usize, 3, 10, 23] {
        let f = file_header(LE, false, 1500, 1);
        match header_error(&f[..len]) {
            IoError::PcapTruncatedFileHeader { got } => assert_eq!(got, len),
            other => panic!("{len}: {other}"),
        }
    }
}

#[test]
fn pcapng_gets_a_conversion_hint() {
    let ng = [
        0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a,
    ];
    let err = header_error(&ng);
    assert!(matches!(err, IoError::PcapNg), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("pcapng not supported") || msg.contains("pcapng, which is not supported"));
    assert!(msg.contains("editcap -F pcap"), "{msg}");
}

#[test]
fn foreign_magics_are_named() {
    let cases: &[(&[u8], &str)] = &[
        (&[0x1f, 0x8b, 8, 0], "gzip"),
        (&[0x34, 0xcd, 0xb2, 0xa1], "Kuznetzov"),
        (b"GET / HTTP/1.1\r\n", "expected a classic pcap magic"),
    ];
    for (bytes, hint) in cases {
        let mut f = bytes.to_vec();
        f.resize(24, 0);
        let msg = header_error(&f).to_string();
        assert!(msg.contains("byte offset 0"), "{msg}");
        assert!(msg.contains(hint), "{msg}");
    }
}

#[test]
fn wrong_version_and_link_type_are_refused() {
    let mut f = file_header(LE, false, 1500, 1);
    f[4] = 3;
    assert!(matches!(
        header_error(&f),
        IoError::PcapUnsupportedVersion { major: 3, minor: 4 }
    ));
    for (link_type, name) in [
        (113, "LINUX_SLL"),
        (101, "RAW"),
        (0, "NULL"),
        (9999, "unknown"),
    ] {
        let err = header_error(&file_header(Endian::Big, true, 1500, link_type));
        let msg = err.to_string();
        assert!(matches!(err, IoError::PcapUnsupportedLinkType { .. }));
        assert!(msg.contains(name) && msg.contains("Ethernet (1"), "{msg}");
    }
}

#[test]
fn truncated_record_header_names_record_and_offset() {
    let mut f = two_good_records();
    let third_at = f.len() as u64;
    f.extend_from_slice(&[0; 7]);
    let (packets, err) = drain(&f);
    assert_eq!(packets, 2, "the good records come first");
    match err {
        Some(IoError::PcapTruncatedRecordHeader {
            record,
            offset,
            got,
        }) => {
            assert_eq!((record, offset, got), (3, third_at, 7));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_record_data_names_record_and_offsets() {
    let mut f = two_good_records();
    let cut = f.len() - 30;
    f.truncate(cut);
    let (packets, err) = drain(&f);
    assert_eq!(packets, 1);
    let err = err.expect("error");
    let msg = err.to_string();
    match err {
        IoError::PcapTruncatedRecord {
            record,
            offset,
            expected,
            got,
            end_offset,
        } => {
            assert_eq!(record, 2);
            assert_eq!(offset, 24 + 16 + 60);
            assert_eq!(expected, 100);
            assert_eq!(got, 70);
            assert_eq!(end_offset, cut as u64);
        }
        other => panic!("{other}"),
    }
    assert!(
        msg.contains("record 2") && msg.contains("byte offset 100"),
        "{msg}"
    );
}

#[test]
fn record_longer_than_snaplen_is_corrupt() {
    let mut f = file_header(LE, false, 100, 1);
    record(&mut f, LE, 0, 0, &packet(100, 0), 100);
    record(&mut f, LE, 0, 0, &packet(101, 0), 101);
    let (packets, err) = drain(&f);
    assert_eq!(packets, 1);
    match err {
        Some(IoError::PcapRecordTooLong {
            record,
            offset,
            caplen,
            limit,
            limit_name,
        }) => {
            assert_eq!(
                (record, offset, caplen, limit),
                (2, 24 + 16 + 100, 101, 100)
            );
            assert!(limit_name.contains("snaplen"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn record_longer_than_256k_is_corrupt_whatever_the_snaplen() {
    for snaplen in [0u32, 1 << 30] {
        let mut f = file_header(LE, true, snaplen, 1);
        // Only the header: the reader must refuse before trying to read 1 GiB.
        f.extend_from_slice(&LE.u32(0));
        f.extend_from_slice(&LE.u32(0));
        f.extend_from_slice(&LE.u32(0x4000_0000));
        f.extend_from_slice(&LE.u32(0x4000_0000));
        let (_, err) = drain(&f);
        match err {
            Some(IoError::PcapRecordTooLong {
                record: 1,
                offset: 24,
                limit: 262_144,
                ..
            }) => {}
            other => panic!("snaplen {snaplen}: {other:?}"),
        }
    }
    // Exactly 256 KiB is still fine.
    let mut f = file_header(LE, true, 0, 1);
    record(&mut f, LE, 0, 0, &packet(262_144, 0), 262_144);
    assert_eq!(drain(&f).0, 1);
}

#[test]
fn timestamp_fraction_out_of_range_is_corrupt() {
    let mut f = file_header(Endian::Big, false, 1500, 1);
    record(&mut f, Endian::Big, 0, 1_000_000, &packet(10, 0), 10);
    match drain(&f).1 {
        Some(IoError::PcapBadTimestamp {
            record: 1,
            offset: 24,
            fraction: 1_000_000,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn reader_stays_failed_after_an_error() {
    let mut f = two_good_records();
    f.extend_from_slice(&[1, 2, 3]);
    let mut reader = PcapReader::new(&f[..]).unwrap();
    let mut batch = PacketBatch::with_capacity(64);
    assert_eq!(reader.next_batch(&mut batch).unwrap(), 2);
    assert!(matches!(
        reader.next_batch(&mut batch),
        Err(IoError::PcapTruncatedRecordHeader { record: 3, .. })
    ));
    for _ in 0..3 {
        let err = reader
            .next_batch(&mut batch)
            .expect_err("must not look like a clean end");
        assert!(err.to_string().contains("already failed"), "{err}");
    }
}

/// A stream that fails with an I/O error after `ok` bytes.
struct FailingRead<'a> {
    data: &'a [u8],
    ok: usize,
}

impl Read for FailingRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.ok).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn io_errors_carry_the_offset() {
    let f = two_good_records();
    let mut reader = PcapReader::new(FailingRead { data: &f, ok: 50 }).unwrap();
    let mut batch = PacketBatch::new();
    match reader.next_batch(&mut batch) {
        Err(IoError::Read { offset, source }) => {
            assert_eq!(offset, 50);
            assert!(source.to_string().contains("disk on fire"));
        }
        other => panic!("{other:?}"),
    }
}

/// Cutting a valid file anywhere either ends exactly on a record boundary
/// (all records before the cut, no error) or gives an error; it never
/// reports a clean end with a record missing.
#[test]
fn every_truncation_point_is_detected() {
    let mut f = file_header(LE, true, 0, 1);
    let mut boundaries = vec![f.len()];
    for i in 0..6 {
        record(&mut f, LE, i, i * 10, &packet(i as usize * 7, i as u8), 999);
        boundaries.push(f.len());
    }
    for cut in 0..=f.len() {
        let (packets, err) = drain(&f[..cut]);
        match boundaries.iter().position(|&b| b == cut) {
            Some(records) => {
                assert!(err.is_none(), "cut {cut}: {err:?}");
                assert_eq!(packets, records, "cut {cut}");
            }
            None => assert!(err.is_some(), "cut {cut}: silently read {packets} packets"),
        }
    }
}

/// Random byte corruption of a valid file never panics and never reads
/// past what the file holds.
#[test]
fn corrupted_bytes_never_panic() {
    let mut f = file_header(LE, false, 2000, 1);
    for i in 0..20 {
        record(
            &mut f,
            LE,
            i,
            0,
            &packet(40 + i as usize * 50, i as u8),
            1000,
        );
    }
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut g = f.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % g.len() as u64) as usize;
            g[at] = next() as u8;
        }
        let (packets, _) = drain(&g);
        assert!(packets <= 20 + g.len() / 16);
    }
}
