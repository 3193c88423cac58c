//! `bpfjet test-run`: run one XDP program once (or `--repeat` times) on one
//! packet, like the kernel's `BPF_PROG_TEST_RUN`, on bpfjet's interpreter,
//! its JIT (or an AOT artifact's native code) or on the kernel itself, and
//! report the action, the output frame, the time per run and optionally
//! every map afterwards.
//!
//! Everything that can be checked without an engine (object, program,
//! packet, state file, state map names, CPU) is checked here first, so a bad
//! input fails with the same message whichever engine was asked for.

mod engine;
mod packet;
mod report;

pub use engine::Engine;

use super::deployment::Deployment;
use anyhow::{anyhow, bail, Context, Result};
use bpfjet_maps::state::{parse_hex, EntryState, MapState};
use bpfjet_obj::{Object, ProgKind};
use engine::{RunRequest, RxContext};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TestRunArgs {
    /// BPF ELF object (clang -target bpf, libbpf conventions).
    pub object: PathBuf,
    /// Program (C function name, or ELF section when that is unique);
    /// defaults to the object's only program.
    #[arg(long)]
    pub prog: Option<String>,
    /// Input frame: raw bytes, or hex text if the file name ends in `.hex`
    /// (two digits per byte, whitespace between bytes, `#` comments).
    #[arg(long)]
    pub data: PathBuf,
    /// Runs on the same buffer, as the kernel does: from the second run on the
    /// program sees its own output. The report is the last run's.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Engine: interp (the default), jit, or kernel; `--aot` implies jit.
    #[arg(long, value_enum)]
    pub engine: Option<Engine>,
    /// Run the native code of this artifact (`bpfjet compile`) instead of
    /// compiling; OBJECT must be the BPF object it was compiled from.
    #[arg(long, value_name = "ARTIFACT")]
    pub aot: Option<PathBuf>,
    /// Initial map contents (STATE.json), applied identically on every engine.
    #[arg(long)]
    pub maps: Option<PathBuf>,
    /// Print every map after the run, in the STATE.json format.
    #[arg(long)]
    pub dump_maps: bool,
    /// Run as this CPU: per-CPU map slots and bpf_get_smp_processor_id; the
    /// kernel engine pins the calling thread to it.
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
    /// One JSON object: retval, action, data_out (hex), duration_ns, [maps].
    #[arg(long)]
    pub json: bool,
    /// Run without bpfjet's verifier, in the bounds-checked interpreter.
    #[arg(long)]
    pub unverified: bool,
    /// xdp_md.ingress_ifindex: an interface of this host. 0 (the default)
    /// means the kernel's test-run default, loopback (the program sees 1).
    #[arg(long, default_value_t = 0)]
    pub ingress_ifindex: u32,
    /// xdp_md.rx_queue_index: a receive queue of that interface.
    #[arg(long = "rx-queue", default_value_t = 0)]
    pub rx_queue: u32,
    /// xdp_md.data_end of the input context (kernel 6.18): the first
    /// min(N, 3520) bytes are the linear part, the rest page fragments; N
    /// may not exceed the packet. Default: the whole packet.
    #[arg(long, value_name = "N")]
    pub linear_size: Option<u32>,
    #[command(flatten)]
    pub object_args: super::object_args::ObjectArgs,
    #[command(flatten)]
    pub deployment: super::deployment::DeploymentArgs,
}

