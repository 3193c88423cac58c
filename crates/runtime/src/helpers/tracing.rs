//! Tracing helpers (the current task's ids and name are in `task.rs`,
//! shared with XDP): fault-safe reads of the traced process's memory
//! (`probe_read*`), the probe's address and cookie. The caller is the
//! calling thread: the tracing program runs on the traced thread itself.

use super::ids;
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};
use crate::tracing::{user_mem, TracingEnv};

pub(crate) fn register(r: &mut HelperRegistry) {
    // The kernel's answers: -E2BIG for an index past the array, -EAGAIN
    // for a slot holding no cgroup, else 1 when the calling thread is in
    // the slot's cgroup or below it, 0 when not (tracing/cgroup.rs). A
    // slot is filled with a cgroup by `bpfjet trace --cgroup-array`.
    r.register(Helper::new(
        ids::CURRENT_TASK_UNDER_CGROUP,
        "current_task_under_cgroup",
        |ctx, a| {
            let map = super::common::map_arg(ctx, a[0])?;
            super::common::require_map_use(
                ctx,
                map,
                "current_task_under_cgroup",
                &[bpfjet_maps::MapType::CgroupArray],
            )?;
            let idx = a[1] as u32;
            if idx >= map.max_entries() {
                return Ok(errno::neg(errno::E2BIG));
            }
            match map.cgroup_array_slot(idx) {
                None => Ok(errno::neg(errno::EAGAIN)),
                Some(id) => Ok(u64::from(crate::tracing::cgroup::current_under(id))),
            }
        },
    ));
    // The calling thread's view of its kernel objects, laid out as the
    // running kernel's BTF says, for BPF_CORE_READ(task, ...) through
    // bpf_probe_read_kernel (tracing/task_view.rs: which fields).
    r.register(Helper::new(
        ids::GET_CURRENT_TASK,
        "get_current_task",
        |_, _| Ok(crate::tracing::task_view::current_task()),
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
    // In a process the "kernel" objects of a hit are the ones the runtime
    // hands the program: its context record (a tracepoint's `sys_enter` /
    // `sys_exit` record, which libbpf-tools read with BPF_CORE_READ, i.e.
    // bpf_probe_read_kernel) and the registers of the hit. Those read as
    // the kernel reads them; any other address faults, with the buffer
    // zeroed as the kernel does.
    r.register(Helper::new(
        ids::PROBE_READ_KERNEL,
        "probe_read_kernel",
        |ctx, a| {
            let env = tracing_env(ctx)?;
            let (allowed, record) = (
                env.is_kernel_memory(a[2], a[1]),
                env.is_context_record(a[2], a[1]),
            );
            let dst = ctx.write_mem(a[0], a[1])?;
            if record {
                // `BPF_CORE_READ` of a tracepoint field: the record the
                // run was entered with, readable for the whole run.
                // SAFETY: `is_context_record` checked the range lies in it;
                // program memory (`dst`) never overlaps the record.
                unsafe {
                    std::ptr::copy_nonoverlapping(a[2] as *const u8, dst.as_mut_ptr(), dst.len())
                };
                return Ok(0);
            }
            if allowed && user_mem::read(a[2], dst).is_ok() {
                return Ok(0);
            }
            dst.fill(0);
            Ok(errno::neg(errno::EFAULT))
        },
    ));
    r.register(Helper::new(
        ids::PROBE_READ_KERNEL_STR,
        "probe_read_kernel_str",
        |ctx, a| {
            // The string may not run past the object it starts in.
            let left = tracing_env(ctx)?.kernel_memory_left(a[2]);
            let dst = ctx.write_mem(a[0], a[1])?;
            dst.fill(0);
            if left == 0 || dst.is_empty() {
                return Ok(errno::neg(errno::EFAULT));
            }
            let n = dst.len().min(left as usize);
            if user_mem::read(a[2], &mut dst[..n]).is_err() {
                return Ok(errno::neg(errno::EFAULT));
            }
            match dst[..n].iter().position(|&b| b == 0) {
                Some(nul) => {
                    dst[nul + 1..].fill(0);
                    Ok(nul as u64 + 1)
                }
                // Cut at the buffer's size, NUL-terminated, as the kernel.
                None if n == dst.len() => {
                    dst[n - 1] = 0;
                    Ok(n as u64)
                }
                // The object ends before any NUL: the kernel would read on
                // into memory that has no counterpart here.
                None => {
                    dst.fill(0);
                    Ok(errno::neg(errno::EFAULT))
                }
            }
        },
    ));
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
