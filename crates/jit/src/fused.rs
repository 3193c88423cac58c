//! A fused pair: the entry and the exit program of one attach point (a
//! `sys_enter_X`/`sys_exit_X` pair on a libc wrapper's call-through stub)
//! compiled into ONE native function (pairwise fusion's `compile` rung,
//! docs/TRACING.md "Pairwise fusion").
//!
//! Both programs are lifted as for their own compilation (same bindings:
//! inlined helpers, internalised hand-off maps as slot loads and stores,
//! folded attach-site constants) into one LLVM module; their entry
//! wrappers become always-inline halves of `bpfjet_fused_pair`:
//!
//! ```text
//! fused(ctxE, argsE, ctxX, argsX, middle, data, run_entry):
//!     if run_entry: entry half on ctxE
//!     if middle(data): exit half on ctxX      ; middle calls the wrapper
//! ```
//!
//! `middle` ([`middle`]) ends the entry half's run (fault accounting, the
//! CPU slot and the thread's run state given back: nothing is held across
//! the traced call), calls the wrapper through the stub's thunk, and
//! begins the exit half's run. So the optimizer sees both programs and
//! the call between them in one function: `bpf_get_current_pid_tgid`
//! (declared `memory(none)` here: the thread cannot change within one
//! activation) is computed once for both halves, and the exit half's
//! context is the record the stub passes.
//!
//! The hand-off value stays in the thread's slot (loads and stores, no
//! helper call), not in a local of this frame: a signal handler calling
//! the same wrapper inside the traced call, and a `longjmp` out of it,
//! see and leave the thread's map entry exactly as the unfused pair does
//! (tests/trace/fusion_target.c exercises both), which a per-activation
//! local would not.

use crate::analysis;
use crate::bindings::{map_symbol_table, Bindings};
use crate::lift;
use crate::loader;
use crate::object::{CompileInputs, CompiledPrograms, JitObject};
use crate::options::JitOptions;
use crate::pipeline;
use crate::program::JitProgram;
use crate::trampoline::{self, RunCtx};
use bpfjet_runtime::tracing::{
    HalfRun, PairRun, ProbeSite, ProgId, SysEnterCtx, SysExitCtx, TracingObject,
};
use bpfjet_runtime::LoadedObject;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{AsValueRef, BasicValue};
use inkwell::AddressSpace;
use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;

/// The fused function's symbol.
pub(crate) const FUSED: &str = "bpfjet_fused_pair";
const ENTRY_HALF: &str = "bpfjet_pair_entry_half";
const EXIT_HALF: &str = "bpfjet_pair_exit_half";
/// The exit program's symbols are renamed so, both programs number their
/// maps and functions their own way.
const EXIT_PREFIX: &str = "bpfjet_pair_x_";

// "C-unwind": a thread cancelled inside the wrapper is unwound through
// `middle`, the fused function and the stub's Rust frames; with the plain
// "C" ABI an optimized build whose inlined frames hold drop glue (the
// halves' run guards) aborts there instead (trace_fusion_compile's
// cancelled thread, release build).
type MiddleFn = unsafe extern "C-unwind" fn(*mut c_void) -> u64;
type FusedFn = unsafe extern "C-unwind" fn(
    *mut RunCtx,
    *const u64,
    *mut RunCtx,
    *const u64,
    MiddleFn,
    *mut c_void,
    u64,
) -> u64;

/// An entry/exit pair of a tracing object compiled into one function.
pub struct FusedPair {
    entry_id: ProgId,
    exit_id: ProgId,
    entry: JitProgram,
    exit: JitProgram,
    native: FusedFn,
    _image: loader::Image,
}

impl std::fmt::Debug for FusedPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FusedPair")
            .field("entry", &self.entry_id)
            .field("exit", &self.exit_id)
            .finish_non_exhaustive()
    }
}

