//! The `--gen SPEC` language: comma-separated `KEY=VALUE` items.
//!
//! ```text
//! proto=udp,ip=4,flows=1000,size=64,dist=zipf:1.1,dst=10.0.0.1:80,src=192.168.0.0/16,count=1000000,seed=7
//! ```
//!
//! | key     | values                                                     | default |
//! |---------|------------------------------------------------------------|---------|
//! | `proto` | `tcp`, `udp`, `icmp` (echo request)                        | `udp` |
//! | `ip`    | `4`, `6`                                                   | `6` if any `dst`/`src` address is IPv6, else `4` |
//! | `flows` | distinct 5-tuples, 1 ..= 16777216                          | `1` |
//! | `size`  | frame bytes without FCS, `N` or `MIN-MAX` (each flow gets one size, uniform in the range); header size ..= 9000 | `64`, raised to the header size (74 for TCP over IPv6) |
//! | `dist`  | flow popularity: `uniform` or `zipf:S` with S > 0 (flow 0 most popular) | `uniform` |
//! | `dst`   | `ADDR[:PORT]` (IPv6 as `[ADDR]:PORT`), several as `a;b` or by repeating the key; flows are spread round-robin over them | `10.0.0.1:80` / `[fd00::1]:80` |
//! | `src`   | source prefix `ADDR/LEN` or one `ADDR`                      | `192.168.0.0/16` / `fd00:1::/64` |
//! | `sport` | source port `PORT` or `LO-HI` (the echo identifier for ICMP) | `1024-65535` |
//! | `count` | packets to generate, `N` or `unbounded`                    | `1000000` |
//! | `flags` | TCP flags `fin syn rst psh ack urg ece cwr` joined by `+` or `\|`, or `none` (TCP only) | `ack` |
//! | `seed`  | `N` or `0xHEX`: same spec and seed, same packets, always    | `0` |
//! | `smac`  | source MAC `aa:bb:cc:dd:ee:ff`                              | `02:00:00:00:00:01` |
//! | `dmac`  | destination MAC                                             | `02:00:00:00:00:02` |
//!
//! Source hosts are numbered from the first address after the prefix's
//! network address (and before IPv4's broadcast address), so a /16 gives
//! 65534 sources. Flow `i` takes destination `i mod D`, then the next
//! source host, and moves to the next source port only once every host was
//! used: `flows` cannot exceed destinations × hosts × ports.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use crate::IoError;

/// The most flows a generator builds templates for: ~90 bytes of memory
/// each (header template, size, Zipf table), so the ceiling costs ~1.5 GB.
pub const MAX_FLOWS: u32 = 1 << 24;
/// Largest frame: a common jumbo MTU.
pub const MAX_FRAME_SIZE: u16 = 9000;
const DEFAULT_FRAME_SIZE: u16 = 64;
const DEFAULT_COUNT: u64 = 1_000_000;
const ETH_HEADER_LEN: u16 = 14;

const KEYS: &str = "proto, ip, flows, size, dist, dst, src, sport, count, flags, seed, smac, dmac";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Proto {
    Tcp,
    Udp,
    Icmp,
}

impl L4Proto {
    pub fn name(self) -> &'static str {
        match self {
            L4Proto::Tcp => "tcp",
            L4Proto::Udp => "udp",
            L4Proto::Icmp => "icmp",
        }
    }

    /// L4 header bytes the generator writes (no TCP options).
    pub fn header_len(self) -> u16 {
        match self {
            L4Proto::Tcp => 20,
            L4Proto::Udp | L4Proto::Icmp => 8,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    V4,
    V6,
}

impl IpVersion {
    pub fn number(self) -> u8 {
        match self {
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }

    pub fn header_len(self) -> u16 {
        match self {
            IpVersion::V4 => 20,
            IpVersion::V6 => 40,
        }
    }

    fn of(addr: &IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => IpVersion::V4,
            IpAddr::V6(_) => IpVersion::V6,
        }
    }
}

/// How packets are spread over flows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowDist {
    Uniform,
    /// Flow of rank k (from 1) has probability proportional to k^-s.
    Zipf {
        s: f64,
    },
}

