//! BTF-typed raw tracepoints (`SEC("tp_btf/NAME")`: `BPF_PROG_TYPE_TRACING`
//! with `BPF_TRACE_RAW_TP`), as the kernel types them.
//!
//! The kernel describes each tracepoint NAME by a typedef
//! `btf_trace_NAME`, a pointer to a function whose first parameter is the
//! tracepoint's private data and whose others are its arguments. A
//! program's context is those arguments, one `u64` each; the kernel's
//! verifier (`btf_ctx_access`) gives a load of an argument that points to
//! a struct a pointer of that BTF type (`PTR_TO_BTF_ID`), and any other
//! argument as a scalar.
//!
//! bpfjet fires the tracepoints of the kernel's `xdp` trace system from
//! its XDP data planes ([`XDP_EVENTS`]). A struct argument is an object
//! bpfjet fills, laid out as the running kernel lays it out (offsets from
//! its BTF, which the program's CO-RE relocations were resolved against
//! too); only the fields in [`FILLED`] hold values, and the verifier lets
//! a program read those and nothing else — never a made-up value.

use crate::btf::{Btf, BtfType};

/// `BPF_TRACE_RAW_TP` (`enum bpf_attach_type`): the expected attach type
/// of a `tp_btf` program.
pub const BPF_TRACE_RAW_TP: u32 = 23;
/// `BPF_TRACE_FENTRY`, `BPF_TRACE_FEXIT`: fentry/fexit programs.
pub const BPF_TRACE_FENTRY: u32 = 24;
pub const BPF_TRACE_FEXIT: u32 = 25;

/// The tracepoints of the kernel's `xdp` trace system
/// (`include/trace/events/xdp.h`): what bpfjet loads `tp_btf` programs
/// for. Its data planes fire [`FIRED_EVENTS`]; the others are events of
/// machinery bpfjet does not have (CPUMAP kthreads, driver bulk queues,
/// memory models), which never happen in it.
pub const XDP_EVENTS: &[&str] = &[
    "xdp_exception",
    "xdp_bulk_tx",
    "xdp_redirect",
    "xdp_redirect_err",
    "xdp_cpumap_kthread",
    "xdp_cpumap_enqueue",
    "xdp_devmap_xmit",
    "mem_disconnect",
    "mem_connect",
    "mem_return_failed",
    "bpf_xdp_link_attach_failed",
];

/// The events bpfjet's data planes fire: an `XDP_ABORTED` or invalid
/// action (or a program fault), and each redirect, delivered or failed.
pub const FIRED_EVENTS: &[&str] = &["xdp_exception", "xdp_redirect", "xdp_redirect_err"];

/// The fields bpfjet fills, per kernel struct (`member.path` as C names
/// them).
pub const FILLED: &[(&str, &[&str])] = &[
    ("net_device", &["ifindex", "name"]),
    ("bpf_prog", &["type", "expected_attach_type", "len", "tag"]),
    ("xdp_cpumap_stats", &["redirect", "pass", "drop"]),
    // An fentry/fexit program's view of an XDP program's context.
    (
        "xdp_buff",
        &["data", "data_end", "data_meta", "data_hard_start", "rxq"],
    ),
    ("xdp_rxq_info", &["dev", "queue_index"]),
];

/// How deep pointers of filled fields are followed (`xdp_buff.rxq->dev`).
const MAX_DEPTH: u32 = 4;

/// One filled field of a kernel struct, at the running kernel's offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelField {
    pub name: String,
    pub off: u32,
    pub size: u32,
    /// A pointer to a kernel struct (`TpBtfProto::structs` index): bpfjet
    /// fills it with a valid object of that struct, never NULL.
    pub object: Option<u8>,
}

/// A kernel struct a tracepoint argument points to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelStruct {
    pub name: String,
    pub size: u32,
    /// The fields bpfjet fills ([`FILLED`]); a program reads only these.
    pub fields: Vec<KernelField>,
}

impl KernelStruct {
    pub fn field(&self, name: &str) -> Option<&KernelField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The filled fields' names, for messages.
    pub fn field_names(&self) -> String {
        if self.fields.is_empty() {
            "none".into()
        } else {
            let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
            names.join(", ")
        }
    }
}

/// One argument of a tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpArg {
    /// An integer or enum: a scalar, loaded in any size.
    Scalar,
    /// A pointer to anything but a struct (`void *`, `char *`): a scalar
    /// too, as the kernel's `btf_ctx_access` has it, loaded whole.
    OpaquePointer,
    /// A pointer to a kernel struct (`TpBtfProto::structs` index): an
    /// object of it.
    Object(u8),
}

