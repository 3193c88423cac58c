//! The internal helpers that replace the map helper calls on a map kept per
//! thread (`crate::tracing::thread_maps`): same arguments as
//! `bpf_map_lookup_elem`/`update_elem`/`delete_elem`, run on the calling
//! thread's slot instead of the map. Only calls rewritten by the tracing
//! loader reach them, on maps the fusion analysis proved thread-keyed.

use super::tracing::tracing_env;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use crate::tracing::thread_maps::{
    result_code, ThreadMapRef, THREAD_MAP_DELETE, THREAD_MAP_LOOKUP, THREAD_MAP_UPDATE,
};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(THREAD_MAP_LOOKUP, "thread_map_lookup", lookup));
    r.register(Helper::new(THREAD_MAP_UPDATE, "thread_map_update", update));
    r.register(Helper::new(THREAD_MAP_DELETE, "thread_map_delete", delete));
}

/// This thread's slot of the map whose handle is `handle`.
fn slot_of(ctx: &mut HelperCtx<'_>, handle: u64) -> Result<ThreadMapRef, Fault> {
    let found = tracing_env(ctx)?
        .thread_maps
        .iter()
        .find(|r| r.handle == handle)
        .cloned();
    found.ok_or_else(|| ctx.fault(format!("{handle:#x} is not a map kept per thread")))
}

fn lookup(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let r = slot_of(ctx, a[0])?;
    let key = ctx.read_mem(a[1], r.map.key_size() as u64)?;
    match r.map.lookup(&r.slot, key) {
        Some(p) => {
            ctx.register_region(Region::writable(p as u64, r.map.value_size() as u64));
            Ok(p as u64)
        }
        None => Ok(0),
    }
}

fn update(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let r = slot_of(ctx, a[0])?;
    let key = ctx.read_mem(a[1], r.map.key_size() as u64)?;
    let value = ctx.read_mem(a[2], r.map.value_size() as u64)?;
    Ok(result_code(r.map.update(&r.slot, key, value, a[3])))
}

fn delete(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let r = slot_of(ctx, a[0])?;
    let key = ctx.read_mem(a[1], r.map.key_size() as u64)?;
    Ok(result_code(r.map.delete(&r.slot, key)))
}
