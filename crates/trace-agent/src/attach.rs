//! Loading the object in the traced process and attaching its programs.

use crate::config::{Config, Fuse};
use crate::{alive, dlopen, events, report, threads, usdt};
use bpfjet_obj::{ProbeFlavor, ProbeTarget, ProgKind, SyscallTracepoint};
use bpfjet_probe::symbols::{loaded_objects, resolve, resolve_path, UprobeTarget};
use bpfjet_probe::syscalls::{self, SyscallHooks};
use bpfjet_probe::ProbeError;
use bpfjet_probe::{attach, fast_syscalls, syscall_table, Attachment, PtRegs};
use bpfjet_runtime::tracing::{
    self as rt, ProbeSite, ProgId, RawSyscallArgs, SysEnterCtx, SysExitCtx, TracingObject,
    TracingOptions,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

const _: () = assert!(std::mem::size_of::<PtRegs>() == std::mem::size_of::<rt::PtRegs>());

/// Whether a probe at `target` sits on a function's first instruction and
/// that instruction is `push %rbp` or `endbr64` (read before the function
/// is patched): the caller's return address is then at the stack pointer
/// ([`ProbeSite::ret_at_sp`]), as the kernel's `is_uprobe_at_func_entry`.
pub(crate) fn ret_at_sp(target: &bpfjet_probe::ResolvedSymbol) -> bool {
    if target.offset != 0 {
        return false;
    }
    // SAFETY: the first bytes of a function of a loaded object: mapped and
    // readable code, not patched yet by this agent.
    let b = unsafe { std::ptr::read_unaligned(target.address as *const [u8; 4]) };
    b[0] == 0x55 || b == [0xf3, 0x0f, 0x1e, 0xfa]
}

/// The agent's own record of an attachment (kept for the process's life).
pub(crate) fn keep_attachment(a: Attachment) {
    if let Some(agent) = agent() {
        agent.attachments.lock().unwrap().push(a);
    }
}

/// The programs to run at one patched address.
struct Site {
    target: bpfjet_probe::ResolvedSymbol,
    entries: Vec<ProgId>,
    returns: Vec<ProgId>,
    /// libc's `_exit`: write the report (when system calls are not traced,
    /// nothing else sees the process end).
    report_on_entry: bool,
    /// libc's `execve`, `execveat`, `fexecve`: the image may end here
    /// ([`before_exec`]; [`exec_failed`] when the call returns), when
    /// system calls are not traced.
    exec_hook: bool,
}

/// The programs of each system call.
struct SyscallPrograms {
    enter: Vec<Vec<ProgId>>,
    exit: Vec<Vec<ProgId>>,
    /// Programs of every system call's entry / return that take the
    /// tracepoint record (`tracepoint/raw_syscalls/sys_*`), as the
    /// per-call ones do.
    every_enter: Vec<ProgId>,
    every_exit: Vec<ProgId>,
    /// Programs of every entry / return that take the raw tracepoint's
    /// arguments (`raw_tracepoint/sys_*`).
    raw_enter: Vec<ProgId>,
    raw_exit: Vec<ProgId>,
    /// Kernel probes on each system call's entry point (`ksyscall/NAME`,
    /// `kprobe/__x64_sys_NAME`) and their return probes
    /// (bpfjet_probe::ksyscall), each with whether its context is the
    /// syscall wrapper's.
    kernel_enter: Vec<Vec<(ProgId, bool)>>,
    kernel_exit: Vec<Vec<(ProgId, bool)>>,
    /// The entry point's kernel address per system call
    /// (`bpf_get_func_ip`), for those with kernel probes.
    kernel_entry: BTreeMap<u32, u64>,
    /// `LINUX_HAS_SYSCALL_WRAPPER` as the object's loader computed it
    /// (read once, when a `ksyscall` program needs it).
    wrapper: Option<bool>,
}

impl SyscallPrograms {
    fn new() -> SyscallPrograms {
        let n = syscall_table::count();
        SyscallPrograms {
            enter: vec![Vec::new(); n],
            exit: vec![Vec::new(); n],
            every_enter: Vec::new(),
            every_exit: Vec::new(),
            raw_enter: Vec::new(),
            raw_exit: Vec::new(),
            kernel_enter: vec![Vec::new(); n],
            kernel_exit: vec![Vec::new(); n],
            kernel_entry: BTreeMap::new(),
            wrapper: None,
        }
    }

    /// Adds program `id`, a kernel probe, to the system call whose entry
    /// point it names; refuses any other kernel function.
    fn add_kernel_probe(
        &mut self,
        id: ProgId,
        p: &rt::TracingProgram,
        probe: &bpfjet_obj::ProbeSection,
    ) -> Result<(), String> {
        let section = p.section();
        let at =
            bpfjet_probe::ksyscall::syscall_probe(probe).map_err(|e| unsupported(section, &e))?;
        p.check_ctx_size(std::mem::size_of::<PtRegs>() as u64)
            .map_err(|e| unsupported(section, &e))?;
        let list = if at.ret {
            &mut self.kernel_exit
        } else {
            &mut self.kernel_enter
        };
        // `ksyscall/NAME` gets what the object's LINUX_HAS_SYSCALL_WRAPPER
        // says it does; `__x64_sys_NAME` is the wrapper.
        let wrapper = !at.by_syscall_name
            || *self
                .wrapper
                .get_or_insert_with(bpfjet_obj::has_syscall_wrapper);
        list[at.nr as usize].push((id, wrapper));
        Ok(())
    }

    /// Looks up the kernel addresses of the entry points probed.
    fn resolve_kernel_entries(&mut self) {
        let probed = |v: &Vec<Vec<(ProgId, bool)>>| {
            v.iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(nr, _)| nr as u32)
                .collect::<Vec<_>>()
        };
        let mut nrs = probed(&self.kernel_enter);
        nrs.extend(probed(&self.kernel_exit));
        if !nrs.is_empty() {
            self.kernel_entry = bpfjet_probe::ksyscall::entry_addresses(nrs.into_iter());
        }
    }

    /// Whether programs run at both the entry and the return of system
    /// call `nr` (tracepoints or kernel probes): a pair.
    fn has_enter_and_exit(&self, nr: u32) -> bool {
        let nr = nr as usize;
        (runs_at(&self.enter, nr) || runs_at(&self.kernel_enter, nr))
            && (runs_at(&self.exit, nr) || runs_at(&self.kernel_exit, nr))
    }

    /// Whether any program runs at system call `nr`'s return.
    fn has_exit(&self, nr: u64) -> bool {
        let nr = nr as usize;
        runs_at(&self.exit, nr) || runs_at(&self.kernel_exit, nr) || self.any_every_exit()
    }

    /// Adds program `id`, a tracepoint program, to the system calls its
    /// section names; refuses any tracepoint but a system call's.
    fn add(&mut self, id: ProgId, p: &rt::TracingProgram) -> Result<(), String> {
        let section = p.section();
        let Some(tp) = p.kind().syscall_tracepoint() else {
            return Err(unsupported(
                section,
                &format!(
                    "only the traced process's own system calls have tracepoints: {}",
                    bpfjet_obj::SYSCALL_TRACEPOINT_SECTIONS
                ),
            ));
        };
        let nr = |call: &str| {
            syscall_table::tracepoint_number(call).ok_or_else(|| {
                let hint = syscall_table::tracepoint_alias(call)
                    .map(|tp| format!(" (the kernel's tracepoint for it is sys_*_{tp})"))
                    .unwrap_or_default();
                unsupported(
                    section,
                    &format!("no system-call tracepoint named {call:?} on x86-64{hint}"),
                )
            })
        };
        p.attach_ctx_size()
            .and_then(|n| p.check_ctx_size(n))
            .map_err(|e| unsupported(section, &e))?;
        match tp {
            SyscallTracepoint::Enter(call) => self.enter[nr(call)? as usize].push(id),
            SyscallTracepoint::Exit(call) => self.exit[nr(call)? as usize].push(id),
            SyscallTracepoint::EveryEnter { raw_args: false } => self.every_enter.push(id),
            SyscallTracepoint::EveryExit { raw_args: false } => self.every_exit.push(id),
            SyscallTracepoint::EveryEnter { raw_args: true } => self.raw_enter.push(id),
            SyscallTracepoint::EveryExit { raw_args: true } => self.raw_exit.push(id),
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        [
            &self.every_enter,
            &self.every_exit,
            &self.raw_enter,
            &self.raw_exit,
        ]
        .iter()
        .all(|v| v.is_empty())
            && self.enter.iter().chain(&self.exit).all(|v| v.is_empty())
            && self
                .kernel_enter
                .iter()
                .chain(&self.kernel_exit)
                .all(|v| v.is_empty())
    }

    /// Whether any program runs at every system call's return.
    fn any_every_exit(&self) -> bool {
        !self.every_exit.is_empty() || !self.raw_exit.is_empty()
    }
}

/// Whether any program of a per-call list runs at system call `nr`.
fn runs_at<T>(per_call: &[Vec<T>], nr: usize) -> bool {
    per_call.get(nr).is_some_and(|p| !p.is_empty())
}

pub struct Agent {
    pub cfg: Config,
    pub object: &'static TracingObject,
    pub ringbufs: Vec<String>,
    /// The PERF_EVENT_ARRAY maps, consumed like the ring buffers.
    pub perfbufs: Vec<String>,
    /// The pairs that run fused: `{"entry", "exit", "internalised": [MAP...]}`.
    pub fused: Vec<serde_json::Value>,
    /// The fusion level, engine and what was folded (report's `"fusion"`).
    pub fusion: serde_json::Value,
    /// Why maps the analysis found could not be kept per thread.
    pub fusion_refusals: Vec<String>,
    /// Every (entry, exit) pair of the object, with the system call of a
    /// `sys_enter_X`/`sys_exit_X` pair.
    pub pairs: Vec<(String, String, Option<String>)>,
    pid: u32,
    finished: AtomicBool,
    attachments: Mutex<Vec<Attachment>>,
}

static AGENT: OnceLock<Agent> = OnceLock::new();

/// Attach a site's handlers where its target is: at a function's entry, a
/// jump with entry and return trampolines (the attachment returned); at
/// `SYMBOL+OFF` inside a function (a control plane's USDT probe), where
/// any branch of the function may land and its frame is live, the entry
/// handler as USDT probes are patched — a jump only where no branch lands
/// in the patched bytes, else a trap — kept in [`INSIDE_PATCHES`]. Both
/// the attach at start and a later `dlopen`'s go through here.
pub(crate) fn attach_site(
    target: &bpfjet_probe::ResolvedSymbol,
    on_entry: Option<bpfjet_probe::ProbeHandler>,
    on_return: Option<bpfjet_probe::ProbeHandler>,
) -> Result<Option<Attachment>, ProbeError> {
    // A raw file offset (no function names it) is an int3 there, return
    // probes included, as the kernel's.
    if target.offset == 0 || target.symbol.is_empty() {
        return attach(target, on_entry, on_return).map(Some);
    }
    if on_return.is_some() {
        return Err(ProbeError::Unpatchable {
            symbol: target.symbol.clone(),
            offset: target.offset,
            address: target.address,
            reason: "a uretprobe attaches to a function's entry, not an offset".into(),
        });
    }
    if let Some(handler) = on_entry {
        let (patch, _) =
            bpfjet_probe::usdt::attach_inside(target, target.address - target.offset, handler)?;
        INSIDE_PATCHES.lock().unwrap().push(patch);
    }
    Ok(None)
}

/// Probes patched inside functions (at `SYMBOL+OFF`): kept for the life of
/// the process, as the function-entry attachments are.
static INSIDE_PATCHES: Mutex<Vec<bpfjet_probe::usdt::UsdtPatch>> = Mutex::new(Vec::new());

/// The probes patched with an `int3` (a signal per hit) rather than a
/// jump, with why, for the report: `[{"address", "why", "hits"}]`.
pub(crate) fn int3_report(agent: &Agent) -> serde_json::Value {
    let entry = |a: &Attachment| {
        a.why_int3().map(|why| {
            serde_json::json!({
                "address": format!("{:#x}", a.address()),
                "why": why,
                "hits": a.hits(),
            })
        })
    };
    let mut out: Vec<serde_json::Value> = agent
        .attachments
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(entry)
        .collect();
    for p in INSIDE_PATCHES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        if let bpfjet_probe::usdt::UsdtPatch::Jump(a) = p {
            out.extend(entry(a));
        }
    }
    serde_json::Value::Array(out)
}

