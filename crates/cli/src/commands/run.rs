//! `bpfjet run OBJ [--prog NAME] [--engine auto|interp|jit] [--maps STATE.json]
//! [--name INSTANCE] [--json] (--pcap IN [--out DIR] | --gen SPEC | --iface IF[:QUEUES])
//! [--duration SECS] [--workers N]`: the data plane.
//!
//! Loads the object (its maps published in shared memory as instance
//! `--name`, by default the object's file stem, for `bpfjet map`), verifies
//! and compiles the program, and runs it over the source with one worker
//! thread per CPU slot until the source ends, `--duration` elapses, or
//! SIGINT/SIGTERM arrives. A status line goes to stderr while it runs; the
//! summary (or with `--json` one JSON object) goes to stdout at the end.
//!
//! Exit codes:
//! - 0: the run ended normally (source exhausted, duration elapsed, or
//!   stopped by SIGINT/SIGTERM); program faults are counted as ABORTED and
//!   reported, not fatal.
//! - 1: the run could not start (object, state, verifier, instance name
//!   taken, interface missing/down/no permission, queue count mismatch) or
//!   failed mid-way (a truncated or corrupt pcap, an output that cannot be
//!   written); the summary of what was processed is still printed.
//! - 2: bad command line.
//!
//! While it runs, `bpfjet replace --instance NAME NEW.o` swaps the program
//! between batches through the instance's control socket (see
//! [`control`]).
//!
//! Teardown is the same on every path: workers stop at a batch boundary,
//! outputs are flushed, kernel XDP programs are detached and the instance's
//! shared memory is unlinked.

pub mod control;
pub(crate) mod engine;
mod status;

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_io::pcap::SplitOptions;
use bpfjet_io::run::{
    FrameProgram, NullOutput, Output, ProgramSwitch, SharedSource, SplitOutput, StopSignal,
    TopOutput, TopTable, WorkerOptions, WorkerPool, WorkerSetup,
};
use bpfjet_io::{GenSpec, Generator, PacketSource, PcapReader, PcapSplitSink};
use bpfjet_maps::Instance;
use bpfjet_runtime::ObjectOptions;
use control::{Control, WorkerSlot};
use engine::EngineChoice;
use status::{StatusLine, StopReason, Summary};
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["pcap", "gen", "iface"])))]
pub struct RunArgs {
    /// BPF ELF object.
    pub obj: PathBuf,
    /// Program to run (default: the object's first XDP program).
    #[arg(long)]
    pub prog: Option<String>,
    #[command(flatten)]
    pub object_args: super::object_args::ObjectArgs,
    #[command(flatten)]
    pub deployment: super::deployment::DeploymentArgs,
    /// Execution engine; `auto` picks the JIT when available.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineChoice,
    /// Run without bpfjet's verifier, in the bounds-checked interpreter.
    #[arg(long)]
    pub unverified: bool,
    /// Run the native code of this artifact (`bpfjet compile`) instead of
    /// compiling; OBJ must be the object it was compiled from.
    #[arg(long, value_name = "ARTIFACT")]
    pub aot: Option<PathBuf>,
    /// Initial map contents (STATE.json).
    #[arg(long, value_name = "STATE.json")]
    pub maps: Option<PathBuf>,
    /// Instance name the maps are published under (default: object file stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Remove a stale instance of the same name (left by a crashed run) first.
    #[arg(long)]
    pub force: bool,
    /// Print the final summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Replay a pcap capture.
    #[arg(long, value_name = "IN")]
    pub pcap: Option<PathBuf>,
    /// Synthetic traffic (see `bpfjet_io::gen::spec`), e.g. `proto=udp,flows=1000,count=unbounded`.
    #[arg(long, value_name = "SPEC")]
    pub gen: Option<String>,
    /// AF_XDP on an interface: `IF` (queue 0) or `IF:N` (queues 0..N) or `IF:A-B`.
    #[arg(long, value_name = "IF[:QUEUES]")]
    pub iface: Option<String>,
    /// Write TX/PASS/REDIRECT packets to pcaps in this directory (pcap and gen).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One redirect file per target (`redirect-if<N>.pcap`) instead of one `redirect.pcap`.
    #[arg(long)]
    pub split_by_target: bool,
    /// Also write DROP and ABORTED packets.
    #[arg(long)]
    pub keep_dropped: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Worker threads, one per CPU slot (default 1; with --iface one per queue).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Also report the N busiest flows (innermost 5-tuple) and destinations
    /// (outermost IP destination: the backend, for IP-in-IP load balancers)
    /// by action (pcap and gen; costs a header parse per packet).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub top: usize,
    /// Pin worker i to CPU i (with --iface: to the CPU of its queue's index).
    #[arg(long)]
    pub pin: bool,
    /// Packets per batch.
    #[arg(long, default_value_t = bpfjet_io::DEFAULT_BATCH_SIZE)]
    pub batch: usize,
    /// `xdp_md.ingress_ifindex` for pcap and generated packets (1: loopback,
    /// as `test-run`).
    #[arg(long, default_value_t = 1)]
    pub ingress_ifindex: u32,
    #[command(flatten)]
    pub xsk: XskArgs,
}

