//! Helper and kfunc prototypes: what each argument must be and what the call
//! returns. Ids are the kernel's (`__BPF_FUNC_MAPPER` in `linux/bpf.h`); the
//! argument kinds follow the kernel's prototypes (one table for every
//! program type; [`unavailable_reason`] holds the per-type sets).
//!
//! Other crates (the runtime's helper table, the JIT) use [`helper_proto`] to
//! name helpers and to know which ones invalidate packet pointers.

/// What a helper argument must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// Not an argument.
    DontCare,
    /// Any initialised value (unprivileged: a scalar, pointers would leak).
    Anything,
    /// A map (`lddw` of a map).
    ConstMapPtr,
    /// Readable, initialised memory of the map's key size.
    PtrToMapKey,
    /// Readable, initialised memory of the map's value size.
    PtrToMapValue,
    /// Writable memory of the map's value size (the helper fills it).
    PtrToUninitMapValue,
    /// Readable, initialised memory; its size is the next argument.
    /// `maybe_null`: NULL is accepted together with a size of 0.
    PtrToMem { maybe_null: bool, rdonly: bool },
    /// Writable memory the helper fills; its size is the next argument.
    PtrToUninitMem,
    /// The size of the preceding memory argument, `> 0`.
    ConstSize,
    /// The size of the preceding memory argument, `>= 0`.
    ConstSizeOrZero,
    /// The program's context pointer, unmodified.
    PtrToCtx,
    /// A stack pointer or NULL (callback context).
    PtrToStackOrNull,
    /// A subprogram (`lddw` of a function): the callback.
    PtrToFunc,
    /// Ringbuf memory from `bpf_ringbuf_reserve`; the call releases it.
    PtrToRingbufMemRelease,
    /// A `struct bpf_spin_lock` inside a map value (needs BTF).
    PtrToSpinLock,
    /// A `struct bpf_timer` inside a map value (needs BTF; `timer.rs`).
    PtrToTimer,
    /// A known constant (allocation size).
    ConstAllocSize,
    /// A NUL-terminated string in a frozen read-only map.
    PtrToConstStr,
    /// Memory of this fixed size, aligned to it, that the helper reads and
    /// writes (the kernel's `ARG_PTR_TO_FIXED_SIZE_MEM | MEM_WRITE |
    /// MEM_ALIGNED`, e.g. `bpf_check_mtu`'s `u32 *mtu_len`).
    PtrToFixedMem(u32),
    /// Readable, initialised memory of this fixed size (the kernel's
    /// `ARG_PTR_TO_FIXED_SIZE_MEM | MEM_RDONLY`, e.g. the raw SYN-cookie
    /// helpers' IP and TCP headers).
    PtrToFixedRdonlyMem(u32),
    /// A kernel object of this struct (`ARG_PTR_TO_BTF_ID`), unmodified:
    /// `bpf_xdp_output`'s `struct xdp_buff *`.
    PtrToKernelStruct(&'static str),
    /// 16 bytes of the stack the helper makes a dynptr of this kind
    /// (`ARG_PTR_TO_DYNPTR | MEM_UNINIT`; `dynptr.rs`).
    DynptrUninit(DynptrKind),
    /// An initialised dynptr on the stack, of `kind` when given; `release`:
    /// the call releases its reference (`OBJ_RELEASE`).
    Dynptr {
        kind: Option<DynptrKind>,
        release: bool,
    },
}

/// What a helper returns in r0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetType {
    /// A scalar.
    Integer,
    /// Nothing: r0 is uninitialised after the call.
    Void,
    /// A pointer into the value of the map in argument 1, or NULL.
    PtrToMapValueOrNull,
    /// `size` bytes of memory from argument `size_arg` (a constant), or NULL;
    /// acquires a reference when `acquire`.
    PtrToMemOrNull { size_arg: u8, acquire: bool },
    /// A slice of the dynptr argument, of the constant size argument's
    /// bytes, or NULL (`RET_PTR_TO_DYNPTR_MEM_OR_NULL`).
    DynptrSliceOrNull,
}