pub fn agent() -> Option<&'static Agent> {
    AGENT.get()
}

pub(crate) fn regs_view(regs: &mut PtRegs) -> &mut rt::PtRegs {
    // SAFETY: both are the kernel's x86-64 pt_regs, 21 u64 in one order.
    unsafe { &mut *(regs as *mut PtRegs as *mut rt::PtRegs) }
}

/// Why a program cannot be attached in a process, naming its section.
fn unsupported(section: &str, why: &str) -> String {
    format!("program section {section:?}: {why}")
}

/// The programs the probe links of `bpf()` instance `name` attach in this
/// process, as one object on the instance's maps.
pub(crate) fn control_plane_object(
    name: &str,
    run: &str,
) -> Result<bpfjet_server::TracedObject, String> {
    let ns = bpfjet_server::Namespace::open(name, std::path::Path::new(run))
        .map_err(|e| format!("instance {name}: {e}"))?;
    let traced = bpfjet_server::traced_object(&ns, std::process::id())
        .map_err(|e| format!("instance {name}: {e}"))?;
    // A PERF_EVENT_ARRAY's output goes to the perf events the control
    // plane put in it (its perf buffer reader's rings).
    bpfjet_server::bind_perf_arrays(&ns, &traced.maps)
        .map_err(|e| format!("instance {name}: {e}"))?;
    Ok(traced)
}