/// AF_XDP settings (`--iface`).
#[derive(Debug, clap::Args)]
pub struct XskArgs {
    /// UMEM frames per queue (each `--frame-size` bytes; half fill the RX
    /// side, half serve TX).
    #[arg(long, default_value_t = 4096)]
    pub umem_frames: u32,
    /// UMEM frame size: 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    pub frame_size: u32,
    /// Ring sizes (fill, completion, RX, TX), a power of two.
    #[arg(long, default_value_t = 2048)]
    pub ring_size: u32,
    /// Busy-poll the sockets (SO_PREFER_BUSY_POLL) instead of sleeping in poll().
    #[arg(long)]
    pub busy_poll: bool,
    /// Do not use XDP_USE_NEED_WAKEUP (wake the kernel on every batch).
    #[arg(long)]
    pub no_need_wakeup: bool,
    /// Socket binding: auto tries zero-copy and falls back to copy.
    #[arg(long, value_enum, default_value = "auto")]
    pub bind: bpfjet_io::afxdp::BindMode,
    /// How the kernel-side XSK redirect program is attached.
    #[arg(long, value_enum, default_value = "auto")]
    pub attach: bpfjet_io::afxdp::AttachMode,
    /// The kernel-side program (default: the one built into
    /// build/examples/xdp_kern/xsk_redirect.o, or $BPFJET_XSK_KERN).
    #[arg(long, value_name = "OBJ")]
    pub xsk_kern: Option<PathBuf>,
}

