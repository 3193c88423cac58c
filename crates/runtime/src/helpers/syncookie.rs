//! The raw SYN-cookie helpers (`bpf_tcp_raw_gen_syncookie_ipv4/6`,
//! `bpf_tcp_raw_check_syncookie_ipv4/6`): a SYN proxy in XDP answers a SYN
//! with a cookie as its sequence number and checks the ACK that comes back,
//! from headers the program parsed, with no socket.
//!
//! The arithmetic is the kernel's (net/ipv4/syncookies.c,
//! net/ipv6/syncookies.c): the cookie is `hash0 + the client's sequence +
//! (minute count << 24) + ((hash1(count) + MSS index) & 0xffffff)`, the
//! hashes SipHash-2-4 of the addresses and ports under two secrets, the
//! count the kernel's `tcp_cookie_time()` (jiffies / 60 HZ), a cookie
//! valid for two counts. The secrets are this process's, drawn once from
//! the OS: cookies bpfjet makes are checked by bpfjet, as the kernel's are
//! by the kernel that made them (its secrets never leave it).

use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::TCP_RAW_GEN_SYNCOOKIE_IPV4,
        "tcp_raw_gen_syncookie_ipv4",
        |ctx, a| Ok(gen(&Ip::read(ctx, a[0], false)?, ctx.read_mem(a[1], a[2])?)),
    ));
    r.register(Helper::new(
        ids::TCP_RAW_GEN_SYNCOOKIE_IPV6,
        "tcp_raw_gen_syncookie_ipv6",
        |ctx, a| Ok(gen(&Ip::read(ctx, a[0], true)?, ctx.read_mem(a[1], a[2])?)),
    ));
    r.register(Helper::new(
        ids::TCP_RAW_CHECK_SYNCOOKIE_IPV4,
        "tcp_raw_check_syncookie_ipv4",
        |ctx, a| Ok(check(&Ip::read(ctx, a[0], false)?, ctx.read_mem(a[1], 20)?)),
    ));
    r.register(Helper::new(
        ids::TCP_RAW_CHECK_SYNCOOKIE_IPV6,
        "tcp_raw_check_syncookie_ipv6",
        |ctx, a| Ok(check(&Ip::read(ctx, a[0], true)?, ctx.read_mem(a[1], 20)?)),
    ));
}

/// The IP header the program passed.
enum Ip {
    V4([u8; 20]),
    V6([u8; 40]),
}

impl Ip {
    /// The IPv4 (20 bytes) or IPv6 (40 bytes) header at `addr`.
    fn read(ctx: &HelperCtx<'_>, addr: u64, v6: bool) -> Result<Ip, Fault> {
        let bytes = ctx.read_mem(addr, if v6 { 40 } else { 20 })?;
        Ok(match v6 {
            false => Ip::V4(bytes.try_into().expect("20 bytes")),
            true => Ip::V6(bytes.try_into().expect("40 bytes")),
        })
    }

    /// The kernel's MSS table for the family (`msstab`).
    fn msstab(&self) -> &'static [u16] {
        match self {
            Ip::V4(_) => &[536, 1300, 1440, 1460],
            Ip::V6(_) => &[1280 - 60, 1480 - 60, 1500 - 60, 9000 - 60],
        }
    }

    /// `cookie_hash(saddr, daddr, sport, dport, count, c)`.
    fn hash(&self, th: &[u8], count: u32, c: usize) -> u32 {
        let key = &secrets()[c];
        let (sport, dport) = (&th[0..2], &th[2..4]);
        match self {
            // siphash_4u32(saddr, daddr, sport << 16 | dport, count): four
            // u32 as they lie in memory (the ports' u32 built from the
            // big-endian fields as the kernel's `__be16` values).
            Ip::V4(h) => {
                let mut m = [0u8; 16];
                m[0..4].copy_from_slice(&h[12..16]);
                m[4..8].copy_from_slice(&h[16..20]);
                let ports = u32::from(u16::from_ne_bytes([sport[0], sport[1]])) << 16
                    | u32::from(u16::from_ne_bytes([dport[0], dport[1]]));
                m[8..12].copy_from_slice(&ports.to_ne_bytes());
                m[12..16].copy_from_slice(&count.to_ne_bytes());
                siphash24(key, &m) as u32
            }
            // siphash of { saddr, daddr, u32 count, __be16 sport, dport }.
            Ip::V6(h) => {
                let mut m = [0u8; 40];
                m[0..32].copy_from_slice(&h[8..40]);
                m[32..36].copy_from_slice(&count.to_ne_bytes());
                m[36..38].copy_from_slice(sport);
                m[38..40].copy_from_slice(dport);
                siphash24(key, &m) as u32
            }
        }
    }
}

