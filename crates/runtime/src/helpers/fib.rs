//! `bpf_fib_lookup` against a routing table the user provides.
//!
//! The kernel answers from the host's FIB and neighbour tables; a userspace
//! data plane has its own view of the network, so bpfjet takes the table as
//! data ([`FibTable`], JSON, documented in `docs/SUPPORT.md`). Without a
//! table every lookup answers `BPF_FIB_LKUP_RET_NOT_FWDED` (the packet goes
//! to the stack), which is what a kernel without a route would say.
//!
//! ```json
//! {"interfaces": [{"ifindex": 2, "mac": "02:00:00:00:00:02", "mtu": 1500,
//!                  "addresses": ["10.0.0.1", "fd00::1"]}],
//!  "routes": [{"prefix": "10.1.0.0/16", "ifindex": 2, "gateway": "10.0.0.254"},
//!             {"prefix": "192.0.2.0/24", "type": "blackhole"}],
//!  "neighbours": [{"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}]}
//! ```

use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use serde::Deserialize;
use std::net::IpAddr;

pub const BPF_FIB_LKUP_RET_SUCCESS: u64 = 0;
pub const BPF_FIB_LKUP_RET_BLACKHOLE: u64 = 1;
pub const BPF_FIB_LKUP_RET_UNREACHABLE: u64 = 2;
pub const BPF_FIB_LKUP_RET_PROHIBIT: u64 = 3;
pub const BPF_FIB_LKUP_RET_NOT_FWDED: u64 = 4;
pub const BPF_FIB_LKUP_RET_FWD_DISABLED: u64 = 5;
pub const BPF_FIB_LKUP_RET_NO_NEIGH: u64 = 7;
pub const BPF_FIB_LKUP_RET_FRAG_NEEDED: u64 = 8;
pub const BPF_FIB_LKUP_RET_NO_SRC_ADDR: u64 = 9;

pub const BPF_FIB_LOOKUP_DIRECT: u64 = 1 << 0;
pub const BPF_FIB_LOOKUP_OUTPUT: u64 = 1 << 1;
pub const BPF_FIB_LOOKUP_SKIP_NEIGH: u64 = 1 << 2;
pub const BPF_FIB_LOOKUP_TBID: u64 = 1 << 3;
pub const BPF_FIB_LOOKUP_SRC: u64 = 1 << 4;
pub const BPF_FIB_LOOKUP_MARK: u64 = 1 << 5;
const KNOWN_FLAGS: u64 = (1 << 6) - 1;

/// `sizeof(struct bpf_fib_lookup)`.
pub const FIB_PARAMS_SIZE: u64 = 64;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FibTable {
    #[serde(default)]
    pub interfaces: Vec<FibInterface>,
    #[serde(default)]
    pub routes: Vec<FibRoute>,
    #[serde(default)]
    pub neighbours: Vec<FibNeighbour>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FibInterface {
    pub ifindex: u32,
    /// `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Forwarding enabled on the interface (sysctl `forwarding`).
    #[serde(default = "yes")]
    pub forwarding: bool,
    /// Addresses, for `BPF_FIB_LOOKUP_SRC`.
    #[serde(default)]
    pub addresses: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteType {
    #[default]
    Unicast,
    Blackhole,
    Unreachable,
    Prohibit,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FibRoute {
    /// `10.1.0.0/16`, `2001:db8::/32`.
    pub prefix: String,
    #[serde(default, rename = "type")]
    pub route_type: RouteType,
    /// Output interface (unicast routes).
    #[serde(default)]
    pub ifindex: u32,
    /// Next hop; the destination itself when absent (on-link).
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default)]
    pub metric: u32,
    /// Routing table id, matched with `BPF_FIB_LOOKUP_TBID` (main = 254).
    #[serde(default = "main_table")]
    pub table: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FibNeighbour {
    pub ip: String,
    pub mac: String,
}

fn default_mtu() -> u32 {
    1500
}
fn yes() -> bool {
    true
}
fn main_table() -> u32 {
    254
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("bad MAC address {s:?}"));
    }
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {s:?}"))?;
    }
    Ok(mac)
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.parse().map_err(|_| format!("bad IP address {s:?}"))
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

fn prefix_matches(net: &[u8], len: u32, addr: &[u8]) -> bool {
    net.len() == addr.len()
        && (0..len as usize).all(|bit| {
            let (byte, mask) = (bit / 8, 0x80 >> (bit % 8));
            net[byte] & mask == addr[byte] & mask
        })
}

/// A parsed route.
#[derive(Clone, Debug)]
struct Route {
    net: Vec<u8>,
    len: u32,
    spec: FibRoute,
    gateway: Option<Vec<u8>>,
}

/// A table ready for lookups.
#[derive(Clone, Debug)]
pub struct Fib {
    interfaces: Vec<(FibInterface, [u8; 6], Vec<IpAddr>)>,
    routes: Vec<Route>,
    neighbours: Vec<(Vec<u8>, [u8; 6])>,
}

impl FibTable {
    pub fn from_json(text: &str) -> Result<Fib, String> {
        let t: FibTable = serde_json::from_str(text).map_err(|e| e.to_string())?;
        t.compile()
    }