pub fn run(args: &TestRunArgs) -> Result<ExitCode> {
    let engine = match (args.engine, &args.aot) {
        (None | Some(Engine::Jit), Some(_)) => Engine::Jit,
        (Some(other), Some(_)) => bail!(
            "--aot runs native code: use it with --engine jit (or no --engine), not {}",
            other.name()
        ),
        (Some(engine), None) => engine,
        (None, None) => Engine::Interp,
    };
    if engine == Engine::Kernel && !args.object_args.ringbuf_backpressure.is_empty() {
        bail!("--ringbuf-backpressure: the kernel's ring buffers always drop when full (bpfjet engines only)");
    }
    let deployment = Deployment::load(&args.object, &args.deployment, &args.object_args)?;
    if args.aot.is_some() && !deployment.is_single() {
        bail!("--aot runs one object's artifact; it cannot be combined with --object");
    }
    let (index, wanted) = match args.prog.as_deref() {
        Some(name) => {
            let (k, plain) = deployment.object_of(name)?;
            (k, Some(plain))
        }
        None => (0, None),
    };
    let program = choose_program(&deployment.objects[index], wanted)
        .with_context(|| format!("object {}", deployment.paths[index].display()))?;
    let program = bpfjet_maps::deployment::program_name(index, &deployment.labels[index], &program);
    let data = packet::read_packet(&args.data)?;
    let state = args
        .maps
        .as_deref()
        .map(|path| read_state(path, &deployment))
        .transpose()?;
    let cpus = bpfjet_kernel::possible_cpus();
    if args.cpu >= cpus {
        bail!(
            "--cpu {}: this machine has {cpus} possible CPUs (0..={})",
            args.cpu,
            cpus - 1
        );
    }

    let request = RunRequest {
        object_path: &args.object,
        deployment: &deployment,
        program: &program,
        data: &data,
        state: state.as_ref(),
        repeat: args.repeat,
        cpu: args.cpu,
        rx: RxContext {
            ingress_ifindex: args.ingress_ifindex,
            rx_queue_index: args.rx_queue,
            linear_size: args.linear_size,
        },
        dump_maps: args.dump_maps,
        unverified: args.unverified,
        aot: args.aot.as_deref(),
        object_args: &args.object_args,
    };
    let outcome = engine::run(engine, &request)?;
    if args.json {
        println!("{}", report::json(engine.name(), &outcome)?);
    } else {
        print!(
            "{}",
            report::text(engine.name(), &data, args.repeat, &outcome)
        );
    }
    // A completed run succeeds whatever the action: XDP_ABORTED is a result too.
    Ok(ExitCode::SUCCESS)
}

/// The program `wanted` names (C function name, else a unique ELF section),
/// or the object's only program; it must be XDP.
fn choose_program(object: &Object, wanted: Option<&str>) -> Result<String> {
    let names = || {
        object
            .programs
            .iter()
            .map(|p| format!("{} ({})", p.name, p.section))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let program = match wanted {
        Some(name) => {
            let by_section: Vec<_> = object
                .programs
                .iter()
                .filter(|p| p.section == name)
                .collect();
            match object.program(name) {
                Some(p) => p,
                None if by_section.len() == 1 => by_section[0],
                None => bail!("no program {name:?}; programs: {}", or_none(names())),
            }
        }
        // `SEC("?...")` programs are not loaded unless named.
        None => match object
            .programs
            .iter()
            .filter(|p| p.autoload())
            .collect::<Vec<_>>()
            .as_slice()
        {
            [only] => only,
            [] if object.programs.is_empty() => bail!("the object has no programs"),
            [] => bail!(
                "every program has autoload off (`SEC(\"?...\")`), choose one with --prog: {}",
                names()
            ),
            _ => bail!("several programs, choose one with --prog: {}", names()),
        },
    };
    match &program.kind {
        kind if kind.is_xdp() => Ok(program.name.clone()),
        ProgKind::Unsupported(t) if t == "unknown" => bail!(
            "program {} (section {}) is of type unknown; test-run runs XDP programs; {}",
            program.name,
            program.section,
            bpfjet_obj::force_type_hint(&program.section)
        ),
        other => bail!(
            "program {} (section {}) is of type {other}; test-run runs XDP programs",
            program.name,
            program.section
        ),
    }
}

fn or_none(list: String) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list
    }
}

/// Parse a STATE.json and check that every map it names is in the object
/// and that its hex is hex, before any engine gets to create maps.
fn read_state(path: &Path, deployment: &Deployment) -> Result<MapState> {
    let state = bpfjet_maps::state::load_state(path)
        .map_err(|e| anyhow!("map state {}: {e}", path.display()))?;
    let maps = deployment.map_names();
    for (name, entries) in &state {
        if !maps.contains(name) {
            bail!(
                "map state {}: no map named {name:?} in the {} (maps: {})",
                path.display(),
                if deployment.is_single() {
                    "object"
                } else {
                    "deployment"
                },
                or_none(maps.join(", "))
            );
        }
        check_hex(entries)
            .map_err(|why| anyhow!("map state {}: map {name:?} {why}", path.display()))?;
    }
    Ok(state)
}

/// Every key and value of `entries` (and of inner maps, recursively) parses
/// as hex; sizes are left to the engines, which know the map specs.
fn check_hex(entries: &[EntryState]) -> std::result::Result<(), String> {
    for (i, entry) in entries.iter().enumerate() {
        let hex = std::iter::once(&entry.key)
            .chain(entry.value.iter())
            .chain(entry.values.iter().flatten());
        for text in hex {
            parse_hex(text).map_err(|e| format!("entry {i}: {e}"))?;
        }
        if let Some(inner) = &entry.inner {
            check_hex(&inner.entries).map_err(|why| format!("entry {i}: inner map {why}"))?;
        }
    }
    Ok(())
}
