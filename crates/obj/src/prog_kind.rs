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

/// The kernel's `enum bpf_prog_type` for the program types bpfjet verifies
/// and runs: the one numbering every crate uses (the verifier's context
/// rules and helper sets, the runtime's contexts and helper registries, the
/// kernel crate's `BPF_PROG_LOAD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum ProgType {
    /// `BPF_PROG_TYPE_KPROBE`: kprobes, uprobes, USDT; context `struct pt_regs`.
    Kprobe = 2,
    /// `BPF_PROG_TYPE_TRACEPOINT`: context the tracepoint's raw record.
    Tracepoint = 5,
    /// `BPF_PROG_TYPE_XDP`: context `struct xdp_md`.
    Xdp = 6,
    /// `BPF_PROG_TYPE_PERF_EVENT`: context `struct bpf_perf_event_data`
    /// (the interrupted `pt_regs`, `sample_period`, `addr`).
    PerfEvent = 7,
    /// `BPF_PROG_TYPE_RAW_TRACEPOINT`: context the tracepoint's `u64` arguments.
    RawTracepoint = 17,
    /// `BPF_PROG_TYPE_TRACING` as `tp_btf` (`BPF_TRACE_RAW_TP`): the
    /// tracepoint's `u64` arguments, typed by the kernel's BTF (pointers to
    /// kernel structs are readable objects). bpfjet runs those of the XDP
    /// tracepoints its data planes fire (`crate::tp_btf`).
    Tracing = 26,
}

impl ProgType {
    /// libbpf's name of the type (`bpf_prog_type__str`).
    pub fn name(self) -> &'static str {
        match self {
            ProgType::Kprobe => "kprobe",
            ProgType::Tracepoint => "tracepoint",
            ProgType::Xdp => "xdp",
            ProgType::PerfEvent => "perf_event",
            ProgType::RawTracepoint => "raw_tracepoint",
            ProgType::Tracing => "tracing",
        }
    }

    /// The kernel's number for the type.
    pub fn kernel_id(self) -> u32 {
        self as u32
    }

    /// The type with the kernel's number `id`, if bpfjet runs it.
    pub fn from_kernel_id(id: u32) -> Option<ProgType> {
        [
            ProgType::Kprobe,
            ProgType::Tracepoint,
            ProgType::Xdp,
            ProgType::PerfEvent,
            ProgType::RawTracepoint,
            ProgType::Tracing,
        ]
        .into_iter()
        .find(|t| t.kernel_id() == id)
    }

    /// Kprobe, tracepoint and raw tracepoint programs: run inside a traced
    /// process, with the tracing helper set.
    pub fn is_tracing(self) -> bool {
        !matches!(self, ProgType::Xdp)
    }
}

impl fmt::Display for ProgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which kprobe-type section a program came from (libbpf's section
/// prefixes of `BPF_PROG_TYPE_KPROBE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeFlavor {
    Kprobe,
    Kretprobe,
    KprobeMulti,
    KretprobeMulti,
    KprobeSession,
    Ksyscall,
    Kretsyscall,
    Uprobe,
    Uretprobe,
    UprobeMulti,
    UretprobeMulti,
    UprobeSession,
    Usdt,
}

impl ProbeFlavor {
    /// A probe on user-space code (uprobe, uretprobe, their multi and
    /// session forms, USDT): what bpfjet attaches inside a process.
    pub fn is_user(self) -> bool {
        matches!(
            self,
            ProbeFlavor::Uprobe
                | ProbeFlavor::Uretprobe
                | ProbeFlavor::UprobeMulti
                | ProbeFlavor::UretprobeMulti
                | ProbeFlavor::UprobeSession
                | ProbeFlavor::Usdt
        )
    }

    /// Runs when the probed function returns (r0 of `pt_regs` holds the
    /// return value) rather than at its entry.
    pub fn is_return(self) -> bool {
        matches!(
            self,
            ProbeFlavor::Kretprobe
                | ProbeFlavor::KretprobeMulti
                | ProbeFlavor::Kretsyscall
                | ProbeFlavor::Uretprobe
                | ProbeFlavor::UretprobeMulti
        )
    }

