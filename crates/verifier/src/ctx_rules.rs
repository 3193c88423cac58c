//! Context access rules per program type. For XDP (`struct xdp_md`): six
//! 32-bit fields, read-only, only as whole aligned 4-byte loads through the
//! unmodified context pointer; `egress_ifindex` only for devmap programs
//! (which bpfjet does not verify), so it is refused like the kernel does for
//! plain XDP.

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
