//! `bpfjet bench OBJ [--prog NAME] --data PKT [--maps STATE.json]
//! [--engines kernel,interp,jit] [--mode fresh|repeat] [--rounds N]
//! [--iters N] [--cpu N] [--json]`: the same program, packet and map state
//! on every engine, interleaved over several rounds in one process, as
//! DESIGN.md's benchmark method asks.
//!
//! Per engine and round three figures are taken: the program (in fresh
//! mode behind the engine's packet reset: the kernel's wrapper program,
//! bpfjet's frame reset), the reset with an empty target, and the empty
//! program alone. The raw cost is `program - reset + empty` (the reset's own
//! cost subtracted), the net cost `program - reset` (fresh) or
//! `program - empty` (repeat). Medians over the rounds are reported with
//! the spread of the raw cost, and ratios are the kernel's time divided by
//! the engine's.

mod engines;
mod report;
mod stats;

use anyhow::{bail, Context, Result};
use bpfjet_jit::{CacheMode, JitOptions};
use bpfjet_maps::state::MapState;
use engines::{Engine, Measurer, Sample};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Whether each run sees the original packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every run, on every engine, starts from the original packet.
    Fresh,
    /// The kernel's `repeat`: runs on the same buffer, never reset.
    Repeat,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Fresh => "fresh",
            Mode::Repeat => "repeat",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// BPF ELF object.
    pub object: PathBuf,
    #[command(flatten)]
    pub object_args: super::object_args::ObjectArgs,
    #[command(flatten)]
    pub deployment: super::deployment::DeploymentArgs,
    /// Program (C function name); defaults to the object's only XDP program.
    #[arg(long)]
    pub prog: Option<String>,
    /// Input frame: raw bytes, or hex text if the name ends in `.hex`.
    #[arg(long)]
    pub data: PathBuf,
    /// Initial map contents (STATE.json), applied identically on every engine.
    #[arg(long)]
    pub maps: Option<PathBuf>,
    /// Engines, in the order they run within a round.
    #[arg(long, value_delimiter = ',', default_value = "kernel,interp,jit")]
    pub engines: Vec<Engine>,
    #[arg(long, value_enum, default_value = "fresh")]
    pub mode: Mode,
    /// Rounds (engines interleaved within each).
    #[arg(long, default_value_t = 7)]
    pub rounds: u32,
    /// Runs per measurement; by default calibrated per engine to about
    /// `--target-ms` per measurement.
    #[arg(long)]
    pub iters: Option<u64>,
    /// Calibration target per measurement, in milliseconds.
    #[arg(long, default_value_t = 20)]
    pub target_ms: u64,
    /// Run as (and pin the process to) this CPU.
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
    /// Also time native memcpy as a reference row: `SIZExCOUNT` copies per
    /// "packet" (e.g. `1024x100`, the 1 KiB copy microbenchmark).
    #[arg(long)]
    pub native_memcpy: Option<String>,
    /// Directory holding `empty.o` and `fresh_wrapper.o` (default: the
    /// `build/examples/bench` of the workspace this binary was built in,
    /// else of the current directory).
    #[arg(long)]
    pub bench_dir: Option<PathBuf>,
    /// Compile without the JIT's disk cache (to measure compile time).
    #[arg(long)]
    pub no_jit_cache: bool,
    /// Keep every helper call on the JIT's trampoline (no inlining), for
    /// comparison.
    #[arg(long)]
    pub no_inline: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The jit engine runs the native code of this artifact (`bpfjet
    /// compile` of OBJECT) instead of compiling.
    #[arg(long, value_name = "ARTIFACT")]
    pub aot: Option<PathBuf>,
    /// Another build of the same program (e.g. with bpfjet's kfuncs): its
    /// program of the same name also runs on bpfjet's JIT, in the same
    /// rounds, as row `jit:<file stem>` (same packet and map state).
    #[arg(long, value_name = "OBJECT")]
    pub versus: Option<PathBuf>,
}

fn bench_dir(args: &BenchArgs) -> Result<PathBuf> {
    if let Some(dir) = &args.bench_dir {
        return Ok(dir.clone());
    }
    let candidates = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/examples/bench"),
        PathBuf::from("build/examples/bench"),
    ];
    candidates
        .iter()
        .find(|d| d.join("empty.o").exists())
        .cloned()
        .with_context(|| {
            "build/examples/bench/empty.o not found: run `make -C examples bench` \
             (or pass --bench-dir)"
        })
}

fn read_packet(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "hex") {
        let text = String::from_utf8_lossy(&bytes);
        let digits: Vec<&str> = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .collect();
        return bpfjet_maps::state::parse_hex(&digits.join(" "))
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    Ok(bytes)
}

