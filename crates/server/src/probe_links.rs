//! Links of tracing programs to probes, and the object a traced process
//! runs from them.
//!
//! A control plane under `bpfjet exec` links a bpfjet kprobe-type or
//! tracepoint program to a stand-in perf event ([`crate::perf_events`])
//! with `BPF_LINK_CREATE` (`BPF_PERF_EVENT`), or a raw-tracepoint program
//! to `sys_enter`/`sys_exit` with `BPF_RAW_TRACEPOINT_OPEN`. The link is an
//! ordinary link record (`<run>/<instance>/links/<id>`) with the probe in
//! it ([`ProbeLink`]): it lasts while the link does (its last fd closing
//! with no pin frees it, as the kernel's), and holds its program.
//!
//! A process started by `bpfjet trace --instance NAME` reads the live
//! probe links of the instance once, at its start ([`traced_object`]): one
//! program per link, on the instance's maps, attached where the link says.

use crate::backend::BpfjetBackend;
use crate::links::{dword, word, LinkRecord};
use crate::namespace::{Kind, Namespace};
use crate::objects::{Obj, ProgRecord};
use crate::perf_events::ProbePoint;
use crate::progs;
use bpfjet_maps::Map;
use bpfjet_obj::{Object, ProgKind, Program};
use bpfjet_sys::Errno;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// `BPF_PERF_EVENT` (enum bpf_attach_type).
pub const BPF_PERF_EVENT: u32 = 41;
/// `BPF_LINK_TYPE_RAW_TRACEPOINT`, `BPF_LINK_TYPE_PERF_EVENT`.
pub const BPF_LINK_TYPE_RAW_TRACEPOINT: u32 = 1;
pub const BPF_LINK_TYPE_PERF_EVENT: u32 = 7;
/// `BPF_LINK_TYPE_TRACING`: fentry/fexit links.
pub const BPF_LINK_TYPE_TRACING: u32 = 2;

/// The probe a link attaches its program to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeLink {
    pub point: ProbePoint,
    /// The process it is for; -1: every process.
    pub pid: i32,
    /// `bpf_get_attach_cookie()`'s value.
    pub cookie: u64,
    /// The perf event fd it was linked through: (pid, fd, inode of the
    /// stand-in), which `BPF_TASK_FD_QUERY` of that fd answers with.
    #[serde(default)]
    pub event: Option<(u32, i32, u64)>,
    /// An `xdp` tracepoint's tracefs id and record size, read by the
    /// control plane's process (a data plane may run where tracefs is not
    /// mounted).
    #[serde(default)]
    pub tracefs: Option<(u16, u64)>,
}

/// The inode of this process's fd `fd` (what `/proc/PID/fd/N` leads to).
pub(crate) fn fd_inode(fd: i32) -> u64 {
    // SAFETY: fstat of an fd into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } == 0 {
        st.st_ino
    } else {
        0
    }
}

impl BpfjetBackend {
    /// A bpfjet tracing program behind `fd` (kprobe, tracepoint or raw
    /// tracepoint type). None: not a bpfjet program of such a type.
    pub(crate) fn tracing_prog(&self, fd: u32) -> Option<Arc<crate::objects::ProgObj>> {
        match self.obj(fd)? {
            Obj::Prog(p) if progs::tracing_section(&p.rec).is_some() => Some(p),
            _ => None,
        }
    }