/// Who calls a callback argument and with what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackKind {
    /// `bpf_loop(nr, cb, ctx, flags)`: `cb(u64 index, void *ctx)`.
    Loop,
    /// `bpf_for_each_map_elem(map, cb, ctx, flags)`: `cb(map, key, value, ctx)`.
    ForEachMapElem,
    /// `bpf_user_ringbuf_drain(map, cb, ctx, flags)`: `cb(const struct
    /// bpf_dynptr *sample, void *ctx)` per sample.
    UserRingbufDrain,
    /// `bpf_timer_set_callback(timer, cb)`: `cb(map, key, value)` later,
    /// on its own (an async callback, verified as a path of its own).
    Timer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperProto {
    pub id: i32,
    pub name: &'static str,
    pub args: [ArgType; 5],
    pub ret: RetType,
    /// Invalidates every packet pointer (the packet may move or shrink).
    pub changes_pkt_data: bool,
    /// Accepts packet pointers as memory arguments.
    pub pkt_access: bool,
    /// Only for GPL-compatible programs.
    pub gpl_only: bool,
    /// Needs CAP_PERFMON (unavailable under the unprivileged policy).
    pub needs_perfmon: bool,
    pub callback: Option<CallbackKind>,
}

use crate::env::ProgType;
use crate::reg_state::DynptrKind;
use ArgType::*;

const fn proto(id: i32, name: &'static str, args: [ArgType; 5], ret: RetType) -> HelperProto {
    HelperProto {
        id,
        name,
        args,
        ret,
        changes_pkt_data: false,
        pkt_access: kernel_pkt_access(id),
        gpl_only: false,
        needs_perfmon: false,
        callback: None,
    }
}

/// The helpers whose kernel prototype has `.pkt_access = true`: the only
/// ones an XDP program may hand a packet pointer (`check_func_arg`:
/// "helper access to the packet is not allowed"). Measured against 6.18 by
/// the corpus case `helper_pkt_args`: the map element helpers, `csum_diff`
/// and the socket/SYN-cookie helpers that parse headers in place.
const fn kernel_pkt_access(id: i32) -> bool {
    matches!(id, 1 | 2 | 3 | 28 | 87 | 100 | 110 | 195 | 204..=207)
}

const fn a0() -> [ArgType; 5] {
    [DontCare; 5]
}

const fn a1(x: ArgType) -> [ArgType; 5] {
    [x, DontCare, DontCare, DontCare, DontCare]
}

const fn a2(x: ArgType, y: ArgType) -> [ArgType; 5] {
    [x, y, DontCare, DontCare, DontCare]
}

const fn a3(x: ArgType, y: ArgType, z: ArgType) -> [ArgType; 5] {
    [x, y, z, DontCare, DontCare]
}

const fn a4(x: ArgType, y: ArgType, z: ArgType, w: ArgType) -> [ArgType; 5] {
    [x, y, z, w, DontCare]
}

const RO_MEM: ArgType = PtrToMem {
    maybe_null: false,
    rdonly: true,
};
const RO_MEM_OR_NULL: ArgType = PtrToMem {
    maybe_null: true,
    rdonly: true,
};
const RW_MEM: ArgType = PtrToMem {
    maybe_null: false,
    rdonly: false,
};
const RW_MEM_OR_NULL: ArgType = PtrToMem {
    maybe_null: true,
    rdonly: false,
};

const ANY_DYNPTR: ArgType = Dynptr {
    kind: None,
    release: false,
};
const RINGBUF_DYNPTR_RELEASE: ArgType = Dynptr {
    kind: Some(DynptrKind::Ringbuf),
    release: true,
};

const fn pkt_changing(mut p: HelperProto) -> HelperProto {
    p.changes_pkt_data = true;
    p
}