const COOKIEBITS: u32 = 24;
const COOKIEMASK: u32 = (1 << COOKIEBITS) - 1;
const MAX_SYNCOOKIE_AGE: u32 = 2;
/// The kernel's `TCP_MSS_DEFAULT`, for a SYN without an MSS option.
const TCP_MSS_DEFAULT: u16 = 536;

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// `tcp_cookie_time()`: the minute count the cookie carries.
fn cookie_time() -> u32 {
    (super::time::jiffies64() / (60 * super::time::hz())) as u32
}

/// `bpf_tcp_raw_gen_syncookie_*(iph, th, th_len)`: `-EINVAL` unless
/// `th_len` is the header's own length (`doff * 4`, at least 20); else
/// the cookie in the low 32 bits and the MSS it encodes in the high ones.
fn gen(ip: &Ip, th: &[u8]) -> u64 {
    if th.len() < 20 || th.len() != usize::from(th[12] >> 4) * 4 {
        return errno::neg(errno::EINVAL);
    }
    let mss = mss_option(th).unwrap_or(TCP_MSS_DEFAULT);
    let tab = ip.msstab();
    let mut ind = tab.len() - 1;
    while ind > 0 && mss < tab[ind] {
        ind -= 1;
    }
    let count = cookie_time();
    let seq = be32(&th[4..8]);
    let cookie = ip
        .hash(th, 0, 0)
        .wrapping_add(seq)
        .wrapping_add(count << COOKIEBITS)
        .wrapping_add(ip.hash(th, count, 1).wrapping_add(ind as u32) & COOKIEMASK);
    u64::from(cookie) | u64::from(tab[ind]) << 32
}

/// `bpf_tcp_raw_check_syncookie_*(iph, th)`: 0 when the ACK's
/// acknowledgment number minus one is a cookie of this connection made in
/// the last two minute counts, `-EACCES` otherwise.
fn check(ip: &Ip, th: &[u8]) -> u64 {
    let cookie = be32(&th[8..12]).wrapping_sub(1);
    let seq = be32(&th[4..8]).wrapping_sub(1);
    let count = cookie_time();
    let rest = cookie.wrapping_sub(ip.hash(th, 0, 0).wrapping_add(seq));
    let diff = count.wrapping_sub(rest >> COOKIEBITS) & (u32::MAX >> COOKIEBITS);
    if diff >= MAX_SYNCOOKIE_AGE {
        return errno::neg(errno::EACCES);
    }
    let ind = rest.wrapping_sub(ip.hash(th, count.wrapping_sub(diff), 1)) & COOKIEMASK;
    if (ind as usize) < ip.msstab().len() {
        0
    } else {
        errno::neg(errno::EACCES)
    }
}

/// The MSS option among the TCP options (`tcp_parse_mss_option(th, 0)`):
/// kind 2, length 4, non-zero (the last such one); the walk ends at kind 0
/// or at a malformed or partial option.
fn mss_option(th: &[u8]) -> Option<u16> {
    let opts = &th[20..];
    let mut mss = None;
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = opts.get(i + 1) else { break };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    break;
                }
                if kind == 2 && len == 4 {
                    let v = u16::from_be_bytes([opts[i + 2], opts[i + 3]]);
                    if v != 0 {
                        mss = Some(v);
                    }
                }
                i += len;
            }
        }
    }
    mss
}