    /// Check and index the table.
    pub fn compile(&self) -> Result<Fib, String> {
        let mut interfaces = Vec::new();
        for i in &self.interfaces {
            let addrs = i
                .addresses
                .iter()
                .map(|a| parse_ip(a))
                .collect::<Result<_, _>>()?;
            interfaces.push((i.clone(), parse_mac(&i.mac)?, addrs));
        }
        let mut routes = Vec::new();
        for r in &self.routes {
            let (net, len) = r
                .prefix
                .split_once('/')
                .ok_or_else(|| format!("route prefix {:?} needs /LEN", r.prefix))?;
            let net = ip_bytes(parse_ip(net)?);
            let len: u32 = len
                .parse()
                .ok()
                .filter(|&l| l as usize <= net.len() * 8)
                .ok_or_else(|| format!("bad prefix length in {:?}", r.prefix))?;
            let gateway = r
                .gateway
                .as_deref()
                .map(parse_ip)
                .transpose()?
                .map(ip_bytes);
            routes.push(Route {
                net,
                len,
                spec: r.clone(),
                gateway,
            });
        }
        let neighbours = self
            .neighbours
            .iter()
            .map(|n| Ok((ip_bytes(parse_ip(&n.ip)?), parse_mac(&n.mac)?)))
            .collect::<Result<_, String>>()?;
        Ok(Fib {
            interfaces,
            routes,
            neighbours,
        })
    }
}

impl Fib {
    /// The MTU of the table's interface `ifindex`, if it lists it.
    pub fn interface_mtu(&self, ifindex: u32) -> Option<u32> {
        self.interface(ifindex).map(|i| i.0.mtu)
    }

    fn interface(&self, ifindex: u32) -> Option<&(FibInterface, [u8; 6], Vec<IpAddr>)> {
        self.interfaces.iter().find(|i| i.0.ifindex == ifindex)
    }

    /// Perform a lookup on `p` (a `struct bpf_fib_lookup`), filling the
    /// outputs; returns the helper's result.
    pub fn lookup(&self, p: &mut [u8], flags: u64) -> u64 {
        let v4 = match p[0] {
            AF_INET => true,
            AF_INET6 => false,
            _ => return errno::neg(errno::EAFNOSUPPORT),
        };
        let ifindex = u32::from_ne_bytes(p[8..12].try_into().unwrap_or_default());
        let Some(input) = self.interface(ifindex) else {
            return errno::neg(errno::ENODEV);
        };
        if flags & BPF_FIB_LOOKUP_OUTPUT == 0 && !input.0.forwarding {
            return BPF_FIB_LKUP_RET_FWD_DISABLED;
        }
        let alen = if v4 { 4 } else { 16 };
        let dst = p[32..32 + alen].to_vec();
        let tbid = u32::from_ne_bytes(p[48..52].try_into().unwrap_or_default());
        let route = self
            .routes
            .iter()
            .filter(|r| prefix_matches(&r.net, r.len, &dst))
            .filter(|r| flags & BPF_FIB_LOOKUP_TBID == 0 || r.spec.table == tbid)
            .max_by_key(|r| (r.len, std::cmp::Reverse(r.spec.metric)));
        let Some(route) = route else {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        };
        match route.spec.route_type {
            RouteType::Unicast => {}
            RouteType::Blackhole => return BPF_FIB_LKUP_RET_BLACKHOLE,
            RouteType::Unreachable => return BPF_FIB_LKUP_RET_UNREACHABLE,
            RouteType::Prohibit => return BPF_FIB_LKUP_RET_PROHIBIT,
        }
        let Some(out) = self.interface(route.spec.ifindex) else {
            return BPF_FIB_LKUP_RET_NOT_FWDED;
        };
        let mtu = out.0.mtu;
        let tot_len = u16::from_ne_bytes([p[6], p[7]]);
        if u32::from(tot_len) > mtu {
            p[6..8].copy_from_slice(&(mtu as u16).to_ne_bytes());
            return BPF_FIB_LKUP_RET_FRAG_NEEDED;
        }
        if flags & BPF_FIB_LOOKUP_SRC != 0 {
            let Some(src) = out.2.iter().find(|a| a.is_ipv4() == v4) else {
                return BPF_FIB_LKUP_RET_NO_SRC_ADDR;
            };
            p[16..16 + alen].copy_from_slice(&ip_bytes(*src));
        }
        let next_hop = route.gateway.clone().unwrap_or(dst);
        if route.gateway.is_some() {
            p[32..32 + alen].copy_from_slice(&next_hop);
        }
        p[8..12].copy_from_slice(&out.0.ifindex.to_ne_bytes());
        p[12..16].copy_from_slice(&route.spec.metric.to_ne_bytes());
        p[48..52].fill(0);
        p[6..8].copy_from_slice(&(mtu as u16).to_ne_bytes());
        if flags & BPF_FIB_LOOKUP_SKIP_NEIGH != 0 {
            return BPF_FIB_LKUP_RET_SUCCESS;
        }
        let Some((_, dmac)) = self.neighbours.iter().find(|n| n.0 == next_hop) else {
            return BPF_FIB_LKUP_RET_NO_NEIGH;
        };
        p[52..58].copy_from_slice(&out.1);
        p[58..64].copy_from_slice(dmac);
        BPF_FIB_LKUP_RET_SUCCESS
    }
}

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::FIB_LOOKUP, "fib_lookup", fib_lookup));
}

fn fib_lookup(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (params, plen, flags) = (a[1], a[2] as u32 as u64, a[3] as u32 as u64);
    if flags & !KNOWN_FLAGS != 0 || plen < FIB_PARAMS_SIZE {
        return Ok(errno::neg(errno::EINVAL));
    }
    let env = super::common::xdp_env(ctx)?;
    if env.frame.md_addr() != a[0] {
        return Err(ctx.fault("the first argument is not the XDP context"));
    }
    let fib = env.fib.clone();
    let mut p = ctx.read_mem(params, FIB_PARAMS_SIZE)?.to_vec();
    let Some(fib) = fib else {
        return Ok(BPF_FIB_LKUP_RET_NOT_FWDED);
    };
    let ret = fib.lookup(&mut p, flags);
    ctx.write_mem(params, FIB_PARAMS_SIZE)?.copy_from_slice(&p);
    Ok(ret)
}