    /// `BPF_LINK_CREATE` of a bpfjet tracing program.
    pub(crate) fn probe_link_create(
        &self,
        prog: &crate::objects::ProgObj,
        raw: &[u8],
    ) -> Result<i64, Errno> {
        let (target_fd, attach_type) = (word(raw, 4), word(raw, 8));
        if !prog.rec.tracepoint.is_empty() {
            // The kernel's link_create of a tracing program: the attach
            // type must be the program's; `tracing.cookie` at 24.
            if attach_type != prog.rec.expected_attach_type {
                return Err(Errno::EINVAL);
            }
            // Another target than the load-time one (target_fd,
            // target_btf_id): not served.
            if target_fd != 0 {
                self.warn_once(
                    "BPF_LINK_CREATE of an fentry/fexit program with another target",
                    "bpfjet links it to its load-time target only",
                );
                return Err(Errno::EINVAL);
            }
            let id = self.tp_btf_link(prog, dword(raw, 24))?;
            return self.new_fd(Obj::Link(id));
        }
        if attach_type == crate::uprobe_multi::BPF_TRACE_UPROBE_MULTI {
            return self.uprobe_multi_link_create(prog, raw);
        }
        if attach_type != BPF_PERF_EVENT {
            self.warn_once(
                &format!("BPF_LINK_CREATE of a tracing program with attach type {attach_type}"),
                "bpfjet links tracing programs to perf events (uprobes, system-call tracepoints) \
                 and raw tracepoints, and uprobe-multi links",
            );
            return Err(Errno::EINVAL);
        }
        // The kernel: an uprobe-multi program runs on its own links only.
        if prog.rec.expected_attach_type == crate::uprobe_multi::BPF_TRACE_UPROBE_MULTI {
            return Err(Errno::EINVAL);
        }
        let probe = match self.obj(target_fd) {
            Some(Obj::PerfEvent(p)) => p,
            Some(_) => return Err(Errno::EINVAL),
            None => {
                // No perf event at all (libbpf's perf-link probe passes -1
                // and wants this): the kernel's EBADF.
                if !crate::perf_events::is_kernel_perf_event(target_fd as i32) {
                    return Err(Errno::EBADF);
                }
                self.warn_once(
                    "a bpfjet tracing program linked to a kernel perf event",
                    "bpfjet runs tracing programs in processes: on uprobes, uretprobes and the \
                     tracepoints of system calls, not on kprobes or other kernel events",
                );
                return Err(Errno::EINVAL);
            }
        };
        let cookie = dword(raw, 16);
        let id = self.perf_link(prog, &probe, target_fd as i32, cookie)?;
        self.new_fd(Obj::Link(id))
    }

    /// `BPF_RAW_TRACEPOINT_OPEN` of a bpfjet raw-tracepoint program:
    /// `sys_enter` and `sys_exit` are the raw tracepoints of a process.
    pub(crate) fn probe_raw_tracepoint_open(
        &self,
        prog: &crate::objects::ProgObj,
        raw: &[u8],
    ) -> Result<i64, Errno> {
        let name_ptr = dword(raw, 0);
        if !prog.rec.tracepoint.is_empty() {
            // The kernel: a tp_btf program's tracepoint was named at load
            // (attach_btf_id); a name here is EINVAL.
            if name_ptr != 0 {
                return Err(Errno::EINVAL);
            }
            let id = self.tp_btf_link(prog, dword(raw, 16))?;
            return self.new_fd(Obj::Link(id));
        }
        let name = crate::user::cstring(name_ptr, 128)?;
        if name != "sys_enter" && name != "sys_exit" {
            self.warn_once(
                &format!("raw tracepoint {name}"),
                "the raw tracepoints of a process are sys_enter and sys_exit",
            );
            return Err(Errno::EINVAL);
        }
        let cookie = dword(raw, 16);
        let id = self.probe_link_record(
            prog,
            ProbeLink {
                point: ProbePoint::RawTracepoint { name },
                pid: -1,
                cookie,
                event: None,
                tracefs: None,
            },
        )?;
        self.new_fd(Obj::Link(id))
    }

