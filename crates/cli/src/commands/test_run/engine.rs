//! The engines a test run can use, behind one request/outcome pair so that
//! both see exactly the same object, program, packet, map state, CPU and
//! context (the point of a differential run).

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_jit::{AotArtifact, JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_maps::{MapType, RingbufSnapshot};
use bpfjet_runtime::xdp::frame::{MAX_FRAGS, MAX_PACKET};
use std::collections::BTreeMap;

/// Ring buffer snapshots by map name.
pub type Ringbufs = BTreeMap<String, RingbufSnapshot>;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// bpfjet's reference interpreter.
    Interp,
    /// bpfjet's LLVM JIT (helpers and map lookups compiled in), or the
    /// native code of an AOT artifact (`--aot`).
    Jit,
    /// The running kernel's BPF_PROG_TEST_RUN (needs root).
    Kernel,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Interp => "interp",
            Engine::Jit => "jit",
            Engine::Kernel => "kernel",
        }
    }
}

/// `struct xdp_md` receive fields, as given on the command line; 0 means
/// "not given", which both engines read as the kernel's test-run default,
/// queue 0 of the loopback device (the program sees ifindex 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct RxContext {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    /// `--linear-size`: the input context's `data_end`.
    pub linear_size: Option<u32>,
}

impl RxContext {
    /// The `xdp_md` context given to the kernel's test run; none when all
    /// zero, which is what the kernel assumes without one.
    fn kernel_context(self) -> Option<bpfjet_kernel::XdpContext> {
        (self.ingress_ifindex != 0 || self.rx_queue_index != 0 || self.linear_size.is_some())
            .then_some(bpfjet_kernel::XdpContext {
                ingress_ifindex: self.ingress_ifindex,
                rx_queue_index: self.rx_queue_index,
                data_end: self.linear_size,
            })
    }
}

/// Everything one run needs; checked by the caller (program exists, state
/// names maps of the object, packet long enough, CPU possible).
pub struct RunRequest<'a> {
    pub object_path: &'a Path,
    /// The object, or the objects loaded together (`--object`).
    pub deployment: &'a crate::commands::deployment::Deployment,
    pub program: &'a str,
    pub data: &'a [u8],
    pub state: Option<&'a MapState>,
    pub repeat: u32,
    pub cpu: usize,
    pub rx: RxContext,
    pub dump_maps: bool,
    pub unverified: bool,
    /// `--aot`: run this artifact's native code (engine jit only).
    pub aot: Option<&'a Path>,
    /// `--prog-type`, `--max-entries`: applied to the kernel engine's load too.
    pub object_args: &'a crate::commands::object_args::ObjectArgs,
}

pub struct RunOutcome {
    pub retval: u32,
    pub data_out: Vec<u8>,
    /// Mean time per run.
    pub duration_ns: u64,
    pub maps: Option<MapState>,
    /// With `--dump-maps`: every ring buffer's unconsumed records, with
    /// their raw headers and positions (rings are streams, not STATE.json).
    pub ringbufs: Option<Ringbufs>,
    /// `bpf_trace_printk` lines (bpfjet only: the kernel's go to trace_pipe).
    pub trace_log: Vec<String>,
    /// What bpfjet cleaned up after the program (a ring-buffer sample never
    /// submitted, a lock still held): worth a look, not an error.
    pub notes: Vec<String>,
}

pub fn run(engine: Engine, request: &RunRequest<'_>) -> Result<RunOutcome> {
    match engine {
        Engine::Interp => run_interp(request),
        Engine::Jit => run_jit(request),
        Engine::Kernel => run_kernel(request),
    }
}

/// errno EINVAL (the same number on every Linux architecture).
const EINVAL: i32 = 22;
/// errno ENOMEM.
const ENOMEM: i32 = 12;

