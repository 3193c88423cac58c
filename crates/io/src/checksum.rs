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

#[cfg(test)]
mod tests {
    use super::*;

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
