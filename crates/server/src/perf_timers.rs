//! `perf_event` programs on a `cpu-clock` timer, run in the control plane's
//! own process.
//!
//! bpftrace's `interval:s:N` (and any tool that wants a program run
//! periodically) opens a `PERF_TYPE_SOFTWARE`/`PERF_COUNT_SW_CPU_CLOCK`
//! event for every process on one CPU with a sample period, and links a
//! `BPF_PROG_TYPE_PERF_EVENT` program to it (`PERF_EVENT_IOC_SET_BPF`, or
//! `BPF_LINK_CREATE` with `BPF_PERF_EVENT`). The kernel runs the program
//! at each overflow of the timer, in whatever task that CPU runs then.
//!
//! Under `bpfjet exec` the program is bpfjet's, so the kernel cannot run
//! it. The event itself stays the kernel's (it counts, and `read()` and
//! every ioctl but `SET_BPF` are the kernel's); the link starts a thread
//! in this process that runs the program at the same period on the
//! interpreter, with the instance's maps and its PERF_EVENT_ARRAYs bound
//! to their readers' rings (as [`crate::tracing_test_run`] runs `BEGIN`),
//! while the event is enabled and until the link goes. The context is
//! `struct bpf_perf_event_data` with the period as `sample_period`.
//!
//! Only programs for which the interrupted task does not matter are
//! served: what a timer program observes of "the current task" in the
//! kernel is whatever that CPU ran, which here would be this thread. A
//! program that reads the sampled registers, the current task, its ids,
//! name or stack (a sampling profiler: bpftrace's `profile`) is refused
//! at link time with the reason.

use crate::backend::BpfjetBackend;
use crate::objects::{Obj, ProgObj};
use crate::perf_events::{
    u64_at, PerfProbe, ProbePoint, PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_ENABLE,
    PERF_EVENT_IOC_SET_BPF,
};
use crate::progs;
use bpfjet_obj::ProgKind;
use bpfjet_runtime::tracing::{ProbeSite, TracingObject, TracingOptions};
use bpfjet_runtime::{helper_ids, kernel_helper_name};
use bpfjet_sys::Errno;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Offsets in `struct perf_event_attr`.
const ATTR_SAMPLE_PERIOD: usize = 16;
const ATTR_FLAGS: usize = 40;
/// `attr.disabled` and `attr.freq` (bits of the flags word).
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_FREQ: u64 = 1 << 10;
/// `sizeof(struct bpf_perf_event_data)`: `pt_regs`, `sample_period`, `addr`.
const PERF_EVENT_DATA_SIZE: usize = 168 + 16;
/// The shortest period run: a faster timer would only spin this thread
/// (the kernel's own floor for cpu-clock is far below; bpftrace's
/// shortest `interval` is 1 ms).
const MIN_PERIOD: Duration = Duration::from_micros(100);

/// Helpers whose answer is the interrupted task's (or its CPU state's):
/// the current task, its ids, name, cgroup and stacks, and reads of its
/// memory. Their names come from the runtime's helper table.
const TASK_HELPERS: &[u32] = &[
    helper_ids::PROBE_READ,
    helper_ids::GET_CURRENT_PID_TGID,
    helper_ids::GET_CURRENT_UID_GID,
    helper_ids::GET_CURRENT_COMM,
    helper_ids::GET_STACKID,
    helper_ids::GET_CURRENT_TASK,
    helper_ids::CURRENT_TASK_UNDER_CGROUP,
    helper_ids::PROBE_READ_STR,
    helper_ids::GET_STACK,
    80, // get_current_cgroup_id
    helper_ids::PROBE_READ_USER,
    helper_ids::PROBE_READ_USER_STR,
    123, // get_current_ancestor_cgroup_id
    141, // get_task_stack
    158, // get_current_task_btf
    176, // get_branch_snapshot
];

/// A program as [`BpfjetBackend::caller_object`] loads it: the object, the
/// program's id in it, the maps.
pub(crate) type CallerObject = (TracingObject, usize, Vec<Arc<bpfjet_maps::Map>>);

