//! The on-disk layout of classic pcap: a 24-byte file header, then records
//! of a 16-byte header followed by the captured bytes.

use crate::IoError;

pub(crate) const FILE_HEADER_LEN: usize = 24;
pub(crate) const RECORD_HEADER_LEN: usize = 16;

/// The largest record the reader accepts, whatever the file's snaplen says:
/// libpcap's own ceiling (`MAXIMUM_SNAPLEN`). A larger length is a corrupt
/// header, and refusing it keeps one bad record from allocating gigabytes.
pub const MAX_RECORD_LEN: u32 = 256 * 1024;

/// `LINKTYPE_ETHERNET`: the only link type XDP programs can run on.
pub const LINKTYPE_ETHERNET: u32 = 1;

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Alexey Kuznetzov's patched libpcap format, with a longer record header.
const MAGIC_KUZNETZOV: u32 = 0xa1b2_cd34;
/// The first block type of every pcapng file (the section header block);
/// the same bytes in either byte order.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Timestamp resolution, chosen by the file's magic number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampResolution {
    Micros,
    Nanos,
}

impl TimestampResolution {
    /// Fraction units per second.
    pub fn units_per_second(self) -> u32 {
        match self {
            TimestampResolution::Micros => 1_000_000,
            TimestampResolution::Nanos => 1_000_000_000,
        }
    }

    /// Nanoseconds per fraction unit.
    pub fn nanos_per_unit(self) -> u64 {
        match self {
            TimestampResolution::Micros => 1_000,
            TimestampResolution::Nanos => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimestampResolution::Micros => "microsecond",
            TimestampResolution::Nanos => "nanosecond",
        }
    }

    fn magic(self) -> u32 {
        match self {
            TimestampResolution::Micros => MAGIC_MICROS,
            TimestampResolution::Nanos => MAGIC_NANOS,
        }
    }
}

/// Byte order of every header field, as the writer's host had it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    #[inline]
    pub(crate) fn u32_at(self, bytes: &[u8], at: usize) -> u32 {
        let b = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    #[inline]
    pub(crate) fn u16_at(self, bytes: &[u8], at: usize) -> u16 {
        let b = [bytes[at], bytes[at + 1]];
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }
}

/// The file header of a classic pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapHeader {
    pub byte_order: ByteOrder,
    pub resolution: TimestampResolution,
    pub version_major: u16,
    pub version_minor: u16,
    /// Largest number of bytes captured per packet; 0 in files from some
    /// writers that meant "unlimited".
    pub snaplen: u32,
    /// The link type (low 16 bits of the header's link-type field; the high
    /// bits carry optional FCS information that XDP has no use for).
    pub link_type: u32,
}

impl PcapHeader {
    /// Parses and validates the first `got` bytes of a file (`got <= 24`
    /// when the file was shorter than a header). Format errors that the
    /// magic alone proves (pcapng, gzip, not pcap) win over truncation, so
    /// a short pcapng file still gets the pcapng message.
    pub(crate) fn parse(bytes: &[u8; FILE_HEADER_LEN], got: usize) -> Result<Self, IoError> {
        if got >= 4 {
            let first = [bytes[0], bytes[1], bytes[2], bytes[3]];
            if first == PCAPNG_MAGIC {
                return Err(IoError::PcapNg);
            }
            if Self::detect(first).is_none() {
                return Err(IoError::PcapBadMagic {
                    magic: u32::from_be_bytes(first),
                    hint: magic_hint(first),
                });
            }
        }
        if got < FILE_HEADER_LEN {
            return Err(IoError::PcapTruncatedFileHeader { got });
        }
        let Some((byte_order, resolution)) = Self::detect([bytes[0], bytes[1], bytes[2], bytes[3]])
        else {
            // Unreachable after the check above, but an error beats a panic.
            return Err(IoError::PcapBadMagic {
                magic: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
                hint: "",
            });
        };
        let version_major = byte_order.u16_at(bytes, 4);
        let version_minor = byte_order.u16_at(bytes, 6);
        if version_major != 2 {
            return Err(IoError::PcapUnsupportedVersion {
                major: version_major,
                minor: version_minor,
            });
        }
        // Bytes 8..16 are thiszone and sigfigs, which every writer sets to 0
        // and no reader uses.
        let snaplen = byte_order.u32_at(bytes, 16);
        let link_type = byte_order.u32_at(bytes, 20) & 0xffff;
        if link_type != LINKTYPE_ETHERNET {
            return Err(IoError::PcapUnsupportedLinkType {
                link_type,
                name: link_type_name(link_type),
            });
        }
        Ok(PcapHeader {
            byte_order,
            resolution,
            version_major,
            version_minor,
            snaplen,
            link_type,
        })
    }

    fn detect(first: [u8; 4]) -> Option<(ByteOrder, TimestampResolution)> {
        let le = u32::from_le_bytes(first);
        let be = u32::from_be_bytes(first);
        [TimestampResolution::Micros, TimestampResolution::Nanos]
            .into_iter()
            .find_map(|res| {
                if le == res.magic() {
                    Some((ByteOrder::Little, res))
                } else if be == res.magic() {
                    Some((ByteOrder::Big, res))
                } else {
                    None
                }
            })
    }

    /// The header as the writer emits it: little-endian whatever the host,
    /// so the same packets always produce the same file bytes.
    pub(crate) fn encode_le(
        resolution: TimestampResolution,
        snaplen: u32,
    ) -> [u8; FILE_HEADER_LEN] {
        let mut out = [0u8; FILE_HEADER_LEN];
        out[0..4].copy_from_slice(&resolution.magic().to_le_bytes());
        out[4..6].copy_from_slice(&2u16.to_le_bytes());
        out[6..8].copy_from_slice(&4u16.to_le_bytes());
        out[16..20].copy_from_slice(&snaplen.to_le_bytes());
        out[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out
    }

    /// The captured-length ceiling for records of this file and how to
    /// name it in an error.
    pub(crate) fn record_limit(&self) -> (u32, &'static str) {
        if self.snaplen == 0 || self.snaplen > MAX_RECORD_LEN {
            (MAX_RECORD_LEN, "the maximum record length")
        } else {
            (self.snaplen, "the file's snaplen")
        }
    }
}

fn magic_hint(first: [u8; 4]) -> &'static str {
    let le = u32::from_le_bytes(first);
    let be = u32::from_be_bytes(first);
    if first[..2] == GZIP_MAGIC {
        "; it looks gzip-compressed: decompress it first"
    } else if le == MAGIC_KUZNETZOV || be == MAGIC_KUZNETZOV {
        "; this is Kuznetzov's modified pcap, which is not supported: \
         convert it with `editcap -F pcap IN OUT`"
    } else {
        "; expected a classic pcap magic (a1b2c3d4 or a1b23c4d, either byte order)"
    }
}

/// Names for the link types a user is likely to hand us by mistake.
fn link_type_name(link_type: u32) -> &'static str {
    match link_type {
        0 => "NULL (BSD loopback)",
        101 => "RAW (IP without link header)",
        105 => "IEEE802_11",
        113 => "LINUX_SLL (Linux cooked capture, `tcpdump -i any`)",
        127 => "IEEE802_11_RADIOTAP",
        228 => "IPV4",
        229 => "IPV6",
        276 => "LINUX_SLL2 (Linux cooked capture v2, `tcpdump -i any`)",
        _ => "unknown",
    }
}