    /// `PERF_EVENT_IOC_SET_BPF` (bcc's and bpftrace's way): a link owned by
    /// the perf event fd, freed when that fd closes. It holds its record
    /// through an fd of its own (so that no sweep takes it for a crashed
    /// holder's) which [`crate::perf_events::PerfProbe::take_link`] gives up.
    pub(crate) fn perf_event_set_bpf(
        &self,
        event: &crate::perf_events::PerfProbe,
        event_fd: i32,
        prog_fd: u32,
    ) -> Result<i64, Errno> {
        let prog = self.tracing_prog(prog_fd).ok_or(Errno::EINVAL)?;
        if prog.rec.expected_attach_type == crate::uprobe_multi::BPF_TRACE_UPROBE_MULTI {
            return Err(Errno::EINVAL);
        }
        let mut link = event.link.lock().unwrap_or_else(|e| e.into_inner());
        if link.is_some() {
            // The kernel: one program per perf event.
            return Err(Errno::EEXIST);
        }
        let id = self.perf_link(&prog, event, event_fd, 0)?;
        let fd = match self.ns.open_record(Kind::Link, id) {
            Ok(fd) => fd,
            Err(e) => {
                self.release_link(id);
                return Err(e);
            }
        };
        crate::holders::hold(fd);
        *link = Some((id, fd));
        Ok(0)
    }

    /// A link of `prog` to perf event `event` (this process's fd
    /// `event_fd`), with `cookie`; for a timer, its thread is started too,
    /// running while the event is enabled.
    fn perf_link(
        &self,
        prog: &crate::objects::ProgObj,
        event: &crate::perf_events::PerfProbe,
        event_fd: i32,
        cookie: u64,
    ) -> Result<u32, Errno> {
        self.check_fits(prog, &event.point)?;
        // The kernel's perf_event_set_bpf_prog: a sampling event only.
        if matches!(event.point, ProbePoint::Timer { period_ns: 0, .. }) {
            return Err(Errno::EINVAL);
        }
        let mut point = event.point.clone();
        // A timer's program, loaded once: to see what it observes, and to
        // run on the timer.
        let mut timer_program = None;
        if let ProbePoint::Timer {
            period_ns, sampled, ..
        } = &mut point
        {
            let caller = self.caller_object(prog, "perf_event")?;
            // A program that observes the interrupted task is a sampling
            // profiler: it runs in the traced processes, each thread
            // sampled every period of its CPU time.
            if let Some(why) = crate::perf_timers::observes_task(&caller.0, caller.1) {
                *sampled = true;
                self.note_once(
                    &format!("perf_event program {} on a cpu-clock event", prog.rec.name),
                    &format!(
                        "runs as a sampling profiler in the processes bpfjet traces for \
                         this instance (bpfjet trace --instance, programs started under \
                         bpfjet exec), each thread sampled every {period_ns} ns of its CPU \
                         time; other processes are not sampled ({why})"
                    ),
                );
            } else {
                timer_program = Some(caller);
            }
        }
        let id = self.probe_link_record(
            prog,
            ProbeLink {
                point: point.clone(),
                pid: event.pid,
                cookie,
                event: Some((std::process::id(), event_fd, fd_inode(event_fd))),
                tracefs: match &point {
                    ProbePoint::Tracepoint { category, name } if category == "xdp" => {
                        bpfjet_runtime::tracing::xdp_events::tracefs_event(name).ok()
                    }
                    _ => None,
                },
            },
        )?;
        if let (ProbePoint::Timer { period_ns, .. }, Some(caller)) = (&point, timer_program) {
            if let Err(e) = self.start_timer(prog, caller, id, *period_ns, event.enabled.clone()) {
                self.release_link(id);
                return Err(e);
            }
        } else if matches!(point, ProbePoint::Timer { .. }) {
            // Sampled in the traced processes: nothing to take now.
        } else if event.pid > 0 {
            // A probe for one process: taken there now (pid_attach.rs).
            let file = match &event.point {
                ProbePoint::Uprobe { path, .. } => Some(path.as_str()),
                _ => None,
            };
            crate::pid_attach::ensure(&self.ns, event.pid, file);
        } else if let ProbePoint::Uprobe { path, .. } = &event.point {
            // Every process: the running ones too, when asked.
            crate::pid_attach::ensure_running(&self.ns, path);
        }
        Ok(id)
    }

