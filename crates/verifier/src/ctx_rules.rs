//! Context access rules per program type.
//!
//! - XDP (`struct xdp_md`): six 32-bit fields, read-only, only as whole
//!   aligned 4-byte loads through the unmodified context pointer;
//!   `egress_ifindex` only for devmap programs (`BPF_XDP_DEVMAP`), as the
//!   kernel's `xdp_is_valid_access`.
//! - Tracing types, as the kernel's `*_is_valid_access`: read-only,
//!   naturally aligned loads of any size inside a window — kprobe
//!   `struct pt_regs` (bytes 0..168, `kprobe_prog_is_valid_access`);
//!   tracepoint records (bytes 8..8192: the 8-byte common header is hidden,
//!   `tp_prog_is_valid_access`; the record's real size is checked when the
//!   program is attached, against the largest offset read, as the kernel's
//!   `max_ctx_offset`); raw tracepoint `u64 args[12]` (bytes 0..96,
//!   `bpf_tracing_ctx_access`; the tracepoint's argument count is checked at
//!   attach). Loads produce unknown scalars; nothing is rewritten.

use crate::env::ProgType;
use crate::error::{err, VResult};
use crate::facts::XdpMdField;
use crate::range::Scalar;
use crate::reg_state::{RegState, RegType};

/// `sizeof(struct xdp_md)`.
pub const XDP_MD_SIZE: i64 = 24;

/// Check a context access through `base` at instruction offset `off` and
/// return the field read. `regno` is only for messages.
pub fn check_xdp_access(
    base: &RegState,
    regno: u8,
    off: i16,
    size: usize,
    write: bool,
    devmap: bool,
) -> VResult<XdpMdField> {
    if base.off != 0 {
        return err(
            "ctx_modified",
            format!(
                "dereference of modified ctx ptr R{regno} off={} disallowed",
                base.off
            ),
        );
    }
    if !base.val.is_zero() {
        return err(
            "ctx_var_off",
            format!("variable ctx access var_off=({:?}) disallowed", base.val),
        );
    }
    let off = off as i64;
    if write {
        return err(
            "ctx_write",
            format!(
                "invalid bpf_context access off={off} size={size}: the XDP context is read-only"
            ),
        );
    }
    let field = XdpMdField::from_offset(off - off.rem_euclid(4));
    let valid = (0..XDP_MD_SIZE).contains(&off) && size == 4 && off % 4 == 0;
    match field {
        Some(f @ XdpMdField::EgressIfindex) if valid && devmap => return Ok(f),
        Some(XdpMdField::EgressIfindex) | None => {}
        Some(f) if valid => return Ok(f),
        Some(_) => {}
    }
    err(
        "ctx_bad_access",
        format!(
            "invalid bpf_context access off={off} size={size}: xdp_md fields are read \
             as aligned 4-byte loads (data, data_end, data_meta, ingress_ifindex, rx_queue_index)"
        ),
    )
}

/// The register a context field load produces.
pub fn xdp_field_value(field: XdpMdField) -> RegState {
    match field {
        XdpMdField::Data => RegState::pointer(RegType::Pkt, 0),
        XdpMdField::DataEnd => RegState::pointer(RegType::PktEnd, 0),
        XdpMdField::DataMeta => RegState::pointer(RegType::PktMeta, 0),
        _ => RegState::scalar(Scalar::unsigned_upto(u32::MAX as u64)),
    }
}

/// `sizeof(struct pt_regs)` on x86-64.
pub const PT_REGS_SIZE: i64 = 168;
/// The kernel's `PERF_MAX_TRACE_SIZE`: the largest tracepoint record.
pub const PERF_MAX_TRACE_SIZE: i64 = 8192;
/// `MAX_BPF_FUNC_ARGS`: a raw tracepoint's `u64` arguments.
pub const MAX_BPF_FUNC_ARGS: i64 = 12;
/// `sizeof(struct bpf_perf_event_data)`: `pt_regs`, `sample_period`, `addr`.
pub const PERF_EVENT_DATA_SIZE: i64 = PT_REGS_SIZE + 16;

/// The readable byte window of a tracing type's context: `[lo, hi)`.
pub fn tracing_ctx_window(prog_type: ProgType) -> (i64, i64) {
    match prog_type {
        ProgType::Kprobe => (0, PT_REGS_SIZE),
        ProgType::Tracepoint => (8, PERF_MAX_TRACE_SIZE),
        ProgType::RawTracepoint | ProgType::Tracing => (0, 8 * MAX_BPF_FUNC_ARGS),
        ProgType::PerfEvent => (0, PERF_EVENT_DATA_SIZE),
        ProgType::Xdp => (0, XDP_MD_SIZE),
    }
}

/// Check a tracing context access through `base` at instruction offset
/// `off`; returns the end of the bytes read (for the attach-time size
/// check).
pub fn check_tracing_access(
    prog_type: ProgType,
    base: &RegState,
    regno: u8,
    off: i16,
    size: usize,
    write: bool,
) -> VResult<u64> {
    if base.off != 0 {
        return err(
            "ctx_modified",
            format!(
                "dereference of modified ctx ptr R{regno} off={} disallowed",
                base.off
            ),
        );
    }
    if !base.val.is_zero() {
        return err(
            "ctx_var_off",
            format!("variable ctx access var_off=({:?}) disallowed", base.val),
        );
    }
    let off = off as i64;
    let size_i = size as i64;
    if write {
        return err(
            "ctx_write",
            format!(
                "invalid bpf_context access off={off} size={size}: the {prog_type} context \
                 is read-only"
            ),
        );
    }
    let (lo, hi) = tracing_ctx_window(prog_type);
    if off < 0 && prog_type == ProgType::Tracepoint {
        // The kernel's `tp_prog_is_valid_access` compares the int offset
        // with `sizeof(void *)` as unsigned, so it lets negative offsets
        // through (a read before the record); bpfjet refuses them.
        return err(
            "ctx_bad_access",
            format!(
                "invalid bpf_context access off={off} size={size}: a read before the \
                 tracepoint record (the kernel accepts negative offsets here through a \
                 signed/unsigned comparison; bpfjet does not)"
            ),
        );
    }
    if off < lo || off >= hi || off % size_i != 0 || off + size_i > hi {
        return err(
            "ctx_bad_access",
            format!(
                "invalid bpf_context access off={off} size={size}: {prog_type} programs read \
                 naturally aligned fields in bytes {lo}..{hi} of their context"
            ),
        );
    }
    Ok((off + size_i) as u64)
}

/// A context pointer passed on (to a helper, a global function) or read
/// through as a whole must be the context itself: no fixed or variable
/// offset (`check_func_arg_reg_off` for `PTR_TO_CTX`).
pub(crate) fn check_ctx_unmoved(reg: &RegState, regno: u8) -> VResult<()> {
    if reg.off != 0 || !reg.val.is_zero() {
        return err(
            "ctx_modified",
            format!(
                "dereference of modified ctx ptr R{regno} off={} disallowed",
                reg.off
            ),
        );
    }
    Ok(())
}
