//! `bpfjet compile`: compile an object's XDP programs ahead of time into one
//! artifact that `test-run --aot` runs without LLVM (format in docs/CLI.md).

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_jit::{AotArtifact, CpuTarget, JitOptions};
use bpfjet_runtime::{LoadedObject, ObjectOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompileArgs {
    /// BPF ELF object (clang -target bpf, libbpf conventions).
    pub object: PathBuf,
    #[command(flatten)]
    pub core: crate::commands::object_args::CoreArgs,
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
    let object = args.core.load(&args.object)?;
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
