//! The engines `bench` measures, behind one interface: calibrate the run
//! count, then take one [`Sample`] per round.

use super::Mode;
use anyhow::{anyhow, bail, Context, Result};
use bpfjet_jit::{JitObject, JitOptions, XdpBench, XdpEngine};
use bpfjet_kernel::bench::{thread_cpu_ns, time_test_run, FreshWrapper};
use bpfjet_kernel::KernelObject;
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use std::hint::black_box;
use std::os::fd::RawFd;
use std::path::Path;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The running kernel's JIT, through BPF_PROG_TEST_RUN (needs root).
    Kernel,
    /// bpfjet's interpreter (verified fast path).
    Interp,
    /// bpfjet's LLVM JIT.
    Jit,
}

/// Everything the engines share.
#[derive(Clone)]
pub struct Setup<'a> {
    pub object_path: &'a Path,
    pub object: &'a bpfjet_obj::Object,
    /// `object` and the `--object`s loaded with it.
    pub deployment: &'a crate::commands::deployment::Deployment,
    pub program: &'a str,
    pub packet: &'a [u8],
    pub state: &'a MapState,
    pub mode: Mode,
    pub cpu: usize,
    pub bench_dir: &'a Path,
    pub target: Duration,
    pub iters: Option<u64>,
    pub jit: JitOptions,
    /// `--aot`: the program's native code comes from this artifact.
    pub aot: Option<&'a Path>,
    /// `--prog-type`, `--max-entries`: applied to the kernel's load too.
    pub object_args: &'a crate::commands::object_args::ObjectArgs,
}

/// One round's measurements, in ns per run.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// The program (behind the packet reset in fresh mode).
    pub prog: f64,
    /// The packet reset with an empty target (fresh mode only).
    pub reset: Option<f64>,
    /// The empty program alone.
    pub empty: f64,
}

impl Sample {
    /// Per-packet cost with the reset's own cost taken out.
    pub fn raw(&self) -> f64 {
        match self.reset {
            Some(reset) => self.prog - reset + self.empty,
            None => self.prog,
        }
    }

    /// Per-packet cost net of the engine's empty-program baseline.
    pub fn net(&self) -> f64 {
        self.raw() - self.empty
    }
}

pub trait Measurer {
    fn name(&self) -> &str;
    fn calibrate(&mut self) -> Result<()>;
    fn measure(&mut self) -> Result<Sample>;
    /// Runs per measurement of the program.
    fn iters(&self) -> u64;
    /// The program's return value (the XDP action) in the last measurement.
    fn action(&self) -> Option<u32>;
    /// Extra facts for the report (compile statistics).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Runs per measurement so that one takes about `target`: `time(n)` runs
/// `n` times and returns ns per run.
fn calibrate(
    target: Duration,
    forced: Option<u64>,
    cap: u64,
    mut time: impl FnMut(u64) -> Result<f64>,
) -> Result<u64> {
    if let Some(n) = forced {
        return Ok(n.clamp(1, cap));
    }
    time(1)?; // warm caches, the JIT's code, the kernel's program
    let mut n = 1u64;
    loop {
        let per_run = time(n)?;
        let total = per_run * n as f64;
        if total >= target.as_nanos() as f64 / 10.0 || n >= cap {
            let want = target.as_nanos() as f64 / per_run.max(0.1);
            return Ok((want as u64).clamp(1, cap));
        }
        n = (n * 10).min(cap);
    }
}

// ---- the kernel -------------------------------------------------------------

struct Kernel<'a> {
    setup: &'a Setup<'a>,
    // Keeps the program (a KernelObject or a KernelDeployment) loaded.
    _target: Box<dyn std::any::Any>,
    _empty_obj: KernelObject,
    prog_fd: RawFd,
    empty_fd: RawFd,
    wrapper: Option<FreshWrapper>,
    iters: u64,
    empty_iters: u64,
    action: Option<u32>,
}

impl Kernel<'_> {
    fn time_prog(&mut self, n: u64) -> Result<f64> {
        let n = n as u32;
        let run = match &self.wrapper {
            Some(w) => {
                w.set_target(self.prog_fd)?;
                w.time(self.setup.packet, n, None)?
            }
            None => time_test_run(self.prog_fd, self.setup.packet, n, None)?,
        };
        self.action = Some(run.result.retval);
        Ok(run.ns_per_run)
    }

    fn time_reset(&self, n: u64) -> Result<Option<f64>> {
        match &self.wrapper {
            Some(w) => {
                w.set_target(self.empty_fd)?;
                Ok(Some(w.time(self.setup.packet, n as u32, None)?.ns_per_run))
            }
            None => Ok(None),
        }
    }

    fn time_empty(&self, n: u64) -> Result<f64> {
        Ok(time_test_run(self.empty_fd, self.setup.packet, n as u32, None)?.ns_per_run)
    }
}

