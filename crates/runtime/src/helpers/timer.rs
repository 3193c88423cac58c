//! `bpf_timer_init`, `bpf_timer_set_callback`, `bpf_timer_start` and
//! `bpf_timer_cancel` on the `struct bpf_timer` inside a map value, with the
//! kernel's checks in its order and its errnos (kernel/bpf/helpers.c). The
//! timers themselves are the process's timer service (`crate::timers`).

use super::common::{env, map_arg};
use super::ids;
use crate::errno;
use crate::error::{Access, Fault};
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::timers::{timers, Home, TimerError};
use std::sync::Arc;

/// `sizeof(struct bpf_timer)`.
const TIMER_SIZE: u64 = 16;
/// `MAX_CLOCKS`: the clock id is the low bits of init's flags.
const MAX_CLOCKS: u64 = 16;
/// `BPF_F_TIMER_ABS`, `BPF_F_TIMER_CPU_PIN`.
const TIMER_ABS: u64 = 1;
const TIMER_CPU_PIN: u64 = 2;
const EDEADLK: u64 = 35;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::TIMER_INIT, "timer_init", timer_init));
    r.register(Helper::new(
        ids::TIMER_SET_CALLBACK,
        "timer_set_callback",
        timer_set_callback,
    ));
    r.register(Helper::new(ids::TIMER_START, "timer_start", timer_start));
    r.register(Helper::new(ids::TIMER_CANCEL, "timer_cancel", timer_cancel));
}

fn timer_arg(ctx: &mut HelperCtx<'_>, addr: u64) -> Result<u64, Fault> {
    ctx.check_mem(addr, TIMER_SIZE, Access::Atomic)?;
    if !addr.is_multiple_of(8) || addr == 0 {
        return Err(Fault::Misaligned {
            pc: ctx.pc(),
            addr,
            size: 8,
        });
    }
    Ok(addr)
}

fn errno_of(e: TimerError) -> u64 {
    errno::neg(match e {
        TimerError::Invalid => errno::EINVAL,
        TimerError::Busy => errno::EBUSY,
        TimerError::Deadlock => EDEADLK,
    })
}

/// `bpf_timer_init(timer, map, flags)`: flags are a clock id
/// (`CLOCK_MONOTONIC`, `CLOCK_REALTIME` or `CLOCK_BOOTTIME`).
fn timer_init(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (timer, handle, flags) = (timer_arg(ctx, a[0])?, a[1], a[2]);
    let clock = (flags & (MAX_CLOCKS - 1)) as i32;
    if flags >= MAX_CLOCKS
        || !matches!(
            clock,
            libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME
        )
    {
        return Ok(errno::neg(errno::EINVAL));
    }
    let map = map_arg(ctx, handle)?;
    let maps = Arc::clone(&env(ctx)?.maps);
    // The verifier placed the timer at its offset in a value of `map`.
    let off = maps.timer_off(handle).ok_or_else(|| {
        ctx.fault(format!(
            "map {} has no struct bpf_timer in its value (its BTF)",
            map.name()
        ))
    })?;
    let value = timer - u64::from(off);
    let key = map.element_key(value as *const u8).ok_or_else(|| {
        ctx.fault(format!(
            "{timer:#x} is not the timer of an element of map {}",
            map.name()
        ))
    })?;
    let home = Home {
        maps: Arc::downgrade(&maps),
        map: handle,
        value,
        timer,
        key,
    };
    Ok(match timers().init(home, clock) {
        Ok(()) => 0,
        Err(e) => errno_of(e),
    })
}

/// `bpf_timer_set_callback(timer, callback)`: the callback is a
/// subprogram of the calling program.
fn timer_set_callback(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let timer = timer_arg(ctx, a[0])?;
    let entry = usize::try_from(a[1])
        .ok()
        .filter(|&e| ctx.program_inner().is_subprog_entry(e))
        .ok_or(Fault::BadSubprogram {
            pc: ctx.pc(),
            target: a[1],
        })?;
    let prog = ctx.program_inner().this.clone();
    Ok(match timers().set_callback(timer, prog, entry) {
        Ok(()) => 0,
        Err(e) => errno_of(e),
    })
}

/// `bpf_timer_start(timer, nsecs, flags)`: relative, or absolute with
/// `BPF_F_TIMER_ABS`. `BPF_F_TIMER_CPU_PIN` is accepted: every expiry runs
/// with the starting run's CPU slot anyway.
fn timer_start(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let (timer, nsecs, flags) = (timer_arg(ctx, a[0])?, a[1], a[2]);
    if flags & !(TIMER_ABS | TIMER_CPU_PIN) != 0 {
        return Ok(errno::neg(errno::EINVAL));
    }
    let cpu = env(ctx)?.cpu;
    Ok(
        match timers().start(timer, nsecs, flags & TIMER_ABS != 0, cpu) {
            Ok(()) => 0,
            Err(e) => errno_of(e),
        },
    )
}

/// `bpf_timer_cancel(timer)`: 1 if the timer was armed, 0 if not.
fn timer_cancel(ctx: &mut HelperCtx<'_>, a: [u64; 5]) -> Result<u64, Fault> {
    let timer = timer_arg(ctx, a[0])?;
    Ok(match timers().cancel(timer) {
        Ok(was_armed) => was_armed,
        Err(e) => errno_of(e),
    })
}
