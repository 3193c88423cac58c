//! Whole objects on bpfjet's fast engines.
//!
//! [`JitObject`] takes a [`LoadedObject`] (maps created and filled, programs
//! bound) and gives each of its XDP programs the fast path: the program is
//! verified by `bpfjet_verifier` first, and only its acceptance yields the
//! [`VerifiedProof`] that lets it run without bounds checks — in the
//! interpreter (raw memory mode) or compiled by the JIT with helpers and map
//! lookups inlined against the object's maps ([`Bindings`]). A program the
//! verifier rejects has no fast path; the error says why.
//!
//! Tail calls from native code enter native code: every program of the
//! object is compiled first, then each gets the object's table of native
//! entries by program id (what PROG_ARRAY slots hold). A slot naming a
//! program that failed to compile aborts the run with the reason. The
//! interpreter's program table holds the compiled programs' loaded forms.
//!
//! [`XdpBench`] runs one program repeatedly on one frame for benchmarks:
//! either fresh (the frame reset to the original packet before each run) or
//! the kernel's repeated-buffer way.

use crate::bindings::Bindings;
use crate::error::JitError;
use crate::options::JitOptions;
use crate::program::{DumpStage, JitProgram};
use crate::trampoline::{TailEntry, TailTable};
use bpfjet_isa::Insn;
use bpfjet_obj::Object;
use bpfjet_runtime::xdp::XdpFrame;
use bpfjet_runtime::{
    LoadOptions, LoadedObject, Program, RunState, RuntimeError, TestRunOptions, TestRunResult,
    XdpEnv, LOOPBACK_IFINDEX,
};
use bpfjet_verifier::Facts;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The engine an [`XdpBench`] or [`JitObject::test_run`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpEngine {
    /// The interpreter on the verified (unchecked) path.
    Interp,
    /// Native code from the LLVM JIT.
    Jit,
}

/// Why a program of an object cannot run on a fast engine.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("program {program}: rejected by bpfjet's verifier: {reason}")]
    Rejected { program: String, reason: String },
    #[error("program {program}: {source}")]
    Compile { program: String, source: JitError },
    #[error("program {program}: {reason}")]
    Run { program: String, reason: String },
}

/// One program's fast forms.
struct FastProgram {
    name: String,
    jit: Result<Compiled, Arc<ObjectError>>,
}

/// A compiled program and what it was compiled from (for dumps).
pub(crate) struct Compiled {
    pub jit: JitProgram,
    pub insns: Vec<Insn>,
    pub opts: LoadOptions,
    pub bindings: Bindings,
    pub options: JitOptions,
}

/// What a program of a loaded object is compiled from: the verified
/// instructions, load options and bindings.
pub(crate) struct CompileInputs {
    pub insns: Vec<Insn>,
    pub opts: LoadOptions,
    pub bindings: Bindings,
}

/// A loaded object whose XDP programs were verified and compiled.
pub struct JitObject {
    loaded: LoadedObject,
    compiled: CompiledPrograms,
}

/// Every XDP program of a loaded object compiled, with the native tail-call
/// table that links them, without owning the object: for callers such as
/// `bpfjet run` that keep the [`LoadedObject`] themselves (and must keep it
/// alive as long as these programs run).
pub struct CompiledPrograms {
    programs: Vec<FastProgram>,
    /// Program table for tail calls: the compiled programs' loaded forms,
    /// by position in `LoadedObject::program_names`.
    table: Vec<Option<Program>>,
    /// For each table slot, the index in `programs` of the program there.
    slots: Vec<Option<usize>>,
}

impl CompiledPrograms {
    /// Compile every XDP program of `loaded` in the form bpfjet's verifier
    /// accepted at load time (as [`JitObject::new`] does).
    pub fn compile(loaded: &LoadedObject, jit: &JitOptions) -> CompiledPrograms {
        Self::build(loaded, |loaded, name| {
            JitObject::compile_one(loaded, name, jit)
        })
    }