fn choose_program(object: &bpfjet_obj::Object, wanted: Option<&str>) -> Result<String> {
    if let Some(name) = wanted {
        if object.program(name).is_none() {
            let names: Vec<&str> = object.programs.iter().map(|p| p.name.as_str()).collect();
            bail!("no program {name:?}; programs: {}", names.join(", "));
        }
        return Ok(name.to_string());
    }
    let xdp: Vec<&bpfjet_obj::Program> = object
        .programs
        .iter()
        .filter(|p| p.kind.is_xdp() && p.autoload())
        .collect();
    match xdp.as_slice() {
        [only] => Ok(only.name.clone()),
        [] => bail!("the object has no XDP program"),
        _ => bail!(
            "several programs, choose one with --prog: {}",
            xdp.iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Shows which round runs, on a terminal, once a run takes over a second.
struct Progress {
    start: Instant,
    tty: bool,
    shown: bool,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        Progress {
            start: Instant::now(),
            tty: !quiet && std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn update(&mut self, round: u32, rounds: u32, engine: &str) {
        if self.tty && self.start.elapsed() > Duration::from_secs(1) {
            eprint!("\rbench: round {}/{rounds}, {engine:<8}", round + 1);
            self.shown = true;
        }
    }

    fn finish(&mut self) {
        if self.shown {
            eprint!("\r{:<40}\r", "");
        }
    }
}

pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.engines.is_empty() {
        bail!("--engines names no engine");
    }
    let deployment =
        super::deployment::Deployment::load(&args.object, &args.deployment, &args.object_args)?;
    if !deployment.is_single() && (args.aot.is_some() || args.versus.is_some()) {
        bail!("--aot and --versus compare one object; they cannot be combined with --object");
    }
    let object = deployment.main();
    let program = choose_program(object, args.prog.as_deref())?;
    let packet = read_packet(&args.data)?;
    let state: MapState = match &args.maps {
        Some(path) => bpfjet_maps::state::load_state(path)
            .map_err(|e| anyhow::anyhow!("map state {}: {e}", path.display()))?,
        None => MapState::new(),
    };
    let cpus = bpfjet_kernel::possible_cpus();
    if args.cpu >= cpus {
        bail!("--cpu {}: this machine has {cpus} possible CPUs", args.cpu);
    }
    // Every engine runs on one CPU: the kernel's per-CPU slot and bpfjet's
    // are then the same, and the figures do not mix cores.
    let _pin = bpfjet_kernel::CpuPin::pin(args.cpu)?;
    let dir = bench_dir(args)?;
    let setup = engines::Setup {
        object_args: &args.object_args,
        object_path: &args.object,
        object,
        deployment: &deployment,
        program: &program,
        packet: &packet,
        state: &state,
        mode: args.mode,
        cpu: args.cpu,
        bench_dir: &dir,
        target: Duration::from_millis(args.target_ms.max(1)),
        iters: args.iters,
        jit: JitOptions {
            cache: if args.no_jit_cache {
                CacheMode::Off
            } else {
                CacheMode::default()
            },
            inline_helpers: !args.no_inline,
            ..JitOptions::default()
        },
        aot: args.aot.as_deref(),
    };
    let fast = if args.engines.iter().any(|e| *e != Engine::Kernel) {
        Some(engines::FastObjects::load(&setup)?)
    } else {
        None
    };
    let versus_object = match &args.versus {
        Some(path) => {
            let o = bpfjet_obj::load_file(path)
                .map_err(|e| anyhow::anyhow!("object {}: {e}", path.display()))?;
            if o.program(&program).is_none() {
                bail!("--versus {}: no program {program:?}", path.display());
            }
            Some((path.as_path(), o))
        }
        None => None,
    };
    let versus_setup = versus_object.as_ref().map(|(path, o)| engines::Setup {
        object_path: path,
        object: o,
        aot: None,
        ..setup.clone()
    });
    let versus_fast = versus_setup
        .as_ref()
        .map(engines::FastObjects::load)
        .transpose()?;
    let mut measurers: Vec<Box<dyn Measurer + '_>> = Vec::new();
    for &engine in &args.engines {
        measurers.push(engines::measurer(engine, &setup, fast.as_ref())?);
    }
    if let (Some(s), Some(f)) = (&versus_setup, &versus_fast) {
        measurers.push(engines::versus(s, f)?);
    }
    if let Some(spec) = &args.native_memcpy {
        measurers.push(engines::native_memcpy(spec, &setup)?);
    }
    for m in &mut measurers {
        m.calibrate()?;
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); measurers.len()];
    let mut progress = Progress::new(args.json);
    for round in 0..args.rounds {
        for (i, m) in measurers.iter_mut().enumerate() {
            progress.update(round, args.rounds, m.name());
            samples[i].push(m.measure()?);
        }
    }
    progress.finish();
    let rows: Vec<report::Row> = measurers
        .iter()
        .zip(&samples)
        .map(|(m, s)| report::Row::new(m.name(), m.iters(), m.action(), s, m.notes()))
        .collect();
    let summary = report::Summary {
        object: &args.object,
        program: &program,
        packet_len: packet.len(),
        mode: args.mode,
        rounds: args.rounds,
        cpu: args.cpu,
        rows: &rows,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary.json())?);
    } else {
        print!("{}", summary.table());
    }
    Ok(ExitCode::SUCCESS)
}
