//! Choosing and preparing the engine: verify, then JIT (compiled now, or
//! the native code of an AOT artifact) or interpret.

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_io::run::FrameProgram;
use bpfjet_runtime::tracing::xdp_events::{EventSite, ProgFacts, XdpEvents};
use bpfjet_runtime::worker::{EngineEntry, XdpRunnerFactory};
use bpfjet_runtime::{LoadedObject, MemoryMode, Program, VerifiedProof};
use std::path::Path;
use std::sync::Arc;

/// `--aot`: the artifact and the BPF object file it must have been compiled from.
#[derive(Clone, Copy)]
pub struct AotRequest<'a> {
    pub artifact: &'a Path,
    pub object_path: &'a Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
    /// The best verified engine available: the JIT, else the interpreter.
    Auto,
    /// bpfjet's interpreter (raw memory access once verified).
    Interp,
    /// bpfjet's LLVM JIT.
    Jit,
}

/// The engine a run ended up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Jit,
    Interp,
    /// `--unverified`: every access checked at run time.
    InterpChecked,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Jit => "jit",
            Engine::Interp => "interp",
            Engine::InterpChecked => "interp (bounds-checked, unverified)",
        }
    }
}

/// A prepared program: what each worker's runner is made from.
pub struct Prepared {
    pub engine: Engine,
    factory: XdpRunnerFactory,
    jit: Option<JitParts>,
}

struct JitParts {
    entry: bpfjet_jit::JitProgram,
    table: Vec<Option<Program>>,
    /// Keeps the native code of `table`'s compiled targets alive (a tail
    /// call reaches it through their `Program`s; dropped, it would be
    /// unregistered and the target interpreted).
    _targets: Vec<bpfjet_jit::JitProgram>,
    /// The JIT path's whole compiled object (owner of the tail-call table).
    _compiled: Option<bpfjet_jit::CompiledPrograms>,
    /// Native code by program id, for devmap/cpumap entry programs (an
    /// AOT artifact's where it has them; the others run on the
    /// interpreter).
    by_id: Vec<Option<bpfjet_jit::JitProgram>>,
}

/// The proof bpfjet's verifier gave `prog` when the object was loaded (the
/// loader verifies every program unless `--unverified`, and refuses the
/// object if one is rejected).
fn verified_proof(loaded: &LoadedObject, prog: &str) -> Result<VerifiedProof> {
    loaded
        .verified(prog)?
        .map(|form| form.proof)
        .ok_or_else(|| {
            anyhow!("{prog} was loaded unverified; the fast engines need the verifier's proof")
        })
}

pub fn prepare(
    object: &bpfjet_obj::Object,
    loaded: &LoadedObject,
    prog: &str,
    choice: EngineChoice,
    unverified: bool,
) -> Result<Prepared> {
    prepare_aot(object, loaded, prog, choice, unverified, None)
}

/// [`prepare`], with the native code taken from an AOT artifact when `aot`
/// is given.
pub fn prepare_aot(
    object: &bpfjet_obj::Object,
    loaded: &LoadedObject,
    prog: &str,
    choice: EngineChoice,
    unverified: bool,
    aot: Option<AotRequest<'_>>,
) -> Result<Prepared> {
    if let Some(aot) = aot {
        if choice == EngineChoice::Interp || unverified {
            bail!("--aot runs verified native code: drop --engine interp / --unverified");
        }
        // The verifier runs all the same: its proof is what makes code
        // without bounds checks safe, and it is cheap.
        let proof = verified_proof(loaded, prog)?;
        let factory = XdpRunnerFactory::new(loaded, prog, MemoryMode::Verified(proof))?;
        let jit = load_aot(object, loaded, &factory, aot)
            .with_context(|| format!("AOT artifact {}", aot.artifact.display()))?;
        return Ok(Prepared {
            engine: Engine::Jit,
            factory,
            jit: Some(jit),
        });
    }
    if unverified {
        if choice == EngineChoice::Jit {
            bail!("--engine jit needs a verified program; drop --unverified");
        }
        let factory = XdpRunnerFactory::new(loaded, prog, MemoryMode::BoundsChecked)?;
        return Ok(Prepared {
            engine: Engine::InterpChecked,
            factory,
            jit: None,
        });
    }
    let proof = verified_proof(loaded, prog)?;
    let factory = XdpRunnerFactory::new(loaded, prog, MemoryMode::Verified(proof))?;
    let want_jit = matches!(choice, EngineChoice::Auto | EngineChoice::Jit);
    if want_jit {
        match compile(loaded, prog) {
            Ok(jit) => {
                return Ok(Prepared {
                    engine: Engine::Jit,
                    factory,
                    jit: Some(jit),
                })
            }
            Err(e) if choice == EngineChoice::Jit => return Err(e),
            Err(e) => eprintln!("bpfjet: JIT unavailable ({e:#}); using the interpreter"),
        }
    }
    Ok(Prepared {
        engine: Engine::Interp,
        factory,
        jit: None,
    })
}

