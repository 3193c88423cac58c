//! Clocks, random numbers and CPU identity.

use super::common::env;
use super::ids;
use crate::helpers::{Helper, HelperRegistry};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::KTIME_GET_NS, "ktime_get_ns", |_, _| {
        Ok(clock_ns(libc::CLOCK_MONOTONIC))
    }));
    r.register(Helper::new(
        ids::KTIME_GET_BOOT_NS,
        "ktime_get_boot_ns",
        |_, _| Ok(clock_ns(libc::CLOCK_BOOTTIME)),
    ));
    r.register(Helper::new(
        ids::KTIME_GET_COARSE_NS,
        "ktime_get_coarse_ns",
        |_, _| Ok(clock_ns(libc::CLOCK_MONOTONIC_COARSE)),
    ));
    r.register(Helper::new(
        ids::KTIME_GET_TAI_NS,
        "ktime_get_tai_ns",
        |_, _| Ok(clock_ns(libc::CLOCK_TAI)),
    ));
    r.register(Helper::new(
        ids::GET_PRANDOM_U32,
        "get_prandom_u32",
        |ctx, _| Ok(u64::from(env(ctx)?.next_random())),
    ));
    r.register(Helper::new(
        ids::GET_SMP_PROCESSOR_ID,
        "get_smp_processor_id",
        |ctx, _| Ok(u64::from(env(ctx)?.cpu)),
    ));
    // bpfjet has no NUMA placement of its own: every worker is on node 0.
    r.register(Helper::new(
        ids::GET_NUMA_NODE_ID,
        "get_numa_node_id",
        |_, _| Ok(0),
    ));
}

/// The kernel's clocks are the same clocks user space reads, so programs
/// comparing `bpf_ktime_get_ns()` with a control plane's timestamps agree.
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock ids are constants.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
