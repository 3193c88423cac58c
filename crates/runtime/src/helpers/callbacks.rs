//! Helpers that call back into the program: `bpf_loop` and
//! `bpf_for_each_map_elem`. Callbacks run through `HelperCtx::call_subprog`
//! (a fresh frame one level deeper; faults propagate).

use super::common::{env, map_arg, require_map_use, value_region};
use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use bpfjet_maps::MapType;

/// `BPF_MAX_LOOPS`: the most iterations one `bpf_loop` call may ask for.
pub const BPF_MAX_LOOPS: u64 = 1 << 23;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::LOOP, "loop", bpf_loop));
    r.register(Helper::new(
        ids::FOR_EACH_MAP_ELEM,
        "for_each_map_elem",
        for_each_map_elem,
    ));
}

/// Calls `callback(i, ctx)` for i in 0..nr_loops until it returns non-zero;
/// returns the number of calls made.
fn bpf_loop(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (nr_loops, callback, callback_ctx, flags) = (a[0] as u32 as u64, a[1], a[2], a[3]);
    if flags != 0 {
        return Ok(errno::neg(errno::EINVAL));
    }
    if nr_loops > BPF_MAX_LOOPS {
        // The kernel verifier inlines bpf_loop when flags are a constant 0
        // (the usual case), and the inlined code loads -E2BIG with a 32-bit
        // move: the program sees it zero-extended.
        return Ok(errno::neg(errno::E2BIG) & 0xffff_ffff);
    }
    for i in 0..nr_loops {
        if ctx.call_subprog(callback, &[i, callback_ctx])? != 0 {
            return Ok(i + 1);
        }
    }
    Ok(nr_loops)
}

/// Calls `callback(map, key, value, ctx)` for each element until it returns
/// non-zero; returns the number of calls made. Arrays visit every index
/// (the key a u32 on this frame, valid during the call, as the kernel's is
/// on its stack), hash maps their elements in place (key and value in the
/// element, bucket by bucket, as the kernel walks them); per-CPU maps this
/// CPU's value. Nothing is allocated: a tracing program may run inside the
/// traced process's allocator.
fn for_each_map_elem(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    use MapType::*;
    let (handle, callback, callback_ctx, flags) = (a[0], a[1], a[2], a[3]);
    let map = map_arg(ctx, handle)?;
    require_map_use(
        ctx,
        map,
        "for_each_map_elem",
        &[Array, PercpuArray, Hash, PercpuHash, LruHash, LruPercpuHash],
    )?;
    if flags != 0 {
        return Ok(errno::neg(errno::EINVAL));
    }
    let cpu = env(ctx)?.cpu;
    let key_size = u64::from(map.spec().key_size);
    let mut calls = 0u64;
    // One element: its regions for a bounds-checked run, then the call;
    // Ok(true) to go on.
    let mut visit = |ctx: &mut HelperCtx<'_>, key: *const u8, value: *mut u8| {
        ctx.register_region(value_region(map, value));
        ctx.register_region(Region::read_only(key as u64, key_size));
        calls += 1;
        let ret = ctx.call_subprog(callback, &[handle, key as u64, value as u64, callback_ctx])?;
        Ok::<bool, Fault>(ret == 0)
    };
    if matches!(map.map_type(), Array | PercpuArray) {
        for i in 0..map.max_entries() {
            let key = i.to_ne_bytes();
            let Some(value) = map.lookup(&key, cpu) else {
                continue;
            };
            if !visit(ctx, key.as_ptr(), value)? {
                break;
            }
        }
    } else {
        let mut fault = None;
        map.visit_hash_elems(cpu, |key, value| match visit(ctx, key, value) {
            Ok(go_on) => go_on,
            Err(f) => {
                fault = Some(f);
                false
            }
        });
        if let Some(f) = fault {
            return Err(f);
        }
    }
    Ok(calls)
}
