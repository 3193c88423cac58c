//! Program types as libbpf 1.x derives them from section names
//! (`SEC("xdp")`, `SEC("tc")`, ...), and the override a loader applies when
//! the section name says nothing (`bpftool prog load ... type xdp`,
//! `bpf_program__set_type()`).
//!
//! The table follows libbpf's `section_defs` and its matching rules:
//! an entry ending in `+` matches the exact name or `name/<anything>`, an
//! entry ending in `/` matches any name with that prefix, any other entry
//! matches only exactly. So `xdp` is XDP but `xdp/custom` and `xdp_prog` are
//! not: libbpf before 1.0 matched them by "sloppy" prefix (and `xdp_devmap/`,
//! `xdp_cpumap/`), libbpf 1.x leaves their type unset and refuses to load
//! them. bpfjet does the same, so that it agrees with the kernel side, and
//! recognises those legacy names only to say how to force the type.

use std::fmt;

/// Where an XDP program is meant to run (libbpf's expected attach type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpAttach {
    /// A device's XDP hook (`BPF_XDP`).
    Device,
    /// A DEVMAP entry's egress program (`BPF_XDP_DEVMAP`).
    Devmap,
    /// A CPUMAP entry's program (`BPF_XDP_CPUMAP`).
    Cpumap,
}

/// What kind of program an executable section holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProgKind {
    /// `xdp`: an XDP program for a device hook.
    Xdp,
    /// `xdp.frags`: XDP that accepts multi-buffer packets.
    XdpFrags,
    /// `xdp/devmap`, `xdp/cpumap`, `xdp.frags/devmap`, `xdp.frags/cpumap`:
    /// XDP programs run by a DEVMAP or CPUMAP entry.
    XdpMapEntry { attach: XdpAttach, frags: bool },
    /// A type bpfjet recognises but cannot run; holds libbpf's name for the
    /// type (`sched_cls`, `kprobe`, ...), or `unknown` for a section name that
    /// matches no libbpf 1.x section definition.
    Unsupported(String),
}

/// How a table entry matches a section name (libbpf's `sec_def_matches`).
#[derive(Clone, Copy)]
enum Match {
    /// `name` exactly.
    Exact,
    /// `name` or `name/<anything>` (libbpf's trailing `+`).
    OrSlash,
    /// Any section starting with `name` (libbpf's trailing `/`).
    Prefix,
}

