//! Frames the tests feed programs.

/// A 64-byte Ethernet + IPv4 + UDP frame with recognisable bytes (the
/// kernel tests' packet): MACs 02:..:01 and 02:..:02, byte i = i from the
/// UDP header on.
pub fn eth_ipv4_udp_64() -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // destination MAC
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // source MAC
    p[12..14].copy_from_slice(&[0x08, 0x00]); // IPv4
    p[14] = 0x45;
    p[23] = 17; // UDP
    for (i, b) in p.iter_mut().enumerate().skip(34) {
        *b = i as u8;
    }
    p
}

/// A well-formed Ethernet + IPv4 + UDP frame: 02:..:02 → 02:..:01, `src`
/// → `dst`, ports 12345 → 80, `payload` after the UDP header (IPv4 and
/// UDP checksums left 0, as test frames usually are).
pub fn udp4(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f.extend_from_slice(&[0x08, 0x00]);
    let udp_len = (8 + payload.len()) as u16;
    let total = 20 + udp_len;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&12345u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `len` bytes counting up from `seed` (a recognisable body).
pub fn counting(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// `len` deterministic bytes that are not a simple count (byte i =
/// i * 37 + 11), so a shifted or reversed copy shows.
pub fn scrambled(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(11))
        .collect()
}

/// Lower-case hex of `bytes`, no spaces (test-run's `data_out`).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp4_lengths_are_consistent() {
        let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], &[1, 2, 3]);
        assert_eq!(f.len(), 14 + 20 + 8 + 3);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 31);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 11);
        assert_eq!(&f[30..34], &[10, 0, 0, 2]);
    }
}