    /// The kernel's `expected_attach_type` for the flavor (`enum
    /// bpf_attach_type`): multi and session probes are loaded as such, the
    /// others with 0.
    pub fn expected_attach_type(self) -> u32 {
        /// `BPF_TRACE_KPROBE_MULTI`, `BPF_TRACE_UPROBE_MULTI`,
        /// `BPF_TRACE_KPROBE_SESSION`, `BPF_TRACE_UPROBE_SESSION`.
        const KPROBE_MULTI: u32 = 42;
        const UPROBE_MULTI: u32 = 48;
        const KPROBE_SESSION: u32 = 56;
        const UPROBE_SESSION: u32 = 57;
        match self {
            ProbeFlavor::KprobeMulti | ProbeFlavor::KretprobeMulti => KPROBE_MULTI,
            ProbeFlavor::UprobeMulti | ProbeFlavor::UretprobeMulti => UPROBE_MULTI,
            ProbeFlavor::KprobeSession => KPROBE_SESSION,
            ProbeFlavor::UprobeSession => UPROBE_SESSION,
            _ => 0,
        }
    }
}

/// Where a probe section says to attach. Empty parts (`SEC("uprobe")`)
/// mean the loader names the target at attach time, as with libbpf's
/// `bpf_program__attach_uprobe()`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProbeTarget {
    /// No target in the section name.
    Unspecified,
    /// `kprobe/FUNC[+OFF]`, `ksyscall/NAME`, `kprobe.multi/PATTERN`: a kernel
    /// function (or pattern). bpfjet runs in user space and cannot attach
    /// these; they are parsed so the error can say what was asked.
    Kernel { function: String, offset: u64 },
    /// `uprobe/PATH:SYMBOL[+OFF]`, `uprobe/PATH:OFFSET`,
    /// `uprobe.multi/PATH:PATTERN`: code in the binary or library `path`.
    /// `symbol` is empty for a raw file offset; for multi probes it is a
    /// glob pattern.
    User {
        path: String,
        symbol: String,
        offset: u64,
    },
    /// `usdt/PATH:PROVIDER:NAME`.
    Usdt {
        path: String,
        provider: String,
        name: String,
    },
}

/// A kprobe-type program's section: flavor, sleepable (`.s`), target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeSection {
    pub flavor: ProbeFlavor,
    pub sleepable: bool,
    pub target: ProbeTarget,
}

/// The x86-64 prefix of a system call's kernel entry point (the
/// `__x64_sys_*` wrappers, `ARCH_HAS_SYSCALL_WRAPPER`).
pub const SYSCALL_ENTRY_PREFIX: &str = "__x64_sys_";

/// A kernel probe on a system call's entry point, as its section names it:
/// `ksyscall/NAME`, `kretsyscall/NAME`, `kprobe/__x64_sys_NAME`,
/// `kretprobe/__x64_sys_NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallEntryProbe<'a> {
    /// The kernel's name of the call (`newstat`, as its entry point and
    /// tracepoints name it).
    pub syscall: &'a str,
    /// Runs at the call's return.
    pub ret: bool,
    /// Named as a syscall (`ksyscall`), whose context follows
    /// `LINUX_HAS_SYSCALL_WRAPPER`, rather than as the wrapper function.
    pub by_syscall_name: bool,
}