/// A tracepoint's (or an fentry/fexit target's) arguments, from the
/// kernel's BTF, and the kernel structs they and their filled pointer
/// fields point to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpBtfProto {
    pub name: String,
    pub args: Vec<TpArg>,
    pub structs: Vec<KernelStruct>,
}

impl TpBtfProto {
    /// The tracepoint whose `btf_trace_NAME` typedef is type `id` of
    /// `btf` (a `tp_btf` program's `attach_btf_id`).
    pub fn of_type_id(btf: &Btf, id: u32) -> Result<TpBtfProto, String> {
        match btf.type_by_id(id) {
            Some(BtfType::Typedef { name, .. }) => match name.strip_prefix("btf_trace_") {
                Some(tp) => TpBtfProto::of_typedef(btf, id, tp),
                None => Err(format!(
                    "attach_btf_id {id} is typedef {name}, not a tracepoint's btf_trace_NAME"
                )),
            },
            Some(other) => Err(format!(
                "attach_btf_id {id} is {} `{}`, not a tracepoint's btf_trace_NAME typedef",
                kind_name(other),
                other.name()
            )),
            None => Err(format!(
                "attach_btf_id {id} is not a type of the kernel's BTF"
            )),
        }
    }

    /// Tracepoint `name` (`tp_btf/NAME`).
    pub fn of_name(btf: &Btf, name: &str) -> Result<TpBtfProto, String> {
        let id = btf_trace_id(btf, name).ok_or_else(|| {
            format!("the kernel's BTF has no tracepoint {name} (btf_trace_{name})")
        })?;
        TpBtfProto::of_typedef(btf, id, name)
    }

    fn of_typedef(btf: &Btf, id: u32, name: &str) -> Result<TpBtfProto, String> {
        let bad = |why: &str| format!("tracepoint {name}: {why}");
        let ptr = btf.resolve(id).ok_or_else(|| bad("unresolvable typedef"))?;
        let Some(BtfType::Ptr { target }) = btf.type_by_id(ptr) else {
            return Err(bad("btf_trace typedef is not a function pointer"));
        };
        let proto = btf
            .resolve(*target)
            .ok_or_else(|| bad("unresolvable prototype"))?;
        let Some(BtfType::FuncProto { params, .. }) = btf.type_by_id(proto) else {
            return Err(bad("btf_trace typedef is not a function pointer"));
        };
        // The first parameter is the tracepoint's private data.
        let mut structs = Vec::new();
        let args = params
            .iter()
            .skip(1)
            .map(|p| arg_of(btf, p.type_id, &mut structs))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        Ok(TpBtfProto {
            name: name.to_string(),
            args,
            structs,
        })
    }

    /// An fentry (`fexit`: false) or fexit program on the entry function
    /// `func` of an XDP program: the kernel gives it the program's
    /// context as the kernel's `struct xdp_buff *` (its translation of
    /// `struct xdp_md`), and an fexit program the return value after it.
    pub fn xdp_entry(btf: &Btf, func: &str, fexit: bool) -> Result<TpBtfProto, String> {
        let id = btf
            .types()
            .iter()
            .position(|t| {
                matches!(t, BtfType::Struct { name, members, .. }
                    if name == "xdp_buff" && !members.is_empty())
            })
            .ok_or("the kernel's BTF has no struct xdp_buff")?;
        let mut structs = Vec::new();
        let buff = struct_index(btf, id as u32, &mut structs, 0)?;
        let mut args = vec![TpArg::Object(buff)];
        if fexit {
            args.push(TpArg::Scalar);
        }
        Ok(TpBtfProto {
            name: func.to_string(),
            args,
            structs,
        })
    }

    /// [`TpBtfProto::xdp_entry`] of the running kernel.
    pub fn running_kernel_xdp_entry(func: &str, fexit: bool) -> Result<TpBtfProto, String> {
        let kernel = crate::TargetBtf::running_kernel().map_err(|e| {
            format!("fentry/fexit on an XDP program: the kernel's BTF is needed: {e}")
        })?;
        TpBtfProto::xdp_entry(kernel.btf(), func, fexit)
    }

    /// The struct an object argument or field points to.
    pub fn object(&self, idx: u8) -> Option<&KernelStruct> {
        self.structs.get(usize::from(idx))
    }

