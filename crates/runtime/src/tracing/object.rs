//! A loaded tracing object and its thread-safe run entry.

use super::context::{PerfEventData, PtRegs, RawSyscallArgs, SysEnterCtx, SysExitCtx};
use super::env::{ProbeSite, TracingEnv};
use super::slots::CpuSlots;
use super::thread_maps::{internal_helper, ThreadMap, ThreadMapRef, ThreadMapSpec};
use crate::env::{ObjectMaps, RunEnv};
use crate::error::Fault;
use crate::loader::{LoadedObject, ObjectOptions};
use crate::program::Program;
use crate::runtime_error::RuntimeError;
use crate::state::RunState;
use bpfjet_isa::{CallTarget, Insn};
use bpfjet_maps::state::MapState;
use bpfjet_obj::{Object, ProgKind, ProgType};
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

// The fused pairs' half runs share this module's thread run states.
#[path = "fused_run.rs"]
mod fused_run;
pub use fused_run::{HalfRun, PairRun};

/// Native code for a program (the JIT's), installed in place of the
/// interpreter. `bpfjet_jit` implements it for its compiled programs.
pub trait NativeEntry: Send + Sync {
    /// Run with `ctx` in r1 and `user` as the per-run context.
    fn run_native(
        &self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        ctx: u64,
    ) -> Result<u64, Fault>;

    /// [`NativeEntry::run_native`] of a tracing run: the per-run context
    /// is known to be a [`TracingEnv`] (whose CPU slot is set), so an
    /// engine need not find out by downcasting.
    fn run_tracing(
        &self,
        state: &mut RunState,
        env: &mut TracingEnv,
        ctx: u64,
    ) -> Result<u64, Fault> {
        self.run_native(state, env, ctx)
    }
}

/// How to load a tracing object.
#[derive(Clone, Debug)]
pub struct TracingOptions {
    /// CPU slots (per-CPU map values, concurrent runs); default: the
    /// host's possible CPUs.
    pub ncpus: usize,
    /// Publish the maps under this instance name for `bpfjet map`.
    pub instance_name: Option<String>,
    /// Join the running instance of this name instead of creating maps:
    /// every map of the object is the instance's map of the same name,
    /// contents as they are (`bpfjet trace` following an `exec`: the new
    /// image's programs share the maps of the process tree). A map the
    /// instance lacks, or has with another shape, is an error.
    pub join: Option<String>,
    /// The object's maps are these, in order: maps a control plane made
    /// in the `bpf()` instance of this name (`bpfjet trace --instance`,
    /// the programs its links attach). Every process running them shares
    /// one CPU slot table under that name.
    pub control_plane: Option<(String, Vec<Arc<bpfjet_maps::Map>>)>,
    /// Initial map contents.
    pub state: Option<MapState>,
    /// Lines of `bpf_trace_printk` output kept for
    /// [`TracingObject::take_trace_lines`]; older lines are dropped.
    pub trace_lines: usize,
    /// Maps to keep per thread instead of in the map (pairwise fusion's
    /// state internalisation, [`super::thread_maps`]), with every map
    /// helper call on them. A map that cannot be kept so (not a plain hash
    /// map, a call that is not where the spec says) stays a map:
    /// [`TracingObject::thread_map_refusals`] says why.
    pub thread_maps: Vec<ThreadMapSpec>,
}

impl Default for TracingOptions {
    fn default() -> Self {
        TracingOptions {
            ncpus: crate::loader::possible_cpus(),
            instance_name: None,
            join: None,
            control_plane: None,
            state: None,
            trace_lines: 10_000,
            thread_maps: Vec::new(),
        }
    }
}