/// One destination (a VIP and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    pub addr: IpAddr,
    pub port: u16,
}

/// Where source addresses come from. `addr` has its host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrcPrefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl SrcPrefix {
    fn host_bits(&self) -> u32 {
        let bits = match self.addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        bits - u32::from(self.len)
    }

    fn total(&self) -> u128 {
        1u128.checked_shl(self.host_bits()).unwrap_or(u128::MAX)
    }

    /// Offset of the first source host from the prefix base: the network
    /// address is skipped whenever the prefix has room for it.
    fn first_host(&self) -> u128 {
        u128::from(self.total() > 2 || (self.total() == 2 && self.addr.is_ipv6()))
    }

    /// How many distinct source addresses flows can use.
    pub fn usable_hosts(&self) -> u128 {
        let total = self.total();
        match self.addr {
            // IPv4 also skips the broadcast address.
            IpAddr::V4(_) if total > 2 => total - 2,
            _ => total - self.first_host(),
        }
    }

    /// The `i`-th usable source address (`i < usable_hosts()`).
    pub fn host(&self, i: u128) -> IpAddr {
        let offset = self.first_host() + i;
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(offset as u32))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).wrapping_add(offset))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn len(&self) -> u32 {
        u32::from(self.hi) - u32::from(self.lo) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Frame sizes, Ethernet header included, FCS excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SizeRange {
    pub min: u16,
    pub max: u16,
}

/// TCP header flag bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
    const NAMES: [(&'static str, u8); 8] = [
        ("fin", Self::FIN),
        ("syn", Self::SYN),
        ("rst", Self::RST),
        ("psh", Self::PSH),
        ("ack", Self::ACK),
        ("urg", Self::URG),
        ("ece", Self::ECE),
        ("cwr", Self::CWR),
    ];
}

impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        let mut first = true;
        for (name, bit) in Self::NAMES {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str("+")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A fully resolved generator spec: every default filled in. Its `Display`
/// prints it back in the spec language (what a run log should show).
#[derive(Debug, Clone, PartialEq)]
pub struct GenSpec {
    pub proto: L4Proto,
    pub ip: IpVersion,
    pub flows: u32,
    pub size: SizeRange,
    pub dist: FlowDist,
    pub dst: Vec<Target>,
    pub src: SrcPrefix,
    pub sport: PortRange,
    /// `None` = unbounded.
    pub count: Option<u64>,
    pub tcp_flags: TcpFlags,
    pub seed: u64,
    pub smac: MacAddr,
    pub dmac: MacAddr,
}

impl Default for GenSpec {
    fn default() -> Self {
        // The empty spec is valid, so this cannot fail; keep a literal
        // fallback anyway rather than unwrap.
        GenSpec::parse("").unwrap_or_else(|_| GenSpec {
            proto: L4Proto::Udp,
            ip: IpVersion::V4,
            flows: 1,
            size: SizeRange {
                min: DEFAULT_FRAME_SIZE,
                max: DEFAULT_FRAME_SIZE,
            },
            dist: FlowDist::Uniform,
            dst: vec![Target {
                addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                port: 80,
            }],
            src: SrcPrefix {
                addr: IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)),
                len: 16,
            },
            sport: PortRange {
                lo: 1024,
                hi: 65535,
            },
            count: Some(DEFAULT_COUNT),
            tcp_flags: TcpFlags(TcpFlags::ACK),
            seed: 0,
            smac: MacAddr([2, 0, 0, 0, 0, 1]),
            dmac: MacAddr([2, 0, 0, 0, 0, 2]),
        })
    }
}

/// The items as given, before defaults.
#[derive(Default)]
struct GivenSpec {
    proto: Option<L4Proto>,
    ip: Option<IpVersion>,
    flows: Option<u32>,
    size: Option<SizeRange>,
    dist: Option<FlowDist>,
    dst: Vec<Target>,
    src: Option<SrcPrefix>,
    sport: Option<PortRange>,
    count: Option<Option<u64>>,
    tcp_flags: Option<TcpFlags>,
    seed: Option<u64>,
    smac: Option<MacAddr>,
    dmac: Option<MacAddr>,
}

