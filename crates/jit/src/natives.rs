//! Native functions generated code calls directly, in place of the helper
//! trampoline: no registry dispatch, no `HelperCtx`, arguments in registers.
//! Each one computes exactly what the runtime's helper of the same name
//! computes for a verified program (whose pointer arguments are valid by
//! proof), and none of them can unwind into generated code.

use crate::trampoline::RunCtx;
use bpfjet_maps::{Map, MapType};
use bpfjet_runtime::worker::RedirectTo;
use bpfjet_runtime::xdp::action;
use bpfjet_runtime::{Fault, BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Symbol names, resolved by the object loader.
pub(crate) const MAP_LOOKUP_GENERIC: &str = "bpfjet_jit_map_lookup";
pub(crate) const KTIME_NS: &str = "bpfjet_jit_ktime_ns";
pub(crate) const KTIME_BOOT_NS: &str = "bpfjet_jit_ktime_boot_ns";
pub(crate) const KTIME_COARSE_NS: &str = "bpfjet_jit_ktime_coarse_ns";
pub(crate) const KTIME_TAI_NS: &str = "bpfjet_jit_ktime_tai_ns";
/// `bpf_get_current_pid_tgid` of tracing programs: the calling thread's
/// cached ids (no helper trampoline).
pub(crate) const PID_TGID: &str = "bpfjet_jit_pid_tgid";
pub(crate) const CSUM_DIFF: &str = "bpfjet_jit_csum_diff";
pub(crate) const STRNCMP: &str = "bpfjet_jit_strncmp";
pub(crate) const MAP_UPDATE: &str = "bpfjet_jit_map_update";
pub(crate) const MAP_DELETE: &str = "bpfjet_jit_map_delete";
/// In `crate::trampoline` (it needs the run context).
pub(crate) const XDP_ADJUST: &str = "bpfjet_jit_xdp_adjust";
/// In `crate::trampoline`: `bpf_xdp_load_bytes`/`store_bytes` for a range
/// past the linear part (a multi-buffer frame's fragments).
pub(crate) const XDP_COPY: &str = "bpfjet_jit_xdp_copy";
/// Map helpers on a handle the lifter cannot resolve to a bound map of a
/// known kind (an inner map of a map-in-map, a map-in-map itself, device
/// maps): they take the run context, check the map's type as the helper
/// does and may abort the run, so generated code checks the status word
/// after them.
pub(crate) const MAP_LOOKUP_ANY: &str = "bpfjet_jit_map_lookup_any";
pub(crate) const MAP_UPDATE_ANY: &str = "bpfjet_jit_map_update_any";
pub(crate) const MAP_DELETE_ANY: &str = "bpfjet_jit_map_delete_any";
pub(crate) const REDIRECT_MAP: &str = "bpfjet_jit_redirect_map";
pub(crate) const REDIRECT: &str = "bpfjet_jit_redirect";
pub(crate) const RINGBUF_RESERVE: &str = "bpfjet_jit_ringbuf_reserve";
pub(crate) const RINGBUF_COMMIT: &str = "bpfjet_jit_ringbuf_commit";
pub(crate) const RINGBUF_OUTPUT: &str = "bpfjet_jit_ringbuf_output";
/// The kernel's `bpf_dynptr_from_xdp` and `bpf_dynptr_slice(_rdwr)` kfuncs
/// on a verified XDP program's run (`bpfjet_runtime::dynptr_direct`).
/// `bpf_xdp_get_buff_len(ctx)`: the run's frame, fragments included.
pub(crate) const XDP_BUFF_LEN: &str = "bpfjet_jit_xdp_buff_len";
/// `bpf_get_prandom_u32`: the run environment's generator, as the helper.
pub(crate) const PRANDOM: &str = "bpfjet_jit_prandom";
pub(crate) const DYNPTR_FROM_XDP: &str = "bpfjet_jit_dynptr_from_xdp";
pub(crate) const DYNPTR_SLICE: &str = "bpfjet_jit_dynptr_slice";
/// `bpf_dynptr_read` (helper 201) on an XDP program's run.
pub(crate) const DYNPTR_READ: &str = "bpfjet_jit_dynptr_read";
/// `bpf_dynptr_adjust`, `_is_null`, `_is_rdonly`, `_size` (any program
/// type): [`DYNPTR_QUERIES`] gives the second argument.
pub(crate) const DYNPTR_QUERY: &str = "bpfjet_jit_dynptr_query";
pub(crate) const DYNPTR_QUERIES: [bpfjet_runtime::dynptr_direct::DynptrKfunc; 4] = {
    use bpfjet_runtime::dynptr_direct::DynptrKfunc::*;
    [Adjust, IsNull, IsRdonly, Size]
};

/// Key sizes with a lookup specialised for them (copying the key is then a
/// fixed-size move, and the hash runs over a known length).
pub(crate) const SPECIALISED_KEY_SIZES: &[u32] = &[4, 8, 12, 16, 20, 36, 40];

/// The symbol of the lookup for `key_size`.
pub(crate) fn map_lookup_symbol(key_size: u32) -> String {
    if SPECIALISED_KEY_SIZES.contains(&key_size) {
        format!("bpfjet_jit_map_lookup_k{key_size}")
    } else {
        MAP_LOOKUP_GENERIC.to_string()
    }
}

/// `bpf_map_lookup_elem` on a keyed map with a `K`-byte key.
///
/// # Safety
/// `map` is the handle of a live map whose key size is `K`; `key` points to
/// `K` readable bytes.
unsafe extern "C" fn map_lookup_k<const K: usize>(
    map: *const Map,
    key: *const u8,
    cpu: u64,
) -> u64 {
    // SAFETY: per the contract above; `[u8; K]` has alignment 1. The key
    // is read in place: a local copy would be written with wide moves and
    // then read by the hash at other offsets and widths, stalling on
    // store-to-load forwarding.
    let key = unsafe { &*key.cast::<[u8; K]>() };
    // SAFETY: the compiled program holds the map alive.
    let map = unsafe { Map::from_handle(map) };
    catch_unwind(AssertUnwindSafe(|| map.lookup_fixed(key, cpu as u32)))
        .ok()
        .flatten()
        .map_or(0, |p| p as u64)
}

/// The symbol of the lookup taking a `key_size`-byte key by value (in the
/// low bytes of an i64, as stored in memory), for key sizes that fit.
pub(crate) fn map_lookup_by_value_symbol(key_size: u32) -> Option<&'static str> {
    match key_size {
        4 => Some("bpfjet_jit_map_lookup_v4"),
        8 => Some("bpfjet_jit_map_lookup_v8"),
        _ => None,
    }
}