/// `obj` loaded as `opts` says: its maps created (in a private instance,
/// or published under [`TracingOptions::instance_name`]) or taken from the
/// running instance [`TracingOptions::join`] names; every program verified.
pub fn load_maps_and_programs(
    obj: &Object,
    opts: &TracingOptions,
) -> Result<LoadedObject, RuntimeError> {
    let object_opts = ObjectOptions {
        ncpus: opts.ncpus,
        unverified: false,
        instance_name: opts.instance_name.clone(),
        state: opts.state.clone(),
        fib: None,
        // `bpfjet trace` has no loader code choosing among programs: it
        // loads and attaches every one, `SEC("?...")` ones included.
        autoload: obj.programs.iter().map(|p| p.name.clone()).collect(),
    };
    if let Some((name, maps)) = &opts.control_plane {
        let instance = bpfjet_maps::Instance::open(name).map_err(|source| RuntimeError::Map {
            map: format!("<instance {name}>"),
            source,
        })?;
        let next = std::cell::Cell::new(0usize);
        let reuse = |_: &bpfjet_maps::spec::MapSpec| {
            let i = next.get();
            next.set(i + 1);
            maps.get(i).cloned()
        };
        let object_opts = ObjectOptions {
            instance_name: Some(name.clone()),
            state: None,
            ..object_opts
        };
        let (loaded, _) = LoadedObject::load_in(obj, &object_opts, instance, &reuse)?;
        return Ok(loaded);
    }
    let Some(name) = &opts.join else {
        return LoadedObject::load(obj, &object_opts);
    };
    let instance_error = |source| RuntimeError::Map {
        map: format!("<instance {name}>"),
        source,
    };
    let lookup = bpfjet_maps::Instance::open(name).map_err(instance_error)?;
    let mut shared = Vec::with_capacity(obj.maps.len());
    for spec in &obj.maps {
        let map = lookup
            .map_by_name(&spec.name)
            .map_err(|source| RuntimeError::Map {
                map: spec.name.clone(),
                source,
            })?;
        // The same object with the same settings made it; `max_entries`
        // may have been sized at load (a perf event array's 0 = the CPUs).
        let have = map.spec();
        if have.map_type != spec.map_type
            || have.key_size != spec.key_size
            || have.value_size != spec.value_size
        {
            return Err(RuntimeError::Map {
                map: spec.name.clone(),
                source: bpfjet_maps::MapError::Invalid(
                    "the joined instance's map of this name has another type, key or value size",
                ),
            });
        }
        shared.push(map);
    }
    let instance = bpfjet_maps::Instance::open(name).map_err(instance_error)?;
    let reuse = |spec: &bpfjet_maps::spec::MapSpec| {
        shared.iter().find(|m| m.spec().name == spec.name).cloned()
    };
    let object_opts = ObjectOptions {
        instance_name: Some(name.clone()),
        state: None,
        ..object_opts
    };
    let (loaded, _) = LoadedObject::load_in(obj, &object_opts, instance, &reuse)?;
    Ok(loaded)
}

/// Index of a program in [`TracingObject::programs`].
pub type ProgId = usize;

enum Entry {
    Interp(Program),
    Native(Arc<dyn NativeEntry>),
}

/// One tracing program of the object.
pub struct TracingProgram {
    name: String,
    section: String,
    kind: ProgKind,
    prog_type: ProgType,
    /// The furthest context byte the program reads (the kernel's
    /// `max_ctx_offset`).
    ctx_bytes: u64,
    /// The context record's size at bpfjet's attach points
    /// ([`TracingProgram::attach_ctx_size`], else `ctx_bytes`): what
    /// `bpf_probe_read_kernel` may read of it.
    ctx_len: u64,
    /// The attach cookie of this program's link, for every hit
    /// ([`TracingObject::set_cookie`]); None: the attach point's.
    cookie: Option<u64>,
    /// The record of the control plane's link this program runs for
    /// ([`TracingObject::watch_links`]): once it is gone, the program runs
    /// no more, as a probe stops when its link goes.
    link: Option<std::ffi::CString>,
    /// False once [`TracingProgram::link`] is gone.
    live: std::sync::atomic::AtomicBool,
    entry: Entry,
}

impl TracingProgram {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn section(&self) -> &str {
        &self.section
    }

    /// The program's type and parsed attach target (the workspace's one
    /// program-type definition): `ProgKind::Probe` (target path, symbol,
    /// offset, return probe or not), `ProgKind::Tracepoint`,
    /// `ProgKind::RawTracepoint`.
    pub fn kind(&self) -> &ProgKind {
        &self.kind
    }

    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// Bytes of context the program may read: the context handed to
    /// [`TracingObject::run`] must be at least this large.
    pub fn ctx_bytes(&self) -> u64 {
        self.ctx_bytes
    }

    /// Runs on native code (the JIT) rather than the interpreter.
    pub fn is_native(&self) -> bool {
        matches!(self.entry, Entry::Native(_))
    }

    /// Whether a context of `size` bytes covers what the program reads,
    /// as the kernel checks at attach (`max_ctx_offset` against the
    /// tracepoint's record size or argument count); the error says why not.
    pub fn check_ctx_size(&self, size: u64) -> Result<(), String> {
        if self.ctx_bytes <= size {
            Ok(())
        } else {
            Err(format!(
                "program {} reads {} bytes of its context, the attach point provides {size}",
                self.name, self.ctx_bytes
            ))
        }
    }

    /// The context size bpfjet's attach points provide for this program:
    /// `pt_regs` for probes, the `sys_enter`/`sys_exit` record for the
    /// syscalls and raw_syscalls tracepoints, two arguments for the raw `sys_enter` /
    /// `sys_exit`; an error for attach points bpfjet does not provide.
    pub fn attach_ctx_size(&self) -> Result<u64, String> {
        use bpfjet_obj::SyscallTracepoint as Tp;
        match (&self.kind, self.kind.syscall_tracepoint()) {
            (ProgKind::Probe(_), _) => Ok(std::mem::size_of::<PtRegs>() as u64),
            (_, Some(Tp::Enter(_) | Tp::EveryEnter { raw_args: false })) => {
                Ok(std::mem::size_of::<SysEnterCtx>() as u64)
            }
            (_, Some(Tp::Exit(_) | Tp::EveryExit { raw_args: false })) => {
                Ok(std::mem::size_of::<SysExitCtx>() as u64)
            }
            (_, Some(Tp::EveryEnter { raw_args: true } | Tp::EveryExit { raw_args: true })) => {
                Ok(std::mem::size_of::<RawSyscallArgs>() as u64)
            }
            // Fired by data planes with every argument slot (xdp_events).
            (ProgKind::TpBtf { .. }, None) => {
                Ok(std::mem::size_of::<super::xdp_events::TpBtfArgs>() as u64)
            }
            (other, None) => Err(format!(
                "bpfjet attaches tracepoints of the traced process's own system calls \
                 ({}), not section {} ({other})",
                bpfjet_obj::SYSCALL_TRACEPOINT_SECTIONS,
                self.section
            )),
        }
    }
}

