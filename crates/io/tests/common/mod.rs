//! Helpers shared by the integration tests. They deliberately do not use
//! the crate's own encoders or checksum routine, so a bug there cannot
//! hide behind the same bug here.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Byte order for hand-crafted pcap files.
#[derive(Clone, Copy, Debug)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn u32(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    pub fn u16(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
}

/// A classic pcap file header, written from the format description.
pub fn file_header(endian: Endian, nanos: bool, snaplen: u32, link_type: u32) -> Vec<u8> {
    let magic = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut out = Vec::new();
    out.extend_from_slice(&endian.u32(magic));
    out.extend_from_slice(&endian.u16(2));
    out.extend_from_slice(&endian.u16(4));
    out.extend_from_slice(&endian.u32(0)); // thiszone
    out.extend_from_slice(&endian.u32(0)); // sigfigs
    out.extend_from_slice(&endian.u32(snaplen));
    out.extend_from_slice(&endian.u32(link_type));
    out
}

/// Appends one record with explicit header fields.
pub fn record(out: &mut Vec<u8>, endian: Endian, sec: u32, frac: u32, data: &[u8], orig_len: u32) {
    out.extend_from_slice(&endian.u32(sec));
    out.extend_from_slice(&endian.u32(frac));
    out.extend_from_slice(&endian.u32(data.len() as u32));
    out.extend_from_slice(&endian.u32(orig_len));
    out.extend_from_slice(data);
}

/// A recognisable packet body: `len` bytes starting at `seed`.
pub fn packet(len: usize, seed: u8) -> Vec<u8> {
    bpfjet_testsupport::packet::counting(len, seed)
}

/// RFC 1071 checksum verification written independently of the crate:
/// a 32-bit accumulator over bytes read pairwise, folded at the end.
/// Returns the folded sum; a correct message (checksum included) gives 0xffff.
pub fn ones_sum(chunks: &[&[u8]]) -> u16 {
    let mut acc: u32 = 0;
    let mut pending: Option<u8> = None;
    for chunk in chunks {
        for &b in chunk.iter() {
            match pending.take() {
                None => pending = Some(b),
                Some(hi) => {
                    acc += (u32::from(hi) << 8) | u32::from(b);
                    acc = (acc & 0xffff) + (acc >> 16);
                }
            }
        }
    }
    if let Some(hi) = pending {
        acc += u32::from(hi) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("bpfjet-io-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
