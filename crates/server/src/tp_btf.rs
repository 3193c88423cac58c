//! `tp_btf` programs of the XDP tracepoints (`SEC("tp_btf/xdp_exception")`,
//! xdp-monitor's and xdp-bench's statistics programs): loaded as bpfjet
//! programs when they name a tracepoint of the kernel's `xdp` trace system,
//! linked with `BPF_RAW_TRACEPOINT_OPEN` or `BPF_LINK_CREATE`
//! (`BPF_TRACE_RAW_TP`) into link records the instance's data planes
//! watch and run (`bpfjet serve-attachment`, [`crate::xdp_event_object`]).
//! A `tp_btf` program of any other tracepoint stays the kernel's.

use bpfjet_obj::tp_btf::{BPF_TRACE_RAW_TP, XDP_EVENTS};
use bpfjet_obj::{TargetBtf, TpBtfProto};
use bpfjet_sys::ProgLoad;

/// The kernel's BTF object id of vmlinux (the first BTF it registers):
/// a `tp_btf` program's `attach_btf_obj_id`.
pub const VMLINUX_BTF_ID: u32 = 1;

/// The XDP tracepoint a `BPF_PROG_LOAD` attaches a `tp_btf` program to
/// (`attach_btf_id` in the kernel's BTF, no module BTF), if it is one.
pub fn xdp_tracepoint(p: &ProgLoad) -> Option<String> {
    if p.prog_type != crate::progs::BPF_PROG_TYPE_TRACING
        || p.expected_attach_type != BPF_TRACE_RAW_TP
        || p.attach_prog_fd != 0
    {
        return None;
    }
    let kernel = TargetBtf::running_kernel().ok()?;
    let proto = TpBtfProto::of_type_id(kernel.btf(), p.attach_btf_id).ok()?;
    XDP_EVENTS
        .contains(&proto.name.as_str())
        .then_some(proto.name)
}

/// What the `struct bpf_prog` argument of an XDP tracepoint holds for
/// program `id` of the instance (its type, expected attach type, length
/// and tag); default when the record is gone.
pub fn prog_facts(
    ns: &crate::Namespace,
    id: u32,
) -> bpfjet_runtime::tracing::xdp_events::ProgFacts {
    let rec: Option<crate::objects::ProgRecord> = ns
        .read_record(crate::namespace::Kind::Prog, id)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    rec.map(|r| bpfjet_runtime::tracing::xdp_events::ProgFacts {
        id,
        prog_type: r.prog_type,
        expected_attach_type: r.expected_attach_type,
        len: r.insns.len() as u32,
        tag: r.tag,
    })
    .unwrap_or_default()
}