/// What one thread keeps for one object: reused by every run on that thread.
struct ThreadRun {
    object: u64,
    state: RunState,
    env: TracingEnv,
}

/// What a run looks up per hit, per thread: whether a run is under way,
/// and the last object run with a pointer to its [`ThreadRun`] (so the
/// usual hit, one object, finds its state without a search).
///
/// The kernel skips a tracing program hit while the same CPU runs one
/// (`recursion_misses`); here a thread with a run under way, of any object,
/// skips (a probe inside a helper, a signal handler): `running` is that
/// rule, for every object of the thread at once, as the `RefCell` borrow of
/// the whole run list was before.
///
/// A thread-local of the initial-exec model declared in assembly, as the
/// probe crate's per-thread block (a Rust thread-local in the trace agent,
/// a shared object, costs a `__tls_get_addr` call per access); zero bytes
/// are its initial value (`run_cache_starts_empty`). The run states
/// themselves are owned by a Rust thread-local ([`THREAD_RUNS`]), touched
/// only on a cache miss.
#[repr(C)]
struct RunCache {
    running: Cell<bool>,
    /// The run states outlive the thread's thread-locals
    /// ([`keep_thread_runs_at_exit`]).
    keep_at_exit: Cell<bool>,
    /// The object of `last`; 0 (no object's uid) when `last` is unset.
    last_object: Cell<u64>,
    last: Cell<*mut ThreadRun>,
}

crate::initial_exec_thread_local! {
    /// This thread's run cache.
    unsafe fn run_cache() -> &'static RunCache = "bpfjet_run_cache";
}

/// Every object's run state on this thread, boxed (the cache points into
/// a box, which growing the list does not move). Dropped when the thread's
/// thread-locals go: the cache is cleared first.
// The boxes are the point: the cache holds pointers into them.
#[allow(clippy::vec_box)]
struct ThreadRuns(UnsafeCell<Vec<Box<ThreadRun>>>);

impl Drop for ThreadRuns {
    fn drop(&mut self) {
        let c = run_cache();
        if c.keep_at_exit.get() {
            // The process's main thread in `exit()`: its states go on
            // (leaked; the boxes do not move, so the cache stays right).
            // SAFETY: the thread-local is being destroyed; nothing else
            // refers to the list itself.
            let runs = std::mem::take(unsafe { &mut *self.0.get() });
            AFTER_EXIT.with_list(|after| after.extend(runs));
            return;
        }
        c.last_object.set(0);
        c.last.set(std::ptr::null_mut());
    }
}

/// The run states of the thread whose thread-locals are gone but that
/// goes on running programs: the main thread after `exit()` destroyed
/// them, which then flushes stdio (`write`), runs `atexit` handlers and
/// calls `exit_group`, all of which the kernel traces. One thread at most
/// (the process ends after), so a plain pointer to a leaked list. Boxes,
/// as in [`ThreadRuns`]: the run cache points into them.
#[allow(clippy::vec_box)]
struct AfterExit(std::sync::atomic::AtomicPtr<Vec<Box<ThreadRun>>>);

static AFTER_EXIT: AfterExit = AfterExit(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()));

impl AfterExit {
    fn with_list<R>(&self, f: impl FnOnce(&mut Vec<Box<ThreadRun>>) -> R) -> R {
        let mut p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            p = Box::into_raw(Box::default());
            self.0.store(p, Ordering::Release);
        }
        // SAFETY: only the thread that keeps its runs at exit (one, the
        // main thread) reaches the list.
        f(unsafe { &mut *p })
    }
}

/// Keep the calling thread's run states after its thread-locals are
/// destroyed, for the rest of its life: for the process's main thread,
/// called before the runtime's thread-locals go (the trace agent's exit
/// guard), so that the system calls `exit()` makes after destroying them
/// run their programs as the kernel's would. Other threads' states go
/// with their thread-locals, and their few later calls are skipped.
pub fn keep_thread_runs_at_exit() {
    run_cache().keep_at_exit.set(true);
}

/// Whether a program run is under way on the calling thread (a handler
/// interrupting it, a signal's, would find its run skipped).
pub fn running_here() -> bool {
    run_cache().running.get()
}

thread_local! {
    static THREAD_RUNS: ThreadRuns = const { ThreadRuns(UnsafeCell::new(Vec::new())) };
}