impl ProbeSection {
    /// The system call whose entry point this kernel probe names, or why
    /// it names no system call's entry point.
    pub fn syscall_entry(&self) -> Result<SyscallEntryProbe<'_>, String> {
        let (ret, by_syscall_name) = match self.flavor {
            ProbeFlavor::Kprobe => (false, false),
            ProbeFlavor::Kretprobe => (true, false),
            ProbeFlavor::Ksyscall => (false, true),
            ProbeFlavor::Kretsyscall => (true, true),
            f => {
                return Err(format!(
                    "{f:?} is not supported on system calls (kprobe, kretprobe, ksyscall and \
                     kretsyscall are)"
                ))
            }
        };
        let ProbeTarget::Kernel { function, offset } = &self.target else {
            return Err("no kernel function named (libbpf's auto-attach form is required)".into());
        };
        let syscall = if by_syscall_name {
            function.as_str()
        } else {
            function.strip_prefix(SYSCALL_ENTRY_PREFIX).ok_or_else(|| {
                format!(
                    "kernel function {function:?}: bpfjet trace runs programs inside the traced \
                     process, where only its system calls' entry points \
                     ({SYSCALL_ENTRY_PREFIX}NAME, ksyscall/NAME) are seen; other kernel \
                     functions never run there"
                )
            })?
        };
        if *offset != 0 {
            return Err(format!(
                "{function}+{offset:#x}: inside a system call's kernel code; only its entry \
                 ({SYSCALL_ENTRY_PREFIX}{syscall}) and return are seen in a process"
            ));
        }
        Ok(SyscallEntryProbe {
            syscall,
            ret,
            by_syscall_name,
        })
    }
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
    /// `kprobe`, `kretprobe`, `uprobe`, `uretprobe`, `uprobe.multi`, `usdt`,
    /// ... (`BPF_PROG_TYPE_KPROBE`, context `struct pt_regs`).
    Probe(ProbeSection),
    /// `tracepoint/CATEGORY/NAME`, `tp/CATEGORY/NAME` (both empty for a
    /// bare `tracepoint`).
    Tracepoint { category: String, name: String },
    /// `raw_tracepoint/NAME`, `raw_tp/NAME` (empty for a bare section).
    RawTracepoint { name: String },
    /// `tp_btf/NAME`: a BTF-typed raw tracepoint (`BPF_PROG_TYPE_TRACING`,
    /// `BPF_TRACE_RAW_TP`); its arguments are typed by the kernel's BTF.
    TpBtf { name: String },
    /// An fentry (`exit` false) or fexit program on the entry function
    /// `func` of a bpfjet XDP program (`BPF_PROG_TYPE_TRACING`,
    /// `BPF_TRACE_FENTRY`/`FEXIT` with `attach_prog_fd`: xdpdump). Its
    /// section is bpfjet's `fentry.xdp/FUNC` or `fexit.xdp/FUNC`, which
    /// the server gives programs loaded so: libbpf's `fentry/FUNC` names
    /// no target, which only the loader knows (and is a kernel function
    /// more often than not).
    XdpTrace { func: String, exit: bool },
    /// `perf_event`: a program run by a perf event's overflow (a timer's
    /// tick, a sampled counter), attached to the event by the loader.
    PerfEvent,
    /// A type bpfjet recognises but cannot run; holds libbpf's name for the
    /// type (`sched_cls`, `tracing`, ...), or `unknown` for a section name
    /// that matches no libbpf 1.x section definition.
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

/// libbpf's kprobe-type sections: prefix, flavor, sleepable.
const PROBE_DEFS: &[(&str, ProbeFlavor, bool)] = &[
    ("kprobe", ProbeFlavor::Kprobe, false),
    ("uprobe", ProbeFlavor::Uprobe, false),
    ("uprobe.s", ProbeFlavor::Uprobe, true),
    ("kretprobe", ProbeFlavor::Kretprobe, false),
    ("uretprobe", ProbeFlavor::Uretprobe, false),
    ("uretprobe.s", ProbeFlavor::Uretprobe, true),
    ("kprobe.multi", ProbeFlavor::KprobeMulti, false),
    ("kretprobe.multi", ProbeFlavor::KretprobeMulti, false),
    ("kprobe.session", ProbeFlavor::KprobeSession, false),
    ("uprobe.multi", ProbeFlavor::UprobeMulti, false),
    ("uretprobe.multi", ProbeFlavor::UretprobeMulti, false),
    ("uprobe.session", ProbeFlavor::UprobeSession, false),
    ("uprobe.multi.s", ProbeFlavor::UprobeMulti, true),
    ("uretprobe.multi.s", ProbeFlavor::UretprobeMulti, true),
    ("uprobe.session.s", ProbeFlavor::UprobeSession, true),
    ("ksyscall", ProbeFlavor::Ksyscall, false),
    ("kretsyscall", ProbeFlavor::Kretsyscall, false),
    ("usdt", ProbeFlavor::Usdt, false),
    ("usdt.s", ProbeFlavor::Usdt, true),
];

/// A number as libbpf's `sscanf("%li")` reads it: decimal, `0x` hex or
/// leading-`0` octal.
fn parse_c_number(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if text.len() > 1 && text.starts_with('0') {
        u64::from_str_radix(&text[1..], 8).ok()
    } else {
        text.parse().ok()
    }
}