/// `bpf_tcp_raw_gen_syncookie_*(iph, th, th_len)`: an IP header of
/// `ip_len` bytes and a TCP header of `th_len`, all read only.
const fn raw_syncookie_gen(id: i32, name: &'static str, ip_len: u32) -> HelperProto {
    let th = PtrToMem {
        maybe_null: false,
        rdonly: true,
    };
    gpl(proto(
        id,
        name,
        a3(PtrToFixedRdonlyMem(ip_len), th, ConstSizeOrZero),
        RetType::Integer,
    ))
}

/// `bpf_tcp_raw_check_syncookie_*(iph, th)`: an IP header of `ip_len`
/// bytes and a 20-byte TCP header, read only.
const fn raw_syncookie_check(id: i32, name: &'static str, ip_len: u32) -> HelperProto {
    gpl(proto(
        id,
        name,
        a2(PtrToFixedRdonlyMem(ip_len), PtrToFixedRdonlyMem(20)),
        RetType::Integer,
    ))
}

const fn gpl(mut p: HelperProto) -> HelperProto {
    p.gpl_only = true;
    p
}

const fn perfmon(mut p: HelperProto) -> HelperProto {
    p.needs_perfmon = true;
    p
}

const fn with_callback(mut p: HelperProto, kind: CallbackKind) -> HelperProto {
    p.callback = Some(kind);
    p
}