impl RunCache {
    /// The thread's run state for object `uid`, made by `make` on the
    /// object's first run on this thread; `None` once the thread's
    /// thread-locals are being destroyed.
    ///
    /// # Safety
    /// The caller holds `running`: no reference into the run list is live.
    #[inline(always)]
    unsafe fn get(&self, uid: u64, make: impl FnOnce() -> ThreadRun) -> Option<*mut ThreadRun> {
        if self.last_object.get() == uid {
            return Some(self.last.get());
        }
        // SAFETY: per the contract.
        unsafe { self.find(uid, make) }
    }

    #[cold]
    unsafe fn find(&self, uid: u64, make: impl FnOnce() -> ThreadRun) -> Option<*mut ThreadRun> {
        #[allow(clippy::vec_box)]
        fn pick(
            runs: &mut Vec<Box<ThreadRun>>,
            uid: u64,
            make: impl FnOnce() -> ThreadRun,
        ) -> *mut ThreadRun {
            match runs.iter_mut().position(|r| r.object == uid) {
                Some(i) => &mut *runs[i],
                None => {
                    runs.push(Box::new(make()));
                    &mut **runs.last_mut().expect("just pushed")
                }
            }
        }
        let mut make = Some(make);
        let run = match THREAD_RUNS.try_with(|runs| {
            // SAFETY: per `get`'s contract.
            pick(
                unsafe { &mut *runs.0.get() },
                uid,
                make.take().expect("once"),
            )
        }) {
            Ok(run) => run,
            Err(_) if self.keep_at_exit.get() => {
                AFTER_EXIT.with_list(|runs| pick(runs, uid, make.take().expect("once")))
            }
            Err(_) => return None,
        };
        self.last_object.set(uid);
        self.last.set(run);
        Some(run)
    }

    /// Drops the thread's run state for object `uid` (the object goes).
    fn forget(&self, uid: u64) {
        if self.running.get() {
            // Dropped from inside a run of this thread (bpfjet never does):
            // the state may be in use; it stays until the thread exits.
            return;
        }
        if self.last_object.get() == uid {
            self.last_object.set(0);
            self.last.set(std::ptr::null_mut());
        }
        let _ = THREAD_RUNS.try_with(|runs| {
            // SAFETY: no run is under way on this thread, so nothing
            // refers into the list.
            unsafe { (*runs.0.get()).retain(|r| r.object != uid) };
        });
    }
}

/// Clears the thread's `running` flag when a run ends, however it ends.
struct Running<'a>(&'a Cell<bool>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// Whether a run of the object's programs must lease a CPU slot: the slot
/// is the run's CPU, which only per-CPU state observes (per-CPU map values
/// and LRU lists, the perf buffer a `BPF_F_CURRENT_CPU` output goes to,
/// `bpf_get_smp_processor_id`, `bpf_for_each_map_elem` on per-CPU maps).
/// Decided once at load from the object's maps and every program's helper
/// calls; map-in-maps (whose inner maps are only known at run time),
/// program arrays (tail calls) and kfunc calls count as needing it, and so
/// does a program bpfjet did not verify (its calls are not listed).
fn needs_cpu_slot(loaded: &LoadedObject) -> bool {
    use bpfjet_maps::MapType::*;
    let cpu_maps = loaded.object_maps().maps().iter().any(|m| {
        matches!(
            m.map_type(),
            PercpuHash
                | PercpuArray
                | LruHash
                | LruPercpuHash
                | PerfEventArray
                | ArrayOfMaps
                | HashOfMaps
                | ProgArray
                | Cpumap
        )
    });
    if cpu_maps {
        return true;
    }
    let cpu_helpers = [
        crate::helpers::ids::GET_SMP_PROCESSOR_ID,
        crate::helpers::ids::GET_NUMA_NODE_ID,
        crate::helpers::ids::PERF_EVENT_OUTPUT,
        crate::helpers::ids::MAP_LOOKUP_PERCPU_ELEM,
        PER_CPU_PTR,
        THIS_CPU_PTR,
    ];
    loaded.program_names().iter().any(|name| {
        let Ok(Some(v)) = loaded.verified(name) else {
            return true;
        };
        v.insns.iter().any(|insn| match insn {
            Insn::Call(CallTarget::Helper(id)) => cpu_helpers.contains(&(*id as u32)),
            Insn::Call(CallTarget::Kfunc(_)) => true,
            _ => false,
        })
    })
}

/// `bpf_per_cpu_ptr` and `bpf_this_cpu_ptr` (kernel helper ids).
const PER_CPU_PTR: u32 = 153;
const THIS_CPU_PTR: u32 = 154;

static NEXT_OBJECT: AtomicU64 = AtomicU64::new(1);