fn run_kernel(request: &RunRequest<'_>) -> Result<RunOutcome> {
    bpfjet_kernel::kernel_available()
        .map_err(|why| anyhow!("engine 'kernel' cannot run here: {why}"))?;
    if !request.deployment.is_single() {
        return run_kernel_deployment(request);
    }
    let autoload = [request.program.to_string()];
    let object = bpfjet_kernel::KernelObject::open_with(
        request.object_path,
        &bpfjet_kernel::LoadOptions {
            autoload: &autoload,
            ..request.object_args.kernel_load_options(request.state)
        },
    )?;
    let xdp_context = request.rx.kernel_context();
    let result = object
        .test_run_with(
            request.program,
            request.data,
            &bpfjet_kernel::TestRunOptions {
                repeat: request.repeat,
                cpu: Some(request.cpu),
                xdp_context,
            },
        )
        .map_err(|e| match e.errno() {
            // The kernel says only EINVAL; name what it checks.
            Some(EINVAL) => anyhow!(
                "{e} (the kernel refuses frames shorter than an Ethernet header, \
                 --ingress-ifindex/--rx-queue naming a missing interface or queue, \
                 and test runs of DEVMAP/CPUMAP entry programs (xdp/devmap, xdp/cpumap), \
                 which bpfjet's engines run)"
            ),
            Some(ENOMEM) => anyhow!(
                "{e} (the kernel refuses frames needing more than {MAX_FRAGS} page \
                 fragments: longer than {MAX_PACKET} bytes)"
            ),
            _ => e.into(),
        })?;
    let (maps, ringbufs) = if request.dump_maps {
        let mut rings = Ringbufs::new();
        for name in object.ringbuf_names() {
            let snap = object
                .ringbuf_snapshot(&name)
                .with_context(|| format!("reading the kernel's ring buffer {name}"))?;
            rings.insert(name, snap);
        }
        (
            Some(object.dump_maps().context("dumping the kernel's maps")?),
            Some(rings),
        )
    } else {
        (None, None)
    };
    Ok(RunOutcome {
        retval: result.retval,
        data_out: result.data_out,
        duration_ns: u64::from(result.duration_ns),
        maps,
        ringbufs,
        trace_log: Vec::new(),
        notes: Vec::new(),
    })
}

/// The kernel engine for several objects: one pin root, PROG_ARRAY slots
/// filled with program fds of any object.
fn run_kernel_deployment(request: &RunRequest<'_>) -> Result<RunOutcome> {
    let deployment = request
        .deployment
        .load_kernel(request.object_args, request.state)?;
    let xdp_context = request.rx.kernel_context();
    let result = deployment.test_run_with(
        request.program,
        request.data,
        &bpfjet_kernel::TestRunOptions {
            repeat: request.repeat,
            cpu: Some(request.cpu),
            xdp_context,
        },
    )?;
    let maps = if request.dump_maps {
        Some(
            deployment
                .dump_maps()
                .context("dumping the kernel's maps")?,
        )
    } else {
        None
    };
    Ok(RunOutcome {
        retval: result.retval,
        data_out: result.data_out,
        duration_ns: u64::from(result.duration_ns),
        maps,
        // Ring records of a kernel deployment are not read back (the
        // single-object kernel path reads them through mmap).
        ringbufs: None,
        trace_log: Vec::new(),
        notes: Vec::new(),
    })
}

/// The interpreter's checks of the receive context (the kernel's
/// `xdp_convert_md_to_buff`), for the JIT path, which takes the context as
/// given: an ifindex must name an interface of this host and the queue one
/// of its receive queues.
fn check_rx(rx: RxContext) -> Result<()> {
    if rx.ingress_ifindex == 0 {
        if rx.rx_queue_index != 0 {
            bail!("--rx-queue needs --ingress-ifindex (EINVAL)");
        }
        return Ok(());
    }
    let interfaces = std::fs::read_dir("/sys/class/net").context("listing /sys/class/net")?;
    for entry in interfaces.filter_map(|e| e.ok()) {
        let index = std::fs::read_to_string(entry.path().join("ifindex")).unwrap_or_default();
        if index.trim().parse::<u32>().ok() != Some(rx.ingress_ifindex) {
            continue;
        }
        let queues = std::fs::read_dir(entry.path().join("queues"))
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count()
            })
            .unwrap_or(1)
            .max(1);
        if rx.rx_queue_index as usize >= queues {
            bail!(
                "interface {} has {queues} receive queues; --rx-queue {} is out of range (EINVAL)",
                entry.file_name().to_string_lossy(),
                rx.rx_queue_index
            );
        }
        return Ok(());
    }
    bail!("no interface with ifindex {} (ENODEV)", rx.ingress_ifindex)
}