impl GenSpec {
    /// Parses a spec string; every omitted key takes its default.
    pub fn parse(spec: &str) -> Result<GenSpec, IoError> {
        let mut given = GivenSpec::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(IoError::spec(
                    item,
                    format!("expected KEY=VALUE; keys are {KEYS}"),
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "proto" => set_once(&mut given.proto, key, parse_proto(value)?)?,
                "ip" => set_once(&mut given.ip, key, parse_ip(value)?)?,
                "flows" => set_once(&mut given.flows, key, parse_flows(value)?)?,
                "size" => set_once(&mut given.size, key, parse_size(value)?)?,
                "dist" => set_once(&mut given.dist, key, parse_dist(value)?)?,
                "dst" => {
                    let before = given.dst.len();
                    for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                        given.dst.push(parse_target(part)?);
                    }
                    if given.dst.len() == before {
                        return Err(IoError::spec(
                            key,
                            "empty; expected ADDR, ADDR:PORT or [IPV6]:PORT, several joined by ;",
                        ));
                    }
                }
                "src" => set_once(&mut given.src, key, parse_prefix(value)?)?,
                "sport" => set_once(&mut given.sport, key, parse_ports(value)?)?,
                "count" => set_once(&mut given.count, key, parse_count(value)?)?,
                "flags" => set_once(&mut given.tcp_flags, key, parse_flags(value)?)?,
                "seed" => set_once(&mut given.seed, key, parse_seed(value)?)?,
                "smac" => set_once(&mut given.smac, key, parse_mac(key, value)?)?,
                "dmac" => set_once(&mut given.dmac, key, parse_mac(key, value)?)?,
                _ => return Err(IoError::spec(key, format!("unknown key; keys are {KEYS}"))),
            }
        }
        let spec = given.resolve()?;
        spec.validate()?;
        Ok(spec)
    }

    /// Bytes of Ethernet + IP + L4 headers, the smallest possible frame.
    pub fn header_len(&self) -> u16 {
        ETH_HEADER_LEN + self.ip.header_len() + self.proto.header_len()
    }

    /// Checks the cross-key rules. [`crate::Generator::new`] runs it too, so
    /// a spec assembled by hand gets the same errors as a parsed one.
    pub fn validate(&self) -> Result<(), IoError> {
        let ip = self.ip.number();
        if self.dst.is_empty() {
            return Err(IoError::spec("dst", "needs at least one destination"));
        }
        let mut seen = HashSet::new();
        for t in &self.dst {
            if IpVersion::of(&t.addr) != self.ip {
                return Err(IoError::spec(
                    "dst",
                    format!("{} is not an IPv{ip} address but ip={ip}", t.addr),
                ));
            }
            if !seen.insert(*t) {
                return Err(IoError::spec(
                    "dst",
                    format!("{} is listed twice", DisplayTarget(t)),
                ));
            }
        }
        if IpVersion::of(&self.src.addr) != self.ip {
            return Err(IoError::spec(
                "src",
                format!("{} is not an IPv{ip} prefix but ip={ip}", self.src.addr),
            ));
        }
        let max_len = if self.ip == IpVersion::V4 { 32 } else { 128 };
        if self.src.len > max_len {
            return Err(IoError::spec(
                "src",
                format!("prefix length {} exceeds {max_len}", self.src.len),
            ));
        }
        let min = self.header_len();
        if self.size.min < min {
            return Err(IoError::spec(
                "size",
                format!(
                    "{} is below the {min}-byte minimum for {} over IPv{ip} \
                     (Ethernet, IP and {} headers)",
                    self.size.min,
                    self.proto.name(),
                    self.proto.name()
                ),
            ));
        }
        if self.size.max > MAX_FRAME_SIZE || self.size.min > self.size.max {
            return Err(IoError::spec(
                "size",
                format!(
                    "{}-{} is not a size range within {min}..={MAX_FRAME_SIZE}",
                    self.size.min, self.size.max
                ),
            ));
        }
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(IoError::spec(
                "flows",
                format!("{} is not within 1..={MAX_FLOWS}", self.flows),
            ));
        }
        let capacity = (self.dst.len() as u128)
            .saturating_mul(self.src.usable_hosts())
            .saturating_mul(u128::from(self.sport.len()));
        if u128::from(self.flows) > capacity {
            return Err(IoError::spec(
                "flows",
                format!(
                    "{} distinct flows do not fit in {} destination(s) x {} source \
                     address(es) x {} source port(s) = {capacity}; widen src or sport",
                    self.flows,
                    self.dst.len(),
                    self.src.usable_hosts(),
                    self.sport.len()
                ),
            ));
        }
        if let FlowDist::Zipf { s } = self.dist {
            if !(s.is_finite() && s > 0.0) {
                return Err(IoError::spec(
                    "dist",
                    format!("zipf exponent {s} must be a number above 0"),
                ));
            }
        }
        Ok(())
    }
}

