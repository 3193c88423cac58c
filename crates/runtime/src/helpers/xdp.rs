//! XDP-only helpers: frame adjustments, packet copies, redirects.

use super::common::{map_arg, require_map_use, xdp_env};
use super::ids;
use crate::env::XdpEnv;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use crate::worker::RedirectTo;
use crate::xdp::{action, XdpFrame};
use bpfjet_maps::{Map, MapType};

/// `BPF_F_BROADCAST` / `BPF_F_EXCLUDE_INGRESS` for `bpf_redirect_map` on devmaps.
pub const BPF_F_BROADCAST: u64 = 1 << 3;
pub const BPF_F_EXCLUDE_INGRESS: u64 = 1 << 4;
/// The low bits of `bpf_redirect_map`'s flags: the action on a lookup miss.
const ACTION_MASK: u64 = (action::ABORTED | action::DROP | action::PASS | action::TX) as u64;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::XDP_ADJUST_HEAD,
        "xdp_adjust_head",
        |ctx, a| adjust(ctx, a[0], |f| f.adjust_head(a[1] as i32)),
    ));
    r.register(Helper::new(
        ids::XDP_ADJUST_META,
        "xdp_adjust_meta",
        |ctx, a| adjust(ctx, a[0], |f| f.adjust_meta(a[1] as i32)),
    ));
    r.register(Helper::new(
        ids::XDP_ADJUST_TAIL,
        "xdp_adjust_tail",
        |ctx, a| adjust(ctx, a[0], |f| f.adjust_tail(a[1] as i32)),
    ));
    r.register(Helper::new(
        ids::XDP_GET_BUFF_LEN,
        "xdp_get_buff_len",
        |ctx, a| Ok(frame_arg(ctx, a[0])?.buff_len() as u64),
    ));
    r.register(Helper::new(
        ids::XDP_LOAD_BYTES,
        "xdp_load_bytes",
        load_bytes,
    ));
    r.register(Helper::new(
        ids::XDP_STORE_BYTES,
        "xdp_store_bytes",
        store_bytes,
    ));
    r.register(Helper::new(ids::REDIRECT, "redirect", |ctx, a| {
        // XDP's bpf_redirect takes no flags at all.
        if a[1] != 0 {
            return Ok(u64::from(action::ABORTED));
        }
        if let Some(env) = ctx.user_as::<XdpEnv>() {
            let ifindex = a[0] as u32;
            env.record_redirect(
                Some(RedirectTo::Ifindex(ifindex)),
                crate::worker::RedirectVia::ifindex(ifindex),
            );
        }
        Ok(u64::from(action::REDIRECT))
    }));
    r.register(Helper::new(ids::REDIRECT_MAP, "redirect_map", redirect_map));
}

/// The frame behind a context argument: the kernel verifier guarantees the
/// argument is the context, bpfjet checks it.
pub(crate) fn frame_arg<'a>(
    ctx: &'a mut HelperCtx<'_>,
    md: u64,
) -> Result<&'a mut XdpFrame, Fault> {
    // The fault's message is built only on the error path: this runs on
    // every XDP helper and dynptr kfunc call.
    let (pc, helper) = (ctx.pc(), ctx.helper_name());
    xdp_env(ctx)?.frame_of(md).ok_or_else(|| Fault::Helper {
        pc,
        helper,
        reason: "the first argument is not the XDP context".into(),
    })
}

fn packet_region(frame: &XdpFrame) -> Region {
    let (start, len) = frame.packet_span();
    Region::writable(start, len)
}

fn adjust(
    ctx: &mut HelperCtx<'_>,
    md: u64,
    op: impl FnOnce(&mut XdpFrame) -> Result<(), u64>,
) -> Result<u64, Fault> {
    let frame = frame_arg(ctx, md)?;
    let before = packet_region(frame);
    match op(frame) {
        Ok(()) => {
            let after = packet_region(frame);
            ctx.replace_region(before, Some(after));
            Ok(0)
        }
        Err(e) => Ok(errno::neg(e)),
    }
}