/// The JIT: compile the object's programs (or load them from `--aot`,
/// without LLVM), then run like the interpreter does.
fn run_jit(request: &RunRequest<'_>) -> Result<RunOutcome> {
    if request.unverified {
        bail!("--engine jit runs only verified programs; drop --unverified");
    }
    check_rx(request.rx)?;
    let loaded = load_object(request)?;
    let fast = match request.aot {
        None => JitObject::new(loaded, &JitOptions::default()),
        Some(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading AOT artifact {}", path.display()))?;
            let artifact = AotArtifact::from_bytes(&bytes)
                .with_context(|| format!("AOT artifact {}", path.display()))?;
            let source = std::fs::read(request.object_path)
                .with_context(|| format!("reading {}", request.object_path.display()))?;
            artifact
                .check_source(&source)
                .and_then(|()| artifact.load(loaded))
                .with_context(|| {
                    format!(
                        "AOT artifact {} with {}",
                        path.display(),
                        request.object_path.display()
                    )
                })?
        }
    };
    let result = fast.test_run(
        request.program,
        request.data,
        &TestRunOptions {
            repeat: request.repeat,
            cpu: request.cpu,
            ingress_ifindex: request.rx.ingress_ifindex,
            rx_queue_index: request.rx.rx_queue_index,
            linear_size: request.rx.linear_size,
            meta_len: 0,
        },
        XdpEngine::Jit,
    )?;
    let maps = if request.dump_maps {
        Some(
            fast.loaded()
                .dump_state()
                .context("dumping bpfjet's maps")?,
        )
    } else {
        None
    };
    Ok(RunOutcome {
        retval: result.retval,
        data_out: result.data_out,
        duration_ns: result.duration_ns,
        maps,
        ringbufs: ringbufs(request, fast.loaded()),
        trace_log: result.trace_log,
        notes: result.notes,
    })
}

/// The object with its maps, as every bpfjet engine loads it.
fn load_object(request: &RunRequest<'_>) -> Result<LoadedObject> {
    request.deployment.load_bpfjet(&ObjectOptions {
        // One slot per possible CPU, like the kernel, so per-CPU dumps line up.
        ncpus: bpfjet_kernel::possible_cpus(),
        unverified: request.unverified,
        state: request.state.cloned(),
        // The program run is loaded, a `SEC("?xdp")` one too.
        autoload: vec![request.program.to_string()],
        ..ObjectOptions::default()
    })
}

fn run_interp(request: &RunRequest<'_>) -> Result<RunOutcome> {
    let loaded = load_object(request)?;
    let result = loaded.test_run(
        request.program,
        request.data,
        &TestRunOptions {
            repeat: request.repeat,
            cpu: request.cpu,
            ingress_ifindex: request.rx.ingress_ifindex,
            rx_queue_index: request.rx.rx_queue_index,
            linear_size: request.rx.linear_size,
            meta_len: 0,
        },
    )?;
    let maps = if request.dump_maps {
        Some(loaded.dump_state().context("dumping bpfjet's maps")?)
    } else {
        None
    };
    Ok(RunOutcome {
        retval: result.retval,
        data_out: result.data_out,
        duration_ns: result.duration_ns,
        maps,
        ringbufs: ringbufs(request, &loaded),
        trace_log: result.trace_log,
        notes: result.notes,
    })
}

/// bpfjet's ring buffers as [`RunOutcome::ringbufs`] shows them.
fn ringbufs(request: &RunRequest<'_>, loaded: &LoadedObject) -> Option<Ringbufs> {
    if !request.dump_maps {
        return None;
    }
    let rings = request
        .deployment
        .objects
        .iter()
        .flat_map(|object| object.maps.iter())
        .filter(|spec| spec.map_type == MapType::Ringbuf)
        .filter_map(|spec| {
            let map = loaded.map(&spec.name)?;
            Some((spec.name.clone(), map.ringbuf_snapshot()?))
        })
        .collect();
    Some(rings)
}