impl FromStr for GenSpec {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GenSpec::parse(s)
    }
}

impl GivenSpec {
    fn resolve(self) -> Result<GenSpec, IoError> {
        if self.tcp_flags.is_some() && self.proto.unwrap_or(L4Proto::Udp) != L4Proto::Tcp {
            return Err(IoError::spec(
                "flags",
                format!(
                    "TCP flags only apply to proto=tcp, not proto={}",
                    self.proto.unwrap_or(L4Proto::Udp).name()
                ),
            ));
        }
        let any_v6 =
            self.dst.iter().any(|t| t.addr.is_ipv6()) || self.src.is_some_and(|p| p.addr.is_ipv6());
        let ip = self
            .ip
            .unwrap_or(if any_v6 { IpVersion::V6 } else { IpVersion::V4 });
        let proto = self.proto.unwrap_or(L4Proto::Udp);
        let dst = if self.dst.is_empty() {
            vec![match ip {
                IpVersion::V4 => Target {
                    addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                    port: 80,
                },
                IpVersion::V6 => Target {
                    addr: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                    port: 80,
                },
            }]
        } else {
            self.dst
        };
        let src = self.src.unwrap_or(match ip {
            IpVersion::V4 => SrcPrefix {
                addr: IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)),
                len: 16,
            },
            IpVersion::V6 => SrcPrefix {
                addr: IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0)),
                len: 64,
            },
        });
        let header_len = ETH_HEADER_LEN + ip.header_len() + proto.header_len();
        let default_size = DEFAULT_FRAME_SIZE.max(header_len);
        Ok(GenSpec {
            proto,
            ip,
            flows: self.flows.unwrap_or(1),
            size: self.size.unwrap_or(SizeRange {
                min: default_size,
                max: default_size,
            }),
            dist: self.dist.unwrap_or(FlowDist::Uniform),
            dst,
            src,
            sport: self.sport.unwrap_or(PortRange {
                lo: 1024,
                hi: 65535,
            }),
            count: self.count.unwrap_or(Some(DEFAULT_COUNT)),
            tcp_flags: self.tcp_flags.unwrap_or(TcpFlags(TcpFlags::ACK)),
            seed: self.seed.unwrap_or(0),
            smac: self.smac.unwrap_or(MacAddr([2, 0, 0, 0, 0, 1])),
            dmac: self.dmac.unwrap_or(MacAddr([2, 0, 0, 0, 0, 2])),
        })
    }
}

fn set_once<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), IoError> {
    if slot.is_some() {
        return Err(IoError::spec(key, "given more than once"));
    }
    *slot = Some(value);
    Ok(())
}

fn parse_proto(v: &str) -> Result<L4Proto, IoError> {
    match v.to_ascii_lowercase().as_str() {
        "tcp" => Ok(L4Proto::Tcp),
        "udp" => Ok(L4Proto::Udp),
        "icmp" => Ok(L4Proto::Icmp),
        _ => Err(IoError::spec(
            "proto",
            format!("`{v}` is not one of tcp, udp, icmp"),
        )),
    }
}

fn parse_ip(v: &str) -> Result<IpVersion, IoError> {
    match v {
        "4" => Ok(IpVersion::V4),
        "6" => Ok(IpVersion::V6),
        _ => Err(IoError::spec("ip", format!("`{v}` is not one of 4, 6"))),
    }
}

fn parse_flows(v: &str) -> Result<u32, IoError> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_FLOWS).contains(n))
        .ok_or_else(|| IoError::spec("flows", format!("`{v}` is not a number in 1..={MAX_FLOWS}")))
}

