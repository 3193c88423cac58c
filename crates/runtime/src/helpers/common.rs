//! Plumbing shared by the kernel helpers: the per-run environment, map
//! arguments, errno conversion.

use crate::env::XdpEnv;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::region::Region;
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::{Map, MapError, MapType};
use std::sync::Arc;

pub(crate) fn env<'a>(ctx: &'a mut HelperCtx<'_>) -> Result<&'a mut XdpEnv, Fault> {
    ctx.user_ctx::<XdpEnv>()
}

/// The map a program passed as a helper argument. A value that is no map
/// handle is what the kernel verifier rules out, so it aborts the run.
pub(crate) fn map_arg(ctx: &mut HelperCtx<'_>, handle: u64) -> Result<Arc<Map>, Fault> {
    let resolved = env(ctx)?.maps.resolve(handle);
    resolved.ok_or_else(|| ctx.fault(format!("{handle:#x} is not a map")))
}

/// `-errno` for a map failure, as the kernel's helper returns it.
pub(crate) fn map_errno(e: &MapError) -> u64 {
    errno::neg(e.errno() as u64)
}

pub(crate) fn result_code(r: Result<(), MapError>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => map_errno(&e),
    }
}

/// Whether programs may write the values of `map` (`BPF_F_RDONLY_PROG`, as
/// `.rodata` has, and the device/CPU maps whose lookups the kernel
/// hands out read-only).
pub(crate) fn program_writable(map: &Map) -> bool {
    map.spec().flags & map_flags::RDONLY_PROG == 0
        && !matches!(
            map.map_type(),
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap | MapType::Xskmap
        )
}

/// The region a value pointer handed to the program covers.
pub(crate) fn value_region(map: &Map, ptr: *mut u8) -> Region {
    let len = u64::from(map.value_size());
    if program_writable(map) {
        Region::writable(ptr as u64, len)
    } else {
        Region::read_only(ptr as u64, len)
    }
}

/// The kernel's `check_map_func_compatibility` for the helpers bpfjet
/// implements: a call it would refuse at load time aborts the run here.
pub(crate) fn require_map_use(
    ctx: &HelperCtx<'_>,
    map: &Map,
    helper: &str,
    allowed: &[MapType],
) -> Result<(), Fault> {
    if allowed.contains(&map.map_type()) {
        Ok(())
    } else {
        Err(ctx.fault(format!(
            "bpf_{helper} cannot be used with a {} map (the kernel verifier rejects it)",
            map.map_type()
        )))
    }
}

/// A key argument: `key_size` bytes of program memory, copied.
pub(crate) fn read_key(ctx: &HelperCtx<'_>, map: &Map, addr: u64) -> Result<Vec<u8>, Fault> {
    Ok(ctx.read_mem(addr, u64::from(map.key_size()))?.to_vec())
}
