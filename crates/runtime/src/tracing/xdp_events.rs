//! The XDP tracepoints a data plane fires, for the `tp_btf` programs a
//! control plane attached to them (xdp-monitor's and xdp-bench's
//! statistics, `SEC("tp_btf/xdp_exception")`):
//!
//! - `xdp_exception(dev, xdp, act)`: the program returned `XDP_ABORTED` or
//!   an action past `XDP_REDIRECT` (which the kernel warns about and
//!   traces the same way), or bpfjet stopped it (a fault, which the data
//!   plane counts as aborted);
//! - `xdp_redirect(dev, xdp, tgt, err, map_type, map_id, index)`: a
//!   redirect the data plane delivers: `bpf_redirect(ifindex)` as map type
//!   `BPF_MAP_TYPE_UNSPEC`, map id `INT_MAX`, index the ifindex and `tgt`
//!   NULL (the kernel's generic-XDP path), `bpf_redirect_map` with the
//!   map's type, id and key;
//! - `xdp_redirect_err(...)`, the same arguments and `err` < 0: a redirect
//!   to an interface that does not exist (`-EINVAL`) or is down
//!   (`-ENETDOWN`), as the kernel's `xdp_do_generic_redirect` checks, or
//!   to an XSKMAP or CPUMAP entry, which no consumer behind the data
//!   plane serves (`-EOPNOTSUPP`: the frame is dropped).
//!
//! Arguments that point to kernel structs (`struct net_device`, `struct
//! bpf_prog`) point to objects laid out as the running kernel lays them
//! out (`bpfjet_obj::tp_btf`), zero but for the fields bpfjet fills: the
//! device's `ifindex` and `name`, the program's `type`,
//! `expected_attach_type`, `len` and `tag`. The verifier lets programs read
//! those fields only, and `bpf_probe_read_kernel` reads them too
//! ([`is_filled`]).
//!
//! The same events fire the `tracepoint/xdp/NAME` programs linked through
//! perf events (bpftrace's `tracepoint:xdp:xdp_exception`): their context
//! is the tracepoint's record as tracefs describes it
//! (`/sys/kernel/tracing/events/xdp/NAME/format`: `prog_id`, `act`,
//! `ifindex`, and for redirects `err`, `to_ifindex`, `map_id`,
//! `map_index`), filled as the kernel's `TP_fast_assign` does.
//!
//! The set of programs is replaced whole when the control plane's links
//! change ([`XdpEvents::publish`]); a worker reads it with one atomic load
//! per packet that fires an event.

use super::{ProbeSite, ProgId, TracingObject};
use crate::worker::{FrameVerdict, RedirectTo, RedirectVia};
use crate::xdp::action;
use bpfjet_obj::{KernelStruct, ProgKind, TpArg, TpBtfProto};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A `tp_btf` program's context: the tracepoint's arguments, one `u64`
/// each (`MAX_BPF_FUNC_ARGS` slots).
pub type TpBtfArgs = [u64; 12];

/// Where event programs run: no function, no registers.
const AT: ProbeSite = ProbeSite {
    func_ip: 0,
    cookie: 0,
    regs: 0,
    ret_at_sp: false,
};

/// `BPF_MAP_TYPE_DEVMAP`, `BPF_MAP_TYPE_DEVMAP_HASH`.
const DEVMAP: u32 = 14;
const DEVMAP_HASH: u32 = 25;

const EINVAL: i64 = 22;
const ENETDOWN: i64 = 100;
const EOPNOTSUPP: i64 = 95;

/// The running kernel's layouts of the structs the fired events point to.
#[derive(Debug)]
struct Layouts {
    net_device: KernelStruct,
    bpf_prog: KernelStruct,
    xdp_buff: KernelStruct,
    xdp_rxq_info: KernelStruct,
}