/// libbpf 1.x `section_defs`, in libbpf's order (first match wins), with
/// libbpf's program type name. XDP entries are handled before this table.
const SECTION_DEFS: &[(&str, Match, &str)] = &[
    ("socket", Match::Exact, "socket_filter"),
    ("sk_reuseport/migrate", Match::Exact, "sk_reuseport"),
    ("sk_reuseport", Match::Exact, "sk_reuseport"),
    ("kprobe", Match::OrSlash, "kprobe"),
    ("uprobe", Match::OrSlash, "kprobe"),
    ("uprobe.s", Match::OrSlash, "kprobe"),
    ("kretprobe", Match::OrSlash, "kprobe"),
    ("uretprobe", Match::OrSlash, "kprobe"),
    ("uretprobe.s", Match::OrSlash, "kprobe"),
    ("kprobe.multi", Match::OrSlash, "kprobe"),
    ("kretprobe.multi", Match::OrSlash, "kprobe"),
    ("kprobe.session", Match::OrSlash, "kprobe"),
    ("uprobe.multi", Match::OrSlash, "kprobe"),
    ("uretprobe.multi", Match::OrSlash, "kprobe"),
    ("uprobe.session", Match::OrSlash, "kprobe"),
    ("uprobe.multi.s", Match::OrSlash, "kprobe"),
    ("uretprobe.multi.s", Match::OrSlash, "kprobe"),
    ("uprobe.session.s", Match::OrSlash, "kprobe"),
    ("ksyscall", Match::OrSlash, "kprobe"),
    ("kretsyscall", Match::OrSlash, "kprobe"),
    ("usdt", Match::OrSlash, "kprobe"),
    ("usdt.s", Match::OrSlash, "kprobe"),
    ("tc/ingress", Match::Exact, "sched_cls"),
    ("tc/egress", Match::Exact, "sched_cls"),
    ("tcx/ingress", Match::Exact, "sched_cls"),
    ("tcx/egress", Match::Exact, "sched_cls"),
    ("tc", Match::Exact, "sched_cls"),
    ("classifier", Match::Exact, "sched_cls"),
    ("action", Match::Exact, "sched_act"),
    ("netkit/primary", Match::Exact, "sched_cls"),
    ("netkit/peer", Match::Exact, "sched_cls"),
    ("tracepoint", Match::OrSlash, "tracepoint"),
    ("tp", Match::OrSlash, "tracepoint"),
    ("raw_tracepoint", Match::OrSlash, "raw_tracepoint"),
    ("raw_tp", Match::OrSlash, "raw_tracepoint"),
    (
        "raw_tracepoint.w",
        Match::OrSlash,
        "raw_tracepoint_writable",
    ),
    ("raw_tp.w", Match::OrSlash, "raw_tracepoint_writable"),
    ("tp_btf", Match::OrSlash, "tracing"),
    ("fentry", Match::OrSlash, "tracing"),
    ("fmod_ret", Match::OrSlash, "tracing"),
    ("fexit", Match::OrSlash, "tracing"),
    ("fentry.s", Match::OrSlash, "tracing"),
    ("fmod_ret.s", Match::OrSlash, "tracing"),
    ("fexit.s", Match::OrSlash, "tracing"),
    ("fsession", Match::OrSlash, "tracing"),
    ("fsession.s", Match::OrSlash, "tracing"),
    ("freplace", Match::OrSlash, "ext"),
    ("lsm", Match::OrSlash, "lsm"),
    ("lsm.s", Match::OrSlash, "lsm"),
    ("lsm_cgroup", Match::OrSlash, "lsm"),
    ("iter", Match::OrSlash, "tracing"),
    ("iter.s", Match::OrSlash, "tracing"),
    ("syscall", Match::Exact, "syscall"),
    ("perf_event", Match::Exact, "perf_event"),
    ("lwt_in", Match::Exact, "lwt_in"),
    ("lwt_out", Match::Exact, "lwt_out"),
    ("lwt_xmit", Match::Exact, "lwt_xmit"),
    ("lwt_seg6local", Match::Exact, "lwt_seg6local"),
    ("sockops", Match::Exact, "sock_ops"),
    ("sk_skb/stream_parser", Match::Exact, "sk_skb"),
    ("sk_skb/stream_verdict", Match::Exact, "sk_skb"),
    ("sk_skb/verdict", Match::Exact, "sk_skb"),
    ("sk_skb", Match::Exact, "sk_skb"),
    ("sk_msg", Match::Exact, "sk_msg"),
    ("lirc_mode2", Match::Exact, "lirc_mode2"),
    ("flow_dissector", Match::Exact, "flow_dissector"),
    ("cgroup_skb/ingress", Match::Exact, "cgroup_skb"),
    ("cgroup_skb/egress", Match::Exact, "cgroup_skb"),
    ("cgroup/skb", Match::Exact, "cgroup_skb"),
    ("cgroup/sock_create", Match::Exact, "cgroup_sock"),
    ("cgroup/sock_release", Match::Exact, "cgroup_sock"),
    ("cgroup/sock", Match::Exact, "cgroup_sock"),
    ("cgroup/post_bind4", Match::Exact, "cgroup_sock"),
    ("cgroup/post_bind6", Match::Exact, "cgroup_sock"),
    ("cgroup/bind4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/bind6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/connect4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/connect6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/connect_unix", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/sendmsg4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/sendmsg6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/sendmsg_unix", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/recvmsg4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/recvmsg6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/recvmsg_unix", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getpeername4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getpeername6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getpeername_unix", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getsockname4", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getsockname6", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/getsockname_unix", Match::Exact, "cgroup_sock_addr"),
    ("cgroup/sysctl", Match::Exact, "cgroup_sysctl"),
    ("cgroup/getsockopt", Match::Exact, "cgroup_sockopt"),
    ("cgroup/setsockopt", Match::Exact, "cgroup_sockopt"),
    ("cgroup/dev", Match::Exact, "cgroup_device"),
    ("struct_ops", Match::OrSlash, "struct_ops"),
    ("struct_ops.s", Match::OrSlash, "struct_ops"),
    ("sk_lookup", Match::Exact, "sk_lookup"),
    ("netfilter", Match::Exact, "netfilter"),
];