/// Lift program `name` of `loaded` as its own compilation does, into `cx`.
fn lift_half<'ctx>(
    cx: &'ctx Context,
    loaded: &LoadedObject,
    name: &str,
    jit: &JitOptions,
    adjust: &dyn Fn(&str, &mut Bindings),
) -> Result<(Module<'ctx>, HashMap<String, usize>), String> {
    let CompileInputs {
        insns,
        opts,
        mut bindings,
    } = JitObject::compile_inputs(loaded, name).map_err(|e| e.to_string())?;
    adjust(name, &mut bindings);
    let program = bpfjet_runtime::Program::new(insns.clone(), opts.clone())
        .map_err(|e| format!("program {name}: {e}"))?;
    let functions = analysis::functions(&insns).map_err(|e| format!("program {name}: {e}"))?;
    let resolved = crate::program::resolve(jit, &bindings, &insns, &opts);
    let module = lift::lift_module(cx, program.insns(), &functions, jit, &resolved)
        .map_err(|e| format!("program {name}: {e}"))?;
    Ok((module, map_symbol_table(&opts.maps, &bindings.maps)))
}

/// Make the lifted program's main entry wrapper the always-inline half
/// `half`, drop its other entry wrappers (callbacks re-enter the program's
/// own compiled code), and rename everything it defines or binds by
/// `prefix`.
fn make_half(
    cx: &Context,
    module: &Module<'_>,
    half: &str,
    prefix: &str,
    symbols: HashMap<String, usize>,
) -> HashMap<String, usize> {
    let main = lift::entry_name(0);
    let inline = cx.create_enum_attribute(Attribute::get_named_enum_kind_id("alwaysinline"), 0);
    for f in module.get_functions() {
        if f.count_basic_blocks() == 0 {
            continue;
        }
        let name = f.get_name().to_string_lossy().into_owned();
        if name == main {
            // External until the fused function calls it: the linker
            // moves only internal functions something references.
            f.as_global_value().set_name(half);
            f.add_attribute(AttributeLoc::Function, inline);
        } else {
            f.as_global_value().set_name(&format!("{prefix}{name}"));
            f.set_linkage(Linkage::Internal);
        }
    }
    let mut renamed = HashMap::new();
    for g in module.get_globals() {
        let name = g.get_name().to_string_lossy().into_owned();
        if let Some(&addr) = symbols.get(&name) {
            let new = format!("{prefix}{name}");
            g.set_name(&new);
            renamed.insert(new, addr);
        }
    }
    renamed
}

/// The pair's module: both programs and `bpfjet_fused_pair`.
fn pair_module<'ctx>(
    cx: &'ctx Context,
    loaded: &LoadedObject,
    entry: &str,
    exit: &str,
    jit: &JitOptions,
    adjust: &dyn Fn(&str, &mut Bindings),
) -> Result<(Module<'ctx>, HashMap<String, usize>), String> {
    let (module, e_symbols) = lift_half(cx, loaded, entry, jit, adjust)?;
    let (x_module, x_symbols) = lift_half(cx, loaded, exit, jit, adjust)?;
    let mut symbols = make_half(cx, &module, ENTRY_HALF, "bpfjet_pair_e_", e_symbols);
    symbols.extend(make_half(cx, &x_module, EXIT_HALF, EXIT_PREFIX, x_symbols));
    module
        .link_in_module(x_module)
        .map_err(|e| format!("linking the exit program {exit} in: {e}"))?;
    build_fused(cx, &module).map_err(|e| format!("building {FUSED}: {e}"))?;
    for half in [ENTRY_HALF, EXIT_HALF] {
        if let Some(f) = module.get_function(half) {
            f.set_linkage(Linkage::Internal);
        }
    }
    // One thread per activation: its pid/tgid cannot change between the
    // halves, so both halves' calls are one.
    if let Some(f) = module.get_function(crate::natives::PID_TGID) {
        for attr in ["nounwind", "willreturn"] {
            let kind = Attribute::get_named_enum_kind_id(attr);
            f.add_attribute(AttributeLoc::Function, cx.create_enum_attribute(kind, 0));
        }
        // memory(none)
        let kind = Attribute::get_named_enum_kind_id("memory");
        f.add_attribute(AttributeLoc::Function, cx.create_enum_attribute(kind, 0));
    }
    Ok((module, symbols))
}