    /// [`CompiledPrograms::compile`] with each program's [`Bindings`]
    /// adjusted by `adjust(program, bindings)` before compiling.
    pub fn compile_bound(
        loaded: &LoadedObject,
        jit: &JitOptions,
        adjust: &dyn Fn(&str, &mut Bindings),
    ) -> CompiledPrograms {
        Self::build(loaded, |loaded, name| {
            JitObject::compile_one_bound(loaded, name, jit, adjust)
        })
    }

    pub(crate) fn build(
        loaded: &LoadedObject,
        mut native: impl FnMut(&LoadedObject, &str) -> Result<Compiled, ObjectError>,
    ) -> CompiledPrograms {
        let names: Vec<String> = loaded
            .program_names()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut programs = Vec::with_capacity(names.len());
        for name in &names {
            let compiled = native(loaded, name);
            programs.push(FastProgram {
                name: name.clone(),
                jit: compiled.map_err(Arc::new),
            });
        }
        let loaded_table = loaded.program_table();
        // The table is indexed by PROG_ARRAY value: a program's position,
        // or its slot when the object says so.
        let mut at_slot: Vec<Option<usize>> = vec![None; loaded_table.len()];
        for i in 0..programs.len() {
            if let Some(s) = at_slot.get_mut(loaded.tail_slot(i)) {
                *s = Some(i);
            }
        }
        let entries = at_slot
            .iter()
            .zip(&loaded_table)
            .map(|(i, loaded)| match (i.map(|i| &programs[i]), loaded) {
                (Some(p), _) if p.jit.is_ok() => {
                    let c = p.jit.as_ref().expect("checked");
                    TailEntry::Compiled(Arc::clone(c.jit.inner()))
                }
                (Some(p), Some(_)) => TailEntry::NoCode(format!(
                    "program {} has no native code: {}",
                    p.name,
                    p.jit
                        .as_ref()
                        .err()
                        .map_or(String::new(), |e| e.to_string())
                )),
                _ => TailEntry::Absent,
            })
            .collect();
        let tails = Arc::new(TailTable::new(entries));
        for p in &mut programs {
            if let Ok(c) = &mut p.jit {
                c.jit = c.jit.with_tail_table(Arc::clone(&tails));
            }
        }
        let table = at_slot
            .iter()
            .map(|i| {
                i.and_then(|i| programs[i].jit.as_ref().ok())
                    .map(|c| c.jit.program().clone())
            })
            .collect();
        CompiledPrograms {
            programs,
            table,
            slots: at_slot,
        }
    }

    /// The compiled programs by table slot (program id), as
    /// [`CompiledPrograms::program_table`] lays them out: what a data plane
    /// runs natively where the table names a program (a devmap or cpumap
    /// entry's program). None where a slot is empty or has no native code.
    pub fn native_by_slot(&self) -> Vec<Option<JitProgram>> {
        self.slots
            .iter()
            .map(|i| {
                i.and_then(|i| self.programs[i].jit.as_ref().ok())
                    .map(|c| c.jit.clone())
            })
            .collect()
    }

    pub fn program_names(&self) -> Vec<&str> {
        self.programs.iter().map(|p| p.name.as_str()).collect()
    }

    /// The compiled program `name`, or why it has none.
    pub fn program(&self, name: &str) -> Result<&JitProgram, ObjectError> {
        self.compiled(name).map(|c| &c.jit)
    }

