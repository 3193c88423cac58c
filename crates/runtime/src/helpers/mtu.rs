//! `bpf_check_mtu` for XDP: would the frame (or a length the program names)
//! fit the MTU of a device?
//!
//! The kernel asks the device (`ifindex`, or 0 for the frame's ingress
//! device). bpfjet's devices are, in order: the interfaces of the routing
//! table the run was given (`FibTable`, their `mtu`), then the host's
//! interfaces (`/sys/class/net/*/mtu`, read once per process: `test-run`
//! runs on the host's loopback or `--ingress-ifindex` like the kernel's
//! test-run, `run --iface` on a real interface). A frame whose ingress
//! device is none of these (pcap replay, generator) is on an Ethernet
//! device with [`DEFAULT_MTU`], like a veth; another unknown `ifindex` is
//! ENODEV, as in the kernel.

use super::common::xdp_env;
use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The MTU of a device bpfjet knows nothing about (a veth's default).
pub const DEFAULT_MTU: u32 = 1500;
/// `dev->hard_header_len` of Ethernet and loopback devices.
const ETH_HLEN: i32 = 14;
/// `ARPHRD_ETHER`, `ARPHRD_LOOPBACK`: the device types with an Ethernet header.
const ARPHRD_ETHER: u32 = 1;
const ARPHRD_LOOPBACK: u32 = 772;
/// `BPF_MTU_CHK_RET_FRAG_NEEDED` (`SUCCESS` is 0).
const FRAG_NEEDED: u64 = 1;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::CHECK_MTU, "check_mtu", check_mtu));
}

/// A device's MTU and link-layer header length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Device {
    mtu: u32,
    hard_header_len: i32,
}

const DEFAULT_DEVICE: Device = Device {
    mtu: DEFAULT_MTU,
    hard_header_len: ETH_HLEN,
};

/// The host interface `ifindex`, from sysfs; cached per process.
fn host_device(ifindex: u32) -> Option<Device> {
    static CACHE: OnceLock<Mutex<HashMap<u32, Option<Device>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    *cache
        .entry(ifindex)
        .or_insert_with(|| read_host_device(ifindex))
}

fn read_host_device(ifindex: u32) -> Option<Device> {
    let read = |dir: &std::path::Path, file: &str| -> Option<u32> {
        std::fs::read_to_string(dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    for entry in std::fs::read_dir("/sys/class/net").ok()?.flatten() {
        let dir = entry.path();
        if read(&dir, "ifindex") != Some(ifindex) {
            continue;
        }
        let hard_header_len = match read(&dir, "type")? {
            ARPHRD_ETHER | ARPHRD_LOOPBACK => ETH_HLEN,
            _ => 0,
        };
        return Some(Device {
            mtu: read(&dir, "mtu")?,
            hard_header_len,
        });
    }
    None
}

/// `bpf_check_mtu(ctx, ifindex, u32 *mtu_len, s32 len_diff, u64 flags)`.
fn check_mtu(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (ifindex, mtu_len, len_diff, flags) = (a[1] as u32, a[2], a[3] as i32, a[4]);
    let env = xdp_env(ctx)?;
    let ingress = env.frame.md().ingress_ifindex;
    let frame_len = env.frame.len() as i32;
    let wanted = if ifindex == 0 { ingress } else { ifindex };
    let from_table = env
        .fib
        .as_ref()
        .and_then(|fib| fib.interface_mtu(wanted))
        .map(|mtu| Device {
            mtu,
            hard_header_len: ETH_HLEN,
        });
    let device = from_table.or_else(|| host_device(wanted)).or(
        // The frame's own device always exists.
        (wanted == ingress).then_some(DEFAULT_DEVICE),
    );
    let input = u32::from_ne_bytes(ctx.read_mem(mtu_len, 4)?.try_into().unwrap_or([0; 4]));
    // The kernel writes 0 to *mtu_len on an error.
    let (ret, mtu) = match device {
        _ if flags != 0 => (errno::neg(errno::EINVAL), 0),
        None => (errno::neg(errno::ENODEV), 0),
        Some(dev) => {
            let dev_len = (dev.mtu as i32).wrapping_add(dev.hard_header_len);
            // A non-zero *mtu_len is an L3 length to check instead of the frame's.
            let len = if input != 0 {
                (input as i32).wrapping_add(dev.hard_header_len)
            } else {
                frame_len
            }
            .wrapping_add(len_diff);
            (if len > dev_len { FRAG_NEEDED } else { 0 }, dev.mtu)
        }
    };
    ctx.write_mem(mtu_len, 4)?
        .copy_from_slice(&mtu.to_ne_bytes());
    Ok(ret)
}