/// A BPF object's tracing programs, verified, with their maps; runnable
/// from any thread. See the [module documentation](crate::tracing).
pub struct TracingObject {
    loaded: LoadedObject,
    programs: Vec<TracingProgram>,
    slots: CpuSlots,
    /// Runs lease a CPU slot ([`needs_cpu_slot`]); else they run on slot
    /// 0's index without a lease (nothing observes it).
    cpu_bound: bool,
    uid: u64,
    missed: AtomicU64,
    faults: AtomicU64,
    last_fault: Mutex<Option<String>>,
    /// `bpf_trace_printk` lines, written by runs without allocating.
    trace: Arc<super::TraceRing>,
    thread_maps: Vec<Arc<ThreadMap>>,
    thread_map_refusals: Vec<String>,
    /// The control plane's link generation ([`TracingObject::watch_links`]).
    link_watch: Option<super::link_watch::LinkWatch>,
}

impl std::fmt::Debug for TracingObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingObject")
            .field(
                "programs",
                &self.programs.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl TracingObject {
    /// Load `obj` for the interpreter: maps created and initialised, every
    /// tracing program verified by bpfjet's verifier. XDP programs of the
    /// object are loaded too (they share the maps) but are not runnable
    /// here.
    pub fn load(obj: &Object, opts: &TracingOptions) -> Result<TracingObject, RuntimeError> {
        Self::from_loaded(load_maps_and_programs(obj, opts)?, opts)
    }

    /// Wrap an already loaded object (its tracing programs verified).
    pub fn from_loaded(
        mut loaded: LoadedObject,
        opts: &TracingOptions,
    ) -> Result<TracingObject, RuntimeError> {
        super::current::install_fork_hook();
        let mut thread_maps = Vec::new();
        let mut thread_map_refusals = Vec::new();
        for spec in &opts.thread_maps {
            match keep_per_thread(&mut loaded, spec) {
                Ok(m) => thread_maps.push(Arc::new(m)),
                Err(why) => thread_map_refusals.push(format!("map {}: {why}", spec.map)),
            }
        }
        let mut programs = Vec::new();
        for name in loaded.program_names() {
            let kind = loaded.program_kind(name)?.clone();
            let Some(prog_type) = kind.prog_type().filter(|t| t.is_tracing()) else {
                continue;
            };
            let program = loaded.program(name)?.clone();
            let ctx_bytes = loaded.verified(name)?.map_or(0, |v| v.facts.max_ctx_end);
            let mut p = TracingProgram {
                name: name.to_string(),
                section: loaded.program_section(name)?.to_string(),
                kind,
                prog_type,
                ctx_bytes,
                ctx_len: ctx_bytes,
                cookie: None,
                link: None,
                live: std::sync::atomic::AtomicBool::new(true),
                entry: Entry::Interp(program),
            };
            p.ctx_len = p.attach_ctx_size().unwrap_or(ctx_bytes).max(ctx_bytes);
            programs.push(p);
        }
        let ncpus = loaded.ncpus();
        let cpu_bound = needs_cpu_slot(&loaded);
        // One slot table for every process running on these maps.
        let slots = match (&opts.control_plane, &opts.join, &opts.instance_name) {
            (Some((name, _)), _, _) => CpuSlots::shared(name, ncpus),
            (None, Some(name), _) => CpuSlots::named(name, ncpus, false),
            (None, None, Some(name)) => CpuSlots::named(name, ncpus, true),
            (None, None, None) => Ok(CpuSlots::new(ncpus)),
        }
        .map_err(|e| RuntimeError::Map {
            map: "<CPU slot table>".into(),
            source: bpfjet_maps::MapError::Os {
                what: if opts.join.is_some() {
                    "open of the joined instance's CPU slot table".into()
                } else {
                    "creation of the CPU slot table".into()
                },
                errno: e.raw_os_error().unwrap_or(0),
                message: e.to_string(),
            },
        })?;
        Ok(TracingObject {
            loaded,
            programs,
            slots,
            cpu_bound,
            uid: NEXT_OBJECT.fetch_add(1, Ordering::Relaxed),
            missed: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            last_fault: Mutex::new(None),
            trace: Arc::new(super::TraceRing::new(
                opts.trace_lines,
                super::TRACE_RING_BYTES,
            )),
            thread_maps,
            thread_map_refusals,
            link_watch: None,
        })
    }

    /// Program `prog` runs only while the link record at `record` exists
    /// (with [`TracingObject::watch_links`]).
    pub fn set_link(&mut self, prog: ProgId, record: &std::path::Path) {
        if let Some(p) = self.programs.get_mut(prog) {
            p.link = super::link_watch::record_path(record);
        }
    }

    /// Check the programs' links whenever the generation word at `path`
    /// moves (`bpfjet trace --instance`: the server bumps it when a probe
    /// link goes). The programs whose record is gone stop running.
    pub fn watch_links(&mut self, path: &std::path::Path) -> std::io::Result<()> {
        self.link_watch = Some(super::link_watch::LinkWatch::open(path)?);
        Ok(())
    }

    /// The generation moved to `g`: mark the programs whose link is gone.
    #[cold]
    fn recheck_links(&self, watch: &super::link_watch::LinkWatch, g: u64) {
        for p in &self.programs {
            if let Some(record) = &p.link {
                if !super::link_watch::record_exists(record) {
                    p.live.store(false, Ordering::Relaxed);
                }
            }
        }
        watch.saw(g);
    }

    /// `bpf_get_attach_cookie()` of program `prog` at every attach point:
    /// the cookie of the link it was loaded for (a control plane's
    /// `bpf_cookie`), where one program is one link.
    pub fn set_cookie(&mut self, prog: ProgId, cookie: u64) {
        if let Some(p) = self.programs.get_mut(prog) {
            p.cookie = Some(cookie);
        }
    }

    /// The maps kept per thread ([`TracingOptions::thread_maps`] that could be).
    pub fn thread_maps(&self) -> &[Arc<ThreadMap>] {
        &self.thread_maps
    }

    /// Why maps of [`TracingOptions::thread_maps`] stayed maps.
    pub fn thread_map_refusals(&self) -> &[String] {
        &self.thread_map_refusals
    }

    /// Copy every map kept per thread back into its map, so dumps
    /// ([`LoadedObject::dump_state`]) show what the unfused programs would
    /// have left there. Call before reporting.
    pub fn write_back_thread_maps(&self) -> Result<(), RuntimeError> {
        for m in &self.thread_maps {
            m.write_back().map_err(|source| RuntimeError::Map {
                map: m.name().to_string(),
                source,
            })?;
        }
        Ok(())
    }

    /// Run program `name` on native code from now on (the JIT installs
    /// its compiled programs this way).
    pub fn install_native(
        &mut self,
        name: &str,
        native: Arc<dyn NativeEntry>,
    ) -> Result<(), RuntimeError> {
        let p = self
            .programs
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| RuntimeError::NoSuchProgram {
                name: name.to_string(),
                available: String::new(),
            })?;
        p.entry = Entry::Native(native);
        Ok(())
    }

    /// The object's tracing programs; a program's position is its [`ProgId`].
    pub fn programs(&self) -> &[TracingProgram] {
        &self.programs
    }

    /// The id of tracing program `name`.
    pub fn program_id(&self, name: &str) -> Option<ProgId> {
        self.programs.iter().position(|p| p.name == name)
    }

    /// The object as loaded: maps by name, STATE.json dumps
    /// ([`LoadedObject::dump_state`]), program table.
    pub fn loaded(&self) -> &LoadedObject {
        &self.loaded
    }

    /// The object's maps.
    pub fn object_maps(&self) -> &Arc<ObjectMaps> {
        self.loaded.object_maps()
    }

    /// Runs skipped because the thread was already running a program of
    /// this object (a probe hit inside a helper, a signal handler), as the
    /// kernel's recursion protection skips them (`recursion_misses`).
    pub fn missed_runs(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// Runs aborted by a fault (r0 reads as 0), and the last reason.
    pub fn faults(&self) -> (u64, Option<String>) {
        let last = self
            .last_fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (self.faults.load(Ordering::Relaxed), last)
    }

    /// Whether any program of the object calls helper `id` (in its
    /// verified form, subprograms included).
    pub fn calls_helper(&self, id: u32) -> bool {
        self.loaded.program_names().iter().any(|name| {
            let Ok(Some(v)) = self.loaded.verified(name) else {
                return false;
            };
            v.insns
                .iter()
                .any(|insn| matches!(insn, Insn::Call(CallTarget::Helper(h)) if *h as u32 == id))
        })
    }

    /// Start this process's counts of missed and faulted runs and its
    /// `bpf_trace_printk` lines afresh: in a forked child, whose copies
    /// are its parent's (the parent reports those), or in an image about
    /// to `exec` after it handed them over. Async-signal-safe: a lock
    /// another thread held at the fork is never released in the child, so
    /// what cannot be taken at once is left as it is.
    pub fn reset_counters(&self) {
        self.missed.store(0, Ordering::Relaxed);
        self.faults.store(0, Ordering::Relaxed);
        if let Ok(mut last) = self.last_fault.try_lock() {
            // Dropping the old string would free in a signal handler:
            // leaked instead (one per fork at most).
            std::mem::forget(last.take());
        }
        self.trace.clear_if_free();
    }

    /// [`TracingObject::reset_counters`] in a forked child (a real fork,
    /// with memory of its own): the trace-line ring is freed even if a
    /// thread of the parent held it at the fork. Async-signal-safe.
    pub fn reset_in_forked_child(&self) {
        self.reset_counters();
        self.trace.reset_in_forked_child();
    }

    /// The `bpf_trace_printk` lines written since the last call, and how
    /// many were lost since then (dropped behind a busy ring, or pushed out
    /// by newer lines).
    pub fn take_trace_lines(&self) -> (Vec<String>, super::TraceLoss) {
        self.trace.take()
    }

    /// Run program `prog` on the context at `ctx` for the hit `site` and
    /// return its r0. Callable from any number of threads at once.
    ///
    /// # Safety
    /// `ctx` must point to at least [`TracingProgram::ctx_bytes`] readable
    /// bytes laid out as the program's type expects ([`PtRegs`] for
    /// probes, [`SysEnterCtx`]/[`SysExitCtx`] for syscalls tracepoints,
    /// [`RawSyscallArgs`] for raw ones), valid for the whole call. The
    /// typed entries ([`TracingObject::run_regs`], ...) check the type.
    pub unsafe fn run(&self, prog: ProgId, ctx: *mut u8, site: &ProbeSite) -> u64 {
        let Some(p) = self.programs.get(prog) else {
            return 0;
        };
        // SAFETY: the caller's.
        unsafe { self.run_program(p, ctx, site) }
    }

    /// [`TracingObject::run`] of a program of this object. Inlined into
    /// the typed entries, which the attach layer's per-hit closures call:
    /// one call for the whole set-up of a run, up to the engine's entry.
    ///
    /// # Safety
    /// As [`TracingObject::run`], for `p`.
    #[inline(always)]
    unsafe fn run_program(&self, p: &TracingProgram, ctx: *mut u8, site: &ProbeSite) -> u64 {
        let cache = run_cache();
        // A run of this thread is under way (a probe inside a helper or a
        // signal handler): skip, as the kernel does.
        if cache.running.replace(true) {
            self.missed.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        let _running = Running(&cache.running);
        // Held while the links are checked too: the check allocates, and a
        // probe on the allocator must not run a program from inside it.
        if let Some(watch) = &self.link_watch {
            if let Some(g) = watch.moved() {
                self.recheck_links(watch, g);
            }
            if !p.live.load(Ordering::Relaxed) {
                return 0;
            }
        }
        // SAFETY: `running` is held: nothing else on this thread uses the
        // run list until this run ends, and the run state stays (boxed)
        // until the object or the thread goes.
        let Some(run) = (unsafe { cache.get(self.uid, || self.thread_run()) }) else {
            // The thread is exiting (its thread-locals are being
            // destroyed): skip, counted.
            self.missed.fetch_add(1, Ordering::Relaxed);
            return 0;
        };
        // SAFETY: as above.
        let run = unsafe { &mut *run };
        {
            let lease = self.cpu_bound.then(|| self.slots.lease());
            if let Some(lease) = &lease {
                run.env.run.set_cpu(lease.cpu);
            }
            run.env
                .begin(ctx as u64, p.ctx_len, p.prog_type == ProgType::Kprobe, site);
            if let Some(cookie) = p.cookie {
                run.env.site.cookie = cookie;
            }
            let result = match &p.entry {
                Entry::Interp(program) => program.run(&mut run.state, &mut run.env, &[ctx as u64]),
                Entry::Native(native) => {
                    native.run_tracing(&mut run.state, &mut run.env, ctx as u64)
                }
            };
            let _ = run.env.run.release_leftovers();
            drop(lease);
            self.end_run(p, result)
        }
    }

    /// What every run does after the program: count a fault (r0 then
    /// reads as 0, and the reason is kept); returns r0. Its trace lines are
    /// in the object's ring already (`thread_run` points the run there).
    #[inline(always)]
    fn end_run(&self, p: &TracingProgram, result: Result<u64, Fault>) -> u64 {
        match result {
            Ok(r0) => r0,
            Err(fault) => self.count_fault(p, fault),
        }
    }

    #[cold]
    #[inline(never)]
    fn count_fault(&self, p: &TracingProgram, fault: Fault) -> u64 {
        self.faults.fetch_add(1, Ordering::Relaxed);
        *self
            .last_fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(format!("program {}: {fault}", p.name));
        0
    }

    /// Whether runs lease a CPU slot (see [`needs_cpu_slot`]): false when
    /// no program can observe which CPU it runs on.
    pub fn leases_cpu_slots(&self) -> bool {
        self.cpu_bound
    }

    /// Makes the calling thread's run state now, so that a run from a
    /// handler that must not allocate (a signal's: the sampler's) finds
    /// it ready.
    pub fn prepare_thread(&self) {
        let cache = run_cache();
        if cache.running.replace(true) {
            return;
        }
        let _running = Running(&cache.running);
        // SAFETY: `running` is held, as in `run_program`.
        let _ = unsafe { cache.get(self.uid, || self.thread_run()) };
    }

    /// [`TracingObject::run`] of a `perf_event` program on a sample.
    #[inline]
    pub fn run_perf_event(&self, prog: ProgId, data: &mut PerfEventData, site: &ProbeSite) -> u64 {
        self.run_typed(prog, ProgType::PerfEvent, data, site)
    }

    /// [`TracingObject::run`] of a kprobe-type program (uprobe, uretprobe,
    /// USDT) on registers.
    #[inline]
    pub fn run_regs(&self, prog: ProgId, regs: &mut PtRegs, site: &ProbeSite) -> u64 {
        self.run_typed(prog, ProgType::Kprobe, regs, site)
    }

    /// [`TracingObject::run`] of a `tracepoint/syscalls/sys_enter_*` program.
    #[inline]
    pub fn run_sys_enter(&self, prog: ProgId, rec: &mut SysEnterCtx, site: &ProbeSite) -> u64 {
        self.run_typed(prog, ProgType::Tracepoint, rec, site)
    }

    /// [`TracingObject::run`] of a `tracepoint/syscalls/sys_exit_*` program.
    #[inline]
    pub fn run_sys_exit(&self, prog: ProgId, rec: &mut SysExitCtx, site: &ProbeSite) -> u64 {
        self.run_typed(prog, ProgType::Tracepoint, rec, site)
    }

    /// [`TracingObject::run`] of a `tp_btf` program on its tracepoint's
    /// arguments (`xdp_events`).
    #[inline]
    pub fn run_tp_btf(
        &self,
        prog: ProgId,
        args: &mut super::xdp_events::TpBtfArgs,
        site: &ProbeSite,
    ) -> u64 {
        self.run_typed(prog, ProgType::Tracing, args, site)
    }

    /// [`TracingObject::run`] of a `tracepoint/xdp/NAME` program on the
    /// event's tracefs record (`xdp_events`).
    #[inline]
    pub fn run_tracepoint_record(
        &self,
        prog: ProgId,
        rec: &mut super::xdp_events::XdpTpRecord,
        site: &ProbeSite,
    ) -> u64 {
        self.run_typed(prog, ProgType::Tracepoint, rec, site)
    }

    /// [`TracingObject::run`] of a `raw_tracepoint/sys_enter|sys_exit` program.
    #[inline]
    pub fn run_raw_syscall(
        &self,
        prog: ProgId,
        args: &mut RawSyscallArgs,
        site: &ProbeSite,
    ) -> u64 {
        self.run_typed(prog, ProgType::RawTracepoint, args, site)
    }

    #[inline(always)]
    fn run_typed<T>(&self, prog: ProgId, want: ProgType, ctx: &mut T, site: &ProbeSite) -> u64 {
        let p = match self.programs.get(prog) {
            Some(p) if p.prog_type == want && p.ctx_bytes <= std::mem::size_of::<T>() as u64 => p,
            _ => return self.misfit(prog, want, std::mem::size_of::<T>()),
        };
        // SAFETY: the program's type matches the context's and it reads no
        // more than size_of::<T>() bytes of it (checked above).
        unsafe { self.run_program(p, (ctx as *mut T).cast(), site) }
    }

    #[cold]
    #[inline(never)]
    fn misfit(&self, prog: ProgId, want: ProgType, size: usize) -> u64 {
        self.faults.fetch_add(1, Ordering::Relaxed);
        *self
            .last_fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(format!(
            "program #{prog} is not a {want} program reading at most {size} context bytes"
        ));
        0
    }

    fn thread_run(&self) -> ThreadRun {
        let mut state = RunState::new();
        state.set_program_table(self.loaded.program_table());
        let mut env = TracingEnv::new(RunEnv::new(0, Arc::clone(self.loaded.object_maps())));
        env.run.trace_ring = Some(Arc::clone(&self.trace));
        env.thread_maps = self
            .thread_maps
            .iter()
            .map(|m| ThreadMapRef {
                handle: m.handle(),
                map: Arc::clone(m),
                slot: m.new_slot(),
            })
            .collect();
        env.slot_table = env
            .thread_maps
            .iter()
            .map(|r| Arc::as_ptr(&r.slot).cast::<u8>())
            .collect();
        ThreadRun {
            object: self.uid,
            state,
            env,
        }
    }
}

impl Drop for TracingObject {
    fn drop(&mut self) {
        // This thread's run state for the object goes with it; other
        // threads' go when those threads exit.
        let uid = self.uid;
        run_cache().forget(uid);
    }
}

/// Rewrite every map helper call `spec` lists into the per-thread helpers,
/// all or none (a program is patched only when every call checks out).
fn keep_per_thread(loaded: &mut LoadedObject, spec: &ThreadMapSpec) -> Result<ThreadMap, String> {
    let map = loaded
        .map(&spec.map)
        .ok_or_else(|| "no such map in the object".to_string())?;
    let kept = ThreadMap::new(map)?;
    let mut by_program: std::collections::BTreeMap<&str, Vec<(usize, u32, u32)>> =
        std::collections::BTreeMap::new();
    for (program, slot) in &spec.sites {
        let verified = loaded
            .verified(program)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("program {program} was not verified"))?;
        let from = match verified.insns.get(*slot) {
            Some(bpfjet_isa::Insn::Call(bpfjet_isa::CallTarget::Helper(id))) => *id as u32,
            other => {
                return Err(format!(
                    "program {program}, slot {slot}: not a map helper call ({other:?})"
                ))
            }
        };
        let to = internal_helper(from).ok_or_else(|| {
            format!(
                "program {program}, slot {slot}: helper {from} is not a lookup, update or delete"
            )
        })?;
        by_program
            .entry(program)
            .or_default()
            .push((*slot, from, to));
    }
    for apply in [false, true] {
        for (program, calls) in &by_program {
            loaded.rewrite_helper_calls(program, calls, apply)?;
        }
    }
    Ok(kept)
}
