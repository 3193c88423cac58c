//! `struct xdp_md` as programs are compiled against it, and bpfjet's own
//! context layout that the loader rewrites accesses to.
//!
//! Programs read `xdp_md` with 32-bit loads; the kernel turns the pointer
//! fields into loads of real pointers from its `xdp_buff`. bpfjet does the
//! same with [`XdpMd`]: pointers are 64-bit, so a rewritten program gets host
//! addresses it can dereference, and the JIT can load them directly.

/// A field of the program-visible `struct xdp_md` (uapi offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtxField {
    Data,
    DataEnd,
    DataMeta,
    IngressIfindex,
    RxQueueIndex,
    EgressIfindex,
}

impl CtxField {
    /// The field at a uapi `xdp_md` offset, for the only access size the
    /// kernel allows there (4 bytes).
    pub fn from_uapi_offset(off: i16) -> Option<CtxField> {
        Some(match off {
            0 => CtxField::Data,
            4 => CtxField::DataEnd,
            8 => CtxField::DataMeta,
            12 => CtxField::IngressIfindex,
            16 => CtxField::RxQueueIndex,
            20 => CtxField::EgressIfindex,
            _ => return None,
        })
    }

    /// Whether the field is a packet pointer (loaded as 64 bits after rewrite).
    pub fn is_pointer(self) -> bool {
        matches!(
            self,
            CtxField::Data | CtxField::DataEnd | CtxField::DataMeta
        )
    }

    /// Offset of the field in [`XdpMd`].
    pub fn offset(self) -> i16 {
        (match self {
            CtxField::Data => std::mem::offset_of!(XdpMd, data),
            CtxField::DataEnd => std::mem::offset_of!(XdpMd, data_end),
            CtxField::DataMeta => std::mem::offset_of!(XdpMd, data_meta),
            CtxField::IngressIfindex => std::mem::offset_of!(XdpMd, ingress_ifindex),
            CtxField::RxQueueIndex => std::mem::offset_of!(XdpMd, rx_queue_index),
            CtxField::EgressIfindex => std::mem::offset_of!(XdpMd, egress_ifindex),
        }) as i16
    }

    pub fn name(self) -> &'static str {
        match self {
            CtxField::Data => "data",
            CtxField::DataEnd => "data_end",
            CtxField::DataMeta => "data_meta",
            CtxField::IngressIfindex => "ingress_ifindex",
            CtxField::RxQueueIndex => "rx_queue_index",
            CtxField::EgressIfindex => "egress_ifindex",
        }
    }
}

/// bpfjet's XDP context: what r1 points to when an XDP program starts.
/// Stable layout (the JIT reads it too); read-only for programs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpMd {
    pub data: u64,
    pub data_end: u64,
    pub data_meta: u64,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    pub _reserved: u32,
}

/// Size of [`XdpMd`]: the context region of a bounds-checked run.
pub const XDP_MD_SIZE: usize = std::mem::size_of::<XdpMd>();

#[cfg(test)]
mod tests {
    use super::CtxField;
    use bpfjet_obj::BtfType;

    /// CO-RE relocates `xdp_md` accesses against `bpfjet_obj::core`'s
    /// context BTF: each of its fields must be a 4-byte field at the uapi
    /// offset this rewrite maps to the same field.
    #[test]
    fn core_context_btf_is_the_layout_the_rewrite_accepts() {
        let btf = bpfjet_obj::core::context_btf();
        let members = btf
            .types()
            .iter()
            .find_map(|t| match t {
                BtfType::Struct { name, members, .. } if name == "xdp_md" => Some(members),
                _ => None,
            })
            .expect("xdp_md in the context BTF");
        assert_eq!(members.len(), 6);
        for m in members {
            assert_eq!(btf.size_of(m.type_id), Some(4), "{}", m.name);
            let field = CtxField::from_uapi_offset((m.bit_offset / 8) as i16)
                .unwrap_or_else(|| panic!("{} at bit {}", m.name, m.bit_offset));
            assert_eq!(field.name(), m.name);
        }
    }
}
