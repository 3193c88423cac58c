//! `bpf_perf_event_output`. For XDP (`bpf_xdp_event_output`) the record is
//! the program's data followed by the first `flags >> 32` packet bytes; for
//! tracing programs (the kernel's `bpf_perf_event_output` on `pt_regs`, a
//! tracepoint record or raw tracepoint arguments) it is the data alone and
//! any bit besides the CPU index is `-EINVAL`.

use super::common::{env, map_arg, require_map_use, result_code, xdp_env};
use super::ids;
use crate::errno;
use crate::helpers::{Helper, HelperRegistry};
use bpfjet_maps::{MapType, BPF_F_INDEX_MASK};

/// `BPF_F_CTXLEN_MASK`: how many packet bytes to append.
const BPF_F_CTXLEN_MASK: u64 = 0xfffff << 32;

pub(crate) fn register_xdp(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::PERF_EVENT_OUTPUT,
        "perf_event_output",
        |ctx, a| {
            let map = map_arg(ctx, a[1])?;
            require_map_use(ctx, map, "perf_event_output", &[MapType::PerfEventArray])?;
            let flags = a[2];
            if flags & !(BPF_F_CTXLEN_MASK | BPF_F_INDEX_MASK) != 0 {
                return Ok(errno::neg(errno::EINVAL));
            }
            let packet_len = ((flags & BPF_F_CTXLEN_MASK) >> 32) as usize;
            let data = ctx.read_mem(a[3], a[4])?.to_vec();
            let env = xdp_env(ctx)?;
            if env.frame.md_addr() != a[0] {
                return Err(ctx.fault("the first argument is not the XDP context"));
            }
            // `xdp_get_buff_len`: the packet bytes may come from fragments.
            if packet_len > env.frame.buff_len() {
                return Ok(errno::neg(errno::EFAULT));
            }
            let cpu = env.cpu;
            let packet = env.frame.gather(0, packet_len);
            Ok(result_code(map.perf_event_output(
                flags & BPF_F_INDEX_MASK,
                &[&data, &packet],
                cpu,
            )))
        },
    ));
}

pub(crate) fn register_tracing(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::PERF_EVENT_OUTPUT,
        "perf_event_output",
        |ctx, a| {
            let map = map_arg(ctx, a[1])?;
            require_map_use(ctx, map, "perf_event_output", &[MapType::PerfEventArray])?;
            let flags = a[2];
            if flags & !BPF_F_INDEX_MASK != 0 {
                return Ok(errno::neg(errno::EINVAL));
            }
            // No copy of the record: a tracing program may run in a
            // signal handler (system calls traced through Syscall User
            // Dispatch) that interrupted the allocator, where a heap
            // allocation could wait forever on the lock its own thread
            // holds.
            let cpu = env(ctx)?.cpu;
            let data = ctx.read_mem(a[3], a[4])?;
            Ok(result_code(map.perf_event_output(
                flags & BPF_F_INDEX_MASK,
                &[data],
                cpu,
            )))
        },
    ));
}

/// `bpf_xdp_output` of an fentry/fexit program on an XDP program: the
/// record, then the first `flags >> 32` bytes of the frame its `struct
/// xdp_buff *` argument describes (the run's own, else a fault), `-EFAULT`
/// past the packet, as the kernel's `bpf_xdp_copy`.
pub(crate) fn register_xdp_trace(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::XDP_OUTPUT, "xdp_output", |ctx, a| {
        let map = map_arg(ctx, a[1])?;
        require_map_use(ctx, map, "xdp_output", &[MapType::PerfEventArray])?;
        let flags = a[2];
        if flags & !(BPF_F_CTXLEN_MASK | BPF_F_INDEX_MASK) != 0 {
            return Ok(errno::neg(errno::EINVAL));
        }
        let packet_len = (flags & BPF_F_CTXLEN_MASK) >> 32;
        let Some((data, data_end)) = crate::tracing::xdp_events::xdp_buff_packet(a[0]) else {
            return Err(ctx.fault("the first argument is not the run's struct xdp_buff"));
        };
        if packet_len > data_end.saturating_sub(data) {
            return Ok(errno::neg(errno::EFAULT));
        }
        // SAFETY: [data, data_end) is the frame the data plane is running
        // the program on, alive for the whole run.
        let packet = unsafe { std::slice::from_raw_parts(data as *const u8, packet_len as usize) };
        let cpu = env(ctx)?.cpu;
        let record = ctx.read_mem(a[3], a[4])?;
        Ok(result_code(map.perf_event_output(
            flags & BPF_F_INDEX_MASK,
            &[record, packet],
            cpu,
        )))
    }));
}