/// The USDT semaphores of a control plane's uprobes (file, file offset),
/// raised once per probe as the kernel raises a uprobe's reference
/// counter in every process mapping the file. They stay raised while the
/// process runs, as its probes stay patched. (A file the process opens
/// later with `dlopen` gets its probes then, not its semaphores.)
pub(crate) fn raise_semaphores(semaphores: &[(String, u64)]) -> Result<(), String> {
    for (path, offset) in semaphores {
        let addr = match bpfjet_probe::symbols::loaded_address_of_file_offset(
            std::path::Path::new(path),
            *offset,
        ) {
            Ok(a) => a,
            // A file this process does not map: nothing to raise here, as
            // the kernel raises it only in processes that map the file.
            Err(bpfjet_probe::ProbeError::NotLoaded { .. }) => continue,
            Err(e) => return Err(format!("USDT semaphore at {path}:{offset:#x}: {e}")),
        };
        if !addr.is_multiple_of(2) {
            return Err(format!(
                "USDT semaphore at {path}:{offset:#x}: address {addr:#x} is not 2-byte aligned"
            ));
        }
        // SAFETY: the note's semaphore is an aligned `unsigned short` in a
        // writable segment of an object this process has loaded.
        let sem = unsafe { &*(addr as *const std::sync::atomic::AtomicU16) };
        sem.fetch_add(1, Ordering::SeqCst);
    }
    Ok(())
}