impl Measurer for Kernel<'_> {
    fn name(&self) -> &str {
        "kernel"
    }

    fn calibrate(&mut self) -> Result<()> {
        let (target, forced) = (self.setup.target, self.setup.iters);
        let cap = u64::from(u32::MAX);
        self.iters = calibrate(target, forced, cap, |n| self.time_prog(n))?;
        self.empty_iters = calibrate(target, forced, cap, |n| match self.time_reset(n)? {
            Some(t) => Ok(t),
            None => self.time_empty(n),
        })?;
        Ok(())
    }

    fn measure(&mut self) -> Result<Sample> {
        let prog = self.time_prog(self.iters)?;
        let reset = self.time_reset(self.empty_iters)?;
        let empty = self.time_empty(self.empty_iters)?;
        Ok(Sample { prog, reset, empty })
    }

    fn iters(&self) -> u64 {
        self.iters
    }

    fn action(&self) -> Option<u32> {
        self.action
    }
}

fn kernel<'a>(setup: &'a Setup<'a>) -> Result<Kernel<'a>> {
    bpfjet_kernel::kernel_available()
        .map_err(|why| anyhow!("engine 'kernel' cannot run here: {why}"))?;
    let (target, prog_fd): (Box<dyn std::any::Any>, _) = if setup.deployment.is_single() {
        let target = KernelObject::open_with(
            setup.object_path,
            &setup.object_args.kernel_load_options(Some(setup.state)),
        )
        .with_context(|| format!("loading {} into the kernel", setup.object_path.display()))?;
        let fd = target.prog_fd(setup.program)?;
        (Box::new(target), fd)
    } else {
        let target = setup
            .deployment
            .load_kernel(setup.object_args, Some(setup.state))
            .with_context(|| format!("loading {} into the kernel", setup.deployment.shown()))?;
        let fd = target.program(setup.program)?.fd;
        (Box::new(target), fd)
    };
    let empty_obj = KernelObject::open(setup.bench_dir.join("empty.o"))?;
    let empty_fd = empty_obj.prog_fd("empty")?;
    let wrapper = match setup.mode {
        Mode::Fresh => Some(FreshWrapper::open(setup.bench_dir.join("fresh_wrapper.o"))?),
        Mode::Repeat => None,
    };
    Ok(Kernel {
        setup,
        _target: target,
        _empty_obj: empty_obj,
        prog_fd,
        empty_fd,
        wrapper,
        iters: 1,
        empty_iters: 1,
        action: None,
    })
}

// ---- bpfjet -----------------------------------------------------------------

/// The objects bpfjet's engines run: the program's and the empty one.
pub struct FastObjects {
    program: JitObject,
    empty: JitObject,
}

impl FastObjects {
    pub fn load(setup: &Setup<'_>) -> Result<FastObjects> {
        let opts = ObjectOptions {
            ncpus: bpfjet_kernel::possible_cpus(),
            state: Some(setup.state.clone()),
            ..ObjectOptions::default()
        };
        let program = match setup.aot {
            None if !setup.deployment.is_single() => {
                JitObject::new(setup.deployment.load_bpfjet(&opts)?, &setup.jit)
            }
            None => JitObject::load(setup.object, &opts, &setup.jit)
                .map_err(|e| anyhow!("loading {}: {e}", setup.object_path.display()))?,
            Some(path) => load_aot(setup, &opts, path)
                .with_context(|| format!("AOT artifact {}", path.display()))?,
        };
        let empty_path = setup.bench_dir.join("empty.o");
        let empty_obj = bpfjet_obj::load_file(&empty_path)
            .map_err(|e| anyhow!("object {}: {e}", empty_path.display()))?;
        let empty = JitObject::load(
            &empty_obj,
            &ObjectOptions {
                ncpus: opts.ncpus,
                ..ObjectOptions::default()
            },
            &setup.jit,
        )
        .map_err(|e| anyhow!("loading {}: {e}", empty_path.display()))?;
        Ok(FastObjects { program, empty })
    }
}

