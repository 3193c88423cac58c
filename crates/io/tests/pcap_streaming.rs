//! A large capture is read with bounded memory: the reader never pulls
//! more from its source than the packets it has handed out (plus the
//! source's own buffer).

use std::cell::Cell;
use std::io::{self, BufReader, Read};
use std::rc::Rc;

use bpfjet_io::{PacketBatch, PacketSource, PcapReader};

const PACKETS: u64 = 100_000;

/// A 100k-packet pcap produced on demand, one record at a time, so the
/// test itself never holds the file. Counts every byte it hands out.
struct SyntheticCapture {
    next_record: u64,
    pending: Vec<u8>,
    pos: usize,
    produced: Rc<Cell<u64>>,
}

fn record_len(i: u64) -> usize {
    60 + (i % 1400) as usize
}

impl SyntheticCapture {
    fn new(produced: Rc<Cell<u64>>) -> Self {
        let mut header = Vec::new();
        header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&[0; 8]);
        header.extend_from_slice(&65_535u32.to_le_bytes());
        header.extend_from_slice(&1u32.to_le_bytes());
        SyntheticCapture {
            next_record: 0,
            pending: header,
            pos: 0,
            produced,
        }
    }

    fn refill(&mut self) {
        self.pending.clear();
        self.pos = 0;
        if self.next_record == PACKETS {
            return;
        }
        let i = self.next_record;
        let len = record_len(i) as u32;
        self.pending.extend_from_slice(&(i as u32).to_le_bytes());
        self.pending.extend_from_slice(&0u32.to_le_bytes());
        self.pending.extend_from_slice(&len.to_le_bytes());
        self.pending.extend_from_slice(&len.to_le_bytes());
        self.pending.extend((0..len).map(|b| (i as u8) ^ (b as u8)));
        self.next_record += 1;
    }
}

impl Read for SyntheticCapture {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.pending.len() {
            self.refill();
        }
        let n = buf.len().min(self.pending.len() - self.pos);
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        self.produced.set(self.produced.get() + n as u64);
        Ok(n)
    }
}

/// Reads the whole capture and returns the largest number of bytes that
/// were ever pulled from the source but not yet delivered as packets.
fn max_bytes_in_flight(reader: &mut PcapReader<impl Read>, produced: &Cell<u64>) -> u64 {
    let mut batch = PacketBatch::new();
    let mut delivered = 24u64;
    let mut packets = 0u64;
    let mut max_in_flight = 0;
    loop {
        let n = reader.next_batch(&mut batch).expect("clean capture");
        if n == 0 {
            break;
        }
        for p in &batch {
            assert_eq!(p.len(), record_len(packets), "packet {packets}");
            assert_eq!(p.data()[1], (packets as u8) ^ 1);
            assert!(
                p.frame_len() <= 4096,
                "frames never grow for <=1460-byte packets"
            );
            delivered += 16 + p.len() as u64;
            packets += 1;
        }
        max_in_flight = max_in_flight.max(produced.get() - delivered);
        assert_eq!(reader.offset(), delivered);
    }
    assert_eq!(packets, PACKETS);
    assert_eq!(reader.records_read(), PACKETS);
    max_in_flight
}

#[test]
fn unbuffered_source_is_read_exactly_as_far_as_delivered() {
    let produced = Rc::new(Cell::new(0));
    let mut reader = PcapReader::new(SyntheticCapture::new(produced.clone())).unwrap();
    assert_eq!(max_bytes_in_flight(&mut reader, &produced), 0);
}

#[test]
fn buffered_source_stays_within_its_buffer() {
    let produced = Rc::new(Cell::new(0));
    let capacity = 64 * 1024;
    let source = BufReader::with_capacity(capacity, SyntheticCapture::new(produced.clone()));
    let mut reader = PcapReader::new(source).unwrap();
    let in_flight = max_bytes_in_flight(&mut reader, &produced);
    assert!(in_flight <= capacity as u64, "{in_flight} bytes read ahead");
}
