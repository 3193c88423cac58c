//! Map helpers: lookup, update, delete, and the queue/stack/bloom trio.

use super::common::{
    env, map_arg, map_errno, read_key, require_map_use, result_code, value_region, ArgBytes,
};
use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use bpfjet_maps::{Map, MapType};
use std::sync::Arc;

use MapType::*;

use super::common::map_use::{KEYED, LOOKUP};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::MAP_LOOKUP_ELEM, "map_lookup_elem", lookup));
    r.register(Helper::new(ids::MAP_UPDATE_ELEM, "map_update_elem", update));
    r.register(Helper::new(ids::MAP_DELETE_ELEM, "map_delete_elem", delete));
    r.register(Helper::new(ids::MAP_PUSH_ELEM, "map_push_elem", push));
    r.register(Helper::new(ids::MAP_POP_ELEM, "map_pop_elem", |ctx, a| {
        take(ctx, a, false)
    }));
    r.register(Helper::new(
        ids::MAP_PEEK_ELEM,
        "map_peek_elem",
        |ctx, a| take(ctx, a, true),
    ));
    r.register(Helper::new(
        ids::MAP_LOOKUP_PERCPU_ELEM,
        "map_lookup_percpu_elem",
        lookup_percpu,
    ));
}

/// Hand a value pointer to the program (0 for none).
fn hand_out(ctx: &mut HelperCtx<'_>, map: &Map, ptr: Option<*mut u8>) -> u64 {
    match ptr {
        Some(p) => {
            ctx.register_region(value_region(map, p));
            p as u64
        }
        None => 0,
    }
}

/// `bpf_map_lookup_elem`: a value pointer, or for map-in-maps the inner
/// map's handle (the kernel returns the inner `struct bpf_map *`).
fn lookup(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    require_map_use(ctx, map, "map_lookup_elem", LOOKUP)?;
    let key = read_key(ctx, map, a[1])?;
    let cpu = env(ctx)?.cpu;
    let ptr = map.lookup(&key, cpu);
    if matches!(map.map_type(), ArrayOfMaps | HashOfMaps) {
        // `map_arg`'s map outlives the call: no copy of the template on
        // this per-packet path.
        return inner_handle(ctx, ptr, map.spec().inner.as_deref());
    }
    Ok(hand_out(ctx, map, ptr))
}

fn inner_handle(
    ctx: &mut HelperCtx<'_>,
    slot: Option<*mut u8>,
    template: Option<&bpfjet_maps::MapSpec>,
) -> Result<u64, Fault> {
    let Some(p) = slot else { return Ok(0) };
    // SAFETY: a map-in-map value is the 4-byte id of the inner map; the
    // pointer came from the map's own lookup.
    let id = unsafe { std::ptr::read_unaligned(p as *const u32) };
    let inner: Option<Arc<Map>> = env(ctx)?.maps.inner_map(id);
    let Some(m) = inner else { return Ok(0) };
    // The program was verified against the template: a map of another
    // shape in the slot (stored by a path that did not check) is none.
    if template.is_some_and(|t| !t.fits_inner_template(m.spec())) {
        return Ok(0);
    }
    let handle = crate::env::map_handle(&m);
    // The inner map's kernel view may be read (privileged `struct bpf_map`
    // reads); the bounds-checked interpreter must know it.
    ctx.register_region(Region::read_only(
        handle,
        bpfjet_maps::KERNEL_VIEW_BYTES as u64,
    ));
    Ok(handle)
}

/// `bpf_map_lookup_percpu_elem`: another CPU's value; NULL past the last CPU.
fn lookup_percpu(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    require_map_use(
        ctx,
        map,
        "map_lookup_percpu_elem",
        &[PercpuHash, PercpuArray, LruPercpuHash],
    )?;
    let key = read_key(ctx, map, a[1])?;
    let cpu = a[2] as u32;
    if cpu >= map.ncpus() {
        return Ok(0);
    }
    let ptr = map.lookup(&key, cpu);
    Ok(hand_out(ctx, map, ptr))
}

fn update(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    require_map_use(ctx, map, "map_update_elem", KEYED)?;
    let key = read_key(ctx, map, a[1])?;
    let cpu = env(ctx)?.cpu;
    let size = u64::from(map.value_size());
    if size as usize > ArgBytes::INLINE {
        // Read in place, as the JIT's natives do: a copy this large would
        // need the heap, and the run may be inside the traced process's
        // allocator (tracing_no_alloc.rs). A value this large comes from a
        // map (the stack holds 512 bytes); when it is the element being
        // written, source and destination are the same bytes.
        let value = ctx.read_mem(a[2], size)?;
        return Ok(result_code(map.update(&key, value, a[3], cpu)));
    }
    let value = ArgBytes::copy(ctx.read_mem(a[2], size)?);
    Ok(result_code(map.update(&key, &value, a[3], cpu)))
}

fn delete(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    require_map_use(ctx, map, "map_delete_elem", KEYED)?;
    let key = read_key(ctx, map, a[1])?;
    if matches!(map.map_type(), Array | PercpuArray) {
        // Array elements always exist; the kernel refuses to delete them.
        return Ok(errno::neg(errno::EINVAL));
    }
    Ok(result_code(map.delete(&key)))
}

fn push(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    require_map_use(ctx, map, "map_push_elem", &[Queue, Stack, BloomFilter])?;
    let value = ArgBytes::copy(ctx.read_mem(a[1], u64::from(map.value_size()))?);
    Ok(result_code(map.push(&value, a[2])))
}

/// `bpf_map_pop_elem` / `bpf_map_peek_elem`: the value lands in program
/// memory. For a bloom filter, peek tests the value (0 = maybe present).
fn take(ctx: &mut HelperCtx<'_>, a: [u64; 5], peek: bool) -> Result<u64, Fault> {
    let map = map_arg(ctx, a[0])?;
    let name = if peek {
        "map_peek_elem"
    } else {
        "map_pop_elem"
    };
    let allowed: &[MapType] = if peek {
        &[Queue, Stack, BloomFilter]
    } else {
        &[Queue, Stack]
    };
    require_map_use(ctx, map, name, allowed)?;
    let len = u64::from(map.value_size());
    if map.map_type() == BloomFilter {
        let mut value = ctx.read_mem(a[1], len)?.to_vec();
        return Ok(result_code(map.peek(&mut value)));
    }
    let mut value = vec![0u8; len as usize];
    let result = if peek {
        map.peek(&mut value)
    } else {
        map.pop(&mut value)
    };
    match result {
        Ok(()) => {
            ctx.write_mem(a[1], len)?.copy_from_slice(&value);
            Ok(0)
        }
        Err(e) => {
            // The kernel clears the destination when the queue is empty.
            if e == bpfjet_maps::MapError::NotFound {
                ctx.write_mem(a[1], len)?.fill(0);
            }
            Ok(map_errno(&e))
        }
    }
}