/// [`map_lookup_k`] with the key passed by value. Generated code loads the
/// key from the program's stack itself, where LLVM can assemble it from the
/// stores that built it: a key written with narrow stores and read back
/// with one wide load costs a store-to-load forwarding stall otherwise.
///
/// # Safety
/// `map` is the handle of a live map whose key size is `K` (at most 8).
unsafe extern "C" fn map_lookup_v<const K: usize>(map: *const Map, key: u64, cpu: u64) -> u64 {
    let bytes = key.to_ne_bytes();
    let Some(key) = bytes.first_chunk::<K>() else {
        return 0;
    };
    // SAFETY: the compiled program holds the map alive.
    let map = unsafe { Map::from_handle(map) };
    catch_unwind(AssertUnwindSafe(|| map.lookup_fixed(key, cpu as u32)))
        .ok()
        .flatten()
        .map_or(0, |p| p as u64)
}

/// `bpf_map_lookup_elem` on a keyed map of any key size.
///
/// # Safety
/// `map` is the handle of a live map; `key` points to its key size in bytes.
unsafe extern "C" fn map_lookup(map: *const Map, key: *const u8, cpu: u64) -> u64 {
    // SAFETY: the compiled program holds the map alive.
    let map = unsafe { Map::from_handle(map) };
    // SAFETY: per the contract above.
    let key = unsafe { std::slice::from_raw_parts(key, map.key_size() as usize) };
    catch_unwind(AssertUnwindSafe(|| map.lookup(key, cpu as u32)))
        .ok()
        .flatten()
        .map_or(0, |p| p as u64)
}

fn result_code(r: Result<(), bpfjet_maps::MapError>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => (e.errno() as u64).wrapping_neg(),
    }
}

