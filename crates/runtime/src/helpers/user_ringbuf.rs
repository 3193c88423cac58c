//! `bpf_user_ringbuf_drain` (209): the kernel's drain of a USER_RINGBUF
//! (`bpfjet_maps::Map::user_ringbuf_drain`: checks, errnos, discards, the
//! per-call limit, one drain at a time, producer wake-ups), calling the
//! program's callback through `HelperCtx::call_subprog` (as `bpf_loop`)
//! with r1 = a LOCAL dynptr over the sample and r2 = ctx.
//!
//! The kernel's drain initializes the dynptr with `bpf_dynptr_init(...,
//! BPF_DYNPTR_TYPE_LOCAL, 0, size)` and does not make it read-only: the
//! verifier keeps the program from changing the dynptr itself (a const
//! dynptr), not the sample's bytes — `bpf_dynptr_write` into a sample
//! succeeds and `bpf_dynptr_data` gives a writable pointer, on Linux 6.18
//! as here (tests/preload/user_ringbuf.sh checks both against the kernel).

use super::common::{map_arg, require_map_use};
use super::ids;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::region::Region;
use bpfjet_maps::MapType;

/// The dynptr size word: bits 0–23 size, 28–30 type, 31 read-only (the
/// kernel's `struct bpf_dynptr_kern`, bpfjet's dynptr contract).
const DYNPTR_TYPE_SHIFT: u32 = 28;
const DYNPTR_TYPE_LOCAL: u32 = 1;
/// Bytes of a dynptr: `u64 data`, `u32 size word`, `u32 offset`.
const DYNPTR_BYTES: u64 = 16;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::USER_RINGBUF_DRAIN,
        "user_ringbuf_drain",
        user_ringbuf_drain,
    ));
}

/// The dynptr the kernel's drain builds on its stack for a sample:
/// `bpf_dynptr_init(LOCAL, 0, size)` (writable).
pub(crate) fn sample_dynptr(data: u64, size: u32) -> [u64; 2] {
    let word = size | (DYNPTR_TYPE_LOCAL << DYNPTR_TYPE_SHIFT);
    // Little-endian host: the size word is the low half of the second u64,
    // the offset (0) its high half.
    [data, u64::from(word)]
}

fn user_ringbuf_drain(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (handle, callback, callback_ctx, flags) = (a[0], a[1], a[2], a[3]);
    let map = map_arg(ctx, handle)?;
    require_map_use(ctx, map, "user_ringbuf_drain", &[MapType::UserRingbuf])?;
    let r = map.user_ringbuf_drain(flags, |data, size| {
        // The dynptr lives on this frame for the call, as the kernel's on
        // its stack; the program may only hand it to dynptr helpers, which
        // read it. The sample may be read and written through it.
        let dynptr = sample_dynptr(data as u64, size);
        let (dptr, sample) = (
            Region::read_only(dynptr.as_ptr() as u64, DYNPTR_BYTES),
            Region::writable(data as u64, u64::from(size)),
        );
        ctx.register_region(dptr);
        ctx.register_region(sample);
        let ret = ctx.call_subprog(callback, &[dynptr.as_ptr() as u64, callback_ctx]);
        // Released to the producer after the call: neither may be touched
        // again.
        ctx.replace_region(dptr, None);
        ctx.replace_region(sample, None);
        ret
    })?;
    Ok(r as u64)
}