    fn compiled(&self, name: &str) -> Result<&Compiled, ObjectError> {
        let p = self
            .programs
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ObjectError::Run {
                program: name.to_string(),
                reason: "no such program".into(),
            })?;
        p.jit.as_ref().map_err(|e| ObjectError::Run {
            program: name.to_string(),
            reason: e.to_string(),
        })
    }

    /// The tail-call table of the fast engines.
    pub fn program_table(&self) -> Vec<Option<Program>> {
        self.table.clone()
    }

    /// The IR or assembly of program `name` as compiled here (with its
    /// bindings).
    pub fn dump(&self, name: &str, stage: DumpStage) -> Result<String, ObjectError> {
        let c = self.compiled(name)?;
        JitProgram::dump_bound(&c.insns, &c.opts, &c.options, &c.bindings, stage).map_err(
            |source| ObjectError::Compile {
                program: name.to_string(),
                source,
            },
        )
    }
}

impl std::fmt::Debug for JitObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitObject")
            .field("programs", &self.program_names())
            .finish_non_exhaustive()
    }
}

fn const_keys(facts: &Facts) -> BTreeMap<usize, u32> {
    facts
        .const_key_lookups
        .iter()
        .filter_map(|(slot, l)| l.key.map(|k| (*slot, k)))
        .collect()
}

impl JitObject {
    /// Compile every XDP program of `loaded` in the form bpfjet's verifier
    /// accepted at load time. Per-program failures are kept and reported when
    /// the program is used.
    pub fn new(loaded: LoadedObject, jit: &JitOptions) -> JitObject {
        Self::build(loaded, |loaded, name| Self::compile_one(loaded, name, jit))
    }

    /// [`JitObject::new`] with `native` giving each program its native code
    /// (compiling it, or taking it from an AOT artifact).
    pub(crate) fn build(
        loaded: LoadedObject,
        native: impl FnMut(&LoadedObject, &str) -> Result<Compiled, ObjectError>,
    ) -> JitObject {
        let compiled = CompiledPrograms::build(&loaded, native);
        JitObject { loaded, compiled }
    }

    fn compile_one(
        loaded: &LoadedObject,
        name: &str,
        jit: &JitOptions,
    ) -> Result<Compiled, ObjectError> {
        Self::compile_one_bound(loaded, name, jit, &|_, _| {})
    }

    /// [`JitObject::compile_one`] with the bindings adjusted by `adjust`
    /// (what the loader of the object knows beyond the object: tracing's
    /// maps kept per thread, attach-site constants).
    pub(crate) fn compile_one_bound(
        loaded: &LoadedObject,
        name: &str,
        jit: &JitOptions,
        adjust: &dyn Fn(&str, &mut Bindings),
    ) -> Result<Compiled, ObjectError> {
        let CompileInputs {
            insns,
            opts,
            mut bindings,
        } = Self::compile_inputs(loaded, name)?;
        adjust(name, &mut bindings);
        let compiled =
            JitProgram::compile_bound(&insns, &opts, jit, &bindings).map_err(|source| {
                ObjectError::Compile {
                    program: name.to_string(),
                    source,
                }
            })?;
        Ok(Compiled {
            jit: compiled,
            insns,
            opts,
            bindings,
            options: jit.clone(),
        })
    }

    /// What program `name` of `loaded` is compiled from.
    pub(crate) fn compile_inputs(
        loaded: &LoadedObject,
        name: &str,
    ) -> Result<CompileInputs, ObjectError> {
        // The loader already verified the program and rewrote its context
        // accesses from the verifier's facts; compile exactly that form.
        let verified = loaded
            .verified(name)?
            .ok_or_else(|| ObjectError::Rejected {
                program: name.to_string(),
                reason: "the object was loaded unverified; the JIT runs only verified programs"
                    .into(),
            })?;
        let (proof, insns, facts) = (verified.proof, verified.insns.clone(), &verified.facts);
        let const_keys = const_keys(facts);
        let program = loaded.program(name)?;
        // In a deployment each object numbers its maps its own way.
        let mut opts = LoadOptions::verified(proof).with_maps(loaded.program_map_bindings(name)?);
        // The program's type's helper set (base + XDP, base + tracing).
        opts.helpers = std::sync::Arc::clone(program.helpers());
        opts.kfuncs = std::sync::Arc::clone(program.kfuncs());
        // XDP programs run with an `XdpEnv`, tracing programs with a
        // `TracingEnv`: the inlined helpers find their run environment in
        // either; the XDP-only ones need the former.
        let kind = loaded.program_kind(name)?;
        let xdp = kind.is_xdp();
        let tracing = kind.prog_type().is_some_and(|t| t.is_tracing());
        let bindings = Bindings {
            maps: loaded.program_maps(name)?,
            const_keys,
            xdp,
            tracing,
            thread_maps: Vec::new(),
            fold_frozen: true,
            ctx_constants: Vec::new(),
        };
        Ok(CompileInputs {
            insns,
            opts,
            bindings,
        })
    }