/// `SYMBOL[+OFF]` (libbpf: `%m[a-zA-Z0-9_.@]%li`), or a bare number: a
/// raw offset with no symbol.
fn parse_symbol_offset(text: &str) -> (String, u64) {
    if let Some(offset) = parse_c_number(text) {
        return (String::new(), offset);
    }
    match text.split_once('+') {
        Some((symbol, off)) => match parse_c_number(off) {
            Some(offset) => (symbol.to_string(), offset),
            None => (text.to_string(), 0),
        },
        None => (text.to_string(), 0),
    }
}

fn probe_target(flavor: ProbeFlavor, rest: &str) -> ProbeTarget {
    if rest.is_empty() {
        return ProbeTarget::Unspecified;
    }
    if !flavor.is_user() {
        let (function, offset) = parse_symbol_offset(rest);
        return ProbeTarget::Kernel { function, offset };
    }
    if flavor == ProbeFlavor::Usdt {
        // PATH:PROVIDER:NAME; the path may itself hold no colon.
        let mut parts = rest.rsplitn(3, ':');
        let name = parts.next().unwrap_or_default().to_string();
        let provider = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        return ProbeTarget::Usdt {
            path,
            provider,
            name,
        };
    }
    match rest.rsplit_once(':') {
        Some((path, func)) => {
            let (symbol, offset) = match flavor {
                // A multi probe's target is a glob pattern, never an offset.
                ProbeFlavor::UprobeMulti
                | ProbeFlavor::UretprobeMulti
                | ProbeFlavor::UprobeSession => (func.to_string(), 0),
                _ => parse_symbol_offset(func),
            };
            ProbeTarget::User {
                path: path.to_string(),
                symbol,
                offset,
            }
        }
        None => ProbeTarget::User {
            path: rest.to_string(),
            symbol: String::new(),
            offset: 0,
        },
    }
}