impl XskArgs {
    fn config(&self) -> bpfjet_io::afxdp::XskConfig {
        bpfjet_io::afxdp::XskConfig {
            umem_frames: self.umem_frames,
            frame_size: self.frame_size,
            ring_size: self.ring_size,
            busy_poll: self.busy_poll,
            need_wakeup: !self.no_need_wakeup,
            bind: self.bind,
            attach: self.attach,
            kern_obj: self.xsk_kern.clone(),
            // Set from the program's kind by `run`.
            multi_buffer: false,
        }
    }
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration must be a positive number of seconds");
        }
    }
    if args.top > 0 && args.iface.is_some() {
        bail!("--top applies to --pcap and --gen");
    }
    if args.out.is_some() && args.iface.is_some() {
        bail!("--out applies to --pcap and --gen; with --iface packets go back to the network");
    }
    // Before anything that needs undoing exists: a signal during loading
    // or compiling then ends the run at its first batch boundary, through
    // the same teardown as any other stop.
    let signal = StopSignal::install().context("installing SIGINT/SIGTERM handlers")?;
    let deployment =
        super::deployment::Deployment::load(&args.obj, &args.deployment, &args.object_args)
            .with_context(|| format!("loading {}", args.obj.display()))?;
    if args.aot.is_some() && !deployment.is_single() {
        bail!("--aot runs one object's artifact; it cannot be combined with --object");
    }
    let object = deployment.main();
    let chosen = object
        .runnable_program(args.prog.as_deref())
        .with_context(|| format!("choosing the program of {}", args.obj.display()))?;
    let prog = chosen.name.clone();
    // An xdp.frags program receives multi-buffer frames over AF_XDP.
    let multi_buffer = chosen.kind.has_frags();
    let state = args
        .maps
        .as_ref()
        .map(|p| {
            bpfjet_maps::state::load_state(p).with_context(|| format!("reading {}", p.display()))
        })
        .transpose()?;
    let instance = match &args.name {
        Some(n) => n.clone(),
        None => args
            .obj
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .ok_or_else(|| {
                anyhow!(
                    "cannot derive an instance name from {}; pass --name",
                    args.obj.display()
                )
            })?,
    };
    let iface = args
        .iface
        .as_deref()
        .map(bpfjet_io::afxdp::IfaceSpec::parse)
        .transpose()?;
    let workers = match (&iface, args.workers) {
        (Some(i), Some(w)) if w != i.queues.len() => bail!(
            "--workers {w} does not match the {} queue(s) of --iface (one worker per queue)",
            i.queues.len()
        ),
        (Some(i), _) => i.queues.len(),
        (None, w) => w.unwrap_or(1).max(1),
    };
    if args.force {
        Instance::remove_stale(&instance).ok();
    }
    let ncpus = bpfjet_runtime::possible_cpus().max(workers);
    let loaded = deployment
        .load_bpfjet(&ObjectOptions {
            ncpus,
            unverified: args.unverified,
            instance_name: Some(instance.clone()),
            state,
            fib: None,
            // The program run is loaded, a `SEC("?xdp")` one too.
            autoload: vec![prog.clone()],
        })
        .map_err(|e| {
            let text = e.to_string();
            if text.contains("exists") || text.contains("EEXIST") {
                anyhow!(
                    "instance '{instance}' already exists: another `bpfjet run` uses it, or a \
                 crashed one left it; pass --name, or --force to remove a stale one ({text})"
                )
            } else {
                anyhow!("{text}")
            }
        })?;
    let aot = args.aot.as_deref().map(|artifact| engine::AotRequest {
        artifact,
        object_path: &args.obj,
    });
    let prepared = engine::prepare_aot(object, &loaded, &prog, args.engine, args.unverified, aot)?;
    let switch = ProgramSwitch::new(workers);
    // Hands `prepared` and `loaded` to the control socket once every
    // worker's first runner exists.
    let control = |slots: Vec<WorkerSlot>, prepared| {
        Control::bind(
            &instance,
            ncpus,
            args.engine,
            args.unverified,
            switch.clone(),
            slots,
            loaded,
            prepared,
            object,
            &prog,
        )
        .map(|c| c.with_kernel_btf(args.object_args.kernel_btf()))
    };
    match &iface {
        Some(spec) => {
            let slots = RefCell::new(vec![None; workers]);
            let make = |i: usize, ifindex: u32, queue: u32| {
                let runner = prepared
                    .runner(i, ifindex, queue)
                    .map_err(|e| e.to_string())?;
                slots.borrow_mut()[i] = Some(WorkerSlot {
                    cpu: i,
                    ingress_ifindex: ifindex,
                    rx_queue: queue,
                });
                Ok(Box::new(switch.wrap(i, runner)) as Box<dyn FrameProgram + Send>)
            };
            let session = bpfjet_io::afxdp::Session::start(
                spec,
                &bpfjet_io::afxdp::XskConfig {
                    multi_buffer,
                    ..args.xsk.config()
                },
                &make,
                args.pin,
                args.batch,
                signal.flag(),
            )?;
            let describe = session.describe();
            let (pool, teardown) = session.into_parts();
            let slots = slots
                .into_inner()
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| anyhow!("AF_XDP session started without every worker's runner"))?;
            let mut control = control(slots, prepared)?;
            let code = finish(
                args,
                &instance,
                &mut control,
                &signal,
                pool,
                &describe,
                None,
                Vec::new,
            );
            // Detaches the kernel program and closes the sockets.
            drop(teardown);
            code
        }
        None => {
            let mut setups = Vec::with_capacity(workers);
            let mut slots = Vec::with_capacity(workers);
            for i in 0..workers {
                let runner = prepared.runner(i, args.ingress_ifindex, 0)?;
                setups.push(Box::new(switch.wrap(i, runner)) as Box<dyn FrameProgram + Send>);
                slots.push(WorkerSlot {
                    cpu: i,
                    ingress_ifindex: args.ingress_ifindex,
                    rx_queue: 0,
                });
            }
            let mut control = control(slots, prepared)?;
            run_offline(args, &instance, &mut control, setups, &signal)
        }
    }
}