    /// Load `obj` (maps, state) and compile its programs.
    pub fn load(
        obj: &Object,
        opts: &bpfjet_runtime::ObjectOptions,
        jit: &JitOptions,
    ) -> Result<JitObject, ObjectError> {
        let loaded = LoadedObject::load(obj, opts)?;
        Ok(JitObject::new(loaded, jit))
    }

    /// The object as loaded: maps, dumps, the bounds-checked programs.
    pub fn loaded(&self) -> &LoadedObject {
        &self.loaded
    }

    pub fn program_names(&self) -> Vec<&str> {
        self.compiled.program_names()
    }

    /// The compiled program (its `program()` is the verified loaded form the
    /// interpreter runs on the fast path).
    pub fn program(&self, name: &str) -> Result<&JitProgram, ObjectError> {
        self.compiled(name).map(|c| &c.jit)
    }

    /// The IR or assembly of a program as this object compiled it (with
    /// `inline` false: as it would be without helper inlining).
    pub fn dump(&self, name: &str, stage: DumpStage, inline: bool) -> Result<String, ObjectError> {
        let c = self.compiled(name)?;
        let options = JitOptions {
            inline_helpers: inline,
            ..c.options.clone()
        };
        JitProgram::dump_bound(&c.insns, &c.opts, &options, &c.bindings, stage).map_err(|source| {
            ObjectError::Compile {
                program: name.to_string(),
                source,
            }
        })
    }

    fn compiled(&self, name: &str) -> Result<&Compiled, ObjectError> {
        // The loaded object knows whether the name exists at all.
        self.loaded.program(name)?;
        self.compiled.compiled(name)
    }

    /// The tail-call table of the fast engines.
    pub fn program_table(&self) -> Vec<Option<Program>> {
        self.compiled.program_table()
    }

    /// `BPF_PROG_TEST_RUN` on a fast engine, like
    /// [`LoadedObject::test_run`]: `repeat` runs on the same frame. A
    /// non-zero ingress ifindex is taken as given (the interpreter's path
    /// checks it against the host's interfaces).
    pub fn test_run(
        &self,
        prog: &str,
        data: &[u8],
        opts: &TestRunOptions,
        engine: XdpEngine,
    ) -> Result<TestRunResult, ObjectError> {
        let mut bench = XdpBench::new(self, prog, data, opts, engine)?;
        let runs = opts.repeat.max(1);
        let started = Instant::now();
        let (retval, notes) = bench.run_collect(runs)?;
        let elapsed = started.elapsed().as_nanos() as u64;
        Ok(TestRunResult {
            retval,
            data_out: bench.env.frame().output(),
            duration_ns: elapsed / u64::from(runs),
            md_offsets: bench.env.frame().md_offsets(),
            trace_log: bench.env.trace_log().to_vec(),
            notes,
        })
    }
}

/// One program, one frame, one run state: runs it again and again.
pub struct XdpBench<'a> {
    name: String,
    engine: XdpEngine,
    jit: &'a JitProgram,
    env: XdpEnv,
    state: RunState,
    md: u64,
    packet: Vec<u8>,
}