fn matches(section: &str, name: &str, how: Match) -> bool {
    match how {
        Match::Exact => section == name,
        Match::OrSlash => section
            .strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
        Match::Prefix => section.starts_with(name),
    }
}

/// libbpf's XDP entries, most specific first as in its table.
const XDP_DEFS: &[(&str, Match, ProgKind)] = &[
    (
        "xdp.frags/devmap",
        Match::Exact,
        ProgKind::XdpMapEntry {
            attach: XdpAttach::Devmap,
            frags: true,
        },
    ),
    (
        "xdp/devmap",
        Match::Exact,
        ProgKind::XdpMapEntry {
            attach: XdpAttach::Devmap,
            frags: false,
        },
    ),
    (
        "xdp.frags/cpumap",
        Match::Exact,
        ProgKind::XdpMapEntry {
            attach: XdpAttach::Cpumap,
            frags: true,
        },
    ),
    (
        "xdp/cpumap",
        Match::Exact,
        ProgKind::XdpMapEntry {
            attach: XdpAttach::Cpumap,
            frags: false,
        },
    ),
    ("xdp.frags", Match::Exact, ProgKind::XdpFrags),
    ("xdp", Match::Exact, ProgKind::Xdp),
];

/// Section names libbpf < 1.0 loaded as XDP and libbpf 1.x does not
/// recognise: its sloppy `xdp` prefix (`xdp_prog`, `xdp/custom`) and the
/// old `xdp_devmap/`, `xdp_cpumap/` prefixes.
const LEGACY_XDP: &[(&str, Match, &str)] = &[
    ("xdp_devmap/", Match::Prefix, "xdp/devmap"),
    ("xdp_cpumap/", Match::Prefix, "xdp/cpumap"),
    ("xdp", Match::Prefix, "xdp"),
];

impl ProgKind {
    /// The type libbpf 1.x gives a program in `section` (a leading `?`,
    /// libbpf's "do not autoload" mark, is ignored).
    pub fn from_section(section: &str) -> ProgKind {
        let section = section.strip_prefix('?').unwrap_or(section);
        if let Some((_, _, kind)) = XDP_DEFS
            .iter()
            .find(|(name, how, _)| matches(section, name, *how))
        {
            return kind.clone();
        }
        let name = SECTION_DEFS
            .iter()
            .find(|(name, how, _)| matches(section, name, *how))
            .map_or("unknown", |(_, _, t)| *t);
        ProgKind::Unsupported(name.to_string())
    }

    /// The type named by a `--prog-type` argument, like bpftool's
    /// `prog load ... type TYPE`: any section name libbpf knows (`xdp`,
    /// `xdp.frags`, `xdp/devmap`, ...). Errors say which types bpfjet runs.
    pub fn from_type_name(name: &str) -> Result<ProgKind, String> {
        match ProgKind::from_section(name) {
            ProgKind::Unsupported(t) if t == "unknown" => Err(format!(
                "unknown program type `{name}` (bpfjet runs xdp, xdp.frags, xdp/devmap, \
                 xdp/cpumap, xdp.frags/devmap, xdp.frags/cpumap)"
            )),
            ProgKind::Unsupported(t) => Err(format!(
                "program type `{name}` ({t}) cannot be run by bpfjet, which runs XDP programs"
            )),
            kind => Ok(kind),
        }
    }