/// `bpf_map_update_elem` on an array or keyed map.
///
/// # Safety
/// `map` is the handle of a live map; `key` and `value` point to its key
/// and value sizes in bytes.
unsafe extern "C" fn map_update(
    map: *const Map,
    key: *const u8,
    value: *const u8,
    flags: u64,
    cpu: u64,
) -> u64 {
    // SAFETY: the compiled program holds the map alive; sizes per contract.
    let (map, key, value) = unsafe {
        let map = Map::from_handle(map);
        (
            map,
            std::slice::from_raw_parts(key, map.key_size() as usize),
            std::slice::from_raw_parts(value, map.value_size() as usize),
        )
    };
    catch_unwind(AssertUnwindSafe(|| {
        result_code(map.update(key, value, flags, cpu as u32))
    }))
    .unwrap_or(errno_neg(bpfjet_runtime::errno::EINVAL))
}

/// `bpf_map_delete_elem` on a keyed map.
///
/// # Safety
/// As [`map_update`], without the value.
unsafe extern "C" fn map_delete(map: *const Map, key: *const u8) -> u64 {
    // SAFETY: as in `map_update`.
    let (map, key) = unsafe {
        let map = Map::from_handle(map);
        (
            map,
            std::slice::from_raw_parts(key, map.key_size() as usize),
        )
    };
    catch_unwind(AssertUnwindSafe(|| result_code(map.delete(key))))
        .unwrap_or(errno_neg(bpfjet_runtime::errno::EINVAL))
}

pub(crate) fn errno_neg(e: u64) -> u64 {
    e.wrapping_neg()
}

/// `bpf_get_current_pid_tgid`: the runtime helper's answer (tgid in the
/// upper half, tid in the lower), from its per-thread cache.
extern "C" fn pid_tgid() -> u64 {
    let (tgid, tid) = bpfjet_runtime::tracing::current_tgid_tid();
    (u64::from(tgid) << 32) | u64::from(tid)
}

/// `bpf_ktime_get_ns` (CLOCK_MONOTONIC), `_boot_ns` (CLOCK_BOOTTIME),
/// `_coarse_ns` (CLOCK_MONOTONIC_COARSE), `_tai_ns` (CLOCK_TAI): the clock
/// through the C library (the vDSO), as the runtime's helpers read it.
extern "C" fn clock_ns<const CLOCK: libc::clockid_t>() -> u64 {
    bpfjet_runtime::clock_ns(CLOCK)
}

/// # Safety
/// `ptr` points to `len` readable bytes unless `len` is 0.
unsafe fn bytes<'a>(ptr: *const u8, len: u64) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: per the contract above.
        unsafe { std::slice::from_raw_parts(ptr, len as usize) }
    }
}

/// `csum_partial`: `seed` plus the buffer's native-endian 32-bit words (a
/// short last word padded with zeros), in ones'-complement arithmetic —
/// the runtime's definition, eight bytes at a time.
fn csum_partial(b: &[u8], seed: u32) -> u32 {
    let mut sum = u128::from(seed);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += u128::from(w & 0xffff_ffff) + u128::from(w >> 32);
    }
    for word in chunks.remainder().chunks(4) {
        let mut w = [0u8; 4];
        w[..word.len()].copy_from_slice(word);
        sum += u128::from(u32::from_ne_bytes(w));
    }
    while sum > 0xffff_ffff {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
}

fn csum_add(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s.wrapping_add(u32::from(carry))
}

/// `bpf_csum_diff(from, from_size, to, to_size, seed)`, bit-exact with
/// `bpfjet_runtime::csum_diff` (checked by `tests/inlining.rs`).
///
/// # Safety
/// The verifier proved both buffers readable for their (32-bit) sizes.
unsafe extern "C" fn csum_diff(
    from: *const u8,
    from_size: u64,
    to: *const u8,
    to_size: u64,
    seed: u64,
) -> u64 {
    // SAFETY: per the contract above.
    let (from, to) = unsafe {
        (
            bytes(from, from_size & 0xffff_ffff),
            bytes(to, to_size & 0xffff_ffff),
        )
    };
    let seed = seed as u32;
    let sum = match (from.is_empty(), to.is_empty()) {
        (false, false) => csum_add(csum_partial(to, seed), !csum_partial(from, 0)),
        (_, false) => csum_partial(to, seed),
        (_, true) => !csum_partial(from, !seed),
    };
    u64::from((sum.wrapping_add(sum.rotate_right(16)) >> 16) as u16)
}

