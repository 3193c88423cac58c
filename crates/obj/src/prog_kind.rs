//! Program types as libbpf derives them from section names
//! (`SEC("xdp")`, `SEC("tc")`, ...).

use std::fmt;

/// What kind of program an executable section holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProgKind {
    /// `xdp`, `xdp/<anything>` (including libbpf's `xdp/cpumap`, `xdp/devmap`).
    Xdp,
    /// `xdp.frags`, `xdp.frags/<anything>`: XDP that accepts multi-buffer packets.
    XdpFrags,
    /// A type bpfjet recognises but cannot run; holds libbpf's name for the
    /// type (`sched_cls`, `kprobe`, ...), or `unknown` for a section name that
    /// matches no known convention.
    Unsupported(String),
}

/// Section prefix (text before the first `/`) → libbpf program type name.
const OTHER_TYPES: &[(&str, &str)] = &[
    ("socket", "socket_filter"),
    ("sk_reuseport", "sk_reuseport"),
    ("kprobe", "kprobe"),
    ("kretprobe", "kprobe"),
    ("uprobe", "kprobe"),
    ("uretprobe", "kprobe"),
    ("ksyscall", "kprobe"),
    ("kretsyscall", "kprobe"),
    ("kprobe.multi", "kprobe"),
    ("kretprobe.multi", "kprobe"),
    ("uprobe.multi", "kprobe"),
    ("uretprobe.multi", "kprobe"),
    ("usdt", "kprobe"),
    ("tc", "sched_cls"),
    ("tcx", "sched_cls"),
    ("classifier", "sched_cls"),
    ("netkit", "sched_cls"),
    ("action", "sched_act"),
    ("tracepoint", "tracepoint"),
    ("tp", "tracepoint"),
    ("raw_tracepoint", "raw_tracepoint"),
    ("raw_tp", "raw_tracepoint"),
    ("raw_tracepoint.w", "raw_tracepoint_writable"),
    ("raw_tp.w", "raw_tracepoint_writable"),
    ("tp_btf", "tracing"),
    ("fentry", "tracing"),
    ("fexit", "tracing"),
    ("fmod_ret", "tracing"),
    ("iter", "tracing"),
    ("freplace", "ext"),
    ("lsm", "lsm"),
    ("lsm_cgroup", "lsm"),
    ("perf_event", "perf_event"),
    ("cgroup_skb", "cgroup_skb"),
    ("cgroup", "cgroup"),
    ("sockops", "sock_ops"),
    ("sk_skb", "sk_skb"),
    ("sk_msg", "sk_msg"),
    ("lirc_mode2", "lirc_mode2"),
    ("flow_dissector", "flow_dissector"),
    ("lwt_in", "lwt_in"),
    ("lwt_out", "lwt_out"),
    ("lwt_xmit", "lwt_xmit"),
    ("lwt_seg6local", "lwt_seg6local"),
    ("sk_lookup", "sk_lookup"),
    ("struct_ops", "struct_ops"),
    ("syscall", "syscall"),
    ("netfilter", "netfilter"),
];

impl ProgKind {
    pub fn from_section(section: &str) -> ProgKind {
        let prefix = section.split('/').next().unwrap_or(section);
        match prefix {
            "xdp" => return ProgKind::Xdp,
            "xdp.frags" => return ProgKind::XdpFrags,
            _ => {}
        }
        // Sleepable variants (`fentry.s`, `uprobe.s`) share their base's type.
        let base = prefix.strip_suffix(".s").unwrap_or(prefix);
        let name = OTHER_TYPES
            .iter()
            .find(|(p, _)| *p == base)
            .map_or("unknown", |(_, t)| *t);
        ProgKind::Unsupported(name.to_string())
    }

    /// Whether bpfjet can run programs of this kind.
    pub fn is_supported(&self) -> bool {
        !matches!(self, ProgKind::Unsupported(_))
    }

    pub fn name(&self) -> &str {
        match self {
            ProgKind::Xdp => "xdp",
            ProgKind::XdpFrags => "xdp.frags",
            ProgKind::Unsupported(t) => t,
        }
    }
}

impl fmt::Display for ProgKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names() {
        let cases = [
            ("xdp", ProgKind::Xdp),
            ("xdp/custom", ProgKind::Xdp),
            ("xdp/devmap", ProgKind::Xdp),
            ("xdp.frags", ProgKind::XdpFrags),
            ("xdp.frags/cpumap", ProgKind::XdpFrags),
            ("tc", ProgKind::Unsupported("sched_cls".into())),
            ("kprobe/sys_open", ProgKind::Unsupported("kprobe".into())),
            ("fentry.s/foo", ProgKind::Unsupported("tracing".into())),
            ("xdpfoo", ProgKind::Unsupported("unknown".into())),
        ];
        for (section, kind) in cases {
            assert_eq!(ProgKind::from_section(section), kind, "{section}");
        }
    }
}