/// The kernel's prototypes of the fired events, checked against the
/// argument order bpfjet fills: another kernel's is an error, not a
/// misread argument.
fn layouts() -> Result<&'static Layouts, String> {
    static LAYOUTS: OnceLock<Result<Layouts, String>> = OnceLock::new();
    LAYOUTS
        .get_or_init(|| {
            let exception = TpBtfProto::running_kernel("xdp_exception")?;
            let object = |p: &TpBtfProto, i: usize, name: &str| match p.args.get(i) {
                Some(TpArg::Object(s)) if p.object(*s).is_some_and(|s| s.name == name) => {
                    Ok(p.object(*s).cloned().unwrap_or_else(|| unreachable!()))
                }
                _ => Err(format!(
                    "the kernel's {} has no struct {name} * as argument {}: bpfjet fires \
                     the 6.x prototypes",
                    p.name,
                    i + 1
                )),
            };
            let scalars = |p: &TpBtfProto, from: usize, n: usize| {
                let scalar = |a: &TpArg| matches!(a, TpArg::Scalar | TpArg::OpaquePointer);
                if p.args.len() == n && p.args[from..].iter().all(scalar) {
                    Ok(())
                } else {
                    Err(format!(
                        "the kernel's {} takes {} arguments, bpfjet fires it with {n}",
                        p.name,
                        p.args.len()
                    ))
                }
            };
            scalars(&exception, 2, 3)?;
            for name in ["xdp_redirect", "xdp_redirect_err"] {
                let p = TpBtfProto::running_kernel(name)?;
                object(&p, 0, "net_device")?;
                object(&p, 1, "bpf_prog")?;
                scalars(&p, 2, 7)?;
            }
            // An fentry/fexit program's `struct xdp_buff` and what its
            // filled pointers lead to.
            let entry = TpBtfProto::running_kernel_xdp_entry("xdp", false)?;
            let named = |name: &str| {
                entry
                    .structs
                    .iter()
                    .find(|s| s.name == name)
                    .cloned()
                    .ok_or_else(|| format!("the kernel's xdp_buff leads to no struct {name}"))
            };
            Ok(Layouts {
                net_device: object(&exception, 0, "net_device")?,
                bpf_prog: object(&exception, 1, "bpf_prog")?,
                xdp_buff: named("xdp_buff")?,
                xdp_rxq_info: named("xdp_rxq_info")?,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A kernel object bpfjet fills: zeroed memory of the struct's size, 8-byte
/// aligned, with values at the filled fields.
#[derive(Debug)]
pub struct KernelObject {
    buf: Box<[u64]>,
    ty: KernelStruct,
}

impl KernelObject {
    fn new(ty: &KernelStruct) -> KernelObject {
        KernelObject {
            buf: vec![0u64; (ty.size as usize).div_ceil(8).max(1)].into_boxed_slice(),
            ty: ty.clone(),
        }
    }

    /// Field `name` (when the kernel's struct has it) holds `bytes`,
    /// truncated or zero-padded to the field's size.
    fn set(&mut self, name: &str, bytes: &[u8]) {
        let Some(f) = self.ty.field(name) else {
            return;
        };
        let (off, size) = (f.off as usize, f.size as usize);
        // SAFETY: the buffer holds `ty.size` bytes and the field lies in
        // the struct (its offset and size come from the same BTF).
        let mem = unsafe {
            std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast::<u8>(), self.buf.len() * 8)
        };
        let Some(dst) = mem.get_mut(off..off + size) else {
            return;
        };
        dst.fill(0);
        let n = bytes.len().min(size);
        dst[..n].copy_from_slice(&bytes[..n]);
    }

    /// `struct net_device` of interface `ifindex`.
    fn net_device(ty: &KernelStruct, ifindex: u32) -> KernelObject {
        let mut o = KernelObject::new(ty);
        o.set("ifindex", &(ifindex as i32).to_ne_bytes());
        o.set("name", ifname(ifindex).as_bytes());
        o
    }

    fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    /// Bytes of filled field from `addr` to the field's end (0: `addr` is
    /// in no filled field).
    fn filled_left(&self, addr: u64) -> u64 {
        let base = self.addr();
        self.ty
            .fields
            .iter()
            .map(|f| (base + u64::from(f.off), u64::from(f.size)))
            .filter(|&(start, size)| addr >= start && addr < start + size)
            .map(|(start, size)| start + size - addr)
            .max()
            .unwrap_or(0)
    }
}

fn ifname(ifindex: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: a buffer of IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// What the `struct bpf_prog` of a data plane's program holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgFacts {
    /// Its id (tracefs records carry it).
    pub id: u32,
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// Instructions.
    pub len: u32,
    pub tag: [u8; 8],
}

/// A redirect target's device state, as `xdp_do_generic_redirect` checks
/// it, looked up again after [`TARGET_REFRESH`].
#[derive(Debug)]
struct Target {
    object: KernelObject,
    /// `Err(errno)`: no such device, or it is down.
    state: Result<(), i64>,
    checked: Instant,
}

/// How long a redirect target's existence and up state are taken as
/// known: a lookup per packet would be a system call per packet.
const TARGET_REFRESH: Duration = Duration::from_millis(100);

fn device_state(ifindex: u32) -> Result<(), i64> {
    let name = ifname(ifindex);
    if name.is_empty() {
        return Err(-EINVAL);
    }
    let flags = std::fs::read_to_string(format!("/sys/class/net/{name}/flags"))
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok());
    match flags {
        Some(f) if f & libc::IFF_UP as u32 == 0 => Err(-ENETDOWN),
        _ => Ok(()),
    }
}

/// The tracefs record of the `xdp` tracepoints bpfjet fires: the common
/// header, then `xdp_exception`'s fields, then the redirects' (an
/// exception's record ends at `err`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpTpRecord {
    pub common_type: u16,
    pub common_flags: u8,
    pub common_preempt_count: u8,
    pub common_pid: i32,
    pub prog_id: i32,
    pub act: u32,
    pub ifindex: i32,
    pub err: i32,
    pub to_ifindex: i32,
    pub map_id: u32,
    pub map_index: i32,
    _pad: u32,
}

/// The fields bpfjet writes, at their offsets in [`XdpTpRecord`], as the
/// kernel's format files must list them.
const RECORD_FIELDS: &[(&str, usize)] = &[
    ("prog_id", 8),
    ("act", 12),
    ("ifindex", 16),
    ("err", 20),
    ("to_ifindex", 24),
    ("map_id", 28),
    ("map_index", 32),
];

/// An `xdp` tracepoint's id and record size from its tracefs format,
/// checked against [`XdpTpRecord`]'s layout.
pub fn tracefs_event(name: &str) -> Result<(u16, u64), String> {
    let format = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|root| std::fs::read_to_string(format!("{root}/events/xdp/{name}/format")).ok())
        .ok_or_else(|| format!("tracepoint xdp/{name}: no tracefs format file"))?;
    let mut id = None;
    let mut end = 0u64;
    for line in format.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse::<u16>().ok();
        }
        let Some(decl) = line.strip_prefix("field:") else {
            continue;
        };
        let num = |key: &str| -> Option<u64> {
            let at = line.find(key)? + key.len();
            line[at..].split(';').next()?.trim().parse().ok()
        };
        let (Some(off), Some(size)) = (num("offset:"), num("size:")) else {
            continue;
        };
        end = end.max(off + size);
        let field = decl.split(';').next().unwrap_or("");
        let field = field.rsplit(' ').next().unwrap_or("");
        if let Some((_, at)) = RECORD_FIELDS.iter().find(|(f, _)| *f == field) {
            if *at as u64 != off || size != 4 {
                return Err(format!(
                    "tracepoint xdp/{name}: field {field} is at offset {off} size {size},                      bpfjet writes it at {at} size 4"
                ));
            }
        }
    }
    let id = id.ok_or_else(|| format!("tracepoint xdp/{name}: no ID in its format"))?;
    if end > std::mem::size_of::<XdpTpRecord>() as u64 {
        return Err(format!(
            "tracepoint xdp/{name}: a {end}-byte record, larger than bpfjet's"
        ));
    }
    Ok((id, end))
}