/// `bpf_strncmp(s1, s1_size, s2)`: `s2` is a NUL-terminated constant string.
///
/// # Safety
/// `s1` is readable for `s1_size` bytes; `s2` is NUL-terminated or readable
/// for `s1_size + 1` bytes.
unsafe extern "C" fn strncmp(s1: *const u8, s1_size: u64, s2: *const u8) -> u64 {
    let n = (s1_size & 0xffff_ffff) as usize;
    // SAFETY: per the contract above.
    let s1 = unsafe { bytes(s1, n as u64) };
    let mut s2_bytes = Vec::with_capacity(n + 1);
    for i in 0..=n {
        // SAFETY: per the contract above: reading stops at the NUL.
        let b = unsafe { s2.add(i).read() };
        if b == 0 {
            break;
        }
        s2_bytes.push(b);
    }
    bpfjet_runtime::strncmp(s1, &s2_bytes, n) as i64 as u64
}

use bpfjet_runtime::map_use::{self, KEYED, LOOKUP};

/// The runtime's check (`bpfjet_runtime::check_map_use`): a call the
/// kernel verifier would refuse at load time aborts the run.
fn require_map_use(
    map: &Map,
    pc: u64,
    helper: &'static str,
    allowed: &[MapType],
) -> Result<(), Fault> {
    bpfjet_runtime::check_map_use(map, helper, allowed).map_err(|reason| Fault::Helper {
        pc: pc as usize,
        helper,
        reason,
    })
}

/// Run `body` for generated code: a fault or panic aborts the run (the
/// status word tells the caller) and yields 0.
///
/// # Safety
/// `ctx` is the run context generated code was entered with; `map` is a map
/// handle the verifier proved to be one (a bound map, or an inner map the
/// run's `ObjectMaps` holds alive).
unsafe fn with_map(
    ctx: *mut RunCtx,
    map: *const Map,
    body: impl FnOnce(&mut RunCtx, &Map) -> Result<u64, Fault>,
) -> u64 {
    // SAFETY: per the contract above.
    let (ctx, map) = unsafe { (&mut *ctx, Map::from_handle(map)) };
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&mut *ctx, map)));
    ctx.settle(outcome)
}

/// `bpf_map_lookup_elem` on any map the helper accepts: a value pointer, or
/// for map-in-maps the inner map's handle (made known to the run's maps, as
/// the helper does).
///
/// # Safety
/// As [`with_map`]; `key` points to the map's key size in bytes.
unsafe extern "C" fn map_lookup_any(
    ctx: *mut RunCtx,
    map: *const Map,
    key: *const u8,
    pc: u64,
) -> u64 {
    const HELPER: &str = "map_lookup_elem";
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |ctx, map| {
            use MapType::*;
            require_map_use(map, pc, HELPER, LOOKUP)?;
            let key = bytes(key, u64::from(map.key_size()));
            let ptr = map.lookup(key, ctx.cpu());
            if !matches!(map.map_type(), ArrayOfMaps | HashOfMaps) {
                return Ok(ptr.map_or(0, |p| p as u64));
            }
            let Some(slot) = ptr else { return Ok(0) };
            // SAFETY: a map-in-map value is the 4-byte id of the inner map.
            let id = std::ptr::read_unaligned(slot as *const u32);
            if let Some(handle) = ctx.code().inner_maps.get(id) {
                return Ok(handle);
            }
            let inner = ctx.run_env(pc, HELPER)?.object_maps().inner_map(id);
            // As the interpreter: a map that does not fit the template the
            // program was verified against is none.
            let template = map.spec().inner.as_deref();
            let inner = inner.filter(|m| template.is_none_or(|t| t.fits_inner_template(m.spec())));
            Ok(inner.map_or(0, |m| ctx.code().inner_maps.insert(id, m)))
        })
    }
}

/// `bpf_map_update_elem` on any map the helper accepts.
///
/// # Safety
/// As [`with_map`]; `key` and `value` point to the map's key and value
/// sizes in bytes.
unsafe extern "C" fn map_update_any(
    ctx: *mut RunCtx,
    map: *const Map,
    key: *const u8,
    value: *const u8,
    flags: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |ctx, map| {
            require_map_use(map, pc, "map_update_elem", KEYED)?;
            let key = bytes(key, u64::from(map.key_size()));
            let value = bytes(value, u64::from(map.value_size()));
            Ok(result_code(map.update(key, value, flags, ctx.cpu())))
        })
    }
}