fn run_offline(
    args: &RunArgs,
    instance: &str,
    control: &mut Control,
    programs: Vec<Box<dyn FrameProgram + Send>>,
    signal: &StopSignal,
) -> Result<ExitCode> {
    let workers = programs.len();
    let options = WorkerOptions {
        batch_size: args.batch,
        ..WorkerOptions::default()
    };
    let (sources, source_name) = sources(args, workers)?;
    let split = match &args.out {
        Some(dir) => {
            let mut routes = SplitOptions::default().routes;
            if args.keep_dropped {
                routes.extend([
                    bpfjet_io::OutputRoute::Drop,
                    bpfjet_io::OutputRoute::Aborted,
                ]);
            }
            let sink = PcapSplitSink::create(
                dir,
                SplitOptions {
                    routes,
                    per_redirect_target: args.split_by_target,
                    ..SplitOptions::default()
                },
            )?;
            Some(SplitOutput::new(sink))
        }
        None => None,
    };
    let top = (args.top > 0).then(|| Arc::new(Mutex::new(TopTable::default())));
    let mut setups = Vec::with_capacity(workers);
    for (i, (source, program)) in sources.into_iter().zip(programs).enumerate() {
        let mut output: Box<dyn Output + Send> = match &split {
            Some(s) => Box::new(s.clone()),
            None => Box::new(NullOutput),
        };
        if let Some(t) = &top {
            output = Box::new(TopOutput::new(output, Arc::clone(t)));
        }
        setups.push(WorkerSetup {
            source,
            program,
            output,
            pin_cpu: args.pin.then_some(i),
            options,
        });
    }
    let pool = WorkerPool::spawn(setups, signal.flag())?;
    let split_sink = split.as_ref().map(SplitOutput::sink);
    finish(
        args,
        instance,
        control,
        signal,
        pool,
        &source_name,
        top,
        move || {
            split_sink
                .map(|s| {
                    s.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .paths()
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect()
                })
                .unwrap_or_default()
        },
    )
}

type Sources = Vec<Box<dyn PacketSource + Send>>;

fn sources(args: &RunArgs, workers: usize) -> Result<(Sources, String)> {
    if let Some(path) = &args.pcap {
        let reader = PcapReader::open(path)?.with_ingress(args.ingress_ifindex, 0);
        let shared = SharedSource::new(reader);
        let sources = (0..workers)
            .map(|_| Box::new(shared.clone()) as Box<dyn PacketSource + Send>)
            .collect();
        return Ok((sources, format!("pcap {}", path.display())));
    }
    let spec_text = args.gen.as_deref().unwrap_or_default();
    let spec = GenSpec::parse(spec_text)?;
    // Every worker generates its share with its own seed, so workers do not
    // replay the same sequence.
    let mut sources: Sources = Vec::with_capacity(workers);
    for i in 0..workers {
        let mut s = spec.clone();
        s.seed = spec.seed.wrapping_add(i as u64);
        s.count = spec.count.map(|c| {
            let base = c / workers as u64;
            base + u64::from((i as u64) < c % workers as u64)
        });
        sources.push(Box::new(
            Generator::new(&s)?.with_ingress(args.ingress_ifindex, 0),
        ));
    }
    Ok((sources, format!("generator {spec_text}")))
}

/// Watches the pool until it ends, prints the status line and the summary.
#[allow(clippy::too_many_arguments)]
fn finish(
    args: &RunArgs,
    instance: &str,
    control: &mut Control,
    signal: &StopSignal,
    pool: WorkerPool,
    source: &str,
    top: Option<Arc<Mutex<TopTable>>>,
    outputs: impl FnOnce() -> Vec<String>,
) -> Result<ExitCode> {
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + Duration::from_secs_f64(d));
    let mut status = StatusLine::new();
    let mut next_status = started + status.interval;
    let mut stop = StopReason::SourceEnded;
    if signal.poll() {
        stop = StopReason::Signal(signal.signal().unwrap_or(2));
    }
    while !pool.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        control.poll();
        if signal.poll() {
            stop = StopReason::Signal(signal.signal().unwrap_or(2));
            pool.stop();
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            stop = StopReason::Duration;
            pool.stop();
        }
        if Instant::now() >= next_status {
            status.update(&pool.stats().snapshot());
            next_status += status.interval;
        }
    }
    let elapsed = started.elapsed();
    // A swap staged just before the workers ended is complete now.
    control.advance();
    status.finish();
    let outcome = pool.join();
    let errors = outcome.errors.clone();
    // Complete: every worker merged its counts when it finished.
    let top = top.map(|t| t.lock().unwrap_or_else(PoisonError::into_inner).clone());
    for w in &outcome.warnings {
        eprintln!("bpfjet: warning: {w}");
    }
    if !errors.is_empty() {
        stop = StopReason::Error;
    }
    let outputs = outputs();
    let summary = Summary {
        program: control.program(),
        engine: control.engine_name(),
        replaces: control.replaces(),
        instance,
        source,
        staged: control.stages_frames(),
        total: &outcome.total,
        workers: &outcome.workers,
        elapsed,
        stop,
        errors: &errors,
        outputs: &outputs,
        top: top.as_ref().map(|t| (t, args.top)),
    };
    if args.json {
        println!("{}", summary.json());
        for e in &errors {
            eprintln!("bpfjet: {e}");
        }
    } else {
        summary.print_human();
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