/// One worker's kernel objects: its device's, its program's, and those of
/// the devices it redirects to.
#[derive(Debug)]
pub struct EventSite {
    dev: KernelObject,
    prog: KernelObject,
    targets: BTreeMap<u32, Target>,
    ifindex: u32,
    prog_id: u32,
    /// The frame as fentry/fexit programs see it: `struct xdp_buff` (its
    /// `data`, `data_end`, `data_meta`, `data_hard_start` set per run),
    /// its `rxq` (`dev`, `queue_index`).
    buff: KernelObject,
    rxq: KernelObject,
    /// The packet `buff` describes while a run may read it (`bpf_xdp_output`).
    packet: Cell<(u64, u64)>,
}

impl EventSite {
    /// The site of a worker receiving on `ifindex` with a program of
    /// `prog`; an error when the running kernel's BTF lacks the events.
    pub fn new(ifindex: u32, rx_queue: u32, prog: ProgFacts) -> Result<EventSite, String> {
        let l = layouts()?;
        let mut p = KernelObject::new(&l.bpf_prog);
        p.set("type", &prog.prog_type.to_ne_bytes());
        p.set(
            "expected_attach_type",
            &prog.expected_attach_type.to_ne_bytes(),
        );
        p.set("len", &prog.len.to_ne_bytes());
        p.set("tag", &prog.tag);
        let dev = KernelObject::net_device(&l.net_device, ifindex);
        let mut rxq = KernelObject::new(&l.xdp_rxq_info);
        rxq.set("dev", &dev.addr().to_ne_bytes());
        rxq.set("queue_index", &rx_queue.to_ne_bytes());
        let mut buff = KernelObject::new(&l.xdp_buff);
        buff.set("rxq", &rxq.addr().to_ne_bytes());
        Ok(EventSite {
            dev,
            prog: p,
            targets: BTreeMap::new(),
            ifindex,
            prog_id: prog.id,
            buff,
            rxq,
            packet: Cell::new((0, 0)),
        })
    }