/// `bpf_map_delete_elem` on any map the helper accepts.
///
/// # Safety
/// As [`with_map`]; `key` points to the map's key size in bytes.
unsafe extern "C" fn map_delete_any(
    ctx: *mut RunCtx,
    map: *const Map,
    key: *const u8,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |_, map| {
            require_map_use(map, pc, "map_delete_elem", KEYED)?;
            if matches!(map.map_type(), MapType::Array | MapType::PercpuArray) {
                // Array elements always exist; the kernel refuses to delete them.
                return Ok(errno_neg(bpfjet_runtime::errno::EINVAL));
            }
            let key = bytes(key, u64::from(map.key_size()));
            Ok(result_code(map.delete(key)))
        })
    }
}

/// `bpf_redirect_map(map, key, flags)`: XDP_REDIRECT when the slot is
/// populated (or on a broadcast), else the action in the flags' low bits;
/// bad flags are XDP_ABORTED. As the runtime's helper computes it.
///
/// # Safety
/// As [`with_map`].
unsafe extern "C" fn redirect_map(
    ctx: *mut RunCtx,
    map: *const Map,
    key: u64,
    flags: u64,
    pc: u64,
) -> u64 {
    const ACTION_MASK: u64 = (action::ABORTED | action::DROP | action::PASS | action::TX) as u64;
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |ctx, map| {
            use MapType::*;
            require_map_use(map, pc, "redirect_map", map_use::REDIRECT)?;
            let flag_mask = match map.map_type() {
                Devmap | DevmapHash => BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
                _ => 0,
            };
            if flags & !(ACTION_MASK | flag_mask) != 0 {
                return Ok(u64::from(action::ABORTED));
            }
            // The map ops take a u32 key: the 64-bit argument is truncated.
            let target = bpfjet_runtime::redirect_target(map, key as u32, flags);
            // Recorded like the runtime's helper does: data-plane runners
            // read it to send the frame.
            let via = bpfjet_runtime::worker::RedirectVia::map(map, key as u32);
            ctx.xdp_env(pc, "redirect_map")?
                .record_redirect(target, via);
            Ok(match target {
                Some(_) => u64::from(action::REDIRECT),
                None => flags & ACTION_MASK,
            })
        })
    }
}

/// `bpf_redirect(ifindex, flags)` in XDP: XDP_REDIRECT with the target
/// recorded in the run's environment, or XDP_ABORTED for any flags.
///
/// # Safety
/// `ctx` is the run context generated code was entered with.
unsafe extern "C" fn redirect_ifindex(ctx: *mut RunCtx, ifindex: u64, flags: u64, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if flags != 0 {
            return Ok(u64::from(action::ABORTED));
        }
        ctx.xdp_env(pc, "redirect")?.record_redirect(
            Some(RedirectTo::Ifindex(ifindex as u32)),
            bpfjet_runtime::worker::RedirectVia::ifindex(ifindex as u32),
        );
        Ok(u64::from(action::REDIRECT))
    }));
    ctx.settle(outcome)
}

/// `bpf_ringbuf_reserve(map, size, flags)`: a sample (tracked in the run's
/// environment like the helper does) or 0.
///
/// # Safety
/// As [`with_map`].
unsafe extern "C" fn ringbuf_reserve(
    ctx: *mut RunCtx,
    map: *const Map,
    size: u64,
    flags: u64,
    pc: u64,
) -> u64 {
    const HELPER: &str = "ringbuf_reserve";
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |ctx, map| {
            require_map_use(map, pc, HELPER, &[MapType::Ringbuf])?;
            let env = ctx.run_env(pc, HELPER)?;
            let Some(sample) = map.ringbuf_reserve(size, flags) else {
                return Ok(0);
            };
            env.track_reservation(sample as u64, size);
            Ok(sample as u64)
        })
    }
}

