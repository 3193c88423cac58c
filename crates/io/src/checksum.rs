//! The Internet checksum (RFC 1071) and the IPv4/IPv6 pseudo-headers that
//! TCP, UDP and ICMPv6 checksums cover.
//!
//! Sums are kept unfolded in a `u64` so pieces (pseudo-header, L4 header,
//! payload) can be summed separately and added: the generator precomputes
//! the payload's sum once and reuses it for every flow.

/// Adds `data` to `sum` as big-endian 16-bit words; an odd final byte is
/// padded with a zero byte. Only the last piece of a message may have odd
/// length.
pub fn sum_bytes(data: &[u8], mut sum: u64) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds the carries back in: the 16-bit ones' complement sum.
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum field value for a message whose words add up to `sum`.
pub fn finish(sum: u64) -> u16 {
    !fold(sum)
}

/// The checksum of `data` on its own (IPv4 header, ICMPv4).
pub fn internet_checksum(data: &[u8]) -> u16 {
    finish(sum_bytes(data, 0))
}

/// Sum of the IPv4 pseudo-header for a TCP/UDP segment of `l4_len` bytes.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, l4_len: u16) -> u64 {
    let sum = sum_bytes(&src, 0);
    let sum = sum_bytes(&dst, sum);
    sum + u64::from(protocol) + u64::from(l4_len)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1) for an upper-layer packet
/// of `l4_len` bytes.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, l4_len: u32) -> u64 {
    let sum = sum_bytes(&src, 0);
    let sum = sum_bytes(&dst, sum);
    sum + u64::from(l4_len >> 16) + u64::from(l4_len & 0xffff) + u64::from(next_header)
}

/// Where a frame's TCP/UDP checksum is and what it must cover.
struct L4 {
    /// Offset of the L4 header and its length (header and payload).
    start: usize,
    len: usize,
    /// Offset of the checksum field.
    check: usize,
    pseudo: u64,
    udp: bool,
}

/// The TCP or UDP segment of an Ethernet frame (an optional 802.1Q tag,
/// IPv4 without fragmentation or IPv6 without extension headers).
fn l4_of(frame: &[u8]) -> Option<L4> {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    if ethertype == 0x8100 {
        off += 4;
        ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    let ip = off + 2;
    let (proto, start, len, pseudo) = match ethertype {
        0x0800 => {
            let h = frame.get(ip..ip + 20)?;
            let ihl = usize::from(h[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // A fragment's checksum covers the whole datagram.
            if h[0] >> 4 != 4 || ihl < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
                return None;
            }
            let len = total.checked_sub(ihl)?;
            let pseudo = pseudo_header_v4(
                h[12..16].try_into().ok()?,
                h[16..20].try_into().ok()?,
                h[9],
                len as u16,
            );
            (h[9], ip + ihl, len, pseudo)
        }
        0x86dd => {
            let h = frame.get(ip..ip + 40)?;
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let pseudo = pseudo_header_v6(
                h[8..24].try_into().ok()?,
                h[24..40].try_into().ok()?,
                h[6],
                len as u32,
            );
            (h[6], ip + 40, len, pseudo)
        }
        _ => return None,
    };
    let (check, udp) = match proto {
        6 => (start + 16, false),
        17 => (start + 6, true),
        _ => return None,
    };
    if start + len > frame.len() || check + 2 > start + len {
        return None;
    }
    Some(L4 {
        start,
        len,
        check,
        pseudo,
        udp,
    })
}

/// A copy of `frame` with its TCP/UDP checksum completed, if the frame
/// left it to checksum offload: the sender's stack (`CHECKSUM_PARTIAL`, as
/// a veth peer's sockets do) put only the folded pseudo-header sum in the
/// field, and the device would have finished it. The kernel treats such a
/// frame as good; once AF_XDP has copied it out, the flag that said so is
/// gone, and the stack it is passed back to would count it as a checksum
/// error. None for every other frame — one whose checksum is right, or
/// wrong in any other way (it stays wrong, so corruption is not hidden).
pub fn complete_partial_l4(frame: &[u8]) -> Option<Vec<u8>> {
    let l4 = l4_of(frame)?;
    let field = u16::from_be_bytes([frame[l4.check], frame[l4.check + 1]]);
    if field != fold(l4.pseudo) || (l4.udp && field == 0) {
        return None;
    }
    let segment = &frame[l4.start..l4.start + l4.len];
    if fold(sum_bytes(segment, l4.pseudo)) == 0xffff {
        return None;
    }
    let mut out = frame.to_vec();
    out[l4.check..l4.check + 2].fill(0);
    let mut check = finish(sum_bytes(&out[l4.start..l4.start + l4.len], l4.pseudo));
    if l4.udp && check == 0 {
        check = 0xffff;
    }
    out[l4.check..l4.check + 2].copy_from_slice(&check.to_be_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/UDP frame from 10.0.0.1:4000 to 10.0.0.2:53 with
    /// `payload` and the given checksum field.
    fn udp4(payload: &[u8], check: Option<u16>) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 8 + payload.len()) as u16;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let c = internet_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let len = (8 + payload.len()) as u16;
        let mut udp = vec![0x0f, 0xa0, 0, 53];
        udp.extend_from_slice(&len.to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let pseudo = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, len);
        let full = finish(sum_bytes(&udp, pseudo));
        let field = check.unwrap_or(full);
        udp[6..8].copy_from_slice(&field.to_be_bytes());
        f.extend_from_slice(&udp);
        f
    }

    #[test]
    fn partial_checksums_are_completed_and_nothing_else_is_touched() {
        let payload = b"a datagram whose checksum the peer left to offload";
        let good = udp4(payload, None);
        let len = (8 + payload.len()) as u16;
        let partial_field = fold(pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, len));
        let partial = udp4(payload, Some(partial_field));
        assert_eq!(complete_partial_l4(&partial), Some(good.clone()));
        // Right already, or wrong in another way: left alone.
        assert_eq!(complete_partial_l4(&good), None);
        assert_eq!(complete_partial_l4(&udp4(payload, Some(0x1234))), None);
        // No checksum (IPv4 UDP may say so with 0).
        assert_eq!(complete_partial_l4(&udp4(payload, Some(0))), None);
        // A truncated frame is not read past its end.
        assert_eq!(complete_partial_l4(&partial[..partial.len() - 5]), None);
    }

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 §3: the sum is ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_bytes(&data, 0)), 0xddf2);
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn message_with_its_checksum_sums_to_all_ones() {
        let mut data = vec![0x45, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        data.extend_from_slice(&[0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let c = internet_checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(fold(sum_bytes(&data, 0)), 0xffff);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum_bytes(&[0x12, 0x34, 0x56], 0), 0x1234 + 0x5600);
    }
}
