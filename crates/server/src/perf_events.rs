//! `perf_event_open(2)` of the probes bpfjet runs inside processes.
//!
//! A libbpf tracer attaches a uprobe or a tracepoint in two steps: it opens
//! a perf event for the probe (the uprobe PMU with the binary's path and
//! the function's file offset, or `PERF_TYPE_TRACEPOINT` with the
//! tracepoint's id from tracefs) and links its program to that event
//! (`BPF_LINK_CREATE` with `BPF_PERF_EVENT`). Under `bpfjet exec` the
//! program is bpfjet's and runs in the traced processes
//! (`bpfjet trace --instance`), so the event must not exist in the kernel:
//! a kernel uprobe would trap every hit of the function in every process
//! for nothing. The probes bpfjet can run — uprobes, uretprobes and the
//! tracepoints of system calls — get a stand-in fd (a memfd) that names
//! the probe ([`PerfProbe`]); every other event (kprobes, other
//! tracepoints, hardware counters, libbpf's perf buffers) is the kernel's.

use crate::backend::BpfjetBackend;
use crate::objects::Obj;
use crate::user;
use bpfjet_sys::Errno;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// `PERF_TYPE_SOFTWARE` / `PERF_COUNT_SW_BPF_OUTPUT`: the event a perf
/// buffer reader opens per CPU for `bpf_perf_event_output`.
pub(crate) const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
/// `PERF_COUNT_SW_CPU_CLOCK`: the timer bpftrace's `interval` samples.
pub(crate) const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_ATTR_SIZE_VER0`: a zero `size` means this one.
const PERF_ATTR_SIZE_VER0: usize = 64;
/// Offsets in `struct perf_event_attr`.
const ATTR_CONFIG: usize = 8;
const ATTR_CONFIG1: usize = 56;
const ATTR_CONFIG2: usize = 64;
/// The end of `clockid`, the last field read.
const ATTR_CLOCKID_END: usize = 96;

/// A place a program can be attached to in a process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbePoint {
    /// A uprobe or uretprobe: function `symbol` of the ELF at `path`,
    /// `offset` bytes in (the file offset the control plane gave, mapped
    /// back to the function that contains it); with no function there
    /// (a stripped file), `symbol` is empty and `offset` the file offset.
    Uprobe {
        path: String,
        symbol: String,
        offset: u64,
        retprobe: bool,
        /// The file offset the control plane gave (link info reports it).
        #[serde(default)]
        file_offset: u64,
        /// The file offset of a USDT semaphore the probe raises while
        /// attached (the kernel's `ref_ctr_offset`; 0: none).
        #[serde(default)]
        ref_ctr_offset: u64,
    },
    /// `tracepoint/CATEGORY/NAME`: `syscalls` or `raw_syscalls`, run in
    /// traced processes, or `xdp` (the events the data planes fire,
    /// [`ProbePoint::is_data_plane`]).
    Tracepoint { category: String, name: String },
    /// `raw_tracepoint/NAME` (`sys_enter` or `sys_exit`).
    RawTracepoint { name: String },
    /// `tp_btf/NAME`: an XDP tracepoint, fired by the instance's data
    /// planes (`crate::tp_btf`), not in traced processes.
    TpBtf { name: String },
    /// The entry (`exit` false: fentry) or return (fexit) of function
    /// `func`, the entry of bpfjet XDP program `prog_id`: run by the data
    /// planes running that program.
    XdpTrace {
        prog_id: u32,
        func: String,
        exit: bool,
        /// The function's BTF id in the program's BTF.
        btf_id: u32,
    },
    /// A `cpu-clock` software event of every process on CPU `cpu`, its
    /// overflow every `period_ns`. A program linked to it that observes
    /// nothing of the interrupted task (bpftrace's `interval`) runs on a
    /// timer in the control plane's own process (crate::perf_timers);
    /// one that does (a sampling profiler: bpftrace's `profile`) is
    /// `sampled`: it runs in the processes bpfjet traces for the
    /// instance, on samples of each thread's CPU time at that period
    /// (docs/TRACING.md, "Sampling").
    Timer {
        period_ns: u64,
        cpu: i32,
        #[serde(default)]
        sampled: bool,
    },
}

impl ProbePoint {
    /// The libbpf section name that says the same: what `bpfjet trace`
    /// attaches by.
    pub fn section(&self) -> String {
        match self {
            ProbePoint::Uprobe {
                path,
                symbol,
                offset,
                retprobe,
                ..
            } => {
                let kind = if *retprobe { "uretprobe" } else { "uprobe" };
                if symbol.is_empty() {
                    // A raw point: `offset` is its file offset.
                    format!("{kind}/{path}:{offset:#x}")
                } else if *offset == 0 {
                    format!("{kind}/{path}:{symbol}")
                } else {
                    format!("{kind}/{path}:{symbol}+{offset:#x}")
                }
            }
            ProbePoint::Tracepoint { category, name } => format!("tracepoint/{category}/{name}"),
            ProbePoint::RawTracepoint { name } => format!("raw_tracepoint/{name}"),
            ProbePoint::TpBtf { name } => format!("tp_btf/{name}"),
            ProbePoint::XdpTrace { func, exit, .. } => {
                format!("{}/{func}", if *exit { "fexit.xdp" } else { "fentry.xdp" })
            }
            ProbePoint::Timer { .. } => "perf_event".to_string(),
        }
    }

    /// Fired by the instance's XDP data planes (`tp_btf/xdp_*`,
    /// `tracepoint/xdp/*`), not in traced processes.
    pub fn is_data_plane(&self) -> bool {
        match self {
            ProbePoint::TpBtf { .. } | ProbePoint::XdpTrace { .. } => true,
            ProbePoint::Tracepoint { category, .. } => category == "xdp",
            _ => false,
        }
    }

    /// The program type that runs at this point.
    pub fn prog_type(&self) -> bpfjet_obj::ProgType {
        use bpfjet_obj::ProgType;
        match self {
            ProbePoint::Uprobe { .. } => ProgType::Kprobe,
            ProbePoint::Tracepoint { .. } => ProgType::Tracepoint,
            ProbePoint::RawTracepoint { .. } => ProgType::RawTracepoint,
            ProbePoint::TpBtf { .. } | ProbePoint::XdpTrace { .. } => ProgType::Tracing,
            ProbePoint::Timer { .. } => ProgType::PerfEvent,
        }
    }
}

/// What a stand-in perf event fd names: the probe and the process it is
/// for (`-1`: every process, as `perf_event_open`'s `pid`).
#[derive(Debug)]
pub struct PerfProbe {
    pub point: ProbePoint,
    pub pid: i32,
    /// The link `PERF_EVENT_IOC_SET_BPF` made, and the fd on its record
    /// that holds it while this event is open.
    pub link: std::sync::Mutex<Option<(u32, i32)>>,
    /// Counting (`PERF_EVENT_IOC_ENABLE`/`DISABLE`, `attr.disabled`): a
    /// [`ProbePoint::Timer`] runs its program only while it is.
    pub enabled: Arc<std::sync::atomic::AtomicBool>,
}

impl PerfProbe {
    /// The event's fd is closing: its link's holding fd is closed, and
    /// the link is returned to be released once the event's fd is gone.
    pub fn take_link(&self) -> Option<u32> {
        let (id, fd) = self.link.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        // SAFETY: the fd perf_event_set_bpf opened; no one else has it.
        unsafe { libc::close(fd) };
        Some(id)
    }
}

/// A `PERF_COUNT_SW_BPF_OUTPUT` event of a control plane: a perf ring in
/// a file of the instance (`<run>/<instance>/perf/`), which its fd is
/// opened on; the consumer maps it ([`bpfjet_maps::PerfRing`]), and
/// programs write to it through the PERF_EVENT_ARRAY element it is put in.
#[derive(Debug)]
pub struct PerfOutput {
    pub path: std::path::PathBuf,
    /// What the reader's event asked each sample to carry.
    pub format: bpfjet_maps::SampleFormat,
}

impl Drop for PerfOutput {
    fn drop(&mut self) {
        // The event goes with its last fd in this process; a traced
        // process that mapped the ring keeps its mapping.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A number from a sysfs file of the uprobe PMU.
fn sysfs(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The uprobe PMU's type and its retprobe bit in `config`.
fn uprobe_pmu() -> Option<(u32, u32)> {
    static PMU: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    *PMU.get_or_init(|| {
        let ty = sysfs("/sys/bus/event_source/devices/uprobe/type")?
            .parse()
            .ok()?;
        // "config:0" on every kernel that has the PMU.
        let bit = sysfs("/sys/bus/event_source/devices/uprobe/format/retprobe")
            .and_then(|f| f.strip_prefix("config:")?.parse().ok())
            .unwrap_or(0);
        Some((ty, bit))
    })
}

/// The tracepoints bpfjet runs programs on, by id, read from tracefs
/// once: those of system calls (`syscalls`, `raw_syscalls`), run in traced
/// processes, and the `xdp` events its data planes fire
/// (`bpfjet_obj::tp_btf::FIRED_EVENTS`).
fn served_tracepoints() -> &'static HashMap<u64, (String, String)> {
    static IDS: OnceLock<HashMap<u64, (String, String)>> = OnceLock::new();
    IDS.get_or_init(|| {
        let mut ids = HashMap::new();
        for root in [
            "/sys/kernel/tracing/events",
            "/sys/kernel/debug/tracing/events",
        ] {
            for category in ["syscalls", "raw_syscalls", "xdp"] {
                let Ok(dir) = std::fs::read_dir(format!("{root}/{category}")) else {
                    continue;
                };
                for e in dir.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    // An xdp event bpfjet fires, whose record it writes.
                    if category == "xdp"
                        && (!bpfjet_obj::tp_btf::FIRED_EVENTS.contains(&name.as_str())
                            || bpfjet_runtime::tracing::xdp_events::tracefs_event(&name).is_err())
                    {
                        continue;
                    }
                    if let Some(id) =
                        sysfs(&format!("{}/id", e.path().display())).and_then(|s| s.parse().ok())
                    {
                        ids.insert(id, (category.to_string(), name));
                    }
                }
            }
            if !ids.is_empty() {
                break;
            }
        }
        ids
    })
}

/// The sample format a perf output event's attr asks for
/// (`sample_type`; `use_clockid` and `clockid`), or the sample type bits
/// bpfjet does not write.
fn sample_format(attr: &[u8]) -> Result<bpfjet_maps::SampleFormat, u64> {
    use bpfjet_maps::SampleFormat;
    /// `sample_type`, the flags word (`use_clockid` is bit 25), `clockid`.
    const ATTR_SAMPLE_TYPE: usize = 24;
    const ATTR_FLAGS: usize = 40;
    const USE_CLOCKID: u64 = 1 << 25;
    const ATTR_CLOCKID: usize = 92;
    let sample_type = u64_at(attr, ATTR_SAMPLE_TYPE);
    let unsupported = sample_type & !SampleFormat::SUPPORTED;
    if unsupported != 0 {
        return Err(unsupported);
    }
    let clockid = if u64_at(attr, ATTR_FLAGS) & USE_CLOCKID != 0 {
        attr.get(ATTR_CLOCKID..ATTR_CLOCKID + 4)
            .map_or(libc::CLOCK_MONOTONIC, |b| {
                i32::from_ne_bytes(b.try_into().unwrap())
            })
    } else {
        libc::CLOCK_MONOTONIC
    };
    Ok(SampleFormat {
        sample_type,
        clockid,
    })
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(off..off + 8) {
        w.copy_from_slice(s);
    }
    u64::from_ne_bytes(w)
}

impl BpfjetBackend {
    /// `perf_event_open(attr, pid, cpu, group_fd, flags)`: a stand-in fd
    /// for a probe bpfjet runs, `None` for an event that is the kernel's.
    pub fn perf_event_open(
        &self,
        attr: u64,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Option<Result<i64, Errno>> {
        if attr == 0 {
            return None;
        }
        let attr_addr = attr;
        let head = user::read(attr, 8).ok()?;
        let ty = u32::from_ne_bytes(head[0..4].try_into().ok()?);
        let size = match u32::from_ne_bytes(head[4..8].try_into().ok()?) as usize {
            0 => PERF_ATTR_SIZE_VER0,
            n => n,
        };
        let attr = user::read(attr, size.clamp(PERF_ATTR_SIZE_VER0, ATTR_CLOCKID_END)).ok()?;
        let config = u64_at(&attr, ATTR_CONFIG);
        let point = if uprobe_pmu().is_some_and(|(t, _)| t == ty) {
            let (_, bit) = uprobe_pmu()?;
            let path = match user::cstring(u64_at(&attr, ATTR_CONFIG1), 4096) {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            let file_offset = u64_at(&attr, ATTR_CONFIG2);
            // A USDT semaphore (`config:32-63` of the PMU's format), which
            // the traced process raises while the probe is attached.
            let ref_ctr_offset = config >> 32;
            let (symbol, offset) = match bpfjet_probe::symbols::symbol_or_raw_at_file_offset(
                std::path::Path::new(&path),
                file_offset,
            ) {
                Ok(s) => s,
                Err(e) => {
                    self.warn_once(&format!("uprobe {path}:{file_offset:#x}"), &e.to_string());
                    return Some(Err(Errno::EINVAL));
                }
            };
            ProbePoint::Uprobe {
                path,
                symbol,
                offset,
                retprobe: config & (1 << bit) != 0,
                file_offset,
                ref_ctr_offset,
            }
        } else if ty == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_BPF_OUTPUT {
            return Some(self.perf_output_open(&attr));
        } else if ty == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_CPU_CLOCK && pid == -1 {
            return Some(self.timer_event_open(attr_addr, &attr, cpu, group_fd, flags));
        } else if ty == PERF_TYPE_TRACEPOINT {
            let (category, name) = served_tracepoints().get(&config)?.clone();
            ProbePoint::Tracepoint { category, name }
        } else {
            return None;
        };
        Some(self.new_fd(Obj::PerfEvent(Arc::new(PerfProbe {
            point,
            pid,
            link: std::sync::Mutex::new(None),
            enabled: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        }))))
    }
}

impl BpfjetBackend {
    fn perf_output_open(&self, attr: &[u8]) -> Result<i64, Errno> {
        let format = match sample_format(attr) {
            Ok(f) => f,
            Err(bits) => {
                self.warn_once(
                    &format!("a perf output event with sample_type bits {bits:#x}"),
                    "bpfjet writes samples with PERF_SAMPLE_RAW, TID, TIME, CPU and PERIOD only",
                );
                return Err(Errno::EINVAL);
            }
        };
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = self.ns.dir().join("perf");
        std::fs::create_dir_all(&dir).map_err(|e| Errno::from_io(&e))?;
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("ring.{}.{n}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Errno::from_io(&e))?;
        self.new_fd(Obj::PerfOutput(Arc::new(PerfOutput { path, format })))
    }

    /// `mmap(fd, len)` of a perf output event: its ring sized and
    /// initialised first (the kernel allocates it at the first mmap).
    /// None: not such an fd.
    pub fn perf_output_mmap(&self, fd: i32, len: usize) -> Option<Result<(), Errno>> {
        let Obj::PerfOutput(out) = self.fds.get(fd)? else {
            return None;
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&out.path)
        {
            Ok(f) => f,
            Err(e) => return Some(Err(Errno::from_io(&e))),
        };
        Some(bpfjet_maps::PerfRing::prepare(&file, len, out.format).map_err(|e| Errno::from_io(&e)))
    }

    /// `BPF_MAP_UPDATE_ELEM`/`DELETE_ELEM` of a PERF_EVENT_ARRAY: its
    /// elements are perf output events (fds in), recorded in the instance
    /// ([`perf_bindings`]) for the traced processes, whose programs then
    /// write to those events' rings. The kernel's rules: `BPF_ANY` only,
    /// `E2BIG` past the end, `ENOENT` deleting an empty element.
    pub(crate) fn perf_array_elem(
        &self,
        map: &bpfjet_maps::Map,
        e: &bpfjet_sys::MapElem,
        update: bool,
    ) -> Result<(), Errno> {
        let key = user::read(e.key, 4)?;
        let index = u32::from_ne_bytes(key[..4].try_into().unwrap());
        if update && e.flags != 0 {
            return Err(Errno::EINVAL);
        }
        if index >= map.max_entries() {
            return Err(Errno::E2BIG);
        }
        let mut bindings = perf_bindings(&self.ns, map.id());
        if update {
            let raw = user::read(e.value, 4)?;
            let fd = u32::from_ne_bytes(raw[..4].try_into().unwrap());
            match self.obj(fd) {
                Some(Obj::PerfOutput(out)) => {
                    bindings.insert(index, out.path.display().to_string());
                }
                Some(_) => return Err(Errno::EINVAL),
                None => {
                    // The kernel's answer for an fd that is no perf event.
                    if !is_kernel_perf_event(fd as i32) {
                        return Err(Errno::EBADF);
                    }
                    self.warn_once(
                        "a kernel perf event in a bpfjet PERF_EVENT_ARRAY",
                        "bpfjet programs write to the perf output events (PERF_COUNT_SW_BPF_OUTPUT) \
                         of a perf buffer reader only",
                    );
                    return Err(Errno::EINVAL);
                }
            }
        } else if bindings.remove(&index).is_none() {
            return Err(Errno::ENOENT);
        }
        let bytes = serde_json::to_vec(&bindings).map_err(|_| Errno::EINVAL)?;
        let dir = self.ns.dir().join("perf");
        std::fs::create_dir_all(&dir).map_err(|e| Errno::from_io(&e))?;
        // Whole or not at all for a reader: write aside, then rename.
        let path = bindings_path(&self.ns, map.id());
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| Errno::from_io(&e))
    }

    /// The ring of a perf output event's fd, mapped in this process (for
    /// its epoll wake-ups). None: not such an fd.
    pub fn perf_output_ring(&self, fd: i32) -> Option<std::io::Result<bpfjet_maps::PerfRing>> {
        let Obj::PerfOutput(out) = self.fds.get(fd)? else {
            return None;
        };
        Some(bpfjet_maps::PerfRing::open(&out.path))
    }
}

/// Whether `fd` is a perf event of the kernel (what `perf_event_get`
/// accepts); anything else — closed, a file, a socket — the kernel refuses
/// with `EBADF`.
pub(crate) fn is_kernel_perf_event(fd: i32) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .is_ok_and(|t| t.as_os_str() == "anon_inode:[perf_event]")
}

pub(crate) fn bindings_path(ns: &crate::Namespace, map_id: u32) -> std::path::PathBuf {
    ns.dir().join("perf").join(format!("map.{map_id}.json"))
}

/// Bind every PERF_EVENT_ARRAY among `maps` (this process's handles) to
/// the perf output events a control plane put in it: element i's output
/// goes to that event's ring; an element left empty fails the output with
/// `-ENOENT`, as in the kernel.
pub fn bind_perf_arrays(
    ns: &crate::Namespace,
    maps: &[std::sync::Arc<bpfjet_maps::Map>],
) -> Result<(), String> {
    for map in maps
        .iter()
        .filter(|m| m.map_type() == bpfjet_maps::MapType::PerfEventArray)
    {
        bind_perf_array(&bindings_path(ns, map.id()), map)?;
    }
    Ok(())
}

/// Bind PERF_EVENT_ARRAY `map` to the rings its bindings file (at
/// `bindings`) names.
pub(crate) fn bind_perf_array(
    bindings: &std::path::Path,
    map: &bpfjet_maps::Map,
) -> Result<(), String> {
    let bound: std::collections::BTreeMap<u32, String> = std::fs::read(bindings)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let rings = (0..map.max_entries())
        .map(|i| {
            let path = bound.get(&i)?;
            bpfjet_maps::PerfRing::open(std::path::Path::new(path)).ok()
        })
        .collect();
    map.bind_perf_rings(rings)
        .map_err(|e| format!("map {}: {e}", map.name()))
}

/// The perf output events a control plane put in PERF_EVENT_ARRAY
/// `map_id`: element index -> ring file.
pub fn perf_bindings(
    ns: &crate::Namespace,
    map_id: u32,
) -> std::collections::BTreeMap<u32, String> {
    std::fs::read(bindings_path(ns, map_id))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// `PERF_EVENT_IOC_ENABLE`, `PERF_EVENT_IOC_DISABLE`,
/// `PERF_EVENT_IOC_SET_BPF` (`_IOW('$', 8, __u32)`).
pub const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
pub const PERF_EVENT_IOC_DISABLE: u64 = 0x2401;
pub const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;

impl BpfjetBackend {
    /// `ioctl(fd, request, arg)` on a stand-in perf event fd; None for any
    /// other fd (the kernel's).
    pub fn perf_event_ioctl(&self, fd: i32, request: u64, arg: u64) -> Option<Result<i64, Errno>> {
        // The table only: a stand-in fd is never inherited or received
        // (and every ioctl of the process passes here).
        let probe = match self.fds.get(fd)? {
            Obj::PerfEvent(probe) => Some(probe),
            Obj::PerfOutput(_) => None,
            _ => return None,
        };
        // A timer event is the kernel's event too: it counts, and its
        // other ioctls are the kernel's.
        if let Some(probe) = probe.as_ref().filter(|p| p.is_kernel_event()) {
            return self.timer_event_ioctl(probe, fd, request, arg);
        }
        Some(match (request, probe) {
            // libbpf and perf buffer readers enable their events and
            // disable them before closing; what runs is decided by the
            // link, which lasts until its fd closes.
            (PERF_EVENT_IOC_ENABLE | PERF_EVENT_IOC_DISABLE, _) => Ok(0),
            (PERF_EVENT_IOC_SET_BPF, Some(probe)) => {
                self.perf_event_set_bpf(&probe, fd, arg as u32)
            }
            _ => Err(Errno(libc::ENOTTY)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ProbePoint;

    #[test]
    fn sections_say_the_same_point() {
        let u = ProbePoint::Uprobe {
            path: "/bin/x".into(),
            symbol: "f".into(),
            offset: 0,
            retprobe: true,
            file_offset: 0x1000,
            ref_ctr_offset: 0,
        };
        assert_eq!(u.section(), "uretprobe//bin/x:f");
        let u = ProbePoint::Uprobe {
            path: "/bin/x".into(),
            symbol: "f".into(),
            offset: 16,
            retprobe: false,
            file_offset: 0x1010,
            ref_ctr_offset: 0,
        };
        assert_eq!(u.section(), "uprobe//bin/x:f+0x10");
        // No function names it: the raw file offset, which ProgKind reads
        // back as a raw target.
        let u = ProbePoint::Uprobe {
            path: "/bin/x".into(),
            symbol: String::new(),
            offset: 0x1234,
            retprobe: false,
            file_offset: 0x1234,
            ref_ctr_offset: 0,
        };
        assert_eq!(u.section(), "uprobe//bin/x:0x1234");
        match bpfjet_obj::ProgKind::from_section(&u.section()) {
            bpfjet_obj::ProgKind::Probe(p) => assert_eq!(
                p.target,
                bpfjet_obj::ProbeTarget::User {
                    path: "/bin/x".into(),
                    symbol: String::new(),
                    offset: 0x1234
                }
            ),
            k => panic!("{k:?}"),
        }
        let t = ProbePoint::Tracepoint {
            category: "syscalls".into(),
            name: "sys_enter_read".into(),
        };
        assert_eq!(t.section(), "tracepoint/syscalls/sys_enter_read");
    }
}