fn build_fused<'ctx>(
    cx: &'ctx Context,
    module: &Module<'ctx>,
) -> Result<(), inkwell::builder::BuilderError> {
    let i64t = cx.i64_type();
    let ptr = cx.ptr_type(AddressSpace::default());
    let ty = i64t.fn_type(
        &[
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            i64t.into(),
        ],
        false,
    );
    let f = module.add_function(FUSED, ty, Some(Linkage::External));
    // Not nounwind: the traced call `middle` makes may be left by a forced
    // unwind (thread cancellation), which must walk through this frame to
    // the application's. Asynchronous unwind tables (uwtable = 2), which
    // the loader registers with the unwinder.
    let uwtable = Attribute::get_named_enum_kind_id("uwtable");
    f.add_attribute(AttributeLoc::Function, cx.create_enum_attribute(uwtable, 2));
    let p = |i: u32| f.get_nth_param(i).expect("declared above");
    let (ctx_e, args_e, ctx_x, args_x) = (p(0), p(1), p(2), p(3));
    let (middle, data, run_entry) = (p(4), p(5), p(6));
    let b = cx.create_builder();
    let start = cx.append_basic_block(f, "start");
    let enter = cx.append_basic_block(f, "entry_half");
    let call = cx.append_basic_block(f, "call");
    let leave = cx.append_basic_block(f, "exit_half");
    let done = cx.append_basic_block(f, "done");
    let half = |name: &str| {
        module
            .get_function(name)
            .expect("made by make_half, kept external")
    };
    let zero = i64t.const_zero();
    b.position_at_end(start);
    let run = b.build_int_compare(
        inkwell::IntPredicate::NE,
        run_entry.into_int_value(),
        zero,
        "run_entry",
    )?;
    b.build_conditional_branch(run, enter, call)?;
    b.position_at_end(enter);
    b.build_call(
        half(ENTRY_HALF),
        &[ctx_e.into(), zero.into(), args_e.into()],
        "r0",
    )?;
    b.build_unconditional_branch(call)?;
    b.position_at_end(call);
    let middle_ty = i64t.fn_type(&[ptr.into()], false);
    let go = b.build_indirect_call(middle_ty, middle.into_pointer_value(), &[data.into()], "go")?;
    let go = match go.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => v.into_int_value(),
        inkwell::values::ValueKind::Instruction(_) => unreachable!("declared to return i64"),
    };
    let go = b.build_int_compare(inkwell::IntPredicate::NE, go, zero, "run_exit")?;
    b.build_conditional_branch(go, leave, done)?;
    b.position_at_end(leave);
    b.build_call(
        half(EXIT_HALF),
        &[ctx_x.into(), zero.into(), args_x.into()],
        "r0",
    )?;
    b.build_unconditional_branch(done)?;
    b.position_at_end(done);
    b.build_return(Some(&zero))?;
    Ok(())
}

/// Verify and optimize the pair's module; returns the target machine.
/// After the first pipeline (the halves inlined into `bpfjet_fused_pair`)
/// the halves' `bpf_get_current_pid_tgid` calls are replaced by one at the
/// function's start (the entry half is conditional, so neither of its
/// calls dominates the other's), and the pipeline runs again.
fn optimize_pair(
    module: &Module<'_>,
    jit: &JitOptions,
) -> Result<inkwell::targets::TargetMachine, String> {
    let spec = pipeline::target_spec(&jit.cpu).map_err(|e| e.to_string())?;
    let machine = pipeline::target_machine(&spec, jit).map_err(|e| e.to_string())?;
    pipeline::configure(module, &machine);
    pipeline::verify(module).map_err(|e| e.to_string())?;
    pipeline::optimize(module, &machine, jit.opt_level).map_err(|e| e.to_string())?;
    if one_pid_tgid(module).map_err(|e| e.to_string())? {
        pipeline::verify(module).map_err(|e| e.to_string())?;
        pipeline::optimize(module, &machine, jit.opt_level).map_err(|e| e.to_string())?;
    }
    Ok(machine)
}

/// Replace every `bpf_get_current_pid_tgid` call of `bpfjet_fused_pair`
/// by one in its first block; false when there were fewer than two.
fn one_pid_tgid(module: &Module<'_>) -> Result<bool, inkwell::builder::BuilderError> {
    let (Some(fused), Some(pid_tgid)) = (
        module.get_function(FUSED),
        module.get_function(crate::natives::PID_TGID),
    ) else {
        return Ok(false);
    };
    let callee = pid_tgid.as_global_value().as_pointer_value();
    let mut calls = Vec::new();
    for bb in fused.get_basic_block_iter() {
        for insn in bb.get_instructions() {
            let n = insn.get_num_operands();
            let is_call = insn.get_opcode() == inkwell::values::InstructionOpcode::Call;
            let target = (n > 0)
                .then(|| insn.get_operand(n - 1))
                .flatten()
                .and_then(|o| o.value());
            if is_call && target.is_some_and(|t| t.as_value_ref() == callee.as_value_ref()) {
                calls.push(insn);
            }
        }
    }
    if calls.len() < 2 {
        return Ok(false);
    }
    let Some(first) = fused.get_first_basic_block() else {
        return Ok(false);
    };
    let b = module.get_context().create_builder();
    match first.get_first_instruction() {
        Some(i) => b.position_before(&i),
        None => b.position_at_end(first),
    }
    let once = b.build_call(pid_tgid, &[], "pid_tgid")?;
    let once = match once.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => v,
        inkwell::values::ValueKind::Instruction(_) => return Ok(false),
    };
    for call in calls {
        call.replace_all_uses_with(&once.as_instruction_value().expect("a call"));
        call.erase_from_basic_block();
    }
    Ok(true)
}