static HELPERS: &[HelperProto] = &[
    proto(
        1,
        "bpf_map_lookup_elem",
        a2(ConstMapPtr, PtrToMapKey),
        RetType::PtrToMapValueOrNull,
    ),
    proto(
        2,
        "bpf_map_update_elem",
        a4(ConstMapPtr, PtrToMapKey, PtrToMapValue, Anything),
        RetType::Integer,
    ),
    proto(
        3,
        "bpf_map_delete_elem",
        a2(ConstMapPtr, PtrToMapKey),
        RetType::Integer,
    ),
    proto(5, "bpf_ktime_get_ns", a0(), RetType::Integer),
    perfmon(gpl(proto(
        6,
        "bpf_trace_printk",
        a2(RO_MEM, ConstSize),
        RetType::Integer,
    ))),
    proto(7, "bpf_get_prandom_u32", a0(), RetType::Integer),
    proto(8, "bpf_get_smp_processor_id", a0(), RetType::Integer),
    proto(14, "bpf_get_current_pid_tgid", a0(), RetType::Integer),
    proto(
        12,
        "bpf_tail_call",
        a3(PtrToCtx, ConstMapPtr, Anything),
        RetType::Void,
    ),
    proto(23, "bpf_redirect", a2(Anything, Anything), RetType::Integer),
    gpl(proto(
        25,
        "bpf_perf_event_output",
        [PtrToCtx, ConstMapPtr, Anything, RO_MEM, ConstSizeOrZero],
        RetType::Integer,
    )),
    gpl(proto(
        121,
        "bpf_xdp_output",
        [
            PtrToKernelStruct("xdp_buff"),
            ConstMapPtr,
            Anything,
            RO_MEM,
            ConstSizeOrZero,
        ],
        RetType::Integer,
    )),
    proto(
        28,
        "bpf_csum_diff",
        [
            RO_MEM_OR_NULL,
            ConstSizeOrZero,
            RO_MEM_OR_NULL,
            ConstSizeOrZero,
            Anything,
        ],
        RetType::Integer,
    ),
    proto(42, "bpf_get_numa_node_id", a0(), RetType::Integer),
    gpl(proto(
        163,
        "bpf_check_mtu",
        [PtrToCtx, Anything, PtrToFixedMem(4), Anything, Anything],
        RetType::Integer,
    )),
    pkt_changing(proto(
        44,
        "bpf_xdp_adjust_head",
        a2(PtrToCtx, Anything),
        RetType::Integer,
    )),
    proto(
        51,
        "bpf_redirect_map",
        a3(ConstMapPtr, Anything, Anything),
        RetType::Integer,
    ),
    pkt_changing(proto(
        54,
        "bpf_xdp_adjust_meta",
        a2(PtrToCtx, Anything),
        RetType::Integer,
    )),
    pkt_changing(proto(
        65,
        "bpf_xdp_adjust_tail",
        a2(PtrToCtx, Anything),
        RetType::Integer,
    )),
    proto(
        69,
        "bpf_fib_lookup",
        a4(PtrToCtx, RW_MEM, ConstSize, Anything),
        RetType::Integer,
    ),
    proto(
        87,
        "bpf_map_push_elem",
        a3(ConstMapPtr, PtrToMapValue, Anything),
        RetType::Integer,
    ),
    proto(
        88,
        "bpf_map_pop_elem",
        a2(ConstMapPtr, PtrToUninitMapValue),
        RetType::Integer,
    ),
    proto(
        89,
        "bpf_map_peek_elem",
        a2(ConstMapPtr, PtrToUninitMapValue),
        RetType::Integer,
    ),
    // bpf_timer (`timer.rs`): GPL-only, as the kernel's protos.
    gpl(proto(
        169,
        "bpf_timer_init",
        a3(PtrToTimer, ConstMapPtr, Anything),
        RetType::Integer,
    )),
    gpl(with_callback(
        proto(
            170,
            "bpf_timer_set_callback",
            a2(PtrToTimer, PtrToFunc),
            RetType::Integer,
        ),
        CallbackKind::Timer,
    )),
    gpl(proto(
        171,
        "bpf_timer_start",
        a3(PtrToTimer, Anything, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        172,
        "bpf_timer_cancel",
        a1(PtrToTimer),
        RetType::Integer,
    )),
    proto(93, "bpf_spin_lock", a1(PtrToSpinLock), RetType::Void),
    proto(94, "bpf_spin_unlock", a1(PtrToSpinLock), RetType::Void),
    perfmon(gpl(proto(
        113,
        "bpf_probe_read_kernel",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    ))),
    proto(118, "bpf_jiffies64", a0(), RetType::Integer),
    proto(125, "bpf_ktime_get_boot_ns", a0(), RetType::Integer),
    proto(
        130,
        "bpf_ringbuf_output",
        a4(ConstMapPtr, RO_MEM, ConstSizeOrZero, Anything),
        RetType::Integer,
    ),
    proto(
        131,
        "bpf_ringbuf_reserve",
        a3(ConstMapPtr, ConstAllocSize, Anything),
        RetType::PtrToMemOrNull {
            size_arg: 2,
            acquire: true,
        },
    ),
    proto(
        132,
        "bpf_ringbuf_submit",
        a2(PtrToRingbufMemRelease, Anything),
        RetType::Void,
    ),
    proto(
        133,
        "bpf_ringbuf_discard",
        a2(PtrToRingbufMemRelease, Anything),
        RetType::Void,
    ),
    proto(
        134,
        "bpf_ringbuf_query",
        a2(ConstMapPtr, Anything),
        RetType::Integer,
    ),
    proto(160, "bpf_ktime_get_coarse_ns", a0(), RetType::Integer),
    proto(
        195,
        "bpf_map_lookup_percpu_elem",
        a3(ConstMapPtr, PtrToMapKey, Anything),
        RetType::PtrToMapValueOrNull,
    ),
    // The dynptr helpers (`dynptr.rs`). bpf_dynptr_from_mem's memory is a
    // map value (checked by name, as the kernel's check_func_arg does).
    with_callback(
        proto(
            209,
            "bpf_user_ringbuf_drain",
            a4(ConstMapPtr, PtrToFunc, PtrToStackOrNull, Anything),
            RetType::Integer,
        ),
        CallbackKind::UserRingbufDrain,
    ),
    proto(
        197,
        "bpf_dynptr_from_mem",
        a4(
            PtrToUninitMem,
            ConstSizeOrZero,
            Anything,
            DynptrUninit(DynptrKind::Local),
        ),
        RetType::Integer,
    ),
    proto(
        198,
        "bpf_ringbuf_reserve_dynptr",
        a4(
            ConstMapPtr,
            Anything,
            Anything,
            DynptrUninit(DynptrKind::Ringbuf),
        ),
        RetType::Integer,
    ),
    proto(
        199,
        "bpf_ringbuf_submit_dynptr",
        a2(RINGBUF_DYNPTR_RELEASE, Anything),
        RetType::Void,
    ),
    proto(
        200,
        "bpf_ringbuf_discard_dynptr",
        a2(RINGBUF_DYNPTR_RELEASE, Anything),
        RetType::Void,
    ),
    proto(
        201,
        "bpf_dynptr_read",
        [
            PtrToUninitMem,
            ConstSizeOrZero,
            ANY_DYNPTR,
            Anything,
            Anything,
        ],
        RetType::Integer,
    ),
    proto(
        202,
        "bpf_dynptr_write",
        [ANY_DYNPTR, Anything, RO_MEM, ConstSizeOrZero, Anything],
        RetType::Integer,
    ),
    proto(
        203,
        "bpf_dynptr_data",
        a3(ANY_DYNPTR, Anything, ConstAllocSize),
        RetType::DynptrSliceOrNull,
    ),
    with_callback(
        proto(
            164,
            "bpf_for_each_map_elem",
            a4(ConstMapPtr, PtrToFunc, PtrToStackOrNull, Anything),
            RetType::Integer,
        ),
        CallbackKind::ForEachMapElem,
    ),
    perfmon(gpl(proto(
        165,
        "bpf_snprintf",
        [
            RW_MEM_OR_NULL,
            ConstSizeOrZero,
            PtrToConstStr,
            RO_MEM_OR_NULL,
            ConstSizeOrZero,
        ],
        RetType::Integer,
    ))),
    perfmon(gpl(proto(
        177,
        "bpf_trace_vprintk",
        [RO_MEM, ConstSize, RO_MEM_OR_NULL, ConstSizeOrZero, DontCare],
        RetType::Integer,
    ))),
    with_callback(
        proto(
            181,
            "bpf_loop",
            a4(Anything, PtrToFunc, PtrToStackOrNull, Anything),
            RetType::Integer,
        ),
        CallbackKind::Loop,
    ),
    proto(
        182,
        "bpf_strncmp",
        a3(RO_MEM, ConstSize, PtrToConstStr),
        RetType::Integer,
    ),
    proto(188, "bpf_xdp_get_buff_len", a1(PtrToCtx), RetType::Integer),
    proto(
        189,
        "bpf_xdp_load_bytes",
        a4(PtrToCtx, Anything, PtrToUninitMem, ConstSize),
        RetType::Integer,
    ),
    proto(
        190,
        "bpf_xdp_store_bytes",
        a4(PtrToCtx, Anything, RO_MEM, ConstSize),
        RetType::Integer,
    ),
    proto(208, "bpf_ktime_get_tai_ns", a0(), RetType::Integer),
    // Tracing helpers (kprobe, tracepoint, raw tracepoint programs).
    gpl(proto(
        4,
        "bpf_probe_read",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        45,
        "bpf_probe_read_str",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        112,
        "bpf_probe_read_user",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        114,
        "bpf_probe_read_user_str",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    )),
    perfmon(gpl(proto(
        115,
        "bpf_probe_read_kernel_str",
        a3(PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    ))),
    proto(15, "bpf_get_current_uid_gid", a0(), RetType::Integer),
    perfmon(proto(35, "bpf_get_current_task", a0(), RetType::Integer)),
    proto(
        37,
        "bpf_current_task_under_cgroup",
        a2(ConstMapPtr, Anything),
        RetType::Integer,
    ),
    // The raw SYN-cookie helpers (CONFIG_SYN_COOKIES): headers the
    // program parsed, no socket; the IP header is 20 bytes for IPv4, 40
    // for IPv6.
    raw_syncookie_gen(204, "bpf_tcp_raw_gen_syncookie_ipv4", 20),
    raw_syncookie_gen(205, "bpf_tcp_raw_gen_syncookie_ipv6", 40),
    raw_syncookie_check(206, "bpf_tcp_raw_check_syncookie_ipv4", 20),
    raw_syncookie_check(207, "bpf_tcp_raw_check_syncookie_ipv6", 40),
    proto(
        16,
        "bpf_get_current_comm",
        a2(PtrToUninitMem, ConstSize),
        RetType::Integer,
    ),
    gpl(proto(
        27,
        "bpf_get_stackid",
        a3(PtrToCtx, ConstMapPtr, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        67,
        "bpf_get_stack",
        a4(PtrToCtx, PtrToUninitMem, ConstSizeOrZero, Anything),
        RetType::Integer,
    )),
    gpl(proto(
        173,
        "bpf_get_func_ip",
        a1(PtrToCtx),
        RetType::Integer,
    )),
    proto(174, "bpf_get_attach_cookie", a1(PtrToCtx), RetType::Integer),
];

/// Helpers only XDP programs may call (the kernel's `xdp_func_proto`
/// beyond the base set).
const XDP_ONLY: &[i32] = &[
    23, 28, 44, 51, 54, 65, 69, 163, 188, 189, 190, 204, 205, 206, 207,
];

/// Helpers of the kernel's `bpf_tracing_func_proto` that bpfjet knows and
/// `bpf_base_func_proto` (which XDP gets) does not have.
/// (`bpf_get_current_pid_tgid` and `bpf_get_current_uid_gid` are in
/// 6.18's base set for every loader; `bpf_get_current_comm` and the `probe_read_*`
/// helpers are too, but only for a CAP_PERFMON loader: bpfjet gives XDP
/// `bpf_get_current_comm` then ([`PERFMON_BASE`]) and keeps the reads of
/// kernel memory from it, see docs/VERIFIER.md.)
const TRACING_ONLY: &[i32] = &[4, 16, 35, 37, 45, 112, 114, 115];

/// Helpers of [`TRACING_ONLY`] that 6.18's `bpf_base_func_proto` gives
/// every program type of a CAP_PERFMON loader, and bpfjet to XDP too:
/// `bpf_get_current_comm` (the name of the thread running the program, as
/// the kernel's test run answers with the calling thread's).
const PERFMON_BASE: &[i32] = &[16];

/// Why a helper bpfjet knows is unavailable to a program type, or `None`
/// when the type may call it. The sets are the kernel's
/// `xdp_func_proto`, `kprobe_prog_func_proto`, `tp_prog_func_proto` and
/// `raw_tp_prog_func_proto` (each falling back to `bpf_tracing_func_proto`
/// and `bpf_base_func_proto`), restricted to the helpers bpfjet runs.
/// `perfmon`: the loader has CAP_PERFMON.
pub fn unavailable_reason(prog_type: ProgType, id: i32, perfmon: bool) -> Option<&'static str> {
    let tracing = prog_type.is_tracing();
    // tracing_prog_func_proto: the XDP frame of an fentry/fexit program
    // on an XDP program.
    if id == 121 && prog_type != ProgType::Tracing {
        return Some("bpf_xdp_output takes the XDP frame of an fentry/fexit program");
    }
    if !tracing && PERFMON_BASE.contains(&id) {
        return (!perfmon).then_some("it needs a CAP_PERFMON loader");
    }
    if !tracing {
        let tracing_helper = TRACING_ONLY.contains(&id) || matches!(id, 27 | 67 | 173 | 174);
        return tracing_helper.then_some("it is a tracing helper, not available to XDP programs");
    }
    if XDP_ONLY.contains(&id) {
        return Some("it is an XDP helper, not available to tracing programs");
    }

    match id {
        // check_map_prog_compatibility: maps with a bpf_spin_lock are
        // refused to tracing programs, so the helpers are unusable.
        93 | 94 => Some("tracing progs cannot use bpf_spin_lock yet"),
        // check_get_func_ip: kprobe (and fentry-style tracing) only.
        173 if prog_type != ProgType::Kprobe => {
            Some("bpf_get_func_ip is supported only for kprobe programs")
        }
        // The kernel's tp and kprobe sets have it, the raw tracepoint set not.
        174 if prog_type == ProgType::RawTracepoint => {
            Some("bpf_get_attach_cookie is not available to raw tracepoint programs")
        }
        _ => None,
    }
}

/// The prototype of helper `id` for a program of `prog_type`: `Err` with
/// the reason when bpfjet does not know it or the type may not call it.
/// `perfmon`: the loader has CAP_PERFMON.
pub fn helper_proto_for(
    prog_type: ProgType,
    id: i32,
    perfmon: bool,
) -> Result<&'static HelperProto, String> {
    let p = helper_proto(id)
        .ok_or_else(|| format!("unknown func #{id}: bpfjet does not know this helper"))?;
    match unavailable_reason(prog_type, id, perfmon) {
        Some(why) => Err(format!(
            "unknown func {}#{id}: {why} (program type {prog_type})",
            p.name
        )),
        None => Ok(p),
    }
}

/// Every helper bpfjet knows, for every program type, by kernel id
/// ([`helper_proto_for`] says which a type may call).
pub fn helper_protos() -> &'static [HelperProto] {
    HELPERS
}