    /// `buff` describes the packet `[data, data_end)` of the buffer at
    /// `hard_start`.
    fn set_packet(&mut self, hard_start: u64, data: u64, data_end: u64) {
        self.buff.set("data", &data.to_ne_bytes());
        self.buff.set("data_meta", &data.to_ne_bytes());
        self.buff.set("data_end", &data_end.to_ne_bytes());
        self.buff.set("data_hard_start", &hard_start.to_ne_bytes());
        self.packet.set((data, data_end));
    }

    fn target(&mut self, ifindex: u32) -> &Target {
        let now = Instant::now();
        let ty = &self.dev.ty;
        let t = self.targets.entry(ifindex).or_insert_with(|| Target {
            object: KernelObject::net_device(ty, ifindex),
            state: device_state(ifindex),
            checked: now,
        });
        if now.duration_since(t.checked) > TARGET_REFRESH {
            t.state = device_state(ifindex);
            t.object = KernelObject::net_device(ty, ifindex);
            t.checked = now;
        }
        t
    }
}

/// What a program's link says beyond its section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventLink {
    /// A tracepoint's tracefs id and record size ([`tracefs_event`]).
    pub tracefs: Option<(u16, u64)>,
    /// The XDP program an fentry/fexit program traces.
    pub target_prog: u32,
}

/// The programs attached to the fired events, on one loaded object.
pub struct EventPrograms {
    /// fentry/fexit programs on an XDP program: (program, its target's id).
    fentry: Vec<(ProgId, u32)>,
    fexit: Vec<(ProgId, u32)>,
    object: TracingObject,
    exception: Vec<ProgId>,
    redirect: Vec<ProgId>,
    redirect_err: Vec<ProgId>,
    /// `tracepoint/xdp/NAME` programs, with the event's tracefs id.
    tp_exception: (u16, Vec<ProgId>),
    tp_redirect: (u16, Vec<ProgId>),
    tp_redirect_err: (u16, Vec<ProgId>),
}