/// What program `id` of `tracing`, linked to a `cpu-clock` event, observes
/// of the task the event interrupts: its registers (the context) or a
/// helper answering for the current task; None: nothing (bpftrace's
/// `interval`), it can run on a timer anywhere.
pub(crate) fn observes_task(tracing: &TracingObject, id: usize) -> Option<String> {
    if tracing.programs()[id].ctx_bytes() > 0 {
        return Some("it reads its context (the interrupted registers)".to_string());
    }
    TASK_HELPERS
        .iter()
        .find(|&&h| tracing.calls_helper(h))
        .map(|&h| {
            format!(
                "it calls bpf_{}#{h}, whose answer is the task the event interrupted",
                kernel_helper_name(h).unwrap_or("?")
            )
        })
}

/// When a file was last written (None: it does not exist).
fn modified(path: &std::path::Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl PerfProbe {
    /// A kernel event bpfjet also runs programs of (a timer): its fd is
    /// the kernel's.
    pub fn is_kernel_event(&self) -> bool {
        matches!(self.point, ProbePoint::Timer { .. })
    }
}

/// `perf_event_open` straight to the kernel (not through the interposed
/// `syscall()`).
unsafe fn kernel_perf_event_open(attr: u64, pid: i32, cpu: i32, group_fd: i32, flags: u64) -> i64 {
    libc::syscall(
        libc::SYS_perf_event_open,
        attr,
        pid as libc::c_long,
        cpu as libc::c_long,
        group_fd as libc::c_long,
        flags,
    )
}

impl BpfjetBackend {
    /// A `cpu-clock` event of every process: the kernel's event, kept in
    /// the table with its period so that a bpfjet program linked to it
    /// runs on a timer here.
    pub(crate) fn timer_event_open(
        &self,
        attr_addr: u64,
        attr: &[u8],
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Result<i64, Errno> {
        // SAFETY: the caller's attr, passed on as it gave it.
        let fd = unsafe { kernel_perf_event_open(attr_addr, -1, cpu, group_fd, flags) };
        if fd < 0 {
            return Err(Errno(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ));
        }
        let bits = u64_at(attr, ATTR_FLAGS);
        let sample = u64_at(attr, ATTR_SAMPLE_PERIOD);
        // cpu-clock counts nanoseconds: a frequency is a period of 1e9/freq.
        let period_ns = match (bits & ATTR_FREQ != 0, sample) {
            (_, 0) => 0,
            (true, hz) => 1_000_000_000 / hz,
            (false, ns) => ns,
        };
        self.fds.insert(
            fd as i32,
            Obj::PerfEvent(Arc::new(PerfProbe {
                point: ProbePoint::Timer {
                    period_ns,
                    cpu,
                    sampled: false,
                },
                pid: -1,
                link: std::sync::Mutex::new(None),
                enabled: Arc::new(AtomicBool::new(bits & ATTR_DISABLED == 0)),
            })),
        );
        Ok(fd)
    }

    /// An ioctl of a timer event: `SET_BPF` of a bpfjet program is served
    /// here; enabling and disabling is noted and, as every other request,
    /// goes on to the kernel's event (None).
    pub(crate) fn timer_event_ioctl(
        &self,
        probe: &PerfProbe,
        fd: i32,
        request: u64,
        arg: u64,
    ) -> Option<Result<i64, Errno>> {
        match request {
            PERF_EVENT_IOC_ENABLE => probe.enabled.store(true, Ordering::SeqCst),
            PERF_EVENT_IOC_DISABLE => probe.enabled.store(false, Ordering::SeqCst),
            PERF_EVENT_IOC_SET_BPF if self.tracing_prog(arg as u32).is_some() => {
                return Some(self.perf_event_set_bpf(probe, fd, arg as u32));
            }
            _ => {}
        }
        None
    }

    /// Starts the timer of link `link_id`: program `prog` (which observes
    /// nothing of the interrupted task), as `caller` holds it
    /// ([`Self::caller_object`]), at the event's period while `enabled`,
    /// until the link's record goes.
    pub(crate) fn start_timer(
        &self,
        prog: &ProgObj,
        caller: CallerObject,
        link_id: u32,
        period_ns: u64,
        enabled: Arc<AtomicBool>,
    ) -> Result<(), Errno> {
        let (tracing, id, maps) = caller;
        // A reader may put its rings in a PERF_EVENT_ARRAY after the
        // link: the timer binds them again when their bindings change.
        let mut perf_arrays: Vec<_> = maps
            .into_iter()
            .filter(|m| m.map_type() == bpfjet_maps::MapType::PerfEventArray)
            .map(|m| {
                let path = crate::perf_events::bindings_path(&self.ns, m.id());
                let seen = modified(&path);
                (m, path, seen)
            })
            .collect();
        let record = self.ns.record_path(crate::namespace::Kind::Link, link_id);
        let period = Duration::from_nanos(period_ns).max(MIN_PERIOD);
        let name = prog.rec.name.clone();
        std::thread::Builder::new()
            .name("bpfjet-timer".into())
            .spawn(move || {
                let mut ctx = [0u8; PERF_EVENT_DATA_SIZE];
                ctx[168..176].copy_from_slice(&period_ns.to_ne_bytes());
                let mut next = Instant::now() + period;
                let mut fault_told = false;
                loop {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += period;
                    // The link went (its fd closed, or the event's).
                    if !record.exists() {
                        return;
                    }
                    if !enabled.load(Ordering::SeqCst) {
                        continue;
                    }
                    for (map, path, seen) in &mut perf_arrays {
                        let now = modified(path);
                        if now != *seen {
                            *seen = now;
                            if let Err(e) = crate::perf_events::bind_perf_array(path, map) {
                                eprintln!("bpfjet: perf_event program {name} on a timer: {e}");
                            }
                        }
                    }
                    // SAFETY: `ctx` is a whole bpf_perf_event_data, which
                    // the program (verified to read none of it) may be
                    // handed.
                    unsafe { tracing.run(id, ctx.as_mut_ptr(), &ProbeSite::default()) };
                    if let (_, Some(fault)) = tracing.faults() {
                        if !fault_told {
                            eprintln!("bpfjet: perf_event program {name} on a timer: {fault}");
                            fault_told = true;
                        }
                    }
                }
            })
            .map_err(|e| Errno::from_io(&e))?;
        Ok(())
    }

    /// Program `prog` as a tracing object of its own of kind `section`, on
    /// fresh handles of the instance's maps, its PERF_EVENT_ARRAYs bound to
    /// the rings their readers put in them, to run in this process on the
    /// interpreter; and its id in the object.
    pub(crate) fn caller_object(
        &self,
        prog: &ProgObj,
        section: &str,
    ) -> Result<CallerObject, Errno> {
        let instance = bpfjet_maps::Instance::open(self.ns.name()).map_err(|e| Errno(e.errno()))?;
        // Fresh handles: their perf rings are bound for these runs.
        let maps = prog
            .rec
            .map_ids
            .iter()
            .map(|&id| instance.map_by_id(id).map_err(|_| Errno::ENOENT))
            .collect::<Result<Vec<_>, _>>()?;
        let mut object = progs::object_of(&prog.rec, &maps);
        let name = object.programs[0].name.clone();
        object.programs[0].kind = ProgKind::from_section(section);
        let tracing = TracingObject::load(
            &object,
            &TracingOptions {
                control_plane: Some((self.ns.name().to_string(), maps.clone())),
                ..TracingOptions::default()
            },
        )
        .map_err(|e| {
            self.warn_once(&format!("program {name}"), &e.to_string());
            Errno::EINVAL
        })?;
        let id = tracing.program_id(&name).ok_or(Errno::EINVAL)?;
        crate::perf_events::bind_perf_arrays(&self.ns, &maps).map_err(|e| {
            self.warn_once(&format!("program {name}"), &e);
            Errno::EINVAL
        })?;
        Ok((tracing, id, maps))
    }
}