    /// The kernel's `perf_event_set_bpf_prog`/raw tracepoint checks:
    /// kprobe-type programs on uprobes, tracepoint programs on
    /// tracepoints, raw-tracepoint programs on raw tracepoints, perf_event
    /// programs on perf events.
    fn check_fits(&self, prog: &crate::objects::ProgObj, point: &ProbePoint) -> Result<(), Errno> {
        if bpfjet_obj::ProgType::from_kernel_id(prog.rec.prog_type) == Some(point.prog_type()) {
            return Ok(());
        }
        self.warn_once(
            &format!("link of program {} to {}", prog.rec.name, point.section()),
            "the program's type does not run there",
        );
        Err(Errno::EINVAL)
    }

    /// A link of a `tp_btf` program to its XDP tracepoint: the instance's
    /// data planes run it from the next batch on (crate::tp_btf).
    fn tp_btf_link(&self, prog: &crate::objects::ProgObj, cookie: u64) -> Result<u32, Errno> {
        use bpfjet_obj::tp_btf::{BPF_TRACE_FENTRY, BPF_TRACE_FEXIT};
        let rec = &prog.rec;
        let point = match rec.expected_attach_type {
            BPF_TRACE_FENTRY | BPF_TRACE_FEXIT => ProbePoint::XdpTrace {
                prog_id: rec.attach_prog_id,
                func: rec.tracepoint.clone(),
                exit: rec.expected_attach_type == BPF_TRACE_FEXIT,
                btf_id: rec.attach_btf_id,
            },
            _ => ProbePoint::TpBtf {
                name: rec.tracepoint.clone(),
            },
        };
        self.new_probe_link(
            prog,
            rec.expected_attach_type,
            Some(ProbeLink {
                point,
                pid: -1,
                cookie,
                event: None,
                tracefs: None,
            }),
            None,
        )
    }

    /// The link record of `probe`. `bpfjet trace` watches the instance's
    /// link generation: a link made while processes run reaches them
    /// (trace-agent late_links.rs).
    fn probe_link_record(
        &self,
        prog: &crate::objects::ProgObj,
        probe: ProbeLink,
    ) -> Result<u32, Errno> {
        self.check_fits(prog, &probe.point)?;
        let attach_type = if matches!(probe.point, ProbePoint::RawTracepoint { .. }) {
            0
        } else {
            BPF_PERF_EVENT
        };
        self.new_probe_link(prog, attach_type, Some(probe), None)
    }

    /// The link record of an uprobe-multi link.
    pub(crate) fn uprobe_multi_link_record(
        &self,
        prog: &crate::objects::ProgObj,
        multi: crate::uprobe_multi::UprobeMulti,
    ) -> Result<u32, Errno> {
        for p in &multi.points {
            self.check_fits(prog, &p.point)?;
        }
        self.new_probe_link(
            prog,
            crate::uprobe_multi::BPF_TRACE_UPROBE_MULTI,
            None,
            Some(multi),
        )
    }

    fn new_probe_link(
        &self,
        prog: &crate::objects::ProgObj,
        attach_type: u32,
        probe: Option<ProbeLink>,
        uprobe_multi: Option<crate::uprobe_multi::UprobeMulti>,
    ) -> Result<u32, Errno> {
        let rec = LinkRecord {
            id: 0,
            prog_id: prog.rec.id,
            ifindex: 0,
            flags: 0,
            target_prog_id: 0,
            target_btf_id: 0,
            target_insn_off: 0,
            attach_type,
            detached: false,
            probe,
            uprobe_multi,
        };
        let (id, _creating) = self.ns.create_record(Kind::Link, |id| {
            let mut r = rec.clone();
            r.id = id;
            serde_json::to_vec(&r).unwrap_or_default()
        })?;
        let _ = bpfjet_runtime::tracing::bump_link_generation(&links_generation(&self.ns));
        Ok(id)
    }
}

/// `enum bpf_perf_event_type` values of link info.
const BPF_PERF_EVENT_UPROBE: u32 = 1;
const BPF_PERF_EVENT_URETPROBE: u32 = 2;
const BPF_PERF_EVENT_TRACEPOINT: u32 = 5;
const BPF_PERF_EVENT_EVENT: u32 = 6;
use crate::perf_events::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};