impl EventPrograms {
    /// The `tp_btf` and `tracepoint/xdp` programs of `object` by the event
    /// they attach to; programs of events bpfjet never fires are loaded
    /// and never run. `tracefs` gives a tracepoint program's event id and
    /// record size ([`tracefs_event`], as its link recorded them).
    pub fn new(
        object: TracingObject,
        links: impl Fn(&str) -> Option<EventLink>,
    ) -> Result<EventPrograms, String> {
        let mut e = EventPrograms {
            fentry: Vec::new(),
            fexit: Vec::new(),
            exception: Vec::new(),
            redirect: Vec::new(),
            redirect_err: Vec::new(),
            tp_exception: (0, Vec::new()),
            tp_redirect: (0, Vec::new()),
            tp_redirect_err: (0, Vec::new()),
            object,
        };
        for (id, p) in e.object.programs().iter().enumerate() {
            match p.kind() {
                ProgKind::TpBtf { name } => {
                    layouts()?;
                    match name.as_str() {
                        "xdp_exception" => e.exception.push(id),
                        "xdp_redirect" => e.redirect.push(id),
                        "xdp_redirect_err" => e.redirect_err.push(id),
                        _ => {}
                    }
                }
                ProgKind::Tracepoint { category, name } if category == "xdp" => {
                    let list = match name.as_str() {
                        "xdp_exception" => &mut e.tp_exception,
                        "xdp_redirect" => &mut e.tp_redirect,
                        "xdp_redirect_err" => &mut e.tp_redirect_err,
                        _ => continue,
                    };
                    // The kernel's attach-time check of the furthest
                    // context byte against the record's size.
                    let (event, size) =
                        links(p.name()).and_then(|l| l.tracefs).ok_or_else(|| {
                            format!(
                                "program {}: tracepoint xdp/{name} without its format",
                                p.name()
                            )
                        })?;
                    p.check_ctx_size(size)?;
                    list.0 = event;
                    list.1.push(id);
                }
                ProgKind::XdpTrace { exit, .. } => {
                    layouts()?;
                    let target = links(p.name()).map_or(0, |l| l.target_prog);
                    if *exit {
                        e.fexit.push((id, target));
                    } else {
                        e.fentry.push((id, target));
                    }
                }
                _ => {}
            }
        }
        Ok(e)
    }

    pub fn object(&self) -> &TracingObject {
        &self.object
    }

    /// Whether fentry or fexit programs trace the program of `site`.
    #[inline]
    pub fn traces(&self, site: &EventSite) -> bool {
        let of = |list: &[(ProgId, u32)]| list.iter().any(|&(_, t)| t == site.prog_id);
        of(&self.fentry) || of(&self.fexit)
    }

    /// Runs the fentry programs of the site's program on the packet
    /// `[data, data_end)` of the buffer at `hard_start`, before the
    /// program runs.
    pub fn entry(&self, site: &mut EventSite, hard_start: u64, data: u64, data_end: u64) {
        if self.fentry.is_empty() {
            return;
        }
        site.set_packet(hard_start, data, data_end);
        let target = site.prog_id;
        let progs = self
            .fentry
            .iter()
            .filter(move |&&(_, t)| t == target)
            .map(|&(p, _)| p);
        self.run_each(progs, site, |site, args| args[0] = site.buff.addr());
    }

    /// Runs the fexit programs of the site's program after it returned
    /// `ret`, the packet now `[data, data_end)`.
    pub fn exit(&self, site: &mut EventSite, ret: u32, hard_start: u64, data: u64, data_end: u64) {
        if self.fexit.is_empty() {
            return;
        }
        site.set_packet(hard_start, data, data_end);
        let target = site.prog_id;
        let progs = self
            .fexit
            .iter()
            .filter(move |&&(_, t)| t == target)
            .map(|&(p, _)| p);
        self.run_each(progs, site, |site, args| {
            args[..2].copy_from_slice(&[site.buff.addr(), u64::from(ret)]);
        });
    }

