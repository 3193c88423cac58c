//! A compiled program: compile, run, statistics.

use crate::analysis;
use crate::bindings::{Bindings, Resolved};
use crate::cache::{self, Cached, KeyHasher};
use crate::error::JitError;
use crate::lift;
use crate::loader::{self, Image};
use crate::options::JitOptions;
use crate::pipeline::{self, TargetSpec};
use crate::trampoline::{self, Activation, EntryFn, TailTable};
use bpfjet_isa::Insn;
use bpfjet_runtime::{Fault, HelperRegistry, LoadOptions, Program, RunState};
use inkwell::context::Context;
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

/// What compiling a program measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileStats {
    /// Instruction slots of the program.
    pub bpf_insns: usize,
    /// BPF functions (the entry and its subprograms).
    pub functions: usize,
    /// IR instructions as lifted and after optimization (as recorded when
    /// the object was first compiled, also on a cache hit).
    pub ir_insns_lifted: u64,
    pub ir_insns_optimized: u64,
    /// The object came from the cache; the phase times below are then 0.
    pub cache_hit: bool,
    pub lift_ms: f64,
    pub optimize_ms: f64,
    pub codegen_ms: f64,
    /// Mapping and relocating the object.
    pub load_ms: f64,
    /// Everything `JitProgram::compile` did, load checks included.
    pub total_ms: f64,
    pub object_bytes: usize,
    /// Bytes of the executable mapping (code, constants, stubs).
    pub code_bytes: usize,
    /// CPU and features the code was generated for.
    pub cpu: String,
    pub features: String,
    /// The object came from an AOT artifact: nothing was compiled.
    pub prebuilt: bool,
}