/// `bpf_ringbuf_submit(sample, flags)` (`discard` 0) or
/// `bpf_ringbuf_discard` (1): only a live reservation of this run.
///
/// # Safety
/// `ctx` is the run context generated code was entered with.
unsafe extern "C" fn ringbuf_commit(
    ctx: *mut RunCtx,
    sample: u64,
    flags: u64,
    discard: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let helper = if discard != 0 {
            "ringbuf_discard"
        } else {
            "ringbuf_submit"
        };
        if ctx
            .run_env(pc, helper)?
            .untrack_reservation(sample)
            .is_none()
        {
            return Err(Fault::Helper {
                pc: pc as usize,
                helper,
                reason: format!(
                    "{sample:#x} is not a ring-buffer sample reserved and not yet \
                     submitted or discarded"
                ),
            });
        }
        // SAFETY: `sample` came from `Map::ringbuf_reserve` and was live
        // until now (it was tracked).
        unsafe {
            if discard != 0 {
                Map::ringbuf_discard(sample as *mut u8, flags);
            } else {
                Map::ringbuf_submit(sample as *mut u8, flags);
            }
        }
        Ok(0)
    }));
    ctx.settle(outcome)
}

/// `bpf_ringbuf_output(map, data, size, flags)`.
///
/// # Safety
/// As [`with_map`]; `data` is readable for `size` bytes.
unsafe extern "C" fn ringbuf_output(
    ctx: *mut RunCtx,
    map: *const Map,
    data: *const u8,
    size: u64,
    flags: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_map(ctx, map, |_, map| {
            require_map_use(map, pc, "ringbuf_output", &[MapType::Ringbuf])?;
            Ok(result_code(map.ringbuf_output(bytes(data, size), flags)))
        })
    }
}

/// The run's XDP environment for a direct dynptr kfunc, and its result (a
/// call on something else than the run's context aborts the run).
///
/// # Safety
/// `ctx` is the run context generated code was entered with.
unsafe fn with_xdp_env(
    ctx: *mut RunCtx,
    pc: u64,
    kfunc: &'static str,
    body: impl FnOnce(&mut bpfjet_runtime::XdpEnv) -> Result<u64, &'static str>,
) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let env = ctx.xdp_env(pc, kfunc)?;
        body(env).map_err(|reason| Fault::Helper {
            pc: pc as usize,
            helper: kfunc,
            reason: reason.into(),
        })
    }));
    ctx.settle(outcome)
}

/// `bpf_dynptr_from_xdp(md, flags, ptr)`.
///
/// # Safety
/// `ctx` as in [`with_xdp_env`]; a verified program's arguments.
unsafe extern "C" fn dynptr_from_xdp(
    ctx: *mut RunCtx,
    md: u64,
    flags: u64,
    at: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above (the verifier proved `at` a dynptr's
    // 16 bytes on the stack).
    unsafe {
        with_xdp_env(ctx, pc, "bpf_dynptr_from_xdp", |env| {
            bpfjet_runtime::dynptr_direct::from_xdp(env, md, flags, at)
        })
    }
}

/// `bpf_dynptr_slice(ptr, offset, buffer, len)` (`rdwr` 1: `_rdwr`).
///
/// # Safety
/// As [`dynptr_from_xdp`].
unsafe extern "C" fn dynptr_slice(
    ctx: *mut RunCtx,
    at: u64,
    offset: u64,
    buffer: u64,
    len: u64,
    rdwr: u64,
    pc: u64,
) -> u64 {
    let kfunc = if rdwr != 0 {
        "bpf_dynptr_slice_rdwr"
    } else {
        "bpf_dynptr_slice"
    };
    // SAFETY: per the contract above (an initialised dynptr; a buffer of
    // `len` writable bytes or NULL).
    unsafe {
        with_xdp_env(ctx, pc, kfunc, |env| {
            bpfjet_runtime::dynptr_direct::slice(
                env,
                at,
                offset as u32,
                buffer,
                len as u32,
                rdwr != 0,
            )
        })
    }
}

/// `bpf_dynptr_read(dst, len, src, offset, flags)`.
///
/// # Safety
/// As [`dynptr_from_xdp`].
unsafe extern "C" fn dynptr_read(
    ctx: *mut RunCtx,
    dst: u64,
    len: u64,
    src: u64,
    offset: u64,
    flags: u64,
    pc: u64,
) -> u64 {
    // SAFETY: per the contract above (the verifier proved `dst` writable
    // for `len` bytes and `src` a dynptr).
    unsafe {
        with_xdp_env(ctx, pc, "dynptr_read", |env| {
            bpfjet_runtime::dynptr_direct::read(env, dst, len as u32, src, offset as u32, flags)
        })
    }
}

/// `bpf_xdp_get_buff_len(md)`.
///
/// # Safety
/// `ctx` is the run context generated code was entered with.
unsafe extern "C" fn xdp_buff_len(ctx: *mut RunCtx, md: u64, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    unsafe {
        with_xdp_env(ctx, pc, "xdp_get_buff_len", |env| {
            env.frame_of(md)
                .map(|f| f.buff_len() as u64)
                .ok_or("the first argument is not the XDP context")
        })
    }
}

/// `bpf_get_prandom_u32()`.
///
/// # Safety
/// `ctx` is the run context generated code was entered with.
unsafe extern "C" fn prandom(ctx: *mut RunCtx, pc: u64) -> u64 {
    // SAFETY: per the contract above.
    let ctx = unsafe { &mut *ctx };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        ctx.run_env(pc, "get_prandom_u32")
            .map(|env| u64::from(env.next_random()))
    }));
    ctx.settle(outcome)
}