/// The tracing types of a section, if it names one (libbpf's kprobe,
/// tracepoint and raw tracepoint entries).
fn tracing_kind(section: &str) -> Option<ProgKind> {
    let split = |prefix: &str| -> Option<String> {
        let rest = section.strip_prefix(prefix)?;
        if rest.is_empty() {
            Some(String::new())
        } else {
            rest.strip_prefix('/').map(str::to_string)
        }
    };
    for (prefix, flavor, sleepable) in PROBE_DEFS {
        if let Some(rest) = split(prefix) {
            return Some(ProgKind::Probe(ProbeSection {
                flavor: *flavor,
                sleepable: *sleepable,
                target: probe_target(*flavor, &rest),
            }));
        }
    }
    for prefix in ["tracepoint", "tp"] {
        if let Some(rest) = split(prefix) {
            let (category, name) = rest.split_once('/').unwrap_or((rest.as_str(), ""));
            return Some(ProgKind::Tracepoint {
                category: category.to_string(),
                name: name.to_string(),
            });
        }
    }
    for prefix in ["raw_tracepoint", "raw_tp"] {
        if let Some(name) = split(prefix) {
            return Some(ProgKind::RawTracepoint { name });
        }
    }
    if let Some(name) = split("tp_btf") {
        return Some(ProgKind::TpBtf { name });
    }
    for (prefix, exit) in [("fentry.xdp", false), ("fexit.xdp", true)] {
        if let Some(func) = split(prefix) {
            return Some(ProgKind::XdpTrace { func, exit });
        }
    }
    (section == "perf_event").then_some(ProgKind::PerfEvent)
}

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
    /// libbpf's "do not autoload" mark, does not change the type:
    /// `Program::autoload` reads it).
    pub fn from_section(section: &str) -> ProgKind {
        let section = section.strip_prefix('?').unwrap_or(section);
        if let Some((_, _, kind)) = XDP_DEFS
            .iter()
            .find(|(name, how, _)| matches(section, name, *how))
        {
            return kind.clone();
        }
        if let Some(kind) = tracing_kind(section) {
            return kind;
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
                 xdp/cpumap, xdp.frags/devmap, xdp.frags/cpumap, kprobe, uprobe, \
                 tracepoint, raw_tracepoint)"
            )),
            ProgKind::Unsupported(t) => Err(format!(
                "program type `{name}` ({t}) cannot be run by bpfjet, which runs XDP, \
                 kprobe, tracepoint and raw_tracepoint programs"
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

    /// Whether bpfjet can verify and run programs of this kind.
    pub fn is_supported(&self) -> bool {
        self.prog_type().is_some()
    }

    /// The kernel program type of this kind, `None` for kinds bpfjet does
    /// not run.
    pub fn prog_type(&self) -> Option<ProgType> {
        match self {
            ProgKind::Xdp | ProgKind::XdpFrags | ProgKind::XdpMapEntry { .. } => {
                Some(ProgType::Xdp)
            }
            ProgKind::Probe(_) => Some(ProgType::Kprobe),
            ProgKind::Tracepoint { .. } => Some(ProgType::Tracepoint),
            ProgKind::RawTracepoint { .. } => Some(ProgType::RawTracepoint),
            ProgKind::TpBtf { .. } | ProgKind::XdpTrace { .. } => Some(ProgType::Tracing),
            ProgKind::PerfEvent => Some(ProgType::PerfEvent),
            ProgKind::Unsupported(_) => None,
        }
    }

    /// XDP of any attach point.
    pub fn is_xdp(&self) -> bool {
        self.prog_type() == Some(ProgType::Xdp)
    }

    /// Kprobe, tracepoint or raw tracepoint.
    pub fn is_tracing(&self) -> bool {
        self.prog_type().is_some_and(ProgType::is_tracing)
    }

    /// The probe section of a kprobe-type program.
    pub fn probe(&self) -> Option<&ProbeSection> {
        match self {
            ProgKind::Probe(p) => Some(p),
            _ => None,
        }
    }

    /// Where a tracepoint program sits among the traced process's own
    /// system calls, the only tracepoints a process has in userspace;
    /// `None` for other tracepoints and other program types.
    pub fn syscall_tracepoint(&self) -> Option<SyscallTracepoint<'_>> {
        match self {
            ProgKind::Tracepoint { category, name } if category == "syscalls" => {
                if let Some(call) = name.strip_prefix("sys_enter_") {
                    Some(SyscallTracepoint::Enter(call))
                } else {
                    name.strip_prefix("sys_exit_").map(SyscallTracepoint::Exit)
                }
            }
            ProgKind::Tracepoint { category, name } if category == "raw_syscalls" => {
                match name.as_str() {
                    "sys_enter" => Some(SyscallTracepoint::EveryEnter { raw_args: false }),
                    "sys_exit" => Some(SyscallTracepoint::EveryExit { raw_args: false }),
                    _ => None,
                }
            }
            ProgKind::RawTracepoint { name } => match name.as_str() {
                "sys_enter" => Some(SyscallTracepoint::EveryEnter { raw_args: true }),
                "sys_exit" => Some(SyscallTracepoint::EveryExit { raw_args: true }),
                _ => None,
            },
            _ => None,
        }
    }

    /// Sleepable (`uprobe.s`, `usdt.s`, ...: `BPF_F_SLEEPABLE`).
    pub fn is_sleepable(&self) -> bool {
        self.probe().is_some_and(|p| p.sleepable)
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
            _ => None,
        }
    }

    /// The kernel's `enum bpf_prog_type` value, `expected_attach_type` and
    /// load flags for this kind, for loading the same program into the
    /// kernel with an overridden type. `None` for kinds bpfjet cannot run.
    pub fn kernel_load_type(&self) -> Option<KernelProgType> {
        /// `BPF_XDP`, `BPF_XDP_DEVMAP`, `BPF_XDP_CPUMAP`,
        /// `BPF_F_XDP_HAS_FRAGS`, `BPF_F_SLEEPABLE` from `linux/bpf.h`.
        const ATTACH_XDP: u32 = 37;
        const ATTACH_XDP_DEVMAP: u32 = 33;
        const ATTACH_XDP_CPUMAP: u32 = 35;
        const F_XDP_HAS_FRAGS: u32 = 1 << 5;
        const F_SLEEPABLE: u32 = 1 << 4;
        let prog_type = self.prog_type()?.kernel_id();
        let (expected_attach_type, prog_flags) = match self {
            ProgKind::Probe(p) => (
                p.flavor.expected_attach_type(),
                if p.sleepable { F_SLEEPABLE } else { 0 },
            ),
            ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. } => (0, 0),
            ProgKind::TpBtf { .. } => (crate::tp_btf::BPF_TRACE_RAW_TP, 0),
            ProgKind::XdpTrace { exit, .. } => (
                if *exit {
                    crate::tp_btf::BPF_TRACE_FEXIT
                } else {
                    crate::tp_btf::BPF_TRACE_FENTRY
                },
                0,
            ),
            _ => {
                let attach = match self.xdp_attach()? {
                    XdpAttach::Device => ATTACH_XDP,
                    XdpAttach::Devmap => ATTACH_XDP_DEVMAP,
                    XdpAttach::Cpumap => ATTACH_XDP_CPUMAP,
                };
                let flags = if self.has_frags() { F_XDP_HAS_FRAGS } else { 0 };
                (attach, flags)
            }
        };
        Some(KernelProgType {
            prog_type,
            expected_attach_type,
            prog_flags,
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
            ProgKind::Probe(_) => "kprobe",
            ProgKind::Tracepoint { .. } => "tracepoint",
            ProgKind::RawTracepoint { .. } => "raw_tracepoint",
            ProgKind::TpBtf { .. } => "tp_btf",
            ProgKind::XdpTrace { exit: false, .. } => "fentry.xdp",
            ProgKind::XdpTrace { exit: true, .. } => "fexit.xdp",
            ProgKind::PerfEvent => "perf_event",
            ProgKind::Unsupported(t) => t,
        }
    }
}