/// The two secrets (`syncookie_secret[2]`), drawn once from the OS's
/// randomness through std's randomly keyed hasher (which has its own
/// fallbacks, where a bare `getrandom` loop could spin on an error).
fn secrets() -> &'static [[u64; 2]; 2] {
    use std::hash::{BuildHasher, Hasher};
    static SECRETS: std::sync::OnceLock<[[u64; 2]; 2]> = std::sync::OnceLock::new();
    SECRETS.get_or_init(|| {
        let keys = std::collections::hash_map::RandomState::new();
        let w = |i: u64| {
            let mut h = keys.build_hasher();
            h.write_u64(i);
            h.finish()
        };
        [[w(0), w(1)], [w(2), w(3)]]
    })
}

/// SipHash-2-4 of `m` under the 128-bit key `k` (the kernel's `siphash`).
fn siphash24(k: &[u64; 2], m: &[u8]) -> u64 {
    let mut v = [
        k[0] ^ 0x736f_6d65_7073_6575,
        k[1] ^ 0x646f_7261_6e64_6f6d,
        k[0] ^ 0x6c79_6765_6e65_7261,
        k[1] ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |word: u64, v: &mut [u64; 4]| {
        v[3] ^= word;
        round(v);
        round(v);
        v[0] ^= word;
    };
    let mut chunks = m.chunks_exact(8);
    for c in &mut chunks {
        compress(u64::from_le_bytes(c.try_into().expect("8 bytes")), &mut v);
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    last[7] = m.len() as u8;
    compress(u64::from_le_bytes(last), &mut v);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // The SipHash paper's key 00..0f; messages 00..(n-1).
        let k = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let m: Vec<u8> = (0..16).collect();
        assert_eq!(siphash24(&k, &[]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(&k, &m[..8]), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash24(&k, &m[..15]), 0xa129_ca61_49be_45e5);
    }

    fn syn(mss: Option<u16>, seq: u32) -> Vec<u8> {
        let mut th = vec![0u8; 20];
        th[0..2].copy_from_slice(&40000u16.to_be_bytes());
        th[2..4].copy_from_slice(&80u16.to_be_bytes());
        th[4..8].copy_from_slice(&seq.to_be_bytes());
        th[13] = 0x02;
        if let Some(m) = mss {
            th.extend_from_slice(&[2, 4]);
            th.extend_from_slice(&m.to_be_bytes());
        }
        th[12] = ((th.len() / 4) as u8) << 4;
        th
    }

    #[test]
    fn a_cookie_checks_once_acknowledged_and_encodes_the_mss() {
        let mut iph = [0u8; 20];
        iph[12..16].copy_from_slice(&[10, 0, 0, 1]);
        iph[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let ip = Ip::V4(iph);
        for (mss, want) in [
            (None, 536),
            (Some(1460), 1460),
            (Some(1400), 1300),
            (Some(9000), 1460),
        ] {
            let th = syn(mss, 1000);
            let r = gen(&ip, &th);
            assert_eq!(r >> 32, want, "mss {mss:?}");
            // The ACK: seq + 1, ack = cookie + 1.
            let mut ack = th[..20].to_vec();
            ack[4..8].copy_from_slice(&1001u32.to_be_bytes());
            ack[8..12].copy_from_slice(&(r as u32).wrapping_add(1).to_be_bytes());
            assert_eq!(check(&ip, &ack), 0);
            // A cookie from eight minute counts ago has expired.
            let old = (r as u32).wrapping_sub(8 << COOKIEBITS);
            ack[8..12].copy_from_slice(&old.wrapping_add(1).to_be_bytes());
            assert_eq!(check(&ip, &ack), errno::neg(errno::EACCES));
            // Another client port: another hash.
            ack[8..12].copy_from_slice(&(r as u32).wrapping_add(1).to_be_bytes());
            ack[0] ^= 1;
            assert_eq!(check(&ip, &ack), errno::neg(errno::EACCES));
        }
        let mut bad = syn(None, 1);
        bad[12] = 6 << 4;
        assert_eq!(gen(&ip, &bad), errno::neg(errno::EINVAL));
    }
}
