//! Tracing objects on native code: [`load_tracing`] loads a
//! [`TracingObject`] and installs the JIT's code for each of its tracing
//! programs, so [`TracingObject::run`] runs native code. The programs are
//! compiled from the form bpfjet's verifier accepted; the helpers every
//! program type shares are inlined as for XDP (map lookups as address
//! arithmetic or key-size-specialised calls, updates, deletes, ring-buffer
//! reserve/submit, the CPU id, the clock, `bpf_loop`: see `lift::inline`),
//! the per-thread map operations of internalised hand-off maps are loads
//! and stores on the thread's slot (`lift::thread_slots`, or direct calls,
//! `crate::thread_maps`, with [`TracingJit::inline_thread_maps`] off),
//! context fields the attach point fixes may be folded
//! ([`TracingJit::ctx_constants`]), `bpf_get_current_pid_tgid` is a direct
//! call to the runtime's per-thread cache, the other tracing helpers go through the
//! trampoline to the runtime's; context loads of `pt_regs` and the
//! tracepoint records are plain loads.

use crate::bindings::{Bindings, CtxConstant, ThreadMapBinding};
use crate::fused::FusedPair;
use crate::object::{CompiledPrograms, ObjectError};
use crate::options::JitOptions;
use crate::program::{DumpStage, JitProgram};
use bpfjet_obj::Object;
use bpfjet_runtime::tracing::{NativeEntry, TracingEnv, TracingObject, TracingOptions};
use bpfjet_runtime::{Fault, RunState};
use std::any::Any;
use std::sync::Arc;

impl NativeEntry for JitProgram {
    fn run_native(
        &self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        ctx: u64,
    ) -> Result<u64, Fault> {
        self.run(state, user, &[ctx])
    }

    fn run_tracing(
        &self,
        state: &mut RunState,
        env: &mut TracingEnv,
        ctx: u64,
    ) -> Result<u64, Fault> {
        JitProgram::run_tracing(self, state, env, ctx)
    }
}

/// What the JIT assumes beyond the programs (pairwise fusion's steps,
/// docs/TRACING.md "Pairwise fusion").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracingJit {
    /// Compile the operations on maps kept per thread as loads and stores
    /// on the thread's slot (else: direct calls to the runtime's natives).
    pub inline_thread_maps: bool,
    /// Fold loads from frozen `.rodata` values (on in every other JIT use).
    pub fold_rodata: bool,
    /// Context fields constant at each program's attach point, by program
    /// name (`tracepoint/syscalls/sys_enter_X`: the system-call number).
    pub ctx_constants: std::collections::BTreeMap<String, Vec<CtxConstant>>,
}

impl Default for TracingJit {
    fn default() -> Self {
        TracingJit {
            inline_thread_maps: true,
            fold_rodata: true,
            ctx_constants: Default::default(),
        }
    }
}

/// Load `obj` as [`TracingObject::load`] does and compile every tracing
/// program with the JIT; a program that fails to compile is an error.
pub fn load_tracing(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
) -> Result<TracingObject, ObjectError> {
    load_tracing_with(obj, opts, jit, &TracingJit::default())
}

/// [`load_tracing`] with the fusion steps of `steps`.
pub fn load_tracing_with(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
    steps: &TracingJit,
) -> Result<TracingObject, ObjectError> {
    let (mut tracing, compiled) = compile_tracing(obj, opts, jit, steps)?;
    let names: Vec<String> = tracing
        .programs()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    for name in names {
        let native = compiled.program(&name)?.clone();
        tracing.install_native(&name, Arc::new(native))?;
    }
    Ok(tracing)
}

/// The IR or assembly of tracing program `program` as
/// [`load_tracing_with`] compiles it.
pub fn dump_tracing(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
    steps: &TracingJit,
    program: &str,
    stage: DumpStage,
) -> Result<String, ObjectError> {
    let (_, compiled) = compile_tracing(obj, opts, jit, steps)?;
    compiled.dump(program, stage)
}

fn compile_tracing(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
    steps: &TracingJit,
) -> Result<(TracingObject, CompiledPrograms), ObjectError> {
    let loaded = bpfjet_runtime::tracing::load_maps_and_programs(obj, opts)?;
    // Wrap first: maps kept per thread have their calls rewritten then,
    // and the JIT compiles the rewritten form.
    let tracing = TracingObject::from_loaded(loaded, opts)?;
    let adjust = adjuster(&tracing, steps);
    let compiled = CompiledPrograms::compile_bound(tracing.loaded(), jit, &adjust);
    Ok((tracing, compiled))
}

/// How each program's bindings are adjusted for `steps` (what
/// [`load_tracing_with`] compiles, and a fused pair's halves with it).
fn adjuster(tracing: &TracingObject, steps: &TracingJit) -> impl Fn(&str, &mut Bindings) {
    // In the order of the run's slot table (`TracingEnv::thread_slot_table`).
    let thread_maps: Vec<ThreadMapBinding> = if steps.inline_thread_maps {
        tracing
            .thread_maps()
            .iter()
            .map(|m| ThreadMapBinding {
                handle: m.handle(),
                key_size: m.key_size() as u32,
                value_size: m.value_size() as u32,
            })
            .collect()
    } else {
        Vec::new()
    };
    let steps = steps.clone();
    move |program: &str, b: &mut Bindings| {
        if b.tracing {
            b.thread_maps = thread_maps.clone();
            b.fold_frozen = steps.fold_rodata;
            b.ctx_constants = steps
                .ctx_constants
                .get(program)
                .cloned()
                .unwrap_or_default();
        }
    }
}

/// A pair compiled into one function, or why it could not be.
pub type FusedOutcome = Result<FusedPair, String>;

/// [`load_tracing_with`], and each (entry, exit) pair of `pairs` compiled
/// into one native function ([`FusedPair`], pairwise fusion's `compile`
/// rung), in the order of `pairs`.
pub fn load_tracing_fused(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
    steps: &TracingJit,
    pairs: &[(String, String)],
) -> Result<(TracingObject, Vec<FusedOutcome>), ObjectError> {
    let (mut tracing, compiled) = compile_tracing(obj, opts, jit, steps)?;
    let adjust = adjuster(&tracing, steps);
    let fused = pairs
        .iter()
        .map(|(entry, exit)| FusedPair::compile(&tracing, &compiled, jit, &adjust, entry, exit))
        .collect();
    let names: Vec<String> = tracing
        .programs()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    for name in names {
        let native = compiled.program(&name)?.clone();
        tracing.install_native(&name, Arc::new(native))?;
    }
    Ok((tracing, fused))
}

/// The optimized IR of pair (`entry`, `exit`) compiled into one function
/// as [`load_tracing_fused`] compiles it.
pub fn dump_fused_pair(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
    steps: &TracingJit,
    entry: &str,
    exit: &str,
) -> Result<String, String> {
    let (tracing, _) = compile_tracing(obj, opts, jit, steps).map_err(|e| e.to_string())?;
    let adjust = adjuster(&tracing, steps);
    FusedPair::optimized_ir(&tracing, jit, &adjust, entry, exit)
}