    /// Fires the events of one run's outcome (`Err`: bpfjet stopped the
    /// program, which the data plane counts as aborted).
    #[inline]
    pub fn fire(&self, site: &mut EventSite, outcome: Result<&FrameVerdict, ()>) {
        let action = match outcome {
            Ok(v) => v.action,
            Err(()) => action::ABORTED,
        };
        if action == action::REDIRECT {
            if let Ok(v) = outcome {
                self.redirected(site, v);
            }
        } else if action == action::ABORTED || action > action::REDIRECT {
            self.run_each(self.exception.iter().copied(), site, |site, args| {
                args[..3].copy_from_slice(&[site.dev.addr(), site.prog.addr(), u64::from(action)]);
            });
            if !self.tp_exception.1.is_empty() {
                let rec = XdpTpRecord {
                    prog_id: site.prog_id as i32,
                    act: action,
                    ifindex: site.ifindex as i32,
                    ..XdpTpRecord::default()
                };
                self.run_records(&self.tp_exception, rec);
            }
        }
    }

    /// Runs tracefs-record programs on `rec` of event `(id, progs)`.
    fn run_records(&self, (id, progs): &(u16, Vec<ProgId>), mut rec: XdpTpRecord) {
        rec.common_type = *id;
        rec.common_pid = super::current::tgid_tid().1 as i32;
        for &p in progs {
            let mut r = rec;
            self.object.run_tracepoint_record(p, &mut r, &AT);
        }
    }

    #[cold]
    fn redirected(&self, site: &mut EventSite, v: &FrameVerdict) {
        if self.redirect.is_empty()
            && self.redirect_err.is_empty()
            && self.tp_redirect.1.is_empty()
            && self.tp_redirect_err.1.is_empty()
        {
            return;
        }
        // A redirect with no target recorded (an engine that reports none)
        // has nothing to say.
        let (Some(to), Some(via)) = (v.redirect, v.via) else {
            return;
        };
        // An entry's program runs after the redirect: the event is the
        // device's.
        let to = match to {
            RedirectTo::EntryProgram { ifindex, .. } => RedirectTo::Ifindex(ifindex),
            to => to,
        };
        let (err, tgt) = match to {
            RedirectTo::Ifindex(i) | RedirectTo::EntryProgram { ifindex: i, .. } => {
                let t = site.target(i);
                let tgt = if via == RedirectVia::ifindex(i) {
                    0
                } else {
                    t.object.addr()
                };
                (t.state.err().unwrap_or(0), tgt)
            }
            RedirectTo::Broadcast { .. } => (0, 0),
            RedirectTo::Xsk(_) | RedirectTo::Cpu(_) => (-EOPNOTSUPP, 0),
        };
        let (progs, records) = if err == 0 {
            (&self.redirect, &self.tp_redirect)
        } else {
            (&self.redirect_err, &self.tp_redirect_err)
        };
        if !records.1.is_empty() {
            // The kernel's TP_fast_assign: a devmap's target device, a
            // bpf_redirect's ifindex (its map index 0).
            let devmap = via.map_type == DEVMAP || via.map_type == DEVMAP_HASH;
            let (to_ifindex, map_index) = match to {
                RedirectTo::Ifindex(i) if devmap => (i, via.index),
                _ if via == RedirectVia::ifindex(via.index) => (via.index, 0),
                _ => (0, via.index),
            };
            let rec = XdpTpRecord {
                prog_id: site.prog_id as i32,
                act: action::REDIRECT,
                ifindex: site.ifindex as i32,
                err: err as i32,
                to_ifindex: to_ifindex as i32,
                map_id: via.map_id,
                map_index: map_index as i32,
                ..XdpTpRecord::default()
            };
            self.run_records(records, rec);
        }
        self.run_each(progs.iter().copied(), site, |site, args| {
            args[..7].copy_from_slice(&[
                site.dev.addr(),
                site.prog.addr(),
                tgt,
                err as u64,
                u64::from(via.map_type),
                u64::from(via.map_id),
                u64::from(via.index),
            ]);
        });
    }

    /// Runs `progs` (none: nothing is filled) on the arguments `fill`
    /// writes, the site's objects readable meanwhile.
    fn run_each(
        &self,
        progs: impl Iterator<Item = ProgId>,
        site: &mut EventSite,
        fill: impl FnOnce(&EventSite, &mut TpBtfArgs),
    ) {
        let mut progs = progs.peekable();
        if progs.peek().is_none() {
            return;
        }
        let mut args: TpBtfArgs = [0; 12];
        fill(site, &mut args);
        let _exposed = Exposed::new(site);
        for p in progs {
            self.object.run_tp_btf(p, &mut args, &AT);
        }
    }
}