/// The prototype of helper `id`, if bpfjet knows it.
pub fn helper_proto(id: i32) -> Option<&'static HelperProto> {
    HELPERS.iter().find(|p| p.id == id)
}

/// The helper's name for messages (`bpf_map_lookup_elem`), `None` if unknown.
pub fn helper_name(id: i32) -> Option<&'static str> {
    helper_proto(id).map(|p| p.name)
}

/// What a kfunc argument must be (the BTF-level kinds the kernel derives
/// from a kfunc's prototype).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KfuncArg {
    /// Not an argument.
    None,
    /// Any scalar (pointers are refused: a kfunc scalar is never a pointer).
    Scalar,
    /// The program's context, unmodified (`struct xdp_md *`).
    Ctx,
    /// Readable memory whose size is the next argument (`void *p, u32 p__sz`).
    Mem,
    /// Writable memory whose size is the next argument (`void *p, u32 p__sz`
    /// that the kfunc writes, e.g. a table of counters).
    MutMem,
    /// A pointer to a fixed-size object the kfunc reads
    /// (`const struct key16 *k`).
    InMem(u32),
    /// The size of the preceding `Mem` argument, a bounded scalar `> 0`.
    Size,
    /// A pointer to a fixed-size object the kfunc writes (`__u64 *out`).
    OutMem(u32),
    /// A non-NULL pointer into a map value.
    MapValue,
    /// Memory acquired from an `acquire` kfunc, unmodified; released by this call.
    Release,
    /// A constant the verifier knows, `> 0` and at most [`MAX_KNOWN_SIZE`]:
    /// the size of the memory the kfunc returns (`p__szk` in the kernel's
    /// naming), see [`KfuncRet::MemOfArgSize`].
    KnownSize,
    /// A referenced, non-NULL pointer to an object of the library type
    /// named `ty` (one of `VerifyEnv::module_types`) at offset 0; the call
    /// ends that reference when `release` (`module_kptr`).
    Module { ty: &'static str, release: bool },
}