impl<'a> XdpBench<'a> {
    pub fn new(
        obj: &'a JitObject,
        prog: &str,
        data: &[u8],
        opts: &TestRunOptions,
        engine: XdpEngine,
    ) -> Result<XdpBench<'a>, ObjectError> {
        let jit = obj.program(prog)?;
        let run_err = |reason: String| ObjectError::Run {
            program: prog.to_string(),
            reason,
        };
        if opts.cpu >= obj.loaded.ncpus() {
            return Err(run_err(format!(
                "CPU {} does not exist: the object has {} CPU slots",
                opts.cpu,
                obj.loaded.ncpus()
            )));
        }
        let ingress = if opts.ingress_ifindex == 0 {
            LOOPBACK_IFINDEX
        } else {
            opts.ingress_ifindex
        };
        let linear = opts.linear_size.map_or(data.len(), |l| l as usize);
        let frame = XdpFrame::for_test_run(
            data,
            opts.meta_len as usize,
            linear,
            ingress,
            opts.rx_queue_index,
        )
        .map_err(|e| run_err(e.to_string()))?;
        let env = XdpEnv::new(
            frame,
            opts.cpu as u32,
            Arc::clone(obj.loaded.object_maps()),
            obj.loaded.fib().cloned(),
        );
        let mut state = RunState::new();
        state.set_program_table(obj.program_table());
        let md = env.frame().md_addr();
        Ok(XdpBench {
            name: prog.to_string(),
            engine,
            jit,
            env,
            state,
            md,
            packet: data.to_vec(),
        })
    }

    fn fault(&self, fault: bpfjet_runtime::Fault) -> ObjectError {
        ObjectError::Runtime(RuntimeError::Fault {
            program: self.name.clone(),
            fault,
        })
    }

    #[inline(always)]
    fn run_one(&mut self) -> Result<u32, ObjectError> {
        let args = [self.md];
        let result = match self.engine {
            XdpEngine::Jit => self.jit.run_xdp(&mut self.state, &mut self.env),
            XdpEngine::Interp => self
                .jit
                .program()
                .run(&mut self.state, &mut self.env, &args),
        };
        result.map(|r0| r0 as u32).map_err(|f| self.fault(f))
    }

    fn run_collect(&mut self, runs: u32) -> Result<(u32, Vec<String>), ObjectError> {
        let mut retval = 0;
        let mut notes = Vec::new();
        let _hold = self.env.hold_cpu();
        for _ in 0..runs {
            retval = self.run_one()?;
            notes.extend(self.env.release_leftovers());
        }
        Ok((retval, notes))
    }

    /// `iters` runs on the same frame (the kernel's `repeat`); the last
    /// return value.
    pub fn run_repeat(&mut self, iters: u64) -> Result<u32, ObjectError> {
        let mut retval = 0;
        // No timer callback on this CPU slot during the runs.
        let _hold = self.env.hold_cpu();
        for _ in 0..iters {
            retval = self.run_one()?;
            let _ = self.env.release_leftovers();
        }
        Ok(retval)
    }

    /// `iters` runs, each on the original packet (the frame is reset before
    /// every run); the last return value.
    pub fn run_fresh(&mut self, iters: u64) -> Result<u32, ObjectError> {
        let mut retval = 0;
        let _hold = self.env.hold_cpu();
        for _ in 0..iters {
            self.reset()?;
            retval = self.run_one()?;
            let _ = self.env.release_leftovers();
        }
        Ok(retval)
    }

    /// Put the original packet back.
    #[inline]
    pub fn reset(&mut self) -> Result<(), ObjectError> {
        let name = &self.name;
        self.env
            .frame_mut()
            .reset(&self.packet)
            .map_err(|e| ObjectError::Run {
                program: name.clone(),
                reason: e.to_string(),
            })
    }

    /// The frame from `data_meta` to `data_end`.
    pub fn data_out(&self) -> &[u8] {
        self.env.frame().meta_and_packet()
    }
}