    /// Tracepoint `name` of the running kernel (its BTF read once per
    /// process), refused unless bpfjet's data planes serve it.
    pub fn running_kernel(name: &str) -> Result<TpBtfProto, String> {
        let kernel = crate::TargetBtf::running_kernel()
            .map_err(|e| format!("tp_btf/{name}: the kernel's BTF is needed: {e}"))?;
        let proto = TpBtfProto::of_name(kernel.btf(), name)?;
        proto.check_served()?;
        Ok(proto)
    }

    /// Whether bpfjet's data planes can fire it (an `xdp` trace system
    /// event); the error says which it fires.
    pub fn check_served(&self) -> Result<(), String> {
        if XDP_EVENTS.contains(&self.name.as_str()) {
            Ok(())
        } else {
            Err(format!(
                "tp_btf/{} is a kernel event: bpfjet runs tp_btf programs on the XDP \
                 tracepoints its data planes fire ({})",
                self.name,
                FIRED_EVENTS.join(", ")
            ))
        }
    }
}

/// The id of tracepoint `name`'s `btf_trace_NAME` typedef in `btf`: what a
/// loader passes as a `tp_btf` program's `attach_btf_id`.
pub fn btf_trace_id(btf: &Btf, name: &str) -> Option<u32> {
    let want = format!("btf_trace_{name}");
    btf.types()
        .iter()
        .position(|t| matches!(t, BtfType::Typedef { name, .. } if *name == want))
        .map(|i| i as u32)
}

fn kind_name(t: &BtfType) -> &'static str {
    match t {
        BtfType::Struct { .. } => "struct",
        BtfType::Union { .. } => "union",
        BtfType::Func { .. } => "function",
        BtfType::Var { .. } => "variable",
        _ => "a type",
    }
}

fn arg_of(btf: &Btf, id: u32, structs: &mut Vec<KernelStruct>) -> Result<TpArg, String> {
    let t = btf.resolve(id).ok_or("unresolvable argument type")?;
    let Some(BtfType::Ptr { target }) = btf.type_by_id(t) else {
        return Ok(TpArg::Scalar);
    };
    let target = btf.resolve(*target).ok_or("unresolvable pointer target")?;
    if !matches!(btf.type_by_id(target), Some(BtfType::Struct { .. })) {
        return Ok(TpArg::OpaquePointer);
    }
    Ok(TpArg::Object(struct_index(btf, target, structs, 0)?))
}

/// The index of struct `id` in `structs`, added (with the structs its
/// filled pointer fields point to) if it is not there yet.
fn struct_index(
    btf: &Btf,
    id: u32,
    structs: &mut Vec<KernelStruct>,
    depth: u32,
) -> Result<u8, String> {
    let Some(BtfType::Struct { name, size, .. }) = btf.type_by_id(id) else {
        return Err(format!("type {id} is not a struct"));
    };
    if let Some(i) = structs.iter().position(|s| s.name == *name) {
        return Ok(i as u8);
    }
    let idx = u8::try_from(structs.len()).map_err(|_| "too many kernel structs")?;
    structs.push(KernelStruct {
        name: name.clone(),
        size: *size,
        fields: Vec::new(),
    });
    let names = FILLED
        .iter()
        .find(|(s, _)| s == name)
        .map_or(&[][..], |(_, fields)| *fields);
    let mut fields = Vec::new();
    for f in names {
        let Some((off, ty)) = member(btf, id, f) else {
            continue;
        };
        let Some(size) = btf.size_of(ty) else {
            continue;
        };
        // A pointer to a struct: an object bpfjet fills too.
        let pointee = btf
            .resolve(ty)
            .and_then(|t| match btf.type_by_id(t) {
                Some(BtfType::Ptr { target }) => btf.resolve(*target),
                _ => None,
            })
            .filter(|t| matches!(btf.type_by_id(*t), Some(BtfType::Struct { .. })));
        let object = match pointee {
            Some(t) if depth < MAX_DEPTH => Some(struct_index(btf, t, structs, depth + 1)?),
            // Deeper than bpfjet fills: not a field it fills.
            Some(_) => continue,
            None => None,
        };
        fields.push(KernelField {
            name: f.to_string(),
            off: off as u32,
            size: size as u32,
            object,
        });
    }
    structs[usize::from(idx)].fields = fields;
    Ok(idx)
}

/// Byte offset and type of member `name` of struct (or union) `id`,
/// looking through anonymous structs and unions as C does; bit-fields are
/// not members bpfjet fills.
pub fn member(btf: &Btf, id: u32, name: &str) -> Option<(u64, u32)> {
    member_at(btf, id, name, 0)
}