/// The event programs a data plane runs now, replaced whole.
#[derive(Default)]
pub struct XdpEvents {
    current: AtomicPtr<EventPrograms>,
}

impl XdpEvents {
    pub fn new() -> XdpEvents {
        XdpEvents::default()
    }

    /// From the next packet on, run `programs` (None: none). The set
    /// replaced is leaked: a worker may be running it, and sets change
    /// only when the control plane links or unlinks a program.
    pub fn publish(&self, programs: Option<EventPrograms>) {
        let new = programs.map_or(std::ptr::null_mut(), |p| Box::into_raw(Box::new(p)));
        self.current.swap(new, Ordering::AcqRel);
    }

    /// The programs to run, if any.
    #[inline]
    pub fn get(&self) -> Option<&EventPrograms> {
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: published sets are never freed (see `publish`).
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

thread_local! {
    /// The site whose objects the current event run may read with
    /// `bpf_probe_read_kernel` (null outside one).
    static EXPOSED: Cell<*const EventSite> = const { Cell::new(std::ptr::null()) };
}

/// Marks a site's objects readable for the duration of a run.
struct Exposed;

impl Exposed {
    fn new(site: &EventSite) -> Exposed {
        EXPOSED.with(|c| c.set(site));
        Exposed
    }
}

impl Drop for Exposed {
    fn drop(&mut self) {
        EXPOSED.with(|c| c.set(std::ptr::null()));
    }
}

/// Bytes of a filled field of the running event's objects from `addr` to
/// the field's end (0 outside them).
pub(crate) fn filled_left(addr: u64) -> u64 {
    EXPOSED.with(|c| {
        let p = c.get();
        if p.is_null() {
            return 0;
        }
        // SAFETY: set only while the site is borrowed by the run.
        let site = unsafe { &*p };
        [&site.dev, &site.prog, &site.buff, &site.rxq]
            .into_iter()
            .chain(site.targets.values().map(|t| &t.object))
            .map(|o| o.filled_left(addr))
            .max()
            .unwrap_or(0)
    })
}

/// The packet `[data, data_end)` of the `struct xdp_buff` at `buff`, when
/// it is the running fentry/fexit program's (`bpf_xdp_output`'s context
/// argument).
pub(crate) fn xdp_buff_packet(buff: u64) -> Option<(u64, u64)> {
    EXPOSED.with(|c| {
        let p = c.get();
        if p.is_null() {
            return None;
        }
        // SAFETY: set only while the site is borrowed by the run.
        let site = unsafe { &*p };
        (site.buff.addr() == buff).then(|| site.packet.get())
    })
}

/// Whether `[addr, addr + len)` lies in one filled field of the running
/// event's objects.
pub(crate) fn is_filled(addr: u64, len: u64) -> bool {
    len > 0 && filled_left(addr) >= len
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfjet_obj::KernelField;

    #[test]
    fn objects_hold_the_filled_fields_only() {
        let ty = KernelStruct {
            name: "net_device".into(),
            size: 100,
            fields: vec![
                KernelField {
                    name: "ifindex".into(),
                    off: 8,
                    size: 4,
                    object: None,
                },
                KernelField {
                    name: "name".into(),
                    off: 16,
                    size: 16,
                    object: None,
                },
            ],
        };
        let o = KernelObject::net_device(&ty, 1);
        // SAFETY: the object's buffer holds at least 100 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(o.addr() as *const u8, 100) };
        assert_eq!(&bytes[8..12], &1i32.to_ne_bytes());
        // ifindex 1 is the loopback device.
        assert_eq!(&bytes[16..18], b"lo");
        assert!(bytes[..8].iter().all(|&b| b == 0));
        assert_eq!(o.filled_left(o.addr() + 9), 3);
        assert_eq!(o.filled_left(o.addr() + 12), 0);
        assert_eq!(o.filled_left(o.addr() + 20), 12);
    }
}