/// `bpf_xdp_load_bytes`: across fragment borders on a multi-buffer frame;
/// the range checks are `bpf_xdp_pointer`'s (in [`XdpFrame::load_bytes`]).
fn load_bytes(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (offset, len) = (a[1] as u32, a[3] as u32);
    let frame = frame_arg(ctx, a[0])?;
    // The kernel checks the range before touching the buffer: an EFAULT or
    // EINVAL call never faults on a bad destination.
    let mut bytes = vec![0u8; (len as usize).min(0x1_0000)];
    if let Err(e) = frame.load_bytes(offset, &mut bytes) {
        return Ok(errno::neg(e));
    }
    ctx.write_mem(a[2], bytes.len() as u64)?
        .copy_from_slice(&bytes);
    Ok(0)
}

/// `bpf_xdp_store_bytes`: across fragment borders on a multi-buffer frame.
fn store_bytes(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let len = a[3] as u32 as u64;
    let bytes = ctx.read_mem(a[2], len)?.to_vec();
    let frame = frame_arg(ctx, a[0])?;
    match frame.store_bytes(a[1] as u32, &bytes) {
        Ok(()) => Ok(0),
        Err(e) => Ok(errno::neg(e)),
    }
}

fn redirect_map(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    use MapType::*;
    let map = map_arg(ctx, a[0])?;
    require_map_use(ctx, map, "redirect_map", super::common::map_use::REDIRECT)?;
    let flags = a[2];
    let flag_mask = match map.map_type() {
        Devmap | DevmapHash => BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
        _ => 0,
    };
    if flags & !(ACTION_MASK | flag_mask) != 0 {
        return Ok(u64::from(action::ABORTED));
    }
    // The map ops take a u32 key: the 64-bit argument is truncated.
    let key = a[1] as u32;
    let target = redirect_target(map, key, flags);
    let via = crate::worker::RedirectVia::map(map, key);
    if let Some(env) = ctx.user_as::<XdpEnv>() {
        env.record_redirect(target, via);
    }
    Ok(match target {
        Some(_) => u64::from(action::REDIRECT),
        None => flags & ACTION_MASK,
    })
}

/// Where `bpf_redirect_map(map, key, flags)` sends the frame: `None` when
/// the slot is empty (and no broadcast is asked), which makes the helper
/// return the action in the flags' low bits. Flags were checked by the
/// caller.
pub fn redirect_target(map: &Map, key: u32, flags: u64) -> Option<RedirectTo> {
    use MapType::*;
    let devmap = matches!(map.map_type(), Devmap | DevmapHash);
    if devmap && flags & BPF_F_BROADCAST != 0 {
        return Some(RedirectTo::Broadcast {
            exclude_ingress: flags & BPF_F_EXCLUDE_INGRESS != 0,
        });
    }
    // Device and CPU maps are not per-CPU: CPU 0's view is the map.
    let value = map.lookup(&key.to_ne_bytes(), 0)?;
    Some(match map.map_type() {
        // SAFETY: a devmap value is 4 or 8 bytes (checked when the map was
        // created) and starts with the target's ifindex.
        Devmap | DevmapHash => {
            let ifindex = unsafe { std::ptr::read_unaligned(value as *const u32) };
            // SAFETY: an 8-byte devmap value holds the program id next.
            let prog = if map.value_size() >= 8 {
                unsafe { std::ptr::read_unaligned(value.add(4) as *const u32) }
            } else {
                0
            };
            if prog == 0 {
                RedirectTo::Ifindex(ifindex)
            } else {
                RedirectTo::EntryProgram { ifindex, prog }
            }
        }
        Cpumap => RedirectTo::Cpu(key),
        // XSKMAP: redirect_map accepts no other map type.
        _ => RedirectTo::Xsk(key),
    })
}