/// A name into the user's buffer as the kernel's link info copies one
/// (`bpf_copy_to_user`): the length with its NUL reported at `len_off`;
/// no buffer, nothing copied; a buffer without a length `EINVAL`; one too
/// short gets the truncated name and `ENOSPC`.
fn copy_name(
    b: &mut [u8],
    user: &[u8],
    ptr_off: usize,
    len_off: usize,
    name: &str,
) -> Result<(), Errno> {
    let ptr = dword(user, ptr_off);
    let ulen = word(user, len_off) as usize;
    b[ptr_off..ptr_off + 8].copy_from_slice(&ptr.to_ne_bytes());
    b[len_off..len_off + 4].copy_from_slice(&(name.len() as u32 + 1).to_ne_bytes());
    if ptr == 0 {
        return Ok(());
    }
    if ulen == 0 {
        return Err(Errno::EINVAL);
    }
    let n = name.len().min(ulen - 1);
    let mut out = name.as_bytes()[..n].to_vec();
    out.push(0);
    crate::user::write(ptr, &out)?;
    if n < name.len() {
        return Err(Errno::ENOSPC);
    }
    Ok(())
}

/// `struct bpf_link_info` of a probe link, as the kernel fills it: type,
/// id, program id, and the raw tracepoint's name or the perf event's kind,
/// file or tracepoint name (into the caller's buffer, `user` being the
/// info as the caller passed it), offset and cookie.
pub(crate) fn link_info(
    rec: &LinkRecord,
    probe: &ProbeLink,
    size: usize,
    user: &[u8],
) -> Result<(Vec<u8>, usize), Errno> {
    let mut b = vec![0u8; size];
    let ty = match probe.point {
        ProbePoint::RawTracepoint { .. } | ProbePoint::TpBtf { .. } => BPF_LINK_TYPE_RAW_TRACEPOINT,
        ProbePoint::XdpTrace { .. } => BPF_LINK_TYPE_TRACING,
        _ => BPF_LINK_TYPE_PERF_EVENT,
    };
    b[0..4].copy_from_slice(&ty.to_ne_bytes());
    b[4..8].copy_from_slice(&rec.id.to_ne_bytes());
    b[8..12].copy_from_slice(&rec.prog_id.to_ne_bytes());
    match &probe.point {
        // raw_tracepoint { tp_name; tp_name_len; }
        ProbePoint::RawTracepoint { name } | ProbePoint::TpBtf { name } => {
            copy_name(&mut b, user, 16, 24, name)?
        }
        // tracing { attach_type; target_obj_id; target_btf_id; }
        ProbePoint::XdpTrace {
            prog_id,
            exit,
            btf_id,
            ..
        } => {
            let attach = if *exit {
                bpfjet_obj::tp_btf::BPF_TRACE_FEXIT
            } else {
                bpfjet_obj::tp_btf::BPF_TRACE_FENTRY
            };
            b[16..20].copy_from_slice(&attach.to_ne_bytes());
            b[20..24].copy_from_slice(&prog_id.to_ne_bytes());
            b[24..28].copy_from_slice(&btf_id.to_ne_bytes());
        }
        // perf_event { type; union { uprobe { file_name; name_len; offset;
        // cookie; } tracepoint { tp_name; name_len; :32; cookie; } } }
        ProbePoint::Uprobe {
            path,
            retprobe,
            file_offset,
            ..
        } => {
            let kind = if *retprobe {
                BPF_PERF_EVENT_URETPROBE
            } else {
                BPF_PERF_EVENT_UPROBE
            };
            b[16..20].copy_from_slice(&kind.to_ne_bytes());
            copy_name(&mut b, user, 24, 32, path)?;
            b[36..40].copy_from_slice(&(*file_offset as u32).to_ne_bytes());
            b[40..48].copy_from_slice(&probe.cookie.to_ne_bytes());
        }
        ProbePoint::Tracepoint { name, .. } => {
            b[16..20].copy_from_slice(&BPF_PERF_EVENT_TRACEPOINT.to_ne_bytes());
            copy_name(&mut b, user, 24, 32, name)?;
            b[40..48].copy_from_slice(&probe.cookie.to_ne_bytes());
        }
        // event { config; type; :32; cookie; }
        ProbePoint::Timer { .. } => {
            b[16..20].copy_from_slice(&BPF_PERF_EVENT_EVENT.to_ne_bytes());
            b[24..32].copy_from_slice(&PERF_COUNT_SW_CPU_CLOCK.to_ne_bytes());
            b[32..36].copy_from_slice(&PERF_TYPE_SOFTWARE.to_ne_bytes());
            b[40..48].copy_from_slice(&probe.cookie.to_ne_bytes());
        }
    }
    Ok((b, size))
}

