//! The engines a test run can use, behind one request/outcome pair so that
//! both see exactly the same object, program, packet, map state, CPU and
//! context (the point of a differential run).

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_maps::state::MapState;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// bpfjet's reference interpreter.
    Interp,
    /// bpfjet's LLVM JIT (not available yet).
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

/// `struct xdp_md` receive fields. `None` means the kernel's test-run
/// default: queue 0 of the loopback device (ifindex 1), which is what the
/// kernel uses when no context is passed.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxContext {
    pub ingress_ifindex: Option<u32>,
    pub rx_queue_index: Option<u32>,
}

impl RxContext {
    pub const LOOPBACK_IFINDEX: u32 = 1;

    fn is_default(&self) -> bool {
        self.ingress_ifindex.is_none() && self.rx_queue_index.is_none()
    }

    pub fn ingress_ifindex(&self) -> u32 {
        self.ingress_ifindex.unwrap_or(Self::LOOPBACK_IFINDEX)
    }

    pub fn rx_queue_index(&self) -> u32 {
        self.rx_queue_index.unwrap_or(0)
    }
}

/// Everything one run needs; checked by the caller (program exists, state
/// names maps of the object, packet long enough, CPU possible).
pub struct RunRequest<'a> {
    pub object_path: &'a Path,
    pub object: &'a bpfjet_obj::Object,
    pub program: &'a str,
    pub data: &'a [u8],
    pub state: Option<&'a MapState>,
    pub repeat: u32,
    pub cpu: usize,
    pub rx: RxContext,
    pub dump_maps: bool,
    pub unverified: bool,
}

pub struct RunOutcome {
    pub retval: u32,
    pub data_out: Vec<u8>,
    /// Mean time per run.
    pub duration_ns: u64,
    pub maps: Option<MapState>,
}

pub fn run(engine: Engine, request: &RunRequest<'_>) -> Result<RunOutcome> {
    match engine {
        Engine::Interp => run_interp(request),
        Engine::Jit => {
            bail!("engine 'jit' is not available yet (the LLVM JIT lands with its own issue)")
        }
        Engine::Kernel => run_kernel(request),
    }
}

fn run_kernel(request: &RunRequest<'_>) -> Result<RunOutcome> {
    bpfjet_kernel::kernel_available()
        .map_err(|why| anyhow!("engine 'kernel' cannot run here: {why}"))?;
    let object = bpfjet_kernel::KernelObject::open_with(
        request.object_path,
        &bpfjet_kernel::LoadOptions {
            state: request.state,
            ..Default::default()
        },
    )?;
    // Only pass a context when asked: without one the kernel picks its own
    // default (loopback queue 0), and passing one makes it validate the device.
    let xdp_context = (!request.rx.is_default()).then(|| bpfjet_kernel::XdpContext {
        ingress_ifindex: request.rx.ingress_ifindex(),
        rx_queue_index: request.rx.rx_queue_index(),
    });
    let result = object.test_run_with(
        request.program,
        request.data,
        &bpfjet_kernel::TestRunOptions {
            repeat: request.repeat,
            cpu: Some(request.cpu),
            xdp_context,
        },
    )?;
    let maps = if request.dump_maps {
        Some(object.dump_maps().context("dumping the kernel's maps")?)
    } else {
        None
    };
    Ok(RunOutcome {
        retval: result.retval,
        data_out: result.data_out,
        duration_ns: u64::from(result.duration_ns),
        maps,
    })
}

fn run_interp(_request: &RunRequest<'_>) -> Result<RunOutcome> {
    bail!("engine 'interp' is not available yet: the XDP loader is still being written")
}
