//! `bpf_get_stack` and `bpf_get_stackid`: user stacks walked through frame
//! pointers (`rbp` chain) from the registers at the probe.
//!
//! Every frame is read with the fault-safe reader, so a function compiled
//! without frame pointers (whose `rbp` holds anything) yields a short or
//! wrong stack, never a crash; the walk stops at a frame pointer that does
//! not grow towards the stack's base. A process has no kernel stack: a
//! request without `BPF_F_USER_STACK` returns `-EFAULT` (what the kernel
//! returns when it cannot take a stack). Build-id stacks are not supported
//! (`-EOPNOTSUPP`). Stack ids are the stack's hash modulo `max_entries`.

use super::common::map_arg;
use super::ids;
use super::tracing::tracing_env;
use crate::errno;
use crate::helpers::{Helper, HelperRegistry};
use crate::tracing::{user_mem, PtRegs, TracingEnv};
use bpfjet_maps::MapType;

const SKIP_MASK: u64 = 0xff;
const USER_STACK: u64 = 1 << 8;
const FAST_STACK_CMP: u64 = 1 << 9;
const REUSE_STACKID: u64 = 1 << 10;
const USER_BUILD_ID: u64 = 1 << 11;
/// The kernel's default `perf_event_max_stack`.
const MAX_STACK: usize = 127;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::GET_STACK, "get_stack", |ctx, a| {
        let (size, flags) = (a[2], a[3]);
        let frames = {
            let env = tracing_env(ctx)?;
            if flags & !(SKIP_MASK | USER_STACK | USER_BUILD_ID) != 0 || size % 8 != 0 {
                Err(errno::EINVAL)
            } else if flags & USER_BUILD_ID != 0 {
                Err(errno::EOPNOTSUPP)
            } else if flags & USER_STACK == 0 {
                Err(errno::EFAULT)
            } else {
                let max = (size / 8) as usize;
                walk(env, (flags & SKIP_MASK) as usize, max.min(MAX_STACK)).ok_or(errno::EFAULT)
            }
        };
        let buf = ctx.write_mem(a[1], size)?;
        buf.fill(0);
        match frames {
            Ok(ips) => {
                for (chunk, ip) in buf.chunks_exact_mut(8).zip(&ips) {
                    chunk.copy_from_slice(&ip.to_ne_bytes());
                }
                Ok(ips.len() as u64 * 8)
            }
            Err(e) => Ok(errno::neg(e)),
        }
    }));
    r.register(Helper::new(ids::GET_STACKID, "get_stackid", |ctx, a| {
        let map = map_arg(ctx, a[1])?;
        if map.map_type() != MapType::StackTrace {
            return Err(ctx.fault("bpf_get_stackid needs a stack trace map"));
        }
        let flags = a[2];
        if flags & !(SKIP_MASK | USER_STACK | FAST_STACK_CMP | REUSE_STACKID) != 0 {
            return Ok(errno::neg(errno::EINVAL));
        }
        if flags & USER_STACK == 0 {
            return Ok(errno::neg(errno::EFAULT));
        }
        let depth = (map.value_size() / 8) as usize;
        let env = tracing_env(ctx)?;
        let Some(ips) = walk(env, (flags & SKIP_MASK) as usize, depth.min(MAX_STACK)) else {
            return Ok(errno::neg(errno::EFAULT));
        };
        let mut value = vec![0u8; map.value_size() as usize];
        for (chunk, ip) in value.chunks_exact_mut(8).zip(&ips) {
            chunk.copy_from_slice(&ip.to_ne_bytes());
        }
        let id = (stack_hash(&ips) % u64::from(map.max_entries().max(1))) as u32;
        let key = id.to_ne_bytes();
        match map.lookup_copy(&key) {
            Ok(existing) if existing == value => return Ok(u64::from(id)),
            Ok(_) if flags & REUSE_STACKID == 0 => return Ok(errno::neg(errno::EEXIST)),
            _ => {}
        }
        Ok(match map.update_elem(&key, &value, 0) {
            Ok(()) => u64::from(id),
            Err(e) => errno::neg(e.errno() as u64),
        })
    }));
}

/// FNV-1a over the instruction pointers.
fn stack_hash(ips: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for ip in ips {
        for b in ip.to_ne_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The user registers at the hit: the context of a kprobe-type program,
/// else the registers the attach layer passed in the probe site.
fn user_regs(env: &TracingEnv) -> Option<PtRegs> {
    let addr = if env.ctx_is_regs {
        env.ctx
    } else {
        env.site.regs
    };
    if addr == 0 {
        return None;
    }
    let mut bytes = [0u8; std::mem::size_of::<PtRegs>()];
    user_mem::read(addr, &mut bytes).ok()?;
    // SAFETY: PtRegs is plain old data of exactly these bytes.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<PtRegs>()) })
}

/// Up to `max` return addresses after skipping `skip`, starting with the
/// probed instruction; `None` when no frame is left.
fn walk(env: &TracingEnv, skip: usize, max: usize) -> Option<Vec<u64>> {
    let regs = user_regs(env)?;
    let mut ips = Vec::with_capacity(max);
    let mut seen = 0usize;
    let mut push = |ip: u64, ips: &mut Vec<u64>| {
        if seen >= skip && ips.len() < max {
            ips.push(ip);
        }
        seen += 1;
    };
    push(regs.ip, &mut ips);
    if env.site.ret_at_sp {
        let mut ret = [0u8; 8];
        if user_mem::read(regs.sp, &mut ret).is_ok() {
            push(u64::from_ne_bytes(ret), &mut ips);
        }
    }
    let mut fp = regs.bp;
    while ips.len() < max && fp != 0 && fp % 8 == 0 {
        let mut frame = [0u8; 16];
        if user_mem::read(fp, &mut frame).is_err() {
            break;
        }
        let next = u64::from_ne_bytes(frame[..8].try_into().ok()?);
        let ret = u64::from_ne_bytes(frame[8..].try_into().ok()?);
        if ret == 0 {
            break;
        }
        push(ret, &mut ips);
        if next <= fp {
            break;
        }
        fp = next;
    }
    (!ips.is_empty()).then_some(ips)
}