fn parse_size(v: &str) -> Result<SizeRange, IoError> {
    let bad = || {
        IoError::spec(
            "size",
            format!("`{v}` is not N or MIN-MAX with frame sizes up to {MAX_FRAME_SIZE} bytes"),
        )
    };
    let (min, max) = match v.split_once('-') {
        Some((lo, hi)) => (lo.trim(), hi.trim()),
        None => (v, v),
    };
    let min = min.parse::<u16>().map_err(|_| bad())?;
    let max = max.parse::<u16>().map_err(|_| bad())?;
    if min > max || max > MAX_FRAME_SIZE {
        return Err(bad());
    }
    Ok(SizeRange { min, max })
}

fn parse_dist(v: &str) -> Result<FlowDist, IoError> {
    let bad = || {
        IoError::spec(
            "dist",
            format!("`{v}` is not one of uniform, zipf:S (S > 0)"),
        )
    };
    if v.eq_ignore_ascii_case("uniform") {
        return Ok(FlowDist::Uniform);
    }
    let s = v
        .strip_prefix("zipf:")
        .ok_or_else(bad)?
        .trim()
        .parse::<f64>()
        .map_err(|_| bad())?;
    if !(s.is_finite() && s > 0.0) {
        return Err(bad());
    }
    Ok(FlowDist::Zipf { s })
}

fn parse_target(v: &str) -> Result<Target, IoError> {
    if let Ok(sa) = v.parse::<SocketAddr>() {
        return Ok(Target {
            addr: sa.ip(),
            port: sa.port(),
        });
    }
    // A bare address (IPv6 without brackets included) gets port 80.
    let bare = v
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(v);
    bare.parse::<IpAddr>()
        .map(|addr| Target { addr, port: 80 })
        .map_err(|_| {
            IoError::spec(
                "dst",
                format!("`{v}` is not ADDR, ADDR:PORT or [IPV6]:PORT"),
            )
        })
}

fn parse_prefix(v: &str) -> Result<SrcPrefix, IoError> {
    let bad = || IoError::spec("src", format!("`{v}` is not ADDR/LEN or ADDR"));
    let (addr, len) = match v.split_once('/') {
        Some((a, l)) => (a.trim(), Some(l.trim())),
        None => (v, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let max_len: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= max_len)
            .ok_or_else(|| {
                IoError::spec(
                    "src",
                    format!("prefix length `{l}` is not in 0..={max_len}"),
                )
            })?,
        None => max_len,
    };
    // Clear the host bits so `10.1.2.3/8` means the 10.0.0.0/8 network.
    let addr = match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    };
    Ok(SrcPrefix { addr, len })
}

fn parse_ports(v: &str) -> Result<PortRange, IoError> {
    let bad = || {
        IoError::spec(
            "sport",
            format!("`{v}` is not PORT or LO-HI with 0 <= LO <= HI <= 65535"),
        )
    };
    let (lo, hi) = match v.split_once('-') {
        Some((lo, hi)) => (lo.trim(), hi.trim()),
        None => (v, v),
    };
    let lo = lo.parse::<u16>().map_err(|_| bad())?;
    let hi = hi.parse::<u16>().map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    Ok(PortRange { lo, hi })
}

fn parse_count(v: &str) -> Result<Option<u64>, IoError> {
    if v.eq_ignore_ascii_case("unbounded") {
        return Ok(None);
    }
    v.parse::<u64>().map(Some).map_err(|_| {
        IoError::spec(
            "count",
            format!("`{v}` is not a packet count or `unbounded`"),
        )
    })
}

fn parse_flags(v: &str) -> Result<TcpFlags, IoError> {
    if v.eq_ignore_ascii_case("none") {
        return Ok(TcpFlags(0));
    }
    let mut bits = 0u8;
    for name in v.split(['+', '|']).map(str::trim) {
        let bit = TcpFlags::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                IoError::spec(
                    "flags",
                    format!(
                        "`{name}` is not a TCP flag; use fin, syn, rst, psh, ack, urg, ece, cwr \
                         joined by + or |, or none"
                    ),
                )
            })?;
        bits |= bit;
    }
    Ok(TcpFlags(bits))
}