/// `bpf_dynptr_adjust(at, start, end)` and the dynptr queries (`which`
/// indexes [`DYNPTR_QUERIES`]).
///
/// # Safety
/// `at` is an initialised dynptr of a verified program.
unsafe extern "C" fn dynptr_query(at: u64, which: u64, start: u64, end: u64) -> u64 {
    let Some(&k) = DYNPTR_QUERIES.get(which as usize) else {
        return 0;
    };
    // SAFETY: per the contract above.
    unsafe { bpfjet_runtime::dynptr_direct::query(k, at, start as u32, end as u32) }
}

/// Addresses of the functions above, by symbol.
pub(crate) fn resolve(name: &str) -> Option<usize> {
    type Lookup = unsafe extern "C" fn(*const Map, *const u8, u64) -> u64;
    let lookup = |f: Lookup| f as *const () as usize;
    Some(match name {
        MAP_LOOKUP_GENERIC => lookup(map_lookup),
        "bpfjet_jit_map_lookup_k4" => lookup(map_lookup_k::<4>),
        "bpfjet_jit_map_lookup_k8" => lookup(map_lookup_k::<8>),
        "bpfjet_jit_map_lookup_k12" => lookup(map_lookup_k::<12>),
        "bpfjet_jit_map_lookup_k16" => lookup(map_lookup_k::<16>),
        "bpfjet_jit_map_lookup_k20" => lookup(map_lookup_k::<20>),
        "bpfjet_jit_map_lookup_k36" => lookup(map_lookup_k::<36>),
        "bpfjet_jit_map_lookup_k40" => lookup(map_lookup_k::<40>),
        "bpfjet_jit_map_lookup_v4" | "bpfjet_jit_map_lookup_v8" => {
            let f: unsafe extern "C" fn(*const Map, u64, u64) -> u64 = if name.ends_with('4') {
                map_lookup_v::<4>
            } else {
                map_lookup_v::<8>
            };
            f as *const () as usize
        }
        KTIME_NS | KTIME_BOOT_NS | KTIME_COARSE_NS | KTIME_TAI_NS => {
            let f: extern "C" fn() -> u64 = match name {
                KTIME_BOOT_NS => clock_ns::<{ libc::CLOCK_BOOTTIME }>,
                KTIME_COARSE_NS => clock_ns::<{ libc::CLOCK_MONOTONIC_COARSE }>,
                KTIME_TAI_NS => clock_ns::<{ libc::CLOCK_TAI }>,
                _ => clock_ns::<{ libc::CLOCK_MONOTONIC }>,
            };
            f as *const () as usize
        }
        PID_TGID => {
            let f: extern "C" fn() -> u64 = pid_tgid;
            f as *const () as usize
        }
        CSUM_DIFF => {
            let f: unsafe extern "C" fn(*const u8, u64, *const u8, u64, u64) -> u64 = csum_diff;
            f as *const () as usize
        }
        MAP_UPDATE => {
            let f: unsafe extern "C" fn(*const Map, *const u8, *const u8, u64, u64) -> u64 =
                map_update;
            f as *const () as usize
        }
        MAP_DELETE => {
            let f: unsafe extern "C" fn(*const Map, *const u8) -> u64 = map_delete;
            f as *const () as usize
        }
        MAP_LOOKUP_ANY | MAP_DELETE_ANY => {
            let f: unsafe extern "C" fn(*mut RunCtx, *const Map, *const u8, u64) -> u64 =
                if name == MAP_LOOKUP_ANY {
                    map_lookup_any
                } else {
                    map_delete_any
                };
            f as *const () as usize
        }
        MAP_UPDATE_ANY => {
            let f: unsafe extern "C" fn(
                *mut RunCtx,
                *const Map,
                *const u8,
                *const u8,
                u64,
                u64,
            ) -> u64 = map_update_any;
            f as *const () as usize
        }
        REDIRECT_MAP => {
            let f: unsafe extern "C" fn(*mut RunCtx, *const Map, u64, u64, u64) -> u64 =
                redirect_map;
            f as *const () as usize
        }
        REDIRECT => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64) -> u64 = redirect_ifindex;
            f as *const () as usize
        }
        RINGBUF_RESERVE => {
            let f: unsafe extern "C" fn(*mut RunCtx, *const Map, u64, u64, u64) -> u64 =
                ringbuf_reserve;
            f as *const () as usize
        }
        RINGBUF_COMMIT => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64) -> u64 = ringbuf_commit;
            f as *const () as usize
        }
        RINGBUF_OUTPUT => {
            let f: unsafe extern "C" fn(*mut RunCtx, *const Map, *const u8, u64, u64, u64) -> u64 =
                ringbuf_output;
            f as *const () as usize
        }
        STRNCMP => {
            let f: unsafe extern "C" fn(*const u8, u64, *const u8) -> u64 = strncmp;
            f as *const () as usize
        }
        DYNPTR_FROM_XDP => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64) -> u64 = dynptr_from_xdp;
            f as *const () as usize
        }
        DYNPTR_READ => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, u64, u64) -> u64 =
                dynptr_read;
            f as *const () as usize
        }
        XDP_BUFF_LEN => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64) -> u64 = xdp_buff_len;
            f as *const () as usize
        }
        PRANDOM => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64) -> u64 = prandom;
            f as *const () as usize
        }
        DYNPTR_QUERY => {
            let f: unsafe extern "C" fn(u64, u64, u64, u64) -> u64 = dynptr_query;
            f as *const () as usize
        }
        DYNPTR_SLICE => {
            let f: unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, u64, u64) -> u64 =
                dynptr_slice;
            f as *const () as usize
        }
        _ => return None,
    })
}