    /// For a section libbpf 1.x does not recognise but libbpf < 1.0 loaded
    /// as XDP: the type it had then (`xdp`, `xdp/devmap`, `xdp/cpumap`).
    pub fn legacy_xdp_type(section: &str) -> Option<&'static str> {
        if ProgKind::from_section(section).is_supported() {
            return None;
        }
        let section = section.strip_prefix('?').unwrap_or(section);
        LEGACY_XDP
            .iter()
            .find(|(name, how, _)| matches(section, name, *how))
            .map(|(_, _, t)| *t)
    }

    /// Whether bpfjet can run programs of this kind.
    pub fn is_supported(&self) -> bool {
        !matches!(self, ProgKind::Unsupported(_))
    }

    /// XDP of any attach point.
    pub fn is_xdp(&self) -> bool {
        self.is_supported()
    }

    /// Accepts multi-buffer packets (`BPF_F_XDP_HAS_FRAGS`).
    pub fn has_frags(&self) -> bool {
        matches!(
            self,
            ProgKind::XdpFrags | ProgKind::XdpMapEntry { frags: true, .. }
        )
    }

    /// The expected attach type of an XDP program.
    pub fn xdp_attach(&self) -> Option<XdpAttach> {
        match self {
            ProgKind::Xdp | ProgKind::XdpFrags => Some(XdpAttach::Device),
            ProgKind::XdpMapEntry { attach, .. } => Some(*attach),
            ProgKind::Unsupported(_) => None,
        }
    }

    /// The kernel's `enum bpf_prog_type` value, `expected_attach_type` and
    /// load flags for this kind, for loading the same program into the
    /// kernel with an overridden type. `None` for kinds bpfjet cannot run.
    pub fn kernel_load_type(&self) -> Option<KernelProgType> {
        /// `BPF_PROG_TYPE_XDP`, `BPF_XDP`, `BPF_XDP_DEVMAP`, `BPF_XDP_CPUMAP`,
        /// `BPF_F_XDP_HAS_FRAGS` from `linux/bpf.h`.
        const PROG_TYPE_XDP: u32 = 6;
        const ATTACH_XDP: u32 = 37;
        const ATTACH_XDP_DEVMAP: u32 = 33;
        const ATTACH_XDP_CPUMAP: u32 = 35;
        const F_XDP_HAS_FRAGS: u32 = 1 << 5;
        let attach = match self.xdp_attach()? {
            XdpAttach::Device => ATTACH_XDP,
            XdpAttach::Devmap => ATTACH_XDP_DEVMAP,
            XdpAttach::Cpumap => ATTACH_XDP_CPUMAP,
        };
        Some(KernelProgType {
            prog_type: PROG_TYPE_XDP,
            expected_attach_type: attach,
            prog_flags: if self.has_frags() { F_XDP_HAS_FRAGS } else { 0 },
        })
    }

    pub fn name(&self) -> &str {
        match self {
            ProgKind::Xdp => "xdp",
            ProgKind::XdpFrags => "xdp.frags",
            ProgKind::XdpMapEntry {
                attach: XdpAttach::Devmap,
                frags: false,
            } => "xdp/devmap",
            ProgKind::XdpMapEntry {
                attach: XdpAttach::Devmap,
                frags: true,
            } => "xdp.frags/devmap",
            ProgKind::XdpMapEntry {
                attach: XdpAttach::Cpumap,
                frags: false,
            } => "xdp/cpumap",
            ProgKind::XdpMapEntry {
                attach: XdpAttach::Cpumap,
                frags: true,
            } => "xdp.frags/cpumap",
            // Not produced by the table (a device attach is `Xdp`/`XdpFrags`).
            ProgKind::XdpMapEntry {
                attach: XdpAttach::Device,
                ..
            } => "xdp",
            ProgKind::Unsupported(t) => t,
        }
    }
}

