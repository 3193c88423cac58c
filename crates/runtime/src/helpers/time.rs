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
    r.register(Helper::new(ids::JIFFIES64, "jiffies64", |_, _| {
        Ok(jiffies64())
    }));
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
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
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

/// The kernel's 64-bit `jiffies`: ticks of the kernel's timer (HZ a
/// second) since boot, counted from `INITIAL_JIFFIES` (2^32 - 300 HZ, so
/// that 32-bit wraparound happens five minutes after boot).
///
/// Derived from CLOCK_MONOTONIC, which the kernel's jiffies follow: the
/// tick is the resolution of CLOCK_MONOTONIC_COARSE (the kernel's
/// `TICK_NSEC`), and the kernel's count trails `INITIAL_JIFFIES +
/// monotonic / tick` by a constant set at boot, read once from
/// `/proc/timer_list` (`jiffies:` and `now at ... nsecs`, one snapshot).
/// That file is root's: without it the constant is taken as 0, and the
/// value may differ from the kernel's by that boot-time constant (72 ticks
/// on the machine this was written on); differences between two values,
/// what programs use jiffies for, are exact either way.
pub(crate) fn jiffies64() -> u64 {
    let j = jiffies_clock();
    (j.base as i64 + j.offset + (clock_ns(libc::CLOCK_MONOTONIC) / j.tick_ns) as i64) as u64
}

/// The kernel's timer frequency (HZ).
pub(crate) fn hz() -> u64 {
    jiffies_clock().hz
}

struct JiffiesClock {
    tick_ns: u64,
    hz: u64,
    base: u64,
    offset: i64,
}

fn jiffies_clock() -> &'static JiffiesClock {
    static CLOCK: std::sync::OnceLock<JiffiesClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(|| {
        let mut res = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `res` is a valid out-pointer.
        unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
        let tick_ns = (res.tv_sec as u64 * 1_000_000_000 + res.tv_nsec as u64).max(1);
        let hz = (1_000_000_000 + tick_ns / 2) / tick_ns;
        // INITIAL_JIFFIES: (unsigned long)(unsigned int)(-300 * HZ).
        let base = u64::from((-300i64 * hz as i64) as u32);
        let offset = std::fs::read_to_string("/proc/timer_list")
            .ok()
            .and_then(|text| timer_list_offset(&text, tick_ns, base))
            .unwrap_or(0);
        JiffiesClock {
            tick_ns,
            hz,
            base,
            offset,
        }
    })
}

/// The kernel's jiffies minus `base + now / tick` at the snapshot of
/// `/proc/timer_list` `text` (its `now at N nsecs` and first `jiffies: J`).
fn timer_list_offset(text: &str, tick_ns: u64, base: u64) -> Option<i64> {
    let now: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("now at ")?.strip_suffix(" nsecs"))?
        .trim()
        .parse()
        .ok()?;
    let jiffies: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("jiffies: "))?
        .trim()
        .parse()
        .ok()?;
    Some(jiffies as i64 - (base + now / tick_ns) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_list_snapshot_gives_the_boot_constant() {
        let text = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 75279879686679 nsecs\n\ncpu: 0\n jiffies: 4313709308\n  .idle_jiffies   : 4313712184\n";
        let base = u64::from((-300i64 * 250) as u32);
        // 75279879686679 / 4 ms = 18819969 ticks after base.
        assert_eq!(
            timer_list_offset(text, 4_000_000, base),
            Some(4313709308 - (base as i64 + 18819969))
        );
        assert_eq!(timer_list_offset("no such lines", 4_000_000, base), None);
    }
}