pub fn start(cfg: Config) -> Result<(), String> {
    // What errors name: the object file, or the instance.
    let source = match &cfg.control_plane {
        Some(name) => format!("instance {name}"),
        None => cfg.object.display().to_string(),
    };
    let (mut obj, control_plane, links, semaphores) = match &cfg.control_plane {
        Some(name) => {
            let traced = control_plane_object(name, &cfg.run_dir)?;
            if cfg.if_linked && traced.programs.is_empty() {
                // Started by a control plane whose instance links nothing
                // here: no agent at all (crates/preload, exec.rs).
                return Ok(());
            }
            let links = Some((traced.links_generation.clone(), traced.programs.clone()));
            let semaphores: Vec<(String, u64)> = traced
                .programs
                .iter()
                .filter_map(|p| p.semaphore.clone())
                .collect();
            (
                traced.object,
                Some((name.clone(), traced.maps)),
                links,
                semaphores,
            )
        }
        None => (
            bpfjet_obj::load_file(&cfg.object)
                .map_err(|e| format!("{}: {e}", cfg.object.display()))?,
            None,
            None,
            Vec::new(),
        ),
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    for (name, bytes) in &cfg.ringbuf_size {
        bytes
            .parse::<u64>()
            .map_err(|_| format!("not a number of bytes: {bytes:?}"))
            .and_then(|n| obj.resize_ringbuf(name, n, page))
            .map_err(|e| format!("--ringbuf-size {name}={bytes}: {e}"))?;
    }
    for (name, n) in &cfg.max_entries {
        n.parse::<u32>()
            .map_err(|_| format!("not a number of entries: {n:?}"))
            .and_then(|n| obj.set_max_entries(name, n))
            .map_err(|e| format!("--max-entries {name}={n}: {e}"))?;
    }
    cfg.loader.apply(&mut obj)?;
    if let Some(instance) = &cfg.instance {
        crate::exec_note::set_instance(instance);
        // The settings every exec of the tree carries (exec_env.rs).
        crate::exec_env::prepare();
        syscalls::set_exec_env_hook(crate::exec_env::envp_for_exec);
    }
    let mut opts = TracingOptions {
        control_plane,
        ..TracingOptions::default()
    };
    // The process tree shares one set of maps: the command's agent
    // publishes them, agents of programs the tree executes join them.
    if cfg.joined {
        opts.join = cfg.instance.clone();
    } else {
        opts.instance_name = cfg.instance.clone();
    }
    // `bpfjet trace` loads the object alone and no control plane can open
    // its maps (no pinning by path, no server): only pinning by name, which
    // the analysis refuses, exposes a map.
    let plan = if cfg.fuse >= Fuse::InternaliseCalls {
        bpfjet_fusion::plan(&obj, &|_| None)
    } else {
        bpfjet_fusion::FusionPlan::default()
    };
    opts.thread_maps = plan
        .internal_maps
        .iter()
        .map(|m| rt::ThreadMapSpec {
            map: m.name.clone(),
            sites: m
                .sites
                .iter()
                .map(|(p, slot, _)| (p.clone(), *slot))
                .collect(),
        })
        .collect();
    let folded = if cfg.fuse >= Fuse::Fold && cfg.jit {
        attach_site_constants(&obj)
    } else {
        BTreeMap::new()
    };
    let steps = bpfjet_jit::TracingJit {
        inline_thread_maps: cfg.fuse >= Fuse::Internalise,
        fold_rodata: cfg.fold_rodata,
        ctx_constants: folded.clone(),
    };
    let tracing = if cfg.jit && cfg.fuse >= Fuse::Compile {
        load_compiled_pairs(&obj, &opts, &steps).map_err(|e| format!("{}: {e}", source))?
    } else if cfg.jit {
        bpfjet_jit::load_tracing_with(&obj, &opts, &bpfjet_jit::JitOptions::default(), &steps)
            .map_err(|e| format!("{}: {e}", source))?
    } else {
        TracingObject::load(&obj, &opts).map_err(|e| format!("{}: {e}", source))?
    };
    for (name, ms) in &cfg.backpressure {
        let map = tracing
            .loaded()
            .map(name)
            .filter(|m| m.map_type() == bpfjet_maps::MapType::Ringbuf)
            .ok_or_else(|| format!("--ringbuf-backpressure {name}: no RINGBUF map {name:?}"))?;
        let stall_limit = if *ms == 0 {
            bpfjet_maps::ringbuf::DEFAULT_STALL_LIMIT
        } else {
            std::time::Duration::from_millis(u64::from(*ms))
        };
        map.set_ringbuf_backpressure(Some(bpfjet_maps::Backpressure { stall_limit }))
            .map_err(|e| format!("--ringbuf-backpressure {name}: {e}"))?;
    }
    for (name, dir) in &cfg.cgroup_array {
        let map = tracing
            .loaded()
            .map(name)
            .filter(|m| m.map_type() == bpfjet_maps::MapType::CgroupArray)
            .ok_or_else(|| format!("--cgroup-array {name}: no CGROUP_ARRAY map {name:?}"))?;
        let id = rt::cgroup::cgroup_id(std::path::Path::new(dir))
            .map_err(|e| format!("--cgroup-array {name}={dir}: {e}"))?;
        map.set_cgroup(0, id)
            .map_err(|e| format!("--cgroup-array {name}={dir}: {e}"))?;
    }
    // What `bpf_get_current_task` needs of the kernel's BTF, read now and
    // not in a signal handler; only for an object that calls it (reading
    // the kernel's BTF is most of an agent's start: every program a
    // traced tree executes pays it).
    if tracing.calls_helper(GET_CURRENT_TASK) {
        rt::task_view::prepare();
    }
    // One program per link: its link's cookie at every hit, and it runs
    // while the link lasts.
    let mut tracing = tracing;
    // A control plane's sampled cpu-clock links carry their period; a
    // `bpfjet trace` object samples at `--sample-freq`.
    let sample_period_ns = links
        .as_ref()
        .and_then(|(_, programs)| programs.iter().find(|p| p.sample_period_ns > 0))
        .map_or(1_000_000_000 / cfg.sample_freq.max(1), |p| {
            p.sample_period_ns
        });
    if let Some((generation, programs)) = &links {
        crate::late_links::loaded(programs.iter().map(|p| p.link_id));
        for p in programs {
            if let Some(id) = tracing.program_id(&p.name) {
                tracing.set_cookie(id, p.cookie);
                tracing.set_link(id, &p.link_record);
            }
        }
        tracing
            .watch_links(generation)
            .map_err(|e| format!("{source}: {}: {e}", generation.display()))?;
    }
    let object: &'static TracingObject = Box::leak(Box::new(tracing));
    // Report as folded only programs whose context reads reach the field
    // (the verifier's furthest context byte): the others' code cannot
    // have changed.
    let mut folded = folded;
    folded.retain(|program, constants| {
        let reach = object
            .program_id(program)
            .map_or(0, |id| object.programs()[id].ctx_bytes());
        constants.retain(|c| c.offset < reach);
        !constants.is_empty()
    });
    let kept: Vec<&str> = object.thread_maps().iter().map(|m| m.name()).collect();
    // What ran, pair by pair: the steps that applied to it.
    let slot_ops = if steps.inline_thread_maps && cfg.jit {
        "inline-slot-ops"
    } else {
        "slot-calls"
    };
    let fused: Vec<serde_json::Value> = bpfjet_fusion::pairs(&obj)
        .iter()
        .filter_map(|(entry, exit)| {
            let planned = plan
                .pairs
                .iter()
                .find(|p| &p.entry == entry && &p.exit == exit && p.pair_refusal.is_none());
            let maps: Vec<&str> = planned
                .map(|p| {
                    p.internalised
                        .iter()
                        .map(|h| h.name.as_str())
                        .filter(|n| kept.contains(n))
                        .collect()
                })
                .unwrap_or_default();
            let mut applied = Vec::new();
            if folded.contains_key(entry) || folded.contains_key(exit) {
                applied.push("fold-attach-site");
            }
            if !maps.is_empty() {
                applied.push("internalise");
                applied.push(slot_ops);
            }
            (!applied.is_empty()).then(|| {
                serde_json::json!({
                    "entry": entry, "exit": exit, "internalised": maps, "steps": applied,
                })
            })
        })
        .collect();
    let fusion = serde_json::json!({
        "level": format!("{:?}", cfg.fuse),
        "engine": if cfg.jit { "jit" } else { "interp" },
        "fold_rodata": cfg.jit && cfg.fold_rodata,
        "folded": folded
            .iter()
            .map(|(p, c)| serde_json::json!({
                "program": p,
                "ctx": c.iter().map(|c| serde_json::json!({
                    "offset": c.offset, "size": c.size, "value": c.value,
                })).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>(),
    });
    let fusion_refusals = object.thread_map_refusals().to_vec();
    // A control plane consumes its own buffers.
    let consumes = cfg.control_plane.is_none();
    let ringbufs: Vec<String> = obj
        .maps
        .iter()
        .filter(|m| consumes && m.map_type == bpfjet_maps::MapType::Ringbuf)
        .map(|m| m.name.clone())
        .collect();
    let perfbufs: Vec<String> = obj
        .maps
        .iter()
        .filter(|m| consumes && m.map_type == bpfjet_maps::MapType::PerfEventArray)
        .map(|m| m.name.clone())
        .collect();

    // Plan every attachment before patching anything: an error leaves the
    // process untouched.
    let objects = loaded_objects();
    let mut sites: BTreeMap<u64, Site> = BTreeMap::new();
    let mut usdt_probes: BTreeMap<u64, usdt::UsdtProbe> = BTreeMap::new();
    let mut pending: Vec<dlopen::Pending> = Vec::new();
    let mut sys = SyscallPrograms::new();
    let mut perf_programs = Vec::new();
    for (id, p) in object.programs().iter().enumerate() {
        let section = p.section();
        match p.kind() {
            ProgKind::Probe(probe) if probe.flavor == ProbeFlavor::Usdt => {
                let ProbeTarget::Usdt {
                    path,
                    provider,
                    name,
                } = &probe.target
                else {
                    return Err(unsupported(
                        section,
                        "no PATH:PROVIDER:NAME target (libbpf's auto-attach form is required)",
                    ));
                };
                usdt::check_maps(object, section)?;
                p.check_ctx_size(168)
                    .map_err(|e| unsupported(section, &e))?;
                let sites = match bpfjet_probe::usdt::resolve(path, provider, name, &objects) {
                    Err(ProbeError::NotLoaded { .. }) => {
                        pending.push(dlopen::Pending {
                            program: id,
                            section: section.to_string(),
                            file: resolve_path(path, &objects)
                                .map_err(|e| unsupported(section, &e.to_string()))?,
                            target: dlopen::PendingTarget::Usdt {
                                provider: provider.clone(),
                                name: name.clone(),
                            },
                        });
                        continue;
                    }
                    r => r.map_err(|e| unsupported(section, &e.to_string()))?,
                };
                usdt::add_sites(&mut usdt_probes, sites, id);
            }
            ProgKind::Probe(probe) => {
                let (ret, multi) = match probe.flavor {
                    ProbeFlavor::Uprobe => (false, false),
                    ProbeFlavor::Uretprobe => (true, false),
                    ProbeFlavor::UprobeMulti => (false, true),
                    ProbeFlavor::UretprobeMulti => (true, true),
                    f if f.is_user() => {
                        return Err(unsupported(
                            section,
                            &format!("{f:?} is not supported by bpfjet trace (uprobe, uretprobe, uprobe.multi, uretprobe.multi and usdt are)"),
                        ))
                    }
                    _ => {
                        sys.add_kernel_probe(id, p, probe)?;
                        continue;
                    }
                };
                let ProbeTarget::User {
                    path,
                    symbol,
                    offset,
                } = &probe.target
                else {
                    return Err(unsupported(
                        section,
                        "no PATH:SYMBOL target (libbpf's auto-attach form is required)",
                    ));
                };
                // An empty symbol: a raw file offset (an int3 probes it,
                // as the kernel probes any offset; a return probe there
                // takes it for a function's entry, as the kernel does).
                if ret && *offset != 0 && !symbol.is_empty() {
                    return Err(unsupported(
                        section,
                        "a uretprobe attaches to a function's entry, not an offset",
                    ));
                }
                p.check_ctx_size(168)
                    .map_err(|e| unsupported(section, &e))?;
                let found = if multi {
                    // Every function matching the glob, aliases included
                    // (the kernel runs the program once per match).
                    bpfjet_probe::multi::resolve_pattern(path, symbol, &objects)
                } else {
                    let target = UprobeTarget {
                        path: path.clone(),
                        symbol: symbol.clone(),
                        offset: *offset,
                    };
                    resolve(&target, &objects).map(|r| vec![r])
                };
                let targets = match found {
                    // A library the program will dlopen later.
                    Err(ProbeError::NotLoaded { .. }) => {
                        pending.push(dlopen::Pending {
                            program: id,
                            section: section.to_string(),
                            file: resolve_path(path, &objects)
                                .map_err(|e| unsupported(section, &e.to_string()))?,
                            target: dlopen::PendingTarget::Probe {
                                ret,
                                multi,
                                symbol: symbol.clone(),
                                offset: *offset,
                            },
                        });
                        continue;
                    }
                    r => r.map_err(|e| unsupported(section, &e.to_string()))?,
                };
                for r in targets {
                    let site = sites
                        .entry(r.address)
                        .or_insert_with(|| Site::new(r.clone()));
                    if ret {
                        site.returns.push(id);
                    } else {
                        site.entries.push(id);
                    }
                }
            }
            ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. } => {
                sys.add(id, p)?;
            }
            ProgKind::PerfEvent => perf_programs.push(id),
            _ => {
                return Err(unsupported(
                    section,
                    "not a tracing program type bpfjet trace can attach",
                ))
            }
        }
    }
    sys.resolve_kernel_entries();
    let trace_syscalls = !sys.is_empty();
    if !trace_syscalls {
        let t = UprobeTarget {
            path: "libc.so.6".into(),
            symbol: "_exit".into(),
            offset: 0,
        };
        let r = resolve(&t, &objects).map_err(|e| format!("the exit hook: {e}"))?;
        sites
            .entry(r.address)
            .or_insert_with(|| Site::new(r.clone()))
            .report_on_entry = true;
        // Every exec of glibc goes through one of these (execv, execvp,
        // execl... call `execve`; `fexecve` makes its system call itself).
        for (symbol, _) in EXEC_FUNCTIONS {
            let t = UprobeTarget {
                path: "libc.so.6".into(),
                symbol: symbol.into(),
                offset: 0,
            };
            if let Ok(r) = resolve(&t, &objects) {
                sites
                    .entry(r.address)
                    .or_insert_with(|| Site::new(r.clone()))
                    .exec_hook = true;
            }
        }
    }

    let agent = Agent {
        cfg,
        object,
        ringbufs,
        perfbufs,
        fused,
        fusion,
        fusion_refusals,
        pairs: crate::fused::pairs(&obj),
        pid: std::process::id(),
        finished: AtomicBool::new(false),
        attachments: Mutex::new(Vec::new()),
    };
    if AGENT.set(agent).is_err() {
        return Err("the trace agent was started twice".into());
    }
    let agent = AGENT.get().unwrap();
    MEMORY_OWNER.store(std::process::id(), Ordering::Relaxed);
    // Forks that are not dispatched (no system call is traced: libc's
    // `fork` is all that runs in the child) reset the counts here; a
    // dispatched fork does it in `forked_child` and again here, harmless.
    // SAFETY: registers a handler with no preconditions.
    unsafe { libc::pthread_atfork(None, None, Some(forked_child_atfork)) };
    // Before the process's threads are dispatched: the consumer's own
    // system calls are not the traced program's. The command's agent
    // consumes the buffers the whole tree produces into.
    if agent.cfg.reporter() {
        if agent.cfg.joined {
            // The command's process after its `exec`.
            if let Some(counts) = crate::exec_note::take_counts() {
                events::carry(counts);
            }
        }
        events::start(agent)?;
    }

    for (address, site) in sites {
        let target = site.target.clone();
        let shown = format!("{}:{}", target.path.display(), target.symbol);
        let entries = site.entries.clone();
        let report = site.report_on_entry;
        let exec_hook = site.exec_hook;
        // Where the environment is among the function's arguments.
        let env_arg = EXEC_FUNCTIONS
            .iter()
            .find(|(f, _)| *f == target.symbol)
            .map(|(_, arg)| *arg);
        // Programs of links made later on the same function join here.
        let at_entry = ret_at_sp(&target);
        let extra = crate::late_links::SiteExtra::new(address, at_entry);
        let on_entry: Option<bpfjet_probe::ProbeHandler> =
            (!entries.is_empty() || report || exec_hook).then(|| -> bpfjet_probe::ProbeHandler {
                Box::new(move |regs: &mut PtRegs| {
                    let site = ProbeSite {
                        func_ip: address,
                        cookie: 0,
                        regs: 0,
                        ret_at_sp: at_entry,
                    };
                    if !entries.is_empty() {
                        if let Some(armed) = alive::can_run() {
                            for &id in &entries {
                                object.run_regs(id, regs_view(regs), &site);
                            }
                            alive::ran(armed);
                        }
                    }
                    extra.run(false, regs);
                    if report {
                        crate::late_attach::set_exit_status(regs.rdi as i32);
                        finish();
                    }
                    if exec_hook {
                        before_exec();
                        if let Some(arg) = env_arg {
                            exec_env_in_call(regs, arg);
                        }
                    }
                })
            });
        let returns = site.returns.clone();
        let on_return: Option<bpfjet_probe::ProbeHandler> = (!returns.is_empty() || exec_hook)
            .then(|| -> bpfjet_probe::ProbeHandler {
                Box::new(move |regs: &mut PtRegs| {
                    if exec_hook {
                        exec_failed();
                        crate::exec_env::forget_copy(EXEC_ENV_COPY.with(|c| c.take()));
                    }
                    extra.run(true, regs);
                    if returns.is_empty() {
                        return;
                    }
                    let site = ProbeSite {
                        func_ip: address,
                        cookie: 0,
                        regs: 0,
                        ret_at_sp: false,
                    };
                    if let Some(armed) = alive::can_run() {
                        for &id in &returns {
                            object.run_regs(id, regs_view(regs), &site);
                        }
                        alive::ran(armed);
                    }
                })
            });
        extra.set_halves(on_entry.is_some(), on_return.is_some());
        let at = match target.offset {
            0 => shown.clone(),
            off => format!("{shown}+{off:#x}"),
        };
        if let Some(a) =
            attach_site(&target, on_entry, on_return).map_err(|e| format!("{at}: {e}"))?
        {
            agent.attachments.lock().unwrap().push(a);
        }
    }

    usdt::attach(object, usdt_probes)?;
    raise_semaphores(&semaphores)?;
    dlopen::set_pending(object, pending);

    // Return probes replace return addresses; C++ exceptions must unwind
    // through the original ones.
    match bpfjet_probe::unwind::attach_guard(&objects) {
        Ok(guards) => agent.attachments.lock().unwrap().extend(guards),
        Err(e) => eprintln!("bpfjet trace: C++ exceptions through return probes will abort: {e}"),
    }
    // Last: from here on the process's system calls are dispatched.
    if trace_syscalls {
        let inline = agent.cfg.fuse >= Fuse::Inline;
        let sys = install_syscalls(object, sys, inline)?;
        let _ = SYSCALL_PROGRAMS.set(sys);
    }
    if !perf_programs.is_empty() && crate::late_attach::is_late() {
        // Loaded into a running process, the agent cannot make a timer in
        // each of its threads (nor see the threads it creates later).
        eprintln!(
            "bpfjet trace: pid {}: perf_event programs are not run in a process bpfjet \
             attached to while it ran; only processes bpfjet starts are sampled",
            std::process::id()
        );
    } else if !perf_programs.is_empty() {
        crate::sampling::start(object, perf_programs, sample_period_ns)?;
        crate::threads::enable_thread_hook();
    }
    Ok(())
}

/// The system-call programs, once installed.
static SYSCALL_PROGRAMS: OnceLock<&'static SyscallPrograms> = OnceLock::new();

/// After [`start`], outside the agent's own work: when this image was
/// started by an `exec` of the traced tree, whose entry programs ran in
/// the image it replaced, the call returns here, with 0, as the kernel's
/// `sys_exit_execve` fires in the new image. The registers are the
/// new image's as far as this point knows them: the system-call number
/// and the result; the others read 0.
pub fn exec_returned() {
    let (Some(agent), Some(sys)) = (agent(), SYSCALL_PROGRAMS.get()) else {
        return;
    };
    if !agent.cfg.joined {
        return;
    }
    let object = agent.object;
    let regs = PtRegs {
        // A successful `execveat` returns as `execve` does (exec_note.rs).
        orig_rax: EXECVE,
        rax: 0,
        ..PtRegs::default()
    };
    // As in the SIGSYS handler: the helpers' own system calls are not the
    // traced program's.
    syscalls::allowed(|| {
        if let Some(armed) = alive::can_run() {
            run_exit_programs(object, sys, &regs);
            alive::ran(armed);
        }
    });
}

/// The programs of system call `regs.orig_rax`'s entry, and those of
/// every entry.
fn run_enter_programs(object: &TracingObject, sys: &SyscallPrograms, regs: &PtRegs) {
    let nr = regs.orig_rax;
    let progs = sys.enter.get(nr as usize).map_or(&[][..], |v| &v[..]);
    let kprobes = sys
        .kernel_enter
        .get(nr as usize)
        .map_or(&[][..], |v| &v[..]);
    if progs.is_empty()
        && sys.every_enter.is_empty()
        && sys.raw_enter.is_empty()
        && kprobes.is_empty()
    {
        return;
    }
    let Some(armed) = alive::can_run() else {
        return;
    };
    let site = ProbeSite {
        func_ip: 0,
        cookie: 0,
        regs: regs as *const PtRegs as u64,
        ret_at_sp: false,
    };
    let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
    for &id in progs.iter().chain(&sys.every_enter) {
        let mut ctx = SysEnterCtx::new(nr as i64, args);
        object.run_sys_enter(id, &mut ctx, &site);
    }
    for &id in &sys.raw_enter {
        let mut args = RawSyscallArgs {
            args: [regs as *const PtRegs as u64, nr],
        };
        object.run_raw_syscall(id, &mut args, &site);
    }
    if !kprobes.is_empty() {
        run_kernel_probes(object, sys, regs, kprobes, false);
    }
    alive::ran(armed);
}

/// Kernel probes on the entry point (`ret` false) or its return of the
/// system call in `regs`, with the kernel's registers at that point
/// (ksyscall.rs); the user registers are the hit's "kernel" memory, as
/// `raw_tracepoint/sys_*`'s.
fn run_kernel_probes(
    object: &TracingObject,
    sys: &SyscallPrograms,
    regs: &PtRegs,
    progs: &[(ProgId, bool)],
    ret: bool,
) {
    let entry = sys
        .kernel_entry
        .get(&(regs.orig_rax as u32))
        .copied()
        .unwrap_or(0);
    let site = ProbeSite {
        func_ip: entry,
        cookie: 0,
        regs: regs as *const PtRegs as u64,
        ret_at_sp: false,
    };
    for &(id, wrapper) in progs {
        let mut kregs = if ret {
            bpfjet_probe::ksyscall::return_regs(regs)
        } else {
            bpfjet_probe::ksyscall::entry_regs(regs, entry, wrapper)
        };
        object.run_regs(id, regs_view(&mut kregs), &site);
    }
}

/// The programs of system call `regs.orig_rax`'s return, and those of
/// every return.
fn run_exit_programs(object: &TracingObject, sys: &SyscallPrograms, regs: &PtRegs) {
    let nr = regs.orig_rax;
    let progs = sys.exit.get(nr as usize).map_or(&[][..], |v| &v[..]);
    let site = ProbeSite {
        func_ip: 0,
        cookie: 0,
        regs: regs as *const PtRegs as u64,
        ret_at_sp: false,
    };
    for &id in progs.iter().chain(&sys.every_exit) {
        let mut ctx = SysExitCtx::new(nr as i64, regs.rax as i64);
        object.run_sys_exit(id, &mut ctx, &site);
    }
    for &id in &sys.raw_exit {
        let mut args = RawSyscallArgs {
            args: [regs as *const PtRegs as u64, regs.rax],
        };
        object.run_raw_syscall(id, &mut args, &site);
    }
    // A forked child returns from its clone into user space without
    // leaving the entry point's kernel function (the kernel starts it at
    // `ret_from_fork`): the call's tracepoint fires there, its kretprobe
    // does not.
    if let Some(kprobes) = sys.kernel_exit.get(nr as usize).filter(|v| !v.is_empty()) {
        let forked_child = regs.rax == 0 && bpfjet_probe::ksyscall::is_clone(nr);
        if !forked_child {
            run_kernel_probes(object, sys, regs, kprobes, true);
        }
    }
}

/// Load the object on the JIT with its eligible `sys_enter_X`/`sys_exit_X`
/// pairs compiled into one function each (`--fuse compile`,
/// `crate::fused`).
fn load_compiled_pairs(
    obj: &bpfjet_obj::Object,
    opts: &TracingOptions,
    steps: &bpfjet_jit::TracingJit,
) -> Result<TracingObject, bpfjet_jit::ObjectError> {
    let (candidates, refusals) = crate::fused::compile_candidates(obj);
    let pairs: Vec<(String, String)> = candidates
        .iter()
        .map(|(e, x, _)| (e.clone(), x.clone()))
        .collect();
    let jit = bpfjet_jit::JitOptions::default();
    let (tracing, outcomes) = bpfjet_jit::load_tracing_fused(obj, opts, &jit, steps, &pairs)?;
    crate::fused::keep_compiled(&candidates, outcomes, refusals);
    Ok(tracing)
}

/// The context fields constant at each program's attach point: for
/// `tracepoint/syscalls/sys_enter_X|sys_exit_X`, the record's system-call
/// number (`id` at offset 8, read whole or as its low half). Programs of
/// other attach points get none.
fn attach_site_constants(
    obj: &bpfjet_obj::Object,
) -> BTreeMap<String, Vec<bpfjet_jit::CtxConstant>> {
    let mut out = BTreeMap::new();
    for p in &obj.programs {
        let ProgKind::Tracepoint { category, name } = &p.kind else {
            continue;
        };
        if category != "syscalls" {
            continue;
        }
        let call = name
            .strip_prefix("sys_enter_")
            .or_else(|| name.strip_prefix("sys_exit_"));
        let Some(nr) = call.and_then(syscall_table::tracepoint_number) else {
            continue;
        };
        let id = std::mem::offset_of!(SysEnterCtx, id) as u64;
        debug_assert_eq!(id, std::mem::offset_of!(SysExitCtx, id) as u64);
        out.insert(
            p.name.clone(),
            vec![
                bpfjet_jit::CtxConstant {
                    offset: id,
                    size: 8,
                    value: u64::from(nr),
                },
                bpfjet_jit::CtxConstant {
                    offset: id,
                    size: 4,
                    value: u64::from(nr),
                },
            ],
        );
    }
    out
}

impl Site {
    fn new(target: bpfjet_probe::ResolvedSymbol) -> Site {
        Site {
            target,
            entries: Vec::new(),
            returns: Vec::new(),
            report_on_entry: false,
            exec_hook: false,
        }
    }
}

/// libc's exec functions and which of their arguments is the
/// environment: every exec of glibc goes through one (execv, execvp,
/// execl... call `execve`; `fexecve` makes its system call itself).
const EXEC_FUNCTIONS: [(&str, usize); 3] = [("execve", 2), ("execveat", 3), ("fexecve", 2)];

thread_local! {
    /// The environment copy this thread's exec function runs with (no
    /// system call traced), unmapped if the function returns.
    static EXEC_ENV_COPY: std::cell::Cell<Option<(u64, usize)>> = const { std::cell::Cell::new(None) };
}

/// In the hook on a libc exec function: the environment argument `arg`
/// (a function's: rdi rsi rdx rcx) replaced by a copy with the tree's
/// settings when it lacks them (exec_env.rs).
fn exec_env_in_call(regs: &mut PtRegs, arg: usize) {
    let reg = match arg {
        2 => &mut regs.rdx,
        _ => &mut regs.rcx,
    };
    if let Some((envp, len)) = crate::exec_env::envp_for_exec(*reg) {
        *reg = envp;
        EXEC_ENV_COPY.with(|c| c.set(Some((envp, len))));
    }
}

const EXECVE: u64 = 59;
const EXECVEAT: u64 = 322;
/// `bpf_get_current_task`.
const GET_CURRENT_TASK: u32 = 35;

/// An `exec` is about to replace this image (its entry programs ran).
/// The command's own process hands over what its agent does: the
/// consumer drains the buffers and stops, and its counts go to the next
/// image's agent (following) or into the report, written now because no
/// later image reports (`--no-follow`).
fn before_exec() {
    let Some(agent) = agent() else { return };
    if in_parents_memory() {
        return;
    }
    let own_image = std::process::id() == agent.pid;
    let reports = own_image && agent.cfg.reporter();
    if !reports || agent.cfg.instance.is_some() {
        // This image's counts end here and the next one (if traced)
        // counts afresh. If the `exec` fails, this image counts on from
        // zero and leaves another part at its exit.
        alive::agent_work(|| report::write_process_part(agent));
        agent.object.reset_counters();
        alive::reset_skipped();
    }
    if !own_image {
        // A forked child: its per-thread values are copies of its
        // parent's, which the parent writes back.
        return;
    }
    // The values kept per thread die with this image; the unfused
    // programs' map entries would not. Written back now, they are in the
    // map for the next image; if the `exec` fails, the final write-back
    // replaces them (`ThreadMap::write_back` first deletes what it wrote).
    alive::agent_work(|| {
        if let Err(e) = agent.object.write_back_thread_maps() {
            eprintln!("bpfjet trace: pid {}: before exec: {e}", agent.pid);
        }
    });
    if !agent.cfg.reporter() || agent.finished.load(Ordering::SeqCst) {
        return;
    }
    alive::agent_work(|| {
        let counts = events::pause();
        if agent.cfg.instance.is_some() {
            crate::exec_note::carry_counts(&counts);
        } else {
            report::write_report(agent, &counts);
        }
    });
}

/// The `exec` failed: this image goes on, and so does its consumer.
fn exec_failed() {
    let Some(agent) = agent() else { return };
    if in_parents_memory() {
        return;
    }
    if std::process::id() != agent.pid || !agent.cfg.reporter() {
        return;
    }
    alive::agent_work(|| {
        crate::exec_note::take_counts();
        if let Err(e) = events::start(agent) {
            eprintln!("bpfjet trace: the consumer after a failed exec: {e}");
        }
    });
}

/// How the system-call hooks are installed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SyscallInstall {
    /// At the agent's start, in a process started with it preloaded: the
    /// hooks also see the process exec and exit.
    AtStart,
    /// At the agent's start in a process that was running
    /// (`bpfjet trace --pid`): the tracer dispatches its threads.
    IntoRunning,
    /// For links made while the process runs, in a process that traced no
    /// system call: the tracer dispatches its threads; the exit and
    /// `exec` functions' probes patched at the start still see the process
    /// exec and exit.
    ForLateLinks,
}

/// System-call programs of links made after the process started, with
/// their objects: each hook runs them after the start's. Replaced whole
/// when links come (the old list is leaked: a hit may be reading it), so
/// a hit reads it with one atomic load.
type SyscallSet = (&'static TracingObject, &'static SyscallPrograms);
static LATE_SYSCALLS: AtomicPtr<Vec<SyscallSet>> = AtomicPtr::new(std::ptr::null_mut());

fn late_syscall_sets() -> &'static [SyscallSet] {
    let p = LATE_SYSCALLS.load(Ordering::Acquire);
    if p.is_null() {
        return &[];
    }
    // SAFETY: lists are leaked, never freed.
    unsafe { &*p }
}

/// Which system calls' exits `sys` runs programs at.
fn exits_of(sys: &SyscallPrograms) -> Vec<bool> {
    (0..sys.exit.len() as u64)
        .map(|nr| sys.has_exit(nr))
        .collect()
}

/// Adds the system-call tracepoint programs of links made while the
/// process runs. Returns true when the hooks were installed for them now
/// (the process traced no system call): the tracer must then dispatch
/// every existing thread (`bpfjet_late_enable_thread`).
pub(crate) fn add_late_syscalls(
    object: &'static TracingObject,
    programs: &[ProgId],
) -> Result<bool, String> {
    let mut sys = SyscallPrograms::new();
    for &id in programs {
        sys.add(id, &object.programs()[id])?;
    }
    let sys: &'static SyscallPrograms = Box::leak(Box::new(sys));
    syscalls::add_exits_traced(&exits_of(sys));
    let mut list = late_syscall_sets().to_vec();
    list.push((object, sys));
    LATE_SYSCALLS.store(Box::into_raw(Box::new(list)), Ordering::Release);
    if syscalls::installed() {
        return Ok(false);
    }
    install_hooks(None, SyscallInstall::ForLateLinks, false)?;
    Ok(true)
}

fn install_syscalls(
    object: &'static TracingObject,
    sys: SyscallPrograms,
    inline: bool,
) -> Result<&'static SyscallPrograms, String> {
    let sys: &'static SyscallPrograms = Box::leak(Box::new(sys));
    // Wrapper calls whose exit runs no program skip the exit hook.
    syscalls::set_exits_traced(exits_of(sys));
    let how = if crate::late_attach::is_late() {
        SyscallInstall::IntoRunning
    } else {
        SyscallInstall::AtStart
    };
    install_hooks(Some((object, sys)), how, inline)?;
    Ok(sys)
}