/// One linked program as a traced process runs it.
#[derive(Clone, Debug)]
pub struct TracedProgram {
    pub link_id: u32,
    pub prog_id: u32,
    /// `PROGNAME@LINKID`: one program of the object per link.
    pub name: String,
    pub section: String,
    pub cookie: u64,
    /// A USDT semaphore to raise while attached: (file, file offset).
    pub semaphore: Option<(String, u64)>,
    /// The link's record: the program runs while it exists.
    pub link_record: std::path::PathBuf,
    /// A sampled `cpu-clock` link's period in ns of CPU time (0: not one).
    pub sample_period_ns: u64,
    /// An `xdp` tracepoint's tracefs id and record size.
    pub tracefs: Option<(u16, u64)>,
    /// The XDP program an fentry/fexit link traces (0: none).
    pub target_prog: u32,
}

/// The instance's probe-link generation word, bumped whenever a probe
/// link goes (`bpfjet_runtime::tracing::bump_link_generation`).
pub fn links_generation(ns: &Namespace) -> std::path::PathBuf {
    ns.dir().join("links.gen")
}

/// What a traced process runs of an instance's probe links.
pub struct TracedObject {
    /// One program per link, sections saying where it attaches.
    pub object: Object,
    /// The instance's maps: `maps[i]` is the object's map `i`.
    pub maps: Vec<Arc<Map>>,
    pub programs: Vec<TracedProgram>,
    /// [`links_generation`] of the instance.
    pub links_generation: std::path::PathBuf,
}

/// The programs the instance's live probe links attach in process `pid`,
/// as one object on the instance's maps.
pub fn traced_object(ns: &Namespace, pid: u32) -> Result<TracedObject, String> {
    linked_object(ns, |p| {
        // A timer's program runs in the control plane's process, an XDP
        // tracepoint's in the data planes; a link for another process is
        // not this one's.
        !matches!(p.point, ProbePoint::Timer { sampled: false, .. })
            && !p.point.is_data_plane()
            && (p.pid == -1 || p.pid as u32 == pid)
    })
}

/// The programs the instance's live links attach to XDP tracepoints
/// (`tp_btf/xdp_*`, `tracepoint/xdp/*`), which its data planes fire, as one
/// object on the instance's maps.
pub fn xdp_event_object(ns: &Namespace) -> Result<TracedObject, String> {
    linked_object(ns, |p| p.point.is_data_plane())
}