/// The object with the artifact's native code (checked against the object
/// file, its maps and this host; no LLVM).
fn load_aot(setup: &Setup<'_>, opts: &ObjectOptions, path: &Path) -> Result<JitObject> {
    let bytes = std::fs::read(path).context("reading it")?;
    let artifact = bpfjet_jit::AotArtifact::from_bytes(&bytes)?;
    let source = std::fs::read(setup.object_path)
        .with_context(|| format!("reading {}", setup.object_path.display()))?;
    artifact.check_source(&source)?;
    let loaded = bpfjet_runtime::LoadedObject::load(setup.object, opts)
        .map_err(|e| anyhow!("loading {}: {e}", setup.object_path.display()))?;
    Ok(artifact.load(loaded)?)
}

struct Fast<'a> {
    name: String,
    mode: Mode,
    setup: &'a Setup<'a>,
    prog: XdpBench<'a>,
    empty: XdpBench<'a>,
    compile: Option<bpfjet_jit::CompileStats>,
    iters: u64,
    empty_iters: u64,
    action: Option<u32>,
}

/// A started measurement of the thread's CPU time. bpfjet's loops are
/// timed with it rather than the wall clock: like the kernel's test-run
/// timer, which stops while the thread is rescheduled, it leaves out the
/// time other processes of a shared machine take.
#[derive(Clone, Copy)]
struct Clock(u64);

impl Clock {
    fn start() -> Clock {
        Clock(thread_cpu_ns())
    }
}

fn per_run(start: Clock, n: u64) -> f64 {
    thread_cpu_ns().saturating_sub(start.0) as f64 / n.max(1) as f64
}

impl Fast<'_> {
    fn time(bench: &mut XdpBench<'_>, fresh: bool, n: u64) -> Result<(f64, u32)> {
        let start = Clock::start();
        let action = if fresh {
            bench.run_fresh(black_box(n))?
        } else {
            bench.run_repeat(black_box(n))?
        };
        Ok((per_run(start, n), action))
    }

    fn time_prog(&mut self, n: u64) -> Result<f64> {
        let (t, action) = Self::time(&mut self.prog, self.mode == Mode::Fresh, n)?;
        self.action = Some(action);
        Ok(t)
    }
}

impl Measurer for Fast<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn calibrate(&mut self) -> Result<()> {
        let (target, forced) = (self.setup.target, self.setup.iters);
        let cap = 100_000_000;
        self.iters = calibrate(target, forced, cap, |n| self.time_prog(n))?;
        let fresh = self.mode == Mode::Fresh;
        let empty = &mut self.empty;
        self.empty_iters = calibrate(target, forced, cap, |n| Ok(Self::time(empty, fresh, n)?.0))?;
        Ok(())
    }

    fn measure(&mut self) -> Result<Sample> {
        let prog = self.time_prog(self.iters)?;
        let reset = match self.mode {
            Mode::Fresh => Some(Self::time(&mut self.empty, true, self.empty_iters)?.0),
            Mode::Repeat => None,
        };
        let empty = Self::time(&mut self.empty, false, self.empty_iters)?.0;
        Ok(Sample { prog, reset, empty })
    }

    fn iters(&self) -> u64 {
        self.iters
    }

    fn action(&self) -> Option<u32> {
        self.action
    }

    fn notes(&self) -> Vec<String> {
        let Some(s) = &self.compile else {
            return Vec::new();
        };
        vec![format!(
            "jit compile: {:.1} ms{} ({} BPF insns, lift {:.1} ms, optimize {:.1} ms, \
             codegen {:.1} ms, {} IR insns after O3)",
            s.total_ms,
            if s.prebuilt {
                " (AOT artifact, no compile)"
            } else if s.cache_hit {
                " (cache hit)"
            } else {
                ""
            },
            s.bpf_insns,
            s.lift_ms,
            s.optimize_ms,
            s.codegen_ms,
            s.ir_insns_optimized
        )]
    }
}