/// Installs the system-call hooks running `start`'s programs and those of
/// later links, and the libc wrappers' fast path.
fn install_hooks(
    start: Option<SyscallSet>,
    how: SyscallInstall,
    inline: bool,
) -> Result<(), String> {
    // Pairs (enter and exit programs on one system call) run through a
    // call-through stub on the wrappers that issue it (`--fuse inline`).
    let call_through =
        move |nr: u32| inline && start.is_some_and(|(_, sys)| sys.has_enter_and_exit(nr));
    if how != SyscallInstall::IntoRunning {
        // Preloaded: the agent's `pthread_create` dispatches new threads.
        threads::enable_thread_hook();
    }
    if let (true, Some((object, _))) = (inline, start) {
        crate::fused::install_pair_hooks(object);
    }
    // Exec and exit: seen here at the start of a process started with the
    // agent; by the probes on libc's exit and exec functions otherwise.
    let lifecycle = how != SyscallInstall::ForLateLinks;
    // A forked child's cached ids are the child's before its first call
    // (the atfork handler, which also runs, comes after glibc's own calls).
    syscalls::set_fork_child_hook(forked_child);
    syscalls::set_vm_child_hook(bpfjet_runtime::tracing::ids_changed);
    let hooks = SyscallHooks {
        on_enter: Some(Box::new(move |regs: &PtRegs| {
            if let Some((object, sys)) = start {
                run_enter_programs(object, sys, regs);
            }
            for &(object, sys) in late_syscall_sets() {
                run_enter_programs(object, sys, regs);
            }
            let nr = regs.orig_rax;
            if lifecycle && (nr == EXECVE || nr == EXECVEAT) {
                before_exec();
            }
        })),
        on_exit: Some(Box::new(move |regs: &PtRegs| {
            let nr = regs.orig_rax;
            if lifecycle && (nr == EXECVE || nr == EXECVEAT) {
                exec_failed();
            }
            for (object, sys) in start.into_iter().chain(late_syscall_sets().iter().copied()) {
                if !sys.has_exit(nr) {
                    continue;
                }
                let Some(armed) = alive::can_run() else {
                    return;
                };
                run_exit_programs(object, sys, regs);
                alive::ran(armed);
            }
        })),
        before_exit: lifecycle.then(|| -> Box<dyn Fn(i32) + Send + Sync> {
            Box::new(|status| {
                crate::late_attach::set_exit_status(status);
                finish()
            })
        }),
    };
    match how {
        SyscallInstall::AtStart => syscalls::install(hooks),
        // Loaded into a running process: its threads are dispatched by
        // the tracer, one by one, once this call returned (late_attach.rs).
        SyscallInstall::IntoRunning => syscalls::install_for_tracer(hooks),
        SyscallInstall::ForLateLinks => syscalls::sigsys_unclaimed().and_then(|()| {
            if crate::late_attach::is_late() {
                // A process `bpfjet trace --pid` attached to.
                syscalls::install_for_tracer(hooks)
            } else {
                syscalls::install_late(hooks)
            }
        }),
    }
    .map_err(|e| format!("system-call tracing: {e}"))?;
    // Common libc wrappers without a signal per call; the others keep the
    // slow path, which is correct for every call.
    for f in fast_syscalls::install_with(&call_through) {
        if let Ok(a) = f.attachment {
            if f.call_through {
                crate::fused::record_call_through(f.syscall, f.wrapper);
            }
            if let Some(agent) = agent() {
                agent.attachments.lock().unwrap().push(a);
            }
        }
    }
    Ok(())
}