/// How many times this process ran LLVM to compile a program (lift,
/// optimize, emit); cache hits and AOT loads do not count.
static LLVM_COMPILATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Programs compiled by LLVM in this process so far (AOT loads must leave
/// this unchanged).
pub fn llvm_compilations() -> u64 {
    LLVM_COMPILATIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// A native object compiled earlier (an AOT artifact) and what it was
/// compiled for.
pub(crate) struct Prebuilt {
    pub cached: Cached,
    pub spec: TargetSpec,
    /// The cache key it was compiled under: loading recomputes the key from
    /// the program, its maps and options here, and refuses a mismatch.
    pub key: u128,
}

/// The shared part of a [`JitProgram`].
pub(crate) struct JitInner {
    /// The loaded (interpreter) form: helper contexts check callbacks
    /// against it, and it identifies the program in tail-call tables.
    pub program: Program,
    pub helpers: Arc<HelperRegistry>,
    pub kfuncs: Arc<HelperRegistry>,
    /// Native entries of every function, by slot (sorted).
    entries: Vec<(usize, EntryFn)>,
    stats: CompileStats,
    /// Maps whose handles and value addresses the code has baked in.
    _maps: Vec<Arc<bpfjet_maps::Map>>,
    /// Inner maps the program's map-in-map lookups found, by id.
    pub inner_maps: crate::natives::InnerMapCache,
    /// Owns the code `entries` point into; dropped last.
    _image: Image,
}

impl JitInner {
    pub(crate) fn entry(&self, slot: usize) -> Option<EntryFn> {
        // Runs enter at slot 0, the first entry.
        if let Some(&(0, entry)) = self.entries.first() {
            if slot == 0 {
                return Some(entry);
            }
        }
        self.entries
            .binary_search_by_key(&slot, |(s, _)| *s)
            .ok()
            .map(|i| self.entries[i].1)
    }
}

impl Drop for JitInner {
    fn drop(&mut self) {
        trampoline::unregister_compiled(&self.program);
    }
}

/// A program compiled to native code. Cheap to clone, `Send + Sync`: worker
/// threads share one and each runs it with its own [`RunState`].
#[derive(Clone)]
pub struct JitProgram {
    inner: Arc<JitInner>,
    /// Native tail-call targets, for programs of a `JitObject` (None:
    /// tail calls resolve through the run state's program table).
    tails: Option<Arc<TailTable>>,
}

impl std::fmt::Debug for JitProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitProgram")
            .field("stats", &self.inner.stats)
            .finish_non_exhaustive()
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Revision of the code generator, part of the cache key.
const CODEGEN_REVISION: u64 = 14;

fn cache_key(
    insns: &[Insn],
    program: &Program,
    opts: &LoadOptions,
    jit: &JitOptions,
    spec: &TargetSpec,
    bindings: &Bindings,
) -> u128 {
    let mut h = KeyHasher::new();
    let (major, minor, patch) = inkwell::support::get_llvm_version();
    // Cached objects of another lifter must not be reused: the digest of
    // the lifter's and the natives' sources (build.rs) changes with any
    // edit to them; CODEGEN_REVISION stays for changes made elsewhere.
    h.bytes(b"bpfjet-jit object")
        .u64(CODEGEN_REVISION)
        .bytes(env!("BPFJET_CODEGEN_SOURCES").as_bytes())
        .bytes(env!("CARGO_PKG_VERSION").as_bytes())
        .u64(u64::from(major) << 32 | u64::from(minor) << 16 | u64::from(patch));
    let encode = |insns: &[Insn]| bpfjet_isa::encode::to_bytes(&bpfjet_isa::encode_program(insns));
    // Map addresses are symbols resolved at load time (crate::bindings), so
    // the key holds the map table's shape, not its addresses.
    let refs = crate::bindings::map_refs(insns);
    let loaded = crate::bindings::without_addresses(program.insns(), &refs);
    h.bytes(&encode(insns)).bytes(&encode(&loaded));
    // Kfuncs are compiled by name: the same call numbers bound to other
    // kfuncs are other code.
    for (id, k) in library_kfuncs(opts) {
        h.u64(id as u64).bytes(k.name.as_bytes());
    }
    for (id, k) in dynptr_kfuncs(opts) {
        h.u64(id as u64).bytes(k.name().as_bytes());
    }
    // Graph kfuncs likewise, and the node offsets (from the program's
    // BTF, which the key does not hold otherwise) compiled into pushes.
    if let Some(g) = opts.kfuncs.graph() {
        for (id, k) in graph_kfuncs(opts) {
            h.u64(id as u64).bytes(k.name().as_bytes());
        }
        h.u64(g.node_offs.len() as u64);
        for (&pc, &off) in g.node_offs.iter() {
            h.u64(pc as u64).u64(u64::from(off));
        }
    }
    h.u64(opts.maps.len() as u64);
    for m in &opts.maps {
        match m.value {
            Some(r) => h.u64(1).u64(r.len).u64(u64::from(r.writable)),
            None => h.u64(0),
        };
    }
    h.bytes(spec.triple.as_bytes())
        .bytes(spec.cpu.as_bytes())
        .bytes(spec.features.as_bytes())
        .bytes(pipeline::pipeline_text(jit.opt_level).as_bytes())
        .u64(u64::from(jit.zero_stack))
        .u64(u64::from(jit.inline_helpers));
    if jit.inline_helpers {
        bindings.hash_into(&mut h, &opts.maps);
    }
    h.finish()
}

impl JitProgram {
    /// Load-check `insns` like the interpreter does (`Program::new`), lift
    /// the result to LLVM IR, optimize it and load the native code (or take
    /// it from the cache). `opts` must be the verified memory mode.
    pub fn compile(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
    ) -> Result<JitProgram, JitError> {
        Self::compile_bound(insns, opts, jit, &Bindings::default())
    }

    /// [`JitProgram::compile`] with what the program is bound to, so that
    /// helpers and map lookups can be compiled in (see [`Bindings`]; with
    /// `jit.inline_helpers` off they are ignored).
    pub fn compile_bound(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        bindings: &Bindings,
    ) -> Result<JitProgram, JitError> {
        Self::build(insns, opts, jit, bindings, None)
    }

    /// [`JitProgram::compile_bound`] with the native object already built
    /// (AOT): the same load checks, no LLVM.
    pub(crate) fn from_prebuilt(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        bindings: &Bindings,
        prebuilt: Prebuilt,
    ) -> Result<JitProgram, JitError> {
        Self::build(insns, opts, jit, bindings, Some(prebuilt))
    }

    /// The cache key and target of `insns` compiled with these inputs (what
    /// an AOT artifact records).
    pub(crate) fn key_and_target(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        bindings: &Bindings,
    ) -> Result<(u128, TargetSpec), JitError> {
        let program = Program::new(insns.to_vec(), opts.clone())?;
        let spec = pipeline::target_spec(&jit.cpu)?;
        Ok((cache_key(insns, &program, opts, jit, &spec, bindings), spec))
    }

    fn build(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        bindings: &Bindings,
        prebuilt: Option<Prebuilt>,
    ) -> Result<JitProgram, JitError> {
        let start = Instant::now();
        if !cfg!(all(target_arch = "x86_64", target_endian = "little")) {
            return Err(JitError::Target(
                "the JIT's object loader supports x86-64 hosts only".into(),
            ));
        }
        let program = Program::new(insns.to_vec(), opts.clone())?;
        if program.is_bounds_checked() {
            return Err(JitError::NotVerified);
        }
        let functions = analysis::functions(insns)?;
        let spec = match &prebuilt {
            Some(p) => p.spec.clone(),
            None => pipeline::target_spec(&jit.cpu)?,
        };
        let key = cache_key(insns, &program, opts, jit, &spec, bindings);
        let mut stats = CompileStats {
            bpf_insns: insns.len(),
            functions: functions.len(),
            cpu: spec.cpu.clone(),
            features: spec.features.clone(),
            ..CompileStats::default()
        };
        let cached = match (prebuilt, cache::lookup(&jit.cache, key)) {
            (Some(p), _) => {
                if p.key != key {
                    return Err(JitError::Loader(
                        "the prebuilt code was compiled from another verified form of the \
                         program (another bpfjet build?), map layout, .rodata contents, \
                         options or LLVM version"
                            .into(),
                    ));
                }
                stats.prebuilt = true;
                p.cached
            }
            (None, Some(hit)) => {
                stats.cache_hit = true;
                hit
            }
            (None, None) => {
                let resolved = resolve(jit, bindings, insns, opts);
                let compiled =
                    compile_object(&program, &functions, jit, &spec, &resolved, &mut stats)?;
                cache::store(&jit.cache, key, &compiled);
                compiled
            }
        };
        stats.ir_insns_lifted = cached.ir_before;
        stats.ir_insns_optimized = cached.ir_after;
        stats.object_bytes = cached.object.len();
        let load_start = Instant::now();
        let map_symbols = crate::bindings::map_symbol_table(&opts.maps, &bindings.maps);
        let image = loader::load(&cached.object, &|name: &str| {
            map_symbols
                .get(name)
                .copied()
                .or_else(|| trampoline::resolve_symbol(name))
        })?;
        let mut entries = Vec::with_capacity(functions.len());
        for f in &functions {
            let name = lift::entry_name(f.entry);
            let addr = image
                .symbol(&name)
                .ok_or_else(|| JitError::Loader(format!("object lacks {name}")))?;
            // SAFETY: `name` is an entry wrapper the lifter emitted with
            // exactly the `EntryFn` signature; the image outlives `entries`.
            let entry = unsafe { std::mem::transmute::<usize, EntryFn>(addr) };
            entries.push((f.entry, entry));
        }
        stats.load_ms = ms(load_start);
        stats.code_bytes = image.code_bytes();
        stats.total_ms = ms(start);
        let inner = Arc::new(JitInner {
            program,
            helpers: Arc::clone(&opts.helpers),
            kfuncs: Arc::clone(&opts.kfuncs),
            entries,
            stats,
            _maps: bindings.maps.clone(),
            inner_maps: crate::natives::InnerMapCache::default(),
            _image: image,
        });
        trampoline::register_compiled(&inner);
        Ok(JitProgram { inner, tails: None })
    }

    pub(crate) fn inner(&self) -> &Arc<JitInner> {
        &self.inner
    }

    /// This program with `tails` as its native tail-call targets.
    pub(crate) fn with_tail_table(&self, tails: Arc<TailTable>) -> JitProgram {
        JitProgram {
            inner: Arc::clone(&self.inner),
            tails: Some(tails),
        }
    }

    #[inline]
    pub(crate) fn activation(&self, cpu: u64, thread_slots: *const *const u8) -> Activation {
        Activation {
            tails: self.tails.as_ref().map_or(std::ptr::null(), Arc::as_ptr),
            cpu,
            thread_slots,
        }
    }

    /// What compiling measured.
    pub fn compile_stats(&self) -> &CompileStats {
        &self.inner.stats
    }

    /// The loaded interpreter form of this program. Put it in program
    /// tables (`RunState::set_program_table`) or PROG_ARRAY maps: a tail
    /// call to it from JIT code runs this native code.
    pub fn program(&self) -> &Program {
        &self.inner.program
    }

    /// Run from slot 0 with `args` in r1–r5 (missing ones are 0) and `user`
    /// as the per-run context helpers reach; returns r0 at the final exit.
    pub fn run(
        &self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        args: &[u64],
    ) -> Result<u64, Fault> {
        let mut regs = [0u64; 5];
        for (reg, arg) in regs.iter_mut().zip(args) {
            *reg = *arg;
        }
        let act = self.activation(trampoline::cpu_of(user), trampoline::thread_slots_of(user));
        self.inner.program.run_externally(state, |state| {
            trampoline::run_native(&self.inner, act, state, user, 0, 0, &regs)
        })
    }

    /// [`JitProgram::run`] of a tracing program: r1 = `ctx`, the CPU slot
    /// taken from the tracing environment without downcasting.
    #[inline]
    pub fn run_tracing(
        &self,
        state: &mut RunState,
        env: &mut bpfjet_runtime::tracing::TracingEnv,
        ctx: u64,
    ) -> Result<u64, Fault> {
        let act = self.activation(u64::from(env.cpu()), env.thread_slot_table());
        self.inner.program.run_externally(state, |state| {
            let regs = [ctx, 0, 0, 0, 0];
            trampoline::run_native(&self.inner, act, state, env, 0, 0, &regs)
        })
    }

    /// [`JitProgram::run`] of an XDP program: r1 = the frame's context.
    #[inline]
    pub fn run_xdp(
        &self,
        state: &mut RunState,
        env: &mut bpfjet_runtime::XdpEnv,
    ) -> Result<u64, Fault> {
        let act = self.activation(u64::from(env.cpu()), std::ptr::null());
        self.inner.program.run_externally(state, |state| {
            // Built here, by reference: a copy of the array through the
            // closure's captures costs a store-forwarding stall per run.
            let regs = [env.frame().md_addr(), 0, 0, 0, 0];
            trampoline::run_native(&self.inner, act, state, env, 0, 0, &regs)
        })
    }

    /// The conformance-suite convention: r1 = `mem` (0 when empty), r2 =
    /// its length, per-run context `()`.
    pub fn run_on_memory(&self, mem: &mut [u8]) -> Result<u64, Fault> {
        self.run_on_memory_with(&mut RunState::new(), mem)
    }

    /// [`JitProgram::run_on_memory`] with a caller-provided run state.
    pub fn run_on_memory_with(&self, state: &mut RunState, mem: &mut [u8]) -> Result<u64, Fault> {
        let (addr, len) = if mem.is_empty() {
            (0, 0)
        } else {
            (mem.as_mut_ptr() as u64, mem.len() as u64)
        };
        self.run(state, &mut (), &[addr, len])
    }
}

/// What [`JitProgram::dump`] shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpStage {
    /// The IR as lifted, before any pass.
    LiftedIr,
    /// The IR after the optimization pipeline.
    OptimizedIr,
    /// The native assembly.
    Assembly,
}

impl JitProgram {
    /// The IR or assembly `compile` would produce for this program (for
    /// inspecting the lifter and the optimizer; never cached).
    pub fn dump(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        stage: DumpStage,
    ) -> Result<String, JitError> {
        Self::dump_bound(insns, opts, jit, &Bindings::default(), stage)
    }

    /// [`JitProgram::dump`] with bindings, as [`JitProgram::compile_bound`].
    pub fn dump_bound(
        insns: &[Insn],
        opts: &LoadOptions,
        jit: &JitOptions,
        bindings: &Bindings,
        stage: DumpStage,
    ) -> Result<String, JitError> {
        let program = Program::new(insns.to_vec(), opts.clone())?;
        if program.is_bounds_checked() {
            return Err(JitError::NotVerified);
        }
        let functions = analysis::functions(insns)?;
        let spec = pipeline::target_spec(&jit.cpu)?;
        let cx = Context::create();
        let resolved = resolve(jit, bindings, insns, opts);
        let module = lift::lift_module(&cx, program.insns(), &functions, jit, &resolved)?;
        let machine = pipeline::target_machine(&spec, jit)?;
        pipeline::configure(&module, &machine);
        pipeline::verify(&module)?;
        if stage != DumpStage::LiftedIr {
            pipeline::optimize(&module, &machine, jit.opt_level)?;
        }
        if stage == DumpStage::Assembly {
            let asm = machine
                .write_to_memory_buffer(&module, inkwell::targets::FileType::Assembly)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            return Ok(String::from_utf8_lossy(asm.as_slice()).into_owned());
        }
        Ok(module.print_to_string().to_string())
    }
}

fn compile_object(
    program: &Program,
    functions: &[analysis::Function],
    jit: &JitOptions,
    spec: &TargetSpec,
    bind: &Resolved,
    stats: &mut CompileStats,
) -> Result<Cached, JitError> {
    LLVM_COMPILATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cx = Context::create();
    let t = Instant::now();
    let module = lift::lift_module(&cx, program.insns(), functions, jit, bind)?;
    let machine = pipeline::target_machine(spec, jit)?;
    pipeline::configure(&module, &machine);
    pipeline::verify(&module)?;
    stats.lift_ms = ms(t);
    let ir_before = pipeline::ir_instruction_count(&module) as u64;
    let t = Instant::now();
    pipeline::optimize(&module, &machine, jit.opt_level)?;
    stats.optimize_ms = ms(t);
    let ir_after = pipeline::ir_instruction_count(&module) as u64;
    let t = Instant::now();
    let object = pipeline::emit_object(&module, &machine)?;
    stats.codegen_ms = ms(t);
    Ok(Cached {
        object: Arc::new(object),
        ir_before,
        ir_after,
    })
}

pub(crate) fn resolve(
    jit: &JitOptions,
    bindings: &Bindings,
    insns: &[Insn],
    opts: &LoadOptions,
) -> Resolved {
    let mut resolved = if jit.inline_helpers {
        bindings.resolve()
    } else {
        Resolved::default()
    };
    if jit.inline_helpers {
        resolved.kfuncs = library_kfuncs(opts);
        if matches!(opts.memory, bpfjet_runtime::MemoryMode::Verified(_)) {
            resolved.dynptr_kfuncs = dynptr_kfuncs(opts);
        }
        if let Some(g) = opts.kfuncs.graph() {
            resolved.graph_kfuncs = graph_kfuncs(opts);
            resolved.graph_node_offs = (*g.node_offs).clone();
        }
    }
    resolved.with_map_table(insns, &opts.maps)
}

/// The program's dynptr kfuncs the JIT calls directly, by call number.
fn dynptr_kfuncs(
    opts: &LoadOptions,
) -> std::collections::BTreeMap<i32, bpfjet_verifier::dynptr_kfunc::DynptrKfunc> {
    use bpfjet_verifier::dynptr_kfunc::DynptrKfunc;
    opts.kfuncs
        .iter()
        .filter_map(|h| {
            let k = DynptrKfunc::from_name(h.name())?;
            (matches!(
                k,
                DynptrKfunc::FromXdp | DynptrKfunc::Slice | DynptrKfunc::SliceRdwr
            ) || crate::natives::DYNPTR_QUERIES.contains(&k))
            .then_some((i32::try_from(h.id()).ok()?, k))
        })
        .collect()
}

/// The program's kernel object and graph kfuncs, by call number.
fn graph_kfuncs(
    opts: &LoadOptions,
) -> std::collections::BTreeMap<i32, bpfjet_verifier::graph::GraphKfunc> {
    opts.kfuncs
        .iter()
        .filter_map(|h| {
            let k = bpfjet_verifier::graph::GraphKfunc::from_name(h.name())?;
            Some((i32::try_from(h.id()).ok()?, k))
        })
        .collect()
}

/// The program's kfuncs that are the NF library's (the registry entry of
/// that name, as the runtime's loader binds them).
fn library_kfuncs(
    opts: &LoadOptions,
) -> std::collections::BTreeMap<i32, &'static bpfjet_kfuncs::Kfunc> {
    opts.kfuncs
        .iter()
        .filter_map(|h| {
            let k = bpfjet_kfuncs::by_name(h.name())?;
            Some((i32::try_from(h.id()).ok()?, k))
        })
        .collect()
}