fn member_at(btf: &Btf, id: u32, name: &str, depth: u32) -> Option<(u64, u32)> {
    if depth > 8 {
        return None;
    }
    let members = match btf.type_by_id(btf.resolve(id)?)? {
        BtfType::Struct { members, .. } | BtfType::Union { members, .. } => members,
        _ => return None,
    };
    for m in members {
        if m.bitfield_size != 0 || m.bit_offset % 8 != 0 {
            continue;
        }
        let at = u64::from(m.bit_offset / 8);
        if m.name == name {
            return Some((at, m.type_id));
        }
        if m.name.is_empty() {
            if let Some((o, t)) = member_at(btf, m.type_id, name, depth + 1) {
                return Some((at + o, t));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Member, Param};

    /// `struct net_device { int pad; int ifindex; char name[16]; u32 flags:1 }`,
    /// `struct bpf_prog`, `btf_trace_xdp_exception(void *, const struct
    /// net_device *, const struct bpf_prog *, u32)`.
    fn kernel() -> Btf {
        let member = |name: &str, type_id, bit_offset| Member {
            name: name.into(),
            type_id,
            bit_offset,
            bitfield_size: 0,
        };
        // Id 0 is void.
        Btf::from_types(vec![
            BtfType::Int {
                name: "int".into(),
                size: 4,
                encoding: 1,
            },
            BtfType::Int {
                name: "char".into(),
                size: 1,
                encoding: 0,
            },
            BtfType::Array {
                elem: 2,
                index: 1,
                nelems: 16,
            },
            BtfType::Struct {
                name: "net_device".into(),
                size: 2048,
                members: vec![
                    member("pad", 1, 0),
                    member("ifindex", 1, 32),
                    member("name", 3, 64),
                ],
            },
            BtfType::Const { target: 4 },
            BtfType::Ptr { target: 5 },
            BtfType::Struct {
                name: "bpf_prog".into(),
                size: 64,
                members: vec![member("len", 1, 64)],
            },
            BtfType::Ptr { target: 7 },
            BtfType::Ptr { target: 0 },
            BtfType::FuncProto {
                ret: 0,
                params: vec![
                    Param {
                        name: String::new(),
                        type_id: 9,
                    },
                    Param {
                        name: String::new(),
                        type_id: 6,
                    },
                    Param {
                        name: String::new(),
                        type_id: 8,
                    },
                    Param {
                        name: String::new(),
                        type_id: 1,
                    },
                ],
            },
            BtfType::Ptr { target: 10 },
            BtfType::Typedef {
                name: "btf_trace_xdp_exception".into(),
                target: 11,
            },
        ])
    }

    #[test]
    fn arguments_are_typed_by_the_kernels_btf() {
        let btf = kernel();
        let p = TpBtfProto::of_type_id(&btf, 12).unwrap();
        assert_eq!(p, TpBtfProto::of_name(&btf, "xdp_exception").unwrap());
        assert_eq!(p.args.len(), 3);
        let TpArg::Object(dev) = p.args[0] else {
            panic!("dev is an object: {:?}", p.args[0]);
        };
        let dev = p.object(dev).unwrap();
        assert_eq!((dev.name.as_str(), dev.size), ("net_device", 2048));
        assert_eq!(
            dev.field("ifindex"),
            Some(&KernelField {
                name: "ifindex".into(),
                off: 4,
                size: 4,
                object: None,
            })
        );
        assert_eq!(dev.field("name").map(|f| (f.off, f.size)), Some((8, 16)));
        let TpArg::Object(prog) = p.args[1] else {
            panic!("xdp is an object");
        };
        let prog = p.object(prog).unwrap();
        // Only the fields the kernel's struct has are filled.
        assert_eq!(prog.field_names(), "len");
        assert_eq!(p.args[2], TpArg::Scalar);
        p.check_served().unwrap();
    }

    #[test]
    fn other_types_and_events_are_refused_by_name() {
        let btf = kernel();
        assert!(TpBtfProto::of_type_id(&btf, 4)
            .unwrap_err()
            .contains("struct `net_device`"));
        assert!(TpBtfProto::of_name(&btf, "sched_switch")
            .unwrap_err()
            .contains("no tracepoint sched_switch"));
        let mut p = TpBtfProto::of_name(&btf, "xdp_exception").unwrap();
        p.name = "sched_switch".into();
        assert!(p.check_served().unwrap_err().contains("kernel event"));
    }
}