impl FusedPair {
    /// Compile programs `entry` and `exit` of `tracing` (whose code is
    /// `compiled`, built with the same `jit` and `adjust`) into one
    /// function. The error says why the pair could not be compiled.
    pub(crate) fn compile(
        tracing: &TracingObject,
        compiled: &CompiledPrograms,
        jit: &JitOptions,
        adjust: &dyn Fn(&str, &mut Bindings),
        entry: &str,
        exit: &str,
    ) -> Result<FusedPair, String> {
        let id = |name: &str| {
            tracing
                .program_id(name)
                .ok_or_else(|| format!("no tracing program {name}"))
        };
        let (entry_id, exit_id) = (id(entry)?, id(exit)?);
        let program = |name: &str| compiled.program(name).cloned().map_err(|e| e.to_string());
        let (entry_code, exit_code) = (program(entry)?, program(exit)?);
        let cx = Context::create();
        let (module, symbols) = pair_module(&cx, tracing.loaded(), entry, exit, jit, adjust)?;
        let machine = optimize_pair(&module, jit)?;
        let object = pipeline::emit_object(&module, &machine).map_err(|e| e.to_string())?;
        let image = loader::load(&object, &|name: &str| {
            symbols
                .get(name)
                .copied()
                .or_else(|| trampoline::resolve_symbol(name))
        })
        .map_err(|e| e.to_string())?;
        let addr = image
            .symbol(FUSED)
            .ok_or_else(|| format!("the pair's object lacks {FUSED}"))?;
        // SAFETY: `FUSED` was built by `build_fused` with exactly the
        // `FusedFn` signature; the image lives as long as the pair.
        let native = unsafe { std::mem::transmute::<usize, FusedFn>(addr) };
        Ok(FusedPair {
            entry_id,
            exit_id,
            entry: entry_code,
            exit: exit_code,
            native,
            _image: image,
        })
    }

    /// The optimized IR of the pair's module.
    pub(crate) fn optimized_ir(
        tracing: &TracingObject,
        jit: &JitOptions,
        adjust: &dyn Fn(&str, &mut Bindings),
        entry: &str,
        exit: &str,
    ) -> Result<String, String> {
        let cx = Context::create();
        let (module, _) = pair_module(&cx, tracing.loaded(), entry, exit, jit, adjust)?;
        optimize_pair(&module, jit)?;
        Ok(module.print_to_string().to_string())
    }

    /// The entry program's id in the object.
    pub fn entry_id(&self) -> ProgId {
        self.entry_id
    }

    /// The exit program's id in the object.
    pub fn exit_id(&self) -> ProgId {
        self.exit_id
    }