fn parse_seed(v: &str) -> Result<u64, IoError> {
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse::<u64>(),
    };
    parsed.map_err(|_| {
        IoError::spec(
            "seed",
            format!("`{v}` is not a 64-bit number (decimal or 0xHEX)"),
        )
    })
}

fn parse_mac(key: &str, v: &str) -> Result<MacAddr, IoError> {
    let bad = || {
        IoError::spec(
            key,
            format!("`{v}` is not a MAC address like 02:00:00:00:00:01"),
        )
    };
    let mut mac = [0u8; 6];
    let mut parts = v.split([':', '-']);
    for byte in &mut mac {
        let part = parts.next().ok_or_else(bad)?;
        if part.is_empty() || part.len() > 2 {
            return Err(bad());
        }
        *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(MacAddr(mac))
}

struct DisplayTarget<'a>(&'a Target);

impl fmt::Display for DisplayTarget<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", SocketAddr::new(self.0.addr, self.0.port))
    }
}

impl fmt::Display for GenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "proto={},ip={},flows={},",
            self.proto.name(),
            self.ip.number(),
            self.flows
        )?;
        if self.size.min == self.size.max {
            write!(f, "size={},", self.size.min)?;
        } else {
            write!(f, "size={}-{},", self.size.min, self.size.max)?;
        }
        match self.dist {
            FlowDist::Uniform => f.write_str("dist=uniform,")?,
            FlowDist::Zipf { s } => write!(f, "dist=zipf:{s},")?,
        }
        f.write_str("dst=")?;
        for (i, t) in self.dst.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{}", DisplayTarget(t))?;
        }
        write!(f, ",src={}/{},", self.src.addr, self.src.len)?;
        write!(f, "sport={}-{},", self.sport.lo, self.sport.hi)?;
        match self.count {
            Some(n) => write!(f, "count={n},")?,
            None => f.write_str("count=unbounded,")?,
        }
        if self.proto == L4Proto::Tcp {
            write!(f, "flags={},", self.tcp_flags)?;
        }
        write!(
            f,
            "seed={},smac={},dmac={}",
            self.seed, self.smac, self.dmac
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> (String, String) {
        match GenSpec::parse(spec) {
            Err(IoError::GenSpec { key, message }) => (key, message),
            other => panic!("{spec}: expected a spec error, got {other:?}"),
        }
    }

    #[test]
    fn empty_spec_takes_defaults() {
        let s = GenSpec::parse("").unwrap();
        assert_eq!(s.proto, L4Proto::Udp);
        assert_eq!(s.ip, IpVersion::V4);
        assert_eq!(s.flows, 1);
        assert_eq!(s.size, SizeRange { min: 64, max: 64 });
        assert_eq!(s.dist, FlowDist::Uniform);
        assert_eq!(s.dst.len(), 1);
        assert_eq!(s.count, Some(1_000_000));
        assert_eq!(s, GenSpec::default());
    }

    #[test]
    fn example_from_the_docs() {
        let s = GenSpec::parse(
            "proto=udp,ip=4,flows=1000,size=64,dist=zipf:1.1,dst=10.0.0.1:80,\
             src=192.168.0.0/16,count=1000000,seed=7",
        )
        .unwrap();
        assert_eq!(s.flows, 1000);
        assert_eq!(s.dist, FlowDist::Zipf { s: 1.1 });
        assert_eq!(s.seed, 7);
        assert_eq!(s.src.len, 16);
    }

    #[test]
    fn several_destinations_by_list_and_repetition() {
        let s = GenSpec::parse("dst=10.0.0.1:80;10.0.0.2:443,dst=10.0.0.3").unwrap();
        let ports: Vec<u16> = s.dst.iter().map(|t| t.port).collect();
        assert_eq!(ports, [80, 443, 80]);
    }

    #[test]
    fn ipv6_is_inferred_from_addresses() {
        let s = GenSpec::parse("dst=[2001:db8::1]:53,proto=tcp").unwrap();
        assert_eq!(s.ip, IpVersion::V6);
        assert!(s.src.addr.is_ipv6());
        assert_eq!(s.size.min, 74, "64 is raised to the TCP/IPv6 header size");
        assert_eq!(GenSpec::parse("dst=2001:db8::1").unwrap().dst[0].port, 80);
    }

    #[test]
    fn display_round_trips() {
        for spec in [
            "",
            "proto=tcp,flags=syn+ack,flows=10,size=64-1500,dist=zipf:0.99,seed=0xff",
            "ip=6,proto=icmp,dst=[fd00::5]:0;[fd00::6]:1,count=unbounded,sport=7",
            "src=10.9.8.7/8,smac=aa:bb:cc:dd:ee:ff,dmac=00-11-22-33-44-55",
        ] {
            let parsed = GenSpec::parse(spec).unwrap();
            let again = GenSpec::parse(&parsed.to_string()).unwrap();
            assert_eq!(parsed, again, "{spec} -> {parsed}");
        }
    }

    #[test]
    fn prefix_host_bits_are_cleared() {
        let s = GenSpec::parse("src=10.9.8.7/8").unwrap();
        assert_eq!(s.src.addr, "10.0.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(s.src.usable_hosts(), (1 << 24) - 2);
        assert_eq!(s.src.host(0), "10.0.0.1".parse::<IpAddr>().unwrap());
        let one = GenSpec::parse("src=10.9.8.7").unwrap();
        assert_eq!(one.src.usable_hosts(), 1);
        assert_eq!(one.src.host(0), "10.9.8.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn errors_name_the_key_and_accepted_values() {
        let cases: &[(&str, &str, &str)] = &[
            ("proto=sctp", "proto", "tcp, udp, icmp"),
            ("ip=5", "ip", "4, 6"),
            ("flows=0", "flows", "1..="),
            ("flows=abc", "flows", "1..="),
            ("size=10", "size", "minimum"),
            ("size=9001", "size", "9000"),
            ("size=100-60", "size", "MIN-MAX"),
            ("ip=6,size=64,proto=tcp", "size", "74-byte minimum"),
            ("dist=pareto", "dist", "uniform, zipf:S"),
            ("dist=zipf:0", "dist", "S > 0"),
            ("dist=zipf:-1", "dist", "S > 0"),
            ("dist=zipf:nan", "dist", "S > 0"),
            ("dst=10.0.0.300", "dst", "ADDR:PORT"),
            ("dst=10.0.0.1:99999", "dst", "ADDR:PORT"),
            ("dst=10.0.0.1;10.0.0.1", "dst", "twice"),
            ("ip=4,dst=[::1]:80", "dst", "IPv4"),
            ("src=10.0.0.0/33", "src", "0..=32"),
            ("src=banana", "src", "ADDR/LEN"),
            ("ip=6,src=10.0.0.0/8", "src", "IPv6"),
            ("sport=9-3", "sport", "LO-HI"),
            ("count=-1", "count", "unbounded"),
            ("proto=tcp,flags=syn+bogus", "flags", "fin, syn"),
            ("flags=syn", "flags", "proto=tcp"),
            ("seed=xyz", "seed", "0xHEX"),
            ("smac=01:02:03", "smac", "MAC"),
            ("dmac=01:02:03:04:05:06:07", "dmac", "MAC"),
            ("colour=red", "colour", "keys are"),
            ("novalue", "novalue", "KEY=VALUE"),
            ("proto=tcp,proto=udp", "proto", "more than once"),
            (
                "src=10.0.0.1,sport=80,flows=2",
                "flows",
                "widen src or sport",
            ),
        ];
        for (spec, key, needle) in cases {
            let (got_key, message) = err(spec);
            assert_eq!(&got_key, key, "{spec}: {message}");
            assert!(
                message.contains(needle),
                "{spec}: `{message}` lacks `{needle}`"
            );
        }
    }

    #[test]
    fn flow_capacity_counts_every_dimension() {
        // 2 destinations x 1 host x 3 ports = 6 flows at most.
        assert!(GenSpec::parse("dst=10.0.0.1;10.0.0.2,src=1.1.1.1,sport=1-3,flows=6").is_ok());
        assert!(GenSpec::parse("dst=10.0.0.1;10.0.0.2,src=1.1.1.1,sport=1-3,flows=7").is_err());
    }
}