/// Largest [`KfuncArg::KnownSize`] (bytes a kfunc may hand out as one object).
pub const MAX_KNOWN_SIZE: u64 = 1 << 16;

/// What a kfunc returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KfuncRet {
    Integer,
    Void,
    /// `size` bytes of memory (NULL too when the kfunc is `ret_null`).
    Mem(u32),
    /// As many bytes of memory as the constant argument `n` (1-based, a
    /// [`KfuncArg::KnownSize`]) says (NULL too when the kfunc is `ret_null`).
    MemOfArgSize(u8),
    /// A pointer to an object of the library type named here (one of
    /// `VerifyEnv::module_types`): readable only at the fields the library
    /// exposes, never writable; a reference when the kfunc is `acquire`.
    Module(&'static str),
}

/// Kernel function flags (`KF_*` in the kernel's kfunc id sets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KfuncFlags {
    /// `KF_ACQUIRE`: the returned memory is a reference the program must
    /// pass to a `release` kfunc on every path.
    pub acquire: bool,
    /// `KF_RET_NULL`: the result may be NULL and must be checked.
    pub ret_null: bool,
    /// Device-bound XDP metadata kfuncs: the kernel only accepts them in
    /// programs loaded for one device (`prog_ifindex` + `BPF_F_XDP_DEV_BOUND_ONLY`),
    /// which bpfjet programs never are.
    pub dev_bound: bool,
}

