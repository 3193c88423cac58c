//! Tracing helpers: who is running (`get_current_*`), fault-safe reads of
//! the traced process's memory (`probe_read*`), the probe's address and
//! cookie. The identity of the caller is the calling thread's: the tracing
//! program runs on the traced thread itself.

use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::tracing::{current, user_mem, TracingEnv};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::GET_CURRENT_PID_TGID,
        "get_current_pid_tgid",
        |_, _| {
            let (tgid, tid) = current::tgid_tid();
            Ok((u64::from(tgid) << 32) | u64::from(tid))
        },
    ));
    r.register(Helper::new(
        ids::GET_CURRENT_UID_GID,
        "get_current_uid_gid",
        |_, _| {
            // SAFETY: getuid/getgid cannot fail.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            Ok((u64::from(gid) << 32) | u64::from(uid))
        },
    ));
    r.register(Helper::new(
        ids::GET_CURRENT_COMM,
        "get_current_comm",
        |ctx, a| {
            let comm = current::comm();
            let buf = ctx.write_mem(a[0], a[1])?;
            // strscpy_pad: at most size-1 bytes, NUL-padded.
            buf.fill(0);
            let n = comm.len().min(buf.len().saturating_sub(1));
            buf[..n].copy_from_slice(&comm[..n]);
            Ok(0)
        },
    ));
    for (id, name) in [
        (ids::PROBE_READ_USER, "probe_read_user"),
        // On x86-64 the compat helper reads user memory for addresses below
        // TASK_SIZE; bpfjet has no kernel memory, so every address is user.
        (ids::PROBE_READ, "probe_read"),
    ] {
        r.register(Helper::new(id, name, |ctx, a| {
            let dst = ctx.write_mem(a[0], a[1])?;
            Ok(match user_mem::read(a[2], dst) {
                Ok(()) => 0,
                Err(_) => errno::neg(errno::EFAULT),
            })
        }));
    }
    for (id, name) in [
        (ids::PROBE_READ_USER_STR, "probe_read_user_str"),
        (ids::PROBE_READ_STR, "probe_read_str"),
    ] {
        r.register(Helper::new(id, name, |ctx, a| {
            let dst = ctx.write_mem(a[0], a[1])?;
            Ok(match user_mem::read_str(a[2], dst) {
                Ok(n) => n as u64,
                Err(_) => errno::neg(errno::EFAULT),
            })
        }));
    }
    // A user-space process has no kernel memory to read: every address
    // faults, the buffer is zeroed as the kernel does on a fault.
    for (id, name) in [
        (ids::PROBE_READ_KERNEL, "probe_read_kernel"),
        (ids::PROBE_READ_KERNEL_STR, "probe_read_kernel_str"),
    ] {
        r.register(Helper::new(id, name, |ctx, a| {
            ctx.write_mem(a[0], a[1])?.fill(0);
            Ok(errno::neg(errno::EFAULT))
        }));
    }
    r.register(Helper::new(ids::GET_FUNC_IP, "get_func_ip", |ctx, _| {
        Ok(tracing_env(ctx)?.site.func_ip)
    }));
    r.register(Helper::new(
        ids::GET_ATTACH_COOKIE,
        "get_attach_cookie",
        |ctx, _| Ok(tracing_env(ctx)?.site.cookie),
    ));
}

/// The tracing context of a tracing helper's program.
pub(crate) fn tracing_env<'a>(ctx: &'a mut HelperCtx<'_>) -> Result<&'a mut TracingEnv, Fault> {
    ctx.user_ctx::<TracingEnv>()
}