fn fast<'a>(engine: Engine, setup: &'a Setup<'a>, objects: &'a FastObjects) -> Result<Fast<'a>> {
    let xdp_engine = match engine {
        Engine::Interp => XdpEngine::Interp,
        _ => XdpEngine::Jit,
    };
    let opts = TestRunOptions {
        cpu: setup.cpu,
        ..TestRunOptions::default()
    };
    let prog = XdpBench::new(
        &objects.program,
        setup.program,
        setup.packet,
        &opts,
        xdp_engine,
    )
    .map_err(|e| anyhow!("{e}"))?;
    let empty = XdpBench::new(&objects.empty, "empty", setup.packet, &opts, xdp_engine)
        .map_err(|e| anyhow!("{e}"))?;
    let compile = (engine == Engine::Jit)
        .then(|| objects.program.program(setup.program).ok())
        .flatten()
        .map(|p| p.compile_stats().clone());
    Ok(Fast {
        name: match engine {
            Engine::Interp => "interp",
            _ => "jit",
        }
        .to_string(),
        mode: setup.mode,
        setup,
        prog,
        empty,
        compile,
        iters: 1,
        empty_iters: 1,
        action: None,
    })
}

/// bpfjet's JIT on another build of the program (`bench --versus`), as
/// row `jit:<file stem>`.
pub fn versus<'a>(
    setup: &'a Setup<'a>,
    objects: &'a FastObjects,
) -> Result<Box<dyn Measurer + 'a>> {
    let mut m = fast(Engine::Jit, setup, objects)?;
    let stem = setup
        .object_path
        .file_stem()
        .map_or_else(|| "versus".into(), |s| s.to_string_lossy().into_owned());
    m.name = format!("jit:{stem}");
    Ok(Box::new(m))
}

pub fn measurer<'a>(
    engine: Engine,
    setup: &'a Setup<'a>,
    objects: Option<&'a FastObjects>,
) -> Result<Box<dyn Measurer + 'a>> {
    Ok(match engine {
        Engine::Kernel => Box::new(kernel(setup)?),
        Engine::Interp | Engine::Jit => {
            let objects = objects.context("bpfjet's objects were not loaded")?;
            Box::new(fast(engine, setup, objects)?)
        }
    })
}

// ---- native memcpy ------------------------------------------------------------

/// Native `memcpy` of `size` bytes, `count` times per "packet", alternating
/// direction between two buffers like the copy microbenchmark.
struct NativeMemcpy<'a> {
    setup: &'a Setup<'a>,
    size: usize,
    count: u64,
    buf: Vec<u8>,
    iters: u64,
}

impl NativeMemcpy<'_> {
    fn time(&mut self, n: u64) -> f64 {
        let size = self.size;
        let (a, b) = self.buf.split_at_mut(size);
        let start = Clock::start();
        for _ in 0..n {
            for i in 0..self.count {
                if i & 1 == 1 {
                    black_box(&mut *a).copy_from_slice(black_box(&*b));
                } else {
                    black_box(&mut *b).copy_from_slice(black_box(&*a));
                }
                let j = (i as usize) % size;
                a[j] = a[j].wrapping_add(1);
            }
        }
        per_run(start, n)
    }
}

impl Measurer for NativeMemcpy<'_> {
    fn name(&self) -> &str {
        "native"
    }

    fn calibrate(&mut self) -> Result<()> {
        let (target, forced) = (self.setup.target, self.setup.iters);
        self.iters = calibrate(target, forced, 100_000_000, |n| Ok(self.time(n)))?;
        Ok(())
    }

    fn measure(&mut self) -> Result<Sample> {
        Ok(Sample {
            prog: self.time(self.iters),
            reset: None,
            empty: 0.0,
        })
    }

    fn iters(&self) -> u64 {
        self.iters
    }

    fn action(&self) -> Option<u32> {
        None
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "native: memcpy of {} bytes x {} per packet (reference, no XDP harness)",
            self.size, self.count
        )]
    }
}

pub fn native_memcpy<'a>(spec: &str, setup: &'a Setup<'a>) -> Result<Box<dyn Measurer + 'a>> {
    let Some((size, count)) = spec.split_once('x') else {
        bail!("--native-memcpy {spec:?}: expected SIZExCOUNT, e.g. 1024x100");
    };
    let size: usize = size.trim().parse().context("--native-memcpy size")?;
    let count: u64 = count.trim().parse().context("--native-memcpy count")?;
    if size == 0 || size > 1 << 24 {
        bail!("--native-memcpy size must be 1..=16 MiB");
    }
    Ok(Box::new(NativeMemcpy {
        setup,
        size,
        count,
        buf: vec![0u8; 2 * size],
        iters: 1,
    }))
}