/// How the kernel is told a program's type (see [`ProgKind::kernel_load_type`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelProgType {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    pub prog_flags: u32,
}

impl fmt::Display for ProgKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sentence an "is of type unknown" error ends with: how to force the
/// type, mentioning what libbpf < 1.0 made of a legacy section name.
pub fn force_type_hint(section: &str) -> String {
    match ProgKind::legacy_xdp_type(section) {
        Some(t) => format!(
            "libbpf < 1.0 loaded section `{section}` as {t}, libbpf 1.x leaves its type unset; \
             force the type with --prog-type {t}"
        ),
        None => "force the type with --prog-type xdp (like bpftool's `prog load ... type xdp`)"
            .to_string(),
    }
}

/// What an "unsupported program" error adds: for a section of unknown
/// type, how to force the type.
pub fn unsupported_suffix(kind: &str, section: &str) -> String {
    if kind == "unknown" {
        format!("; {}", force_type_hint(section))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names() {
        let devmap = ProgKind::XdpMapEntry {
            attach: XdpAttach::Devmap,
            frags: false,
        };
        let frags_cpumap = ProgKind::XdpMapEntry {
            attach: XdpAttach::Cpumap,
            frags: true,
        };
        let cases = [
            ("xdp", ProgKind::Xdp),
            ("?xdp", ProgKind::Xdp),
            ("xdp.frags", ProgKind::XdpFrags),
            ("xdp/devmap", devmap.clone()),
            ("xdp.frags/cpumap", frags_cpumap.clone()),
            // libbpf 1.x: exact names only for XDP.
            ("xdp/custom", ProgKind::Unsupported("unknown".into())),
            ("xdp_devmap/foo", ProgKind::Unsupported("unknown".into())),
            ("xdp.frags/custom", ProgKind::Unsupported("unknown".into())),
            ("xdpfoo", ProgKind::Unsupported("unknown".into())),
            ("tc", ProgKind::Unsupported("sched_cls".into())),
            ("tc/ingress", ProgKind::Unsupported("sched_cls".into())),
            ("tc/other", ProgKind::Unsupported("unknown".into())),
            ("kprobe/sys_open", ProgKind::Unsupported("kprobe".into())),
            ("kprobe", ProgKind::Unsupported("kprobe".into())),
            ("kprobex", ProgKind::Unsupported("unknown".into())),
            ("fentry.s/foo", ProgKind::Unsupported("tracing".into())),
            (
                "cgroup/connect4",
                ProgKind::Unsupported("cgroup_sock_addr".into()),
            ),
        ];
        for (section, kind) in cases {
            assert_eq!(ProgKind::from_section(section), kind, "{section}");
        }
    }

    #[test]
    fn legacy_names_and_overrides() {
        assert_eq!(ProgKind::legacy_xdp_type("xdp/custom"), Some("xdp"));
        assert_eq!(ProgKind::legacy_xdp_type("xdp_prog"), Some("xdp"));
        assert_eq!(
            ProgKind::legacy_xdp_type("xdp_devmap/x"),
            Some("xdp/devmap")
        );
        assert_eq!(ProgKind::legacy_xdp_type("xdp"), None);
        assert_eq!(ProgKind::legacy_xdp_type("classifier"), None);
        assert!(force_type_hint("xdp_patch_ports").contains("--prog-type xdp"));
        assert_eq!(
            ProgKind::from_type_name("xdp.frags"),
            Ok(ProgKind::XdpFrags)
        );
        assert!(ProgKind::from_type_name("tc")
            .unwrap_err()
            .contains("sched_cls"));
        assert!(ProgKind::from_type_name("bogus").is_err());
        let k = ProgKind::from_type_name("xdp.frags/devmap").unwrap();
        assert_eq!(k.to_string(), "xdp.frags/devmap");
        assert_eq!(
            k.kernel_load_type(),
            Some(KernelProgType {
                prog_type: 6,
                expected_attach_type: 33,
                prog_flags: 32
            })
        );
    }
}