/// Inner maps a program's map-in-map lookups resolved, by id: the helper's
/// resolution (`ObjectMaps::inner_map`) takes locks and a map-id table
/// lookup on every call, a hit here is two atomic loads. Map ids are never
/// reused within an instance, so an id names one map for good; the cache
/// holds each map alive. A program runs against the object it was compiled
/// for, whose `ObjectMaps` knows every handle cached here (the miss path
/// registered it there).
pub(crate) struct InnerMapCache {
    /// `id + 1` (0: empty) and the handle, in the slot `id % SLOTS`; a slot
    /// is written once, so readers never see a torn pair.
    slots: [(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64); INNER_SLOTS],
    owned: std::sync::Mutex<Vec<std::sync::Arc<Map>>>,
}

const INNER_SLOTS: usize = 64;

impl Default for InnerMapCache {
    fn default() -> Self {
        InnerMapCache {
            slots: std::array::from_fn(|_| Default::default()),
            owned: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl InnerMapCache {
    #[inline]
    fn get(&self, id: u32) -> Option<u64> {
        use std::sync::atomic::Ordering;
        let (key, handle) = &self.slots[id as usize % INNER_SLOTS];
        (key.load(Ordering::Acquire) == u64::from(id) + 1).then(|| handle.load(Ordering::Relaxed))
    }

    /// Remember `map` as inner map `id` (if its slot is free); its handle.
    fn insert(&self, id: u32, map: std::sync::Arc<Map>) -> u64 {
        use std::sync::atomic::Ordering;
        let handle = bpfjet_runtime::env::map_handle(&map);
        let Ok(mut owned) = self.owned.lock() else {
            return handle;
        };
        let (key, slot) = &self.slots[id as usize % INNER_SLOTS];
        if key.load(Ordering::Acquire) == 0 {
            owned.push(map);
            slot.store(handle, Ordering::Relaxed);
            key.store(u64::from(id) + 1, Ordering::Release);
        }
        handle
    }
}