/// The tracepoint sections of a process's own system calls, for messages.
pub const SYSCALL_TRACEPOINT_SECTIONS: &str = "tracepoint/syscalls/sys_enter_NAME|sys_exit_NAME, \
     tracepoint/raw_syscalls/sys_enter|sys_exit, raw_tracepoint/sys_enter|sys_exit";

/// A tracepoint of the traced process's own system calls
/// ([`ProgKind::syscall_tracepoint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallTracepoint<'a> {
    /// `tracepoint/syscalls/sys_enter_NAME`: system call NAME's entry,
    /// context the `sys_enter` record.
    Enter(&'a str),
    /// `tracepoint/syscalls/sys_exit_NAME`: its return, the `sys_exit` record.
    Exit(&'a str),
    /// Every system call's entry: `raw_tracepoint/sys_enter` (`raw_args`:
    /// context `struct bpf_raw_tracepoint_args`, `{pt_regs *, id}`) or
    /// `tracepoint/raw_syscalls/sys_enter` (the `sys_enter` record, as the
    /// per-call tracepoints get it).
    EveryEnter { raw_args: bool },
    /// Every system call's return: `raw_tracepoint/sys_exit` (`{pt_regs *,
    /// ret}`) or `tracepoint/raw_syscalls/sys_exit` (the `sys_exit` record).
    EveryExit { raw_args: bool },
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
    fn kernel_ids_round_trip() {
        for t in [
            ProgType::Kprobe,
            ProgType::Tracepoint,
            ProgType::Xdp,
            ProgType::PerfEvent,
            ProgType::RawTracepoint,
            ProgType::Tracing,
        ] {
            assert_eq!(ProgType::from_kernel_id(t.kernel_id()), Some(t));
        }
        // BPF_PROG_TYPE_SCHED_CLS: not one bpfjet runs.
        assert_eq!(ProgType::from_kernel_id(3), None);
    }

    fn user(flavor: ProbeFlavor, path: &str, symbol: &str, offset: u64) -> ProgKind {
        ProgKind::Probe(ProbeSection {
            flavor,
            sleepable: false,
            target: ProbeTarget::User {
                path: path.into(),
                symbol: symbol.into(),
                offset,
            },
        })
    }

    #[test]
    fn syscall_tracepoints() {
        use SyscallTracepoint as Tp;
        let cases = [
            (
                "tracepoint/syscalls/sys_enter_read",
                Some(Tp::Enter("read")),
            ),
            ("tp/syscalls/sys_exit_openat", Some(Tp::Exit("openat"))),
            ("tracepoint/syscalls/sys_other", None),
            (
                "tracepoint/raw_syscalls/sys_enter",
                Some(Tp::EveryEnter { raw_args: false }),
            ),
            (
                "tp/raw_syscalls/sys_exit",
                Some(Tp::EveryExit { raw_args: false }),
            ),
            ("tracepoint/raw_syscalls/other", None),
            (
                "raw_tracepoint/sys_enter",
                Some(Tp::EveryEnter { raw_args: true }),
            ),
            ("raw_tp/sys_exit", Some(Tp::EveryExit { raw_args: true })),
            ("raw_tracepoint/sched_switch", None),
            ("tracepoint/sched/sched_switch", None),
            ("uprobe//bin/true:main", None),
            ("xdp", None),
        ];
        for (section, want) in cases {
            assert_eq!(
                ProgKind::from_section(section).syscall_tracepoint(),
                want,
                "{section}"
            );
        }
    }

    #[test]
    fn tracing_sections() {
        let cases = [
            (
                "uprobe//usr/lib/libc.so.6:malloc",
                user(ProbeFlavor::Uprobe, "/usr/lib/libc.so.6", "malloc", 0),
            ),
            (
                "uretprobe/./a.out:f+0x10",
                user(ProbeFlavor::Uretprobe, "./a.out", "f", 16),
            ),
            (
                "uprobe/bin:0x1234",
                user(ProbeFlavor::Uprobe, "bin", "", 0x1234),
            ),
            (
                "uprobe.multi/libc.so.6:str*",
                user(ProbeFlavor::UprobeMulti, "libc.so.6", "str*", 0),
            ),
            (
                "usdt/libc.so.6:libc:setjmp",
                ProgKind::Probe(ProbeSection {
                    flavor: ProbeFlavor::Usdt,
                    sleepable: false,
                    target: ProbeTarget::Usdt {
                        path: "libc.so.6".into(),
                        provider: "libc".into(),
                        name: "setjmp".into(),
                    },
                }),
            ),
            (
                "kprobe/do_sys_open+8",
                ProgKind::Probe(ProbeSection {
                    flavor: ProbeFlavor::Kprobe,
                    sleepable: false,
                    target: ProbeTarget::Kernel {
                        function: "do_sys_open".into(),
                        offset: 8,
                    },
                }),
            ),
            (
                "uprobe",
                ProgKind::Probe(ProbeSection {
                    flavor: ProbeFlavor::Uprobe,
                    sleepable: false,
                    target: ProbeTarget::Unspecified,
                }),
            ),
            (
                "tracepoint/syscalls/sys_enter_read",
                ProgKind::Tracepoint {
                    category: "syscalls".into(),
                    name: "sys_enter_read".into(),
                },
            ),
            (
                "tp/syscalls/sys_exit_write",
                ProgKind::Tracepoint {
                    category: "syscalls".into(),
                    name: "sys_exit_write".into(),
                },
            ),
            (
                "raw_tp/sys_enter",
                ProgKind::RawTracepoint {
                    name: "sys_enter".into(),
                },
            ),
            (
                "raw_tracepoint/sys_exit",
                ProgKind::RawTracepoint {
                    name: "sys_exit".into(),
                },
            ),
            ("kprobex", ProgKind::Unsupported("unknown".into())),
            ("tpx/a", ProgKind::Unsupported("unknown".into())),
        ];
        for (section, kind) in cases {
            assert_eq!(ProgKind::from_section(section), kind, "{section}");
        }
        let s = ProgKind::from_section("uprobe.s/bin:f");
        assert!(s.is_sleepable() && s.is_tracing() && !s.is_xdp());
        assert_eq!(
            s.kernel_load_type(),
            Some(KernelProgType {
                prog_type: 2,
                expected_attach_type: 0,
                prog_flags: 16
            })
        );
        assert_eq!(
            ProgKind::from_section("uprobe.multi/bin:f*")
                .kernel_load_type()
                .map(|k| k.expected_attach_type),
            Some(48)
        );
        assert_eq!(
            ProgKind::from_section("tp/syscalls/sys_enter_read").prog_type(),
            Some(ProgType::Tracepoint)
        );
    }

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
            ("kprobex", ProgKind::Unsupported("unknown".into())),
            ("fentry.s/foo", ProgKind::Unsupported("tracing".into())),
            (
                "raw_tracepoint.w/x",
                ProgKind::Unsupported("raw_tracepoint_writable".into()),
            ),
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
