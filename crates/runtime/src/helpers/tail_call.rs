//! `bpf_tail_call` through a PROG_ARRAY whose values are program indices
//! (positions in `LoadedObject::program_names`, the run state's program table).

use super::common::{map_arg, require_map_use};
use super::ids;
use crate::errno;
use crate::helpers::{Helper, HelperRegistry};
use bpfjet_maps::MapType;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::TAIL_CALL, "tail_call", |ctx, a| {
        let map = map_arg(ctx, a[1])?;
        require_map_use(ctx, map, "tail_call", &[MapType::ProgArray])?;
        // On every failure execution continues after the call; r0 is
        // undefined for the program (the helper returns void), bpfjet leaves
        // an errno there. Only tail calls taken count against the limit:
        // attempts on empty slots do not (checked against the kernel).
        let index = a[2] as u32;
        if index >= map.max_entries() {
            return Ok(errno::neg(errno::E2BIG));
        }
        let Some(slot) = map.lookup(&index.to_ne_bytes(), 0) else {
            return Ok(errno::neg(errno::ENOENT));
        };
        // SAFETY: a PROG_ARRAY value is the 4-byte program id.
        let prog = unsafe { std::ptr::read_unaligned(slot as *const u32) };
        Ok(match ctx.tail_call_index(prog) {
            Ok(()) => 0,
            Err(e) => errno::neg(e.errno()),
        })
    }));
}
