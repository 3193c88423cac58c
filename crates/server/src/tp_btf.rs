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

/// An fentry/fexit program's target: the entry function of a bpfjet XDP
/// program.
pub struct XdpTraceTarget {
    pub prog_id: u32,
    /// The target program's BTF object id (`attach_btf_obj_id`).
    pub btf_obj_id: u32,
    pub func: String,
}

impl crate::BpfjetBackend {
    /// A `BPF_PROG_LOAD` of an fentry/fexit program whose `attach_prog_fd`
    /// is a bpfjet program: its target, or why bpfjet refuses it (only the
    /// entry function of an XDP program). None: not such a load.
    pub(crate) fn xdp_trace_target(
        &self,
        p: &ProgLoad,
    ) -> Option<Result<XdpTraceTarget, crate::progs::Refusal>> {
        use bpfjet_obj::tp_btf::{BPF_TRACE_FENTRY, BPF_TRACE_FEXIT};
        if p.prog_type != crate::progs::BPF_PROG_TYPE_TRACING
            || !matches!(p.expected_attach_type, BPF_TRACE_FENTRY | BPF_TRACE_FEXIT)
            || p.attach_prog_fd == 0
        {
            return None;
        }
        let crate::objects::Obj::Prog(target) = self.obj(p.attach_prog_fd)? else {
            return None;
        };
        let refuse = |log: String| {
            Some(Err(crate::progs::Refusal::new(
                bpfjet_sys::Errno::EINVAL,
                log,
            )))
        };
        let target = crate::freplace::read_prog(&self.ns, target.rec.id)
            .unwrap_or_else(|_| target.rec.clone());
        if target.prog_type != crate::progs::BPF_PROG_TYPE_XDP {
            return refuse(format!(
                "bpfjet runs fentry/fexit programs on XDP programs only (program {} has type {})",
                target.id, target.prog_type
            ));
        }
        let btf = match self.prog_btf(&target) {
            Ok(b) => b,
            Err(_) => return refuse("Target program doesn't have BTF".into()),
        };
        let insn_off = match crate::freplace::target_function(&btf, &target, p.attach_btf_id) {
            Ok(o) => o,
            Err(e) => return refuse(e),
        };
        let func = btf
            .type_by_id(p.attach_btf_id)
            .map(|t| t.name().to_string())
            .unwrap_or_default();
        if insn_off != 0 {
            return refuse(format!(
                "bpfjet runs fentry/fexit programs on an XDP program's entry function; \
                 {func} is a subprogram (insn {insn_off})"
            ));
        }
        Some(Ok(XdpTraceTarget {
            prog_id: target.id,
            btf_obj_id: target.btf_id,
            func,
        }))
    }
}