    /// Run the pair on one traced call: the entry half on `enter` (when
    /// `run_entry`), then `call` (which calls the traced function and
    /// returns its raw result, or `None` when the exit half must not run),
    /// then the exit half on the `sys_exit` record of system call `nr`.
    /// Each half begins and ends as [`TracingObject::run`] would run its
    /// program (missed when the thread is already running one, a fault
    /// counted and r0 0); nothing is held during `call`, only the
    /// thread's run state found once for both ([`PairRun`]). Generic over
    /// `call` so that the caller's call, [`middle`] and the set-ups are
    /// one function.
    #[inline]
    pub fn run<F: FnMut() -> Option<i64>>(
        &self,
        object: &TracingObject,
        nr: i64,
        enter: &mut SysEnterCtx,
        site: &ProbeSite,
        run_entry: bool,
        call: F,
    ) {
        let mut frame = Frame {
            pair: self,
            shared: object.pair_run(),
            site,
            nr,
            call,
            entry: None,
            exit: None,
            ctx_e: MaybeUninit::uninit(),
            ctx_x: MaybeUninit::uninit(),
            exit_rec: SysExitCtx::new(nr, 0),
        };
        let enter_ptr: *mut SysEnterCtx = enter;
        let args_e = [enter_ptr as u64, 0, 0, 0, 0];
        if run_entry {
            // SAFETY: `enter` is the entry program's record (the caller's
            // contract) and outlives the half, finished in `middle`.
            if let Some(half) = unsafe {
                frame
                    .shared
                    .begin_half(self.entry_id, enter_ptr.cast(), site)
            } {
                frame.entry = Some(frame.begin(half, true));
            }
        }
        let entered = frame.entry.is_some();
        let args_x = [&mut frame.exit_rec as *mut SysExitCtx as u64, 0, 0, 0, 0];
        let data: *mut Frame<'_, '_, F> = &mut frame;
        // SAFETY: `native` has the `FusedFn` signature; the run contexts it
        // enters are initialised (ctx_e when `entered`, ctx_x when `middle`
        // returns 1) and live in `frame`, which outlives the call.
        unsafe {
            (self.native)(
                (*data).ctx_e.as_mut_ptr(),
                args_e.as_ptr(),
                (*data).ctx_x.as_mut_ptr(),
                args_x.as_ptr(),
                middle::<F>,
                data.cast(),
                u64::from(entered),
            );
        }
        // The exit half, if it ran.
        if let Some(half) = frame.exit.take() {
            // SAFETY: written by `begin` for this half, read once.
            let ctx = unsafe { frame.ctx_x.assume_init_read() };
            half.finish(trampoline::end_run_ctx(ctx, 0));
        }
    }
}

/// What [`middle`] needs, in [`FusedPair::run`]'s frame.
struct Frame<'a, 'o, F> {
    pair: &'a FusedPair,
    shared: PairRun<'o>,
    site: &'a ProbeSite,
    nr: i64,
    call: F,
    /// The entry half under way (until `middle` ends it).
    entry: Option<HalfRun<'o>>,
    /// The exit half under way (until `run` ends it).
    exit: Option<HalfRun<'o>>,
    ctx_e: MaybeUninit<RunCtx>,
    ctx_x: MaybeUninit<RunCtx>,
    exit_rec: SysExitCtx,
}

impl<'o, F> Frame<'_, 'o, F> {
    /// Set up the run context of a begun half; returns the half.
    #[inline(always)]
    fn begin(&mut self, mut half: HalfRun<'o>, entry: bool) -> HalfRun<'o> {
        let code = if entry {
            &self.pair.entry
        } else {
            &self.pair.exit
        };
        let cpu = u64::from(half.cpu());
        let (state, env) = half.state_env();
        let act = code.activation(cpu, env.thread_slot_table());
        let ctx = trampoline::new_run_ctx(code.inner(), act, state, env);
        if entry {
            self.ctx_e.write(ctx);
        } else {
            self.ctx_x.write(ctx);
        }
        half
    }
}

/// Between the halves: end the entry half, call the traced function, begin
/// the exit half (1: the exit half runs on `ctx_x`).
///
/// # Safety
/// `data` is the live [`Frame`] of the [`FusedPair::run`] on this thread,
/// with the same `F`.
unsafe extern "C-unwind" fn middle<F: FnMut() -> Option<i64>>(data: *mut c_void) -> u64 {
    // SAFETY: per the contract above.
    let frame = unsafe { &mut *data.cast::<Frame<'_, '_, F>>() };
    if let Some(half) = frame.entry.take() {
        // SAFETY: written by `begin` for this half, read once.
        let ctx = unsafe { frame.ctx_e.assume_init_read() };
        half.finish(trampoline::end_run_ctx(ctx, 0));
    }
    let Some(ret) = (frame.call)() else {
        return 0;
    };
    frame.exit_rec = SysExitCtx::new(frame.nr, ret);
    let rec: *mut SysExitCtx = &mut frame.exit_rec;
    let exit_id = frame.pair.exit_id;
    // SAFETY: the exit record lives in the frame until the half is
    // finished by `FusedPair::run`.
    match unsafe { frame.shared.begin_half(exit_id, rec.cast(), frame.site) } {
        Some(half) => {
            frame.exit = Some(frame.begin(half, false));
            1
        }
        None => 0,
    }
}