/// In a forked child, right after the fork: the ids the helpers cache
/// change, and the child's counts start at zero (its parent reports what
/// it counted before).
fn forked_child() {
    bpfjet_runtime::tracing::forked_child();
    forked_child_atfork();
}

extern "C" fn forked_child_atfork() {
    MEMORY_OWNER.store(std::process::id(), Ordering::Relaxed);
    crate::sampling::forked_child();
    if let Some(agent) = agent() {
        agent.object.reset_in_forked_child();
        alive::reset_skipped();
    }
}

/// The process whose memory this is: set at start and in each forked
/// child. A `posix_spawn`/`vfork` child runs in its parent's memory until
/// it `exec`s or exits, and finds another process id here.
static MEMORY_OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Running in a parent's memory (see [`MEMORY_OWNER`]): the agent's
/// counts, report and hand-overs are the parent's, not this process's to
/// write or reset. Its programs run (its system calls are traced).
fn in_parents_memory() -> bool {
    std::process::id() != MEMORY_OWNER.load(Ordering::Relaxed)
}

/// Attaching failed after the agent was set up: the error report is the
/// one the CLI must read, not a map report written by the exit hook.
pub fn abandon() {
    if let Some(agent) = agent() {
        agent.finished.store(true, Ordering::SeqCst);
    }
}

/// The process is ending: drain the ring buffers and write the report,
/// once, from the traced process itself (not a forked child).
pub fn finish() {
    let Some(agent) = agent() else { return };
    if in_parents_memory() {
        // A vfork-style child ending before it `exec`s (a failed spawn):
        // nothing of the agent is its own.
        return;
    }
    // A forked child has its own copy of the flag.
    if agent.finished.swap(true, Ordering::SeqCst) {
        return;
    }
    crate::sampling::stop();
    let own_image = std::process::id() == agent.pid;
    if !own_image || !agent.cfg.reporter() {
        // The command's agent reports the maps; this process leaves its
        // own counts. An executed program's per-thread hand-off values go
        // back into the shared maps first, as its unfused programs would
        // have left them (a forked child's are copies of its parent's).
        alive::agent_work(|| {
            if own_image {
                if let Err(e) = agent.object.write_back_thread_maps() {
                    eprintln!("bpfjet trace: pid {}: {e}", agent.pid);
                }
            }
            report::write_process_part(agent);
        });
        return;
    }
    alive::agent_work(|| {
        let counts = events::stop();
        report::write_report(agent, &counts);
    });
}
