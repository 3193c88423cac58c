//! bpfjet's own program contexts as a target BTF. A program built against
//! `vmlinux.h` reaches `struct xdp_md` through CO-RE; relocating it against
//! this layout yields the 4-byte loads at uapi offsets that the verifier's
//! context rules and the runtime's context rewrite accept, whatever BTF the
//! host kernel has.

use crate::btf::{Btf, BtfType, Member};

/// `struct xdp_md` of `uapi/linux/bpf.h`, in field order: every field is a
/// `__u32`, so field `i` lives at byte `4 * i`.
pub const XDP_MD_FIELDS: [&str; 6] = [
    "data",
    "data_end",
    "data_meta",
    "ingress_ifindex",
    "rx_queue_index",
    "egress_ifindex",
];

/// The context types as BTF: `[1] unsigned int`, `[2] struct xdp_md`.
pub fn context_btf() -> Btf {
    let u32_id = 1;
    let members = XDP_MD_FIELDS
        .iter()
        .enumerate()
        .map(|(i, name)| Member {
            name: name.to_string(),
            type_id: u32_id,
            bit_offset: 32 * i as u32,
            bitfield_size: 0,
        })
        .collect::<Vec<_>>();
    Btf::from_types(vec![
        BtfType::Int {
            name: "unsigned int".into(),
            size: 4,
            // 32 value bits, no encoding flags (unsigned).
            encoding: 32,
        },
        BtfType::Struct {
            name: "xdp_md".into(),
            size: 4 * members.len() as u32,
            members,
        },
    ])
}
