//! `bpfjet compile`: compile an object's XDP programs ahead of time into one
//! artifact that `test-run --aot` runs without LLVM (format in docs/CLI.md).

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_jit::{AotArtifact, CpuTarget, DumpStage, JitObject, JitOptions};
use bpfjet_runtime::{LoadedObject, ObjectOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompileArgs {
    /// BPF ELF object (clang -target bpf, libbpf conventions).
    pub object: PathBuf,
    /// Output artifact (default: OBJECT with the extension `.aot`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Programs to compile (repeatable); default: every XDP program.
    #[arg(long = "prog")]
    pub progs: Vec<String>,
    /// CPU the code may assume: `host` (this machine's CPU and every feature
    /// it has), `portable` (the x86-64 baseline) or an LLVM CPU name.
    #[arg(long, default_value = "host")]
    pub cpu: String,
    /// What to write: `artifact` (the AOT artifact), or, for reading the
    /// code the JIT makes as `bpftool prog dump jited` reads the kernel's,
    /// `asm` (x86-64 assembly), `ir` (LLVM IR after optimization) or
    /// `lifted-ir` (the IR as lifted from the BPF instructions), printed per
    /// program to OUT or stdout.
    #[arg(long, value_enum, default_value = "artifact")]
    pub emit: Emit,
    #[command(flatten)]
    pub object_args: super::object_args::ObjectArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    Artifact,
    Asm,
    Ir,
    LiftedIr,
}

impl Emit {
    fn stage(self) -> Option<DumpStage> {
        match self {
            Emit::Artifact => None,
            Emit::Asm => Some(DumpStage::Assembly),
            Emit::Ir => Some(DumpStage::OptimizedIr),
            Emit::LiftedIr => Some(DumpStage::LiftedIr),
        }
    }
}

fn cpu_target(cpu: &str) -> Result<CpuTarget> {
    Ok(match cpu {
        "host" => CpuTarget::Host,
        "portable" => CpuTarget::Portable,
        "" => bail!("--cpu: empty CPU name (host, portable or an LLVM CPU name)"),
        name => CpuTarget::Named {
            cpu: name.to_string(),
            features: String::new(),
        },
    })
}

fn default_output(object: &Path) -> PathBuf {
    object.with_extension("aot")
}

pub fn run(args: &CompileArgs) -> Result<ExitCode> {
    let source = std::fs::read(&args.object)
        .with_context(|| format!("reading {}", args.object.display()))?;
    let object = args.object_args.load(&args.object)?;
    for name in &args.progs {
        if object.program(name).is_none() {
            let names: Vec<&str> = object.programs.iter().map(|p| p.name.as_str()).collect();
            bail!("no program {name:?}; programs: {}", names.join(", "));
        }
    }
    // The same CPU slot count test-run and run use: per-CPU layouts match.
    let loaded = LoadedObject::load(
        &object,
        &ObjectOptions {
            ncpus: bpfjet_kernel::possible_cpus(),
            ..ObjectOptions::default()
        },
    )
    .map_err(|e| anyhow!("loading {}: {e}", args.object.display()))?;
    let jit = JitOptions {
        cpu: cpu_target(&args.cpu)?,
        ..JitOptions::default()
    };
    let path = args.object.display().to_string();
    if let Some(stage) = args.emit.stage() {
        return emit_listing(loaded, &jit, &args.progs, stage, args.output.as_deref());
    }
    let artifact = AotArtifact::compile(&loaded, &source, &path, &args.progs, &jit)
        .with_context(|| format!("compiling {path}"))?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.object));
    let bytes = artifact.to_bytes();
    std::fs::write(&output, &bytes).with_context(|| format!("writing {}", output.display()))?;
    let names: Vec<&str> = artifact.programs.iter().map(|p| p.name.as_str()).collect();
    println!(
        "{}: {} ({} bytes; CPU {}; programs: {})",
        path,
        output.display(),
        bytes.len(),
        artifact.cpu,
        names.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The assembly or IR of each program (all XDP programs, or `progs`), each
/// under a `; program NAME` line, to `output` or stdout. The code is what
/// the JIT compiles for `test-run --engine jit` with the same options.
fn emit_listing(
    loaded: LoadedObject,
    jit: &JitOptions,
    progs: &[String],
    stage: DumpStage,
    output: Option<&Path>,
) -> Result<ExitCode> {
    let obj = JitObject::new(loaded, jit);
    let names: Vec<String> = if progs.is_empty() {
        obj.program_names().iter().map(|s| s.to_string()).collect()
    } else {
        progs.to_vec()
    };
    let mut text = String::new();
    for name in &names {
        let listing = obj
            .dump(name, stage, jit.inline_helpers)
            .with_context(|| format!("compiling program {name}"))?;
        text.push_str(&format!("; program {name}\n{listing}"));
        if !listing.ends_with('\n') {
            text.push('\n');
        }
    }
    match output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