/// The programs of the instance's live probe links whose points `keep`
/// selects, as one object on the instance's maps.
fn linked_object(
    ns: &Namespace,
    keep: impl Fn(&ProbeLink) -> bool,
) -> Result<TracedObject, String> {
    let mut maps: Vec<Arc<Map>> = Vec::new();
    let mut programs = Vec::new();
    let mut traced = Vec::new();
    let mut sampled_programs = std::collections::BTreeSet::new();
    let mut license = String::from("GPL");
    for id in ns.ids(Kind::Link) {
        let Ok(link) = ns
            .read_record(Kind::Link, id)
            .map_err(|_| ())
            .and_then(|b| serde_json::from_slice::<LinkRecord>(&b).map_err(|_| ()))
        else {
            continue;
        };
        let points: Vec<&ProbeLink> = link.probe_points().filter(|p| keep(p)).collect();
        if points.is_empty() {
            continue;
        }
        // A profiler links one program to the event of every CPU: a thread
        // is on one CPU at a time, so each sample runs it once (the first
        // link of the program stands for all).
        if let Some(ProbePoint::Timer { period_ns, .. }) = points.first().map(|p| &p.point) {
            if !sampled_programs.insert((link.prog_id, *period_ns)) {
                continue;
            }
        }
        let rec: ProgRecord = ns
            .read_record(Kind::Prog, link.prog_id)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| format!("link {id}: its program {} is gone", link.prog_id))?;
        let mut words = rec.insns.clone();
        for (pc, src) in progs::map_lddws(&words) {
            let index = (words[pc] >> 32) as usize;
            let map_id = *rec
                .map_ids
                .get(index)
                .ok_or_else(|| format!("program {}: map index {index} out of range", rec.id))?;
            let at = match maps.iter().position(|m| m.id() == map_id) {
                Some(i) => i,
                None => {
                    let m = ns
                        .instance()
                        .map_by_id(map_id)
                        .map_err(|e| format!("program {}: map id {map_id}: {e}", rec.id))?;
                    maps.push(m);
                    maps.len() - 1
                }
            };
            progs::set_map_index(&mut words[pc], src, at as u32);
        }
        // The object has one license: a program that is not GPL makes
        // the GPL-only helpers unavailable to all, as it would alone.
        if !rec.license.contains("GPL") {
            license = rec.license.clone();
        }
        let prog_name = if rec.name.is_empty() {
            "prog"
        } else {
            &rec.name
        };
        let multi = link.uprobe_multi.is_some();
        for (k, probe) in points.into_iter().enumerate() {
            let section = probe.point.section();
            // One program per point: `PROG@LINK`, `PROG@LINK.K` for the
            // K-th offset of an uprobe-multi link.
            let name = if multi {
                format!("{prog_name}@{id}.{k}")
            } else {
                format!("{prog_name}@{id}")
            };
            programs.push(Program {
                name: name.clone(),
                section: section.clone(),
                kind: ProgKind::from_section(&section),
                insns: progs::raw_insns(&words),
                func_info: Vec::new(),
                line_info: Vec::new(),
                core_relos: Vec::new(),
                unresolved_core: Vec::new(),
            });
            traced.push(TracedProgram {
                link_id: id,
                prog_id: rec.id,
                name,
                section,
                cookie: probe.cookie,
                semaphore: match &probe.point {
                    ProbePoint::Uprobe {
                        path,
                        ref_ctr_offset,
                        ..
                    } if *ref_ctr_offset != 0 => Some((path.clone(), *ref_ctr_offset)),
                    _ => None,
                },
                link_record: ns.record_path(Kind::Link, id),
                sample_period_ns: match &probe.point {
                    ProbePoint::Timer { period_ns, .. } => *period_ns,
                    _ => 0,
                },
                tracefs: probe.tracefs,
                target_prog: match &probe.point {
                    ProbePoint::XdpTrace { prog_id, .. } => *prog_id,
                    _ => 0,
                },
            });
        }
    }
    let object = Object {
        license,
        maps: maps
            .iter()
            .map(|m| {
                let mut s = m.spec().clone();
                s.frozen = m.is_frozen();
                s
            })
            .collect(),
        spin_locks: maps.iter().map(|m| m.spin_lock_off()).collect(),
        map_fields: vec![Vec::new(); maps.len()],
        inner_map_fields: Default::default(),
        map_inits: Vec::new(),
        programs,
        kfuncs: Vec::new(),
        weak_kfuncs: Vec::new(),
        btf: None,
    };
    Ok(TracedObject {
        object,
        maps,
        programs: traced,
        links_generation: links_generation(ns),
    })
}
