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
        let mut ips = Frames::new();
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
                walk(env, (flags & SKIP_MASK) as usize, max, &mut ips)
                    .then_some(())
                    .ok_or(errno::EFAULT)
            }
        };
        let buf = ctx.write_mem(a[1], size)?;
        buf.fill(0);
        match frames {
            Ok(()) => {
                for (chunk, ip) in buf.chunks_exact_mut(8).zip(ips.as_slice()) {
                    chunk.copy_from_slice(&ip.to_ne_bytes());
                }
                Ok(ips.len as u64 * 8)
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
        let mut ips = Frames::new();
        if !walk(env, (flags & SKIP_MASK) as usize, depth, &mut ips) {
            return Ok(errno::neg(errno::EFAULT));
        }
        // The map's value: the frames, zero-filled to its size. A stack
        // trace map's values are at most MAX_STACK frames (the kernel's
        // limit on its value size), so the buffer is on the stack.
        let mut buf = [0u8; MAX_STACK * 8];
        let Some(value) = buf.get_mut(..map.value_size() as usize) else {
            return Ok(errno::neg(errno::EINVAL));
        };
        for (chunk, ip) in value.chunks_exact_mut(8).zip(ips.as_slice()) {
            chunk.copy_from_slice(&ip.to_ne_bytes());
        }
        let value = &*value;
        let id = (stack_hash(ips.as_slice()) % u64::from(map.max_entries().max(1))) as u32;
        let key = id.to_ne_bytes();
        let same = map.lookup(&key, 0).map(|existing| {
            // SAFETY: the element's value is `value_size` bytes, and its
            // memory stays mapped while the map lives (elements are
            // recycled, not unmapped).
            unsafe { std::slice::from_raw_parts(existing, value.len()) == value }
        });
        match same {
            Some(true) => return Ok(u64::from(id)),
            Some(false) if flags & REUSE_STACKID == 0 => return Ok(errno::neg(errno::EEXIST)),
            _ => {}
        }
        Ok(match map.update_elem(&key, value, 0) {
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

/// The user registers at the hit: those the attach layer passed in the
/// probe site (a tracepoint's system call; a kernel probe's, whose context
/// is the kernel's registers, as the kernel walks `task_pt_regs`), else
/// the context of a kprobe-type program (a uprobe's registers).
fn user_regs(env: &TracingEnv) -> Option<PtRegs> {
    let addr = if env.site.regs != 0 {
        env.site.regs
    } else if env.ctx_is_regs {
        env.ctx
    } else {
        0
    };
    if addr == 0 {
        return None;
    }
    let mut bytes = [0u8; std::mem::size_of::<PtRegs>()];
    user_mem::read(addr, &mut bytes).ok()?;
    // SAFETY: PtRegs is plain old data of exactly these bytes.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<PtRegs>()) })
}

/// Up to [`MAX_STACK`] return addresses, on the stack: a program may run
/// in a signal handler that interrupted the allocator (system calls traced
/// through Syscall User Dispatch), where it must not allocate.
struct Frames {
    ips: [u64; MAX_STACK],
    len: usize,
}

impl Frames {
    fn new() -> Frames {
        Frames {
            ips: [0; MAX_STACK],
            len: 0,
        }
    }

    fn as_slice(&self) -> &[u64] {
        &self.ips[..self.len]
    }
}

/// Up to `max` (at most [`MAX_STACK`]) return addresses into `out` after
/// skipping `skip`, starting with the probed instruction; false when no
/// frame is left.
fn walk(env: &TracingEnv, skip: usize, max: usize, out: &mut Frames) -> bool {
    let Some(regs) = user_regs(env) else {
        return false;
    };
    let max = max.min(MAX_STACK);
    let mut seen = 0usize;
    let mut push = |ip: u64, out: &mut Frames| {
        if seen >= skip && out.len < max {
            out.ips[out.len] = ip;
            out.len += 1;
        }
        seen += 1;
    };
    push(regs.ip, out);
    if env.site.ret_at_sp {
        let mut ret = [0u8; 8];
        if user_mem::read(regs.sp, &mut ret).is_ok() {
            push(u64::from_ne_bytes(ret), out);
        }
    }
    let mut fp = regs.bp;
    while out.len < max && fp != 0 && fp % 8 == 0 {
        let mut frame = [0u8; 16];
        if user_mem::read(fp, &mut frame).is_err() {
            break;
        }
        let [n0, n1, n2, n3, n4, n5, n6, n7, r0, r1, r2, r3, r4, r5, r6, r7] = frame;
        let next = u64::from_ne_bytes([n0, n1, n2, n3, n4, n5, n6, n7]);
        let ret = u64::from_ne_bytes([r0, r1, r2, r3, r4, r5, r6, r7]);
        if ret == 0 {
            break;
        }
        push(ret, out);
        if next <= fp {
            break;
        }
        fp = next;
    }
    out.len > 0
}
