//! Ring-buffer helpers. Reservations are tracked per run, so that submit and
//! discard accept only live samples (what the kernel verifier's reference
//! tracking guarantees) and a sample the program leaks is discarded at exit.

use super::common::{env, map_arg, require_map_use, result_code};
use super::ids;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use bpfjet_maps::{Map, MapType};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::RINGBUF_OUTPUT,
        "ringbuf_output",
        |ctx, a| {
            let map = map_arg(ctx, a[0])?;
            require_map_use(ctx, map, "ringbuf_output", &[MapType::Ringbuf])?;
            let data = ctx.read_mem(a[1], a[2])?;
            Ok(result_code(map.ringbuf_output(data, a[3])))
        },
    ));
    r.register(Helper::new(
        ids::RINGBUF_RESERVE,
        "ringbuf_reserve",
        |ctx, a| {
            let map = map_arg(ctx, a[0])?;
            require_map_use(ctx, map, "ringbuf_reserve", &[MapType::Ringbuf])?;
            let Some(sample) = map.ringbuf_reserve(a[1], a[2]) else {
                return Ok(0);
            };
            let (addr, size) = (sample as u64, a[1]);
            env(ctx)?.reservations.push((addr, size));
            ctx.register_region(Region::writable(addr, size));
            Ok(addr)
        },
    ));
    r.register(Helper::new(
        ids::RINGBUF_SUBMIT,
        "ringbuf_submit",
        |ctx, a| commit(ctx, a[0], a[1], false),
    ));
    r.register(Helper::new(
        ids::RINGBUF_DISCARD,
        "ringbuf_discard",
        |ctx, a| commit(ctx, a[0], a[1], true),
    ));
    r.register(Helper::new(
        ids::RINGBUF_QUERY,
        "ringbuf_query",
        |ctx, a| {
            let map = map_arg(ctx, a[0])?;
            require_map_use(ctx, map, "ringbuf_query", &[MapType::Ringbuf])?;
            Ok(map.ringbuf_query(a[1]))
        },
    ));
}

pub(crate) fn commit(
    ctx: &mut HelperCtx<'_>,
    addr: u64,
    flags: u64,
    discard: bool,
) -> Result<u64, Fault> {
    let reservations = &mut env(ctx)?.reservations;
    let Some(i) = reservations.iter().position(|&(a, _)| a == addr) else {
        return Err(ctx.fault(format!(
            "{addr:#x} is not a ring-buffer sample reserved and not yet submitted or discarded"
        )));
    };
    let (_, size) = reservations.swap_remove(i);
    // The sample is the consumer's now: the program may not touch it again.
    ctx.replace_region(Region::writable(addr, size), None);
    // SAFETY: `addr` came from `Map::ringbuf_reserve` and was live until now.
    unsafe {
        if discard {
            Map::ringbuf_discard(addr as *mut u8, flags);
        } else {
            Map::ringbuf_submit(addr as *mut u8, flags);
        }
    }
    Ok(0)
}