/// Every program of the object compiled against its maps (helpers and map
/// lookups inlined, as `bpfjet bench` and `test-run --engine jit` run them),
/// linked by the native tail-call table.
fn compile(loaded: &LoadedObject, prog: &str) -> Result<JitParts> {
    let compiled =
        bpfjet_jit::CompiledPrograms::compile(loaded, &bpfjet_jit::JitOptions::default());
    let entry = compiled
        .program(prog)
        .map_err(|e| anyhow!("JIT compile of {prog}: {e}"))?
        .clone();
    Ok(JitParts {
        entry,
        table: compiled.program_table(),
        by_id: compiled.native_by_slot(),
        _compiled: Some(compiled),
        _targets: Vec::new(),
    })
}

/// The entry program and its tail-call targets from an AOT artifact, after
/// checking it against the object file, the loaded maps and this host.
fn load_aot(
    object: &bpfjet_obj::Object,
    loaded: &LoadedObject,
    factory: &XdpRunnerFactory,
    aot: AotRequest<'_>,
) -> Result<JitParts> {
    let bytes = std::fs::read(aot.artifact).context("reading it")?;
    let artifact = bpfjet_jit::AotArtifact::from_bytes(&bytes)?;
    let source = std::fs::read(aot.object_path)
        .with_context(|| format!("reading {}", aot.object_path.display()))?;
    artifact.check_source(&source)?;
    let entry = artifact.load_program(loaded, factory.name())?;
    // Tail-call targets: the artifact's code where it has some (verified
    // at load like the entry), otherwise the interpreter's checked form.
    let mut table = Vec::with_capacity(factory.program_table().len());
    let mut targets = Vec::new();
    // The same code by program id, for devmap/cpumap entry programs.
    let mut by_id = Vec::with_capacity(factory.program_table().len());
    for (p, obj_prog) in factory.program_table().iter().zip(&object.programs) {
        let (target, native) = match p {
            Some(_) if obj_prog.name == factory.name() => {
                (Some(entry.program().clone()), Some(entry.clone()))
            }
            Some(_) if artifact.has_program(&obj_prog.name) => {
                let target = artifact.load_program(loaded, &obj_prog.name)?;
                let program = target.program().clone();
                let native = target.clone();
                targets.push(target);
                (Some(program), Some(native))
            }
            Some(p) => (Some(p.clone()), None),
            None => (None, None),
        };
        table.push(target);
        by_id.push(native);
    }
    Ok(JitParts {
        entry,
        table,
        _targets: targets,
        _compiled: None,
        by_id,
    })
}

impl Prepared {
    /// Frames are copied through the runtime's frame (the program calls a
    /// helper that takes its context) rather than run in place.
    pub fn stages_frames(&self) -> bool {
        self.factory.stages_frames()
    }

    /// A runner for one worker that fires the XDP tracepoints of `events`
    /// (`tp_btf` programs a control plane attached) for a program of
    /// `facts`. Without the kernel's BTF no such program can be loaded, so
    /// the runner is the plain one.
    pub fn runner_with_events(
        &self,
        cpu: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
        events: &Arc<XdpEvents>,
        facts: ProgFacts,
    ) -> Result<Box<dyn FrameProgram + Send>> {
        let Ok(site) = EventSite::new(ingress_ifindex, rx_queue, facts) else {
            return self.runner(cpu, ingress_ifindex, rx_queue);
        };
        let runner = self.xdp_runner(cpu, ingress_ifindex, rx_queue)?;
        Ok(Box::new(bpfjet_io::run::EventedRunner::new(
            runner,
            Arc::clone(events),
            site,
        )))
    }

    /// A runner for one worker.
    pub fn runner(
        &self,
        cpu: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> Result<Box<dyn FrameProgram + Send>> {
        Ok(Box::new(self.xdp_runner(cpu, ingress_ifindex, rx_queue)?))
    }

    fn xdp_runner(
        &self,
        cpu: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> Result<bpfjet_runtime::worker::XdpRunner> {
        let (engine, table): (Option<EngineEntry>, _) = match &self.jit {
            Some(jit) => {
                let entry = jit.entry.clone();
                (
                    Some(Box::new(move |state, env, md| entry.run(state, env, &[md]))),
                    Some(jit.table.clone()),
                )
            }
            None => (None, None),
        };
        let mut runner = self
            .factory
            .runner(cpu, ingress_ifindex, rx_queue, engine, table)?;
        if let Some(jit) = &self.jit {
            runner.set_entry_engines(
                jit.by_id
                    .iter()
                    .map(|p| {
                        p.clone().map(|p| -> EngineEntry {
                            Box::new(move |state, env, md| p.run(state, env, &[md]))
                        })
                    })
                    .collect(),
            );
        }
        Ok(runner)
    }
}