/// A kernel function prototype, keyed by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KfuncProto {
    pub name: &'static str,
    pub args: [KfuncArg; 5],
    pub ret: KfuncRet,
    pub flags: KfuncFlags,
}

const DEV_BOUND: KfuncFlags = KfuncFlags {
    acquire: false,
    ret_null: false,
    dev_bound: true,
};

/// The kernel's XDP kfuncs. bpfjet has no kfuncs of its own yet; a library
/// adds its prototypes through `VerifyEnv::extra_kfuncs`.
static KFUNCS: &[KfuncProto] = &[
    KfuncProto {
        name: "bpf_xdp_metadata_rx_timestamp",
        args: [
            KfuncArg::Ctx,
            KfuncArg::OutMem(8),
            KfuncArg::None,
            KfuncArg::None,
            KfuncArg::None,
        ],
        ret: KfuncRet::Integer,
        flags: DEV_BOUND,
    },
    KfuncProto {
        name: "bpf_xdp_metadata_rx_hash",
        args: [
            KfuncArg::Ctx,
            KfuncArg::OutMem(4),
            KfuncArg::OutMem(4),
            KfuncArg::None,
            KfuncArg::None,
        ],
        ret: KfuncRet::Integer,
        flags: DEV_BOUND,
    },
    KfuncProto {
        name: "bpf_xdp_metadata_rx_vlan_tag",
        args: [
            KfuncArg::Ctx,
            KfuncArg::OutMem(2),
            KfuncArg::OutMem(2),
            KfuncArg::None,
            KfuncArg::None,
        ],
        ret: KfuncRet::Integer,
        flags: DEV_BOUND,
    },
];

/// Every kfunc bpfjet knows by itself.
pub fn kfunc_protos() -> &'static [KfuncProto] {
    KFUNCS
}

pub fn kfunc_proto(name: &str) -> Option<&'static KfuncProto> {
    KFUNCS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_named() {
        let mut ids: Vec<i32> = HELPERS.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert_eq!(helper_name(1), Some("bpf_map_lookup_elem"));
        assert_eq!(helper_name(190), Some("bpf_xdp_store_bytes"));
        assert!(helper_proto(44).is_some_and(|p| p.changes_pkt_data));
    }

    #[test]
    fn sizes_follow_memory() {
        for p in HELPERS {
            for (i, a) in p.args.iter().enumerate() {
                if matches!(a, ConstSize | ConstSizeOrZero) {
                    assert!(
                        i > 0 && matches!(p.args[i - 1], PtrToMem { .. } | PtrToUninitMem),
                        "{}",
                        p.name
                    );
                }
            }
        }
    }
}
