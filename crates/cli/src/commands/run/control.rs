//! The control socket of a running instance and the hot replace it serves.
//!
//! `bpfjet run` listens on a Unix stream socket next to the instance's
//! shared memory ([`socket_path`]). A request is one JSON line, the reply
//! one JSON line:
//!
//! ```text
//! -> {"op":"replace","object":"/abs/new.o","prog":null}
//! <- {"ok":true,"generation":1,"program":"...","engine":"jit",
//!     "maps":{"kept":[...],"created":[...],"dropped":[...]},"switch_ms":0.4}
//! <- {"ok":false,"error":"bpfjet's verifier rejected ..."}
//! ```
//!
//! A replace loads the new object into the same instance, reusing every live
//! map whose name, type, key/value size, max_entries and flags match (its
//! contents untouched), verifies and compiles the program with the run's
//! engine, and only then stages one runner per worker on the
//! [`ProgramSwitch`]: each worker takes it at its next batch boundary. Any
//! failure before staging leaves the running program as it was and removes
//! the maps the attempt created. Old maps the new object does not reuse are
//! removed from the instance once no worker runs the old program.
//!
//! The run loop never waits for a replace: loading, verifying and
//! compiling happen on a thread of their own, and [`Control::poll`] only
//! installs a finished build and checks the workers' acknowledgements, so
//! the status line, `--duration` and signals keep working meanwhile. One
//! replace runs at a time; a second request is refused until the first is
//! answered. If some worker has not taken the new program within
//! [`SWITCH_TIMEOUT`], the replace is withdrawn: the previous program is
//! staged again, the attempt's new maps leave the instance and the reply
//! is an error. A run that stops during a build waits for the compile to
//! end (it cannot be interrupted), removes the attempt's maps and tells
//! the client nothing was replaced.

use super::engine::{self, EngineChoice, Prepared};
use crate::commands::map::btf_json::btf_path;
use anyhow::{anyhow, bail, Context, Result};
use bpfjet_io::run::{FrameProgram, ProgramSwitch};
use bpfjet_maps::spec::MapSpec;
use bpfjet_maps::{Instance, Map, MapType};
use bpfjet_runtime::{LoadedObject, ObjectOptions};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a client has to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the workers have to reach a batch boundary after a swap.
const SWITCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Publishes `object`'s raw `.BTF` for `bpfjet map --typed` (written
/// aside and renamed, so a reader never sees half a section), or removes a
/// previous generation's when the object has none.
fn publish_btf(instance: &str, object: &bpfjet_obj::Object) -> Result<()> {
    let path = btf_path(instance);
    match &object.btf {
        Some(btf) => {
            let tmp = path.with_extension("btf.tmp");
            // Private like the instance's maps (0600): the types of a
            // running NF are nobody else's business.
            let write = || -> std::io::Result<()> {
                use std::os::unix::fs::OpenOptionsExt;
                let _ = std::fs::remove_file(&tmp);
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(btf.raw())
            };
            write().with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &path)
                .with_context(|| format!("publishing {}", path.display()))?;
        }
        None => {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(())
}

/// The control socket of instance `name`.
pub fn socket_path(name: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/bpfjet.{name}.ctl"))
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Replace {
        object: PathBuf,
        #[serde(default)]
        prog: Option<String>,
        /// `--prog-type`, `--max-entries`, `--btf`, `--global` of `bpfjet replace`.
        #[serde(default)]
        load: ReplaceLoad,
    },
}

/// How to read the new object, as `--prog-type`, `--max-entries` and
/// `--btf` say for the other commands (`ObjectArgs`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReplaceLoad {
    #[serde(default)]
    pub prog_type: Option<String>,
    #[serde(default)]
    pub max_entries: Vec<(String, u32)>,
    /// Absolute path of the CO-RE target BTF.
    #[serde(default)]
    pub btf: Option<PathBuf>,
    /// `--global NAME=VALUE`.
    #[serde(default)]
    pub globals: Vec<(String, String)>,
}

impl ReplaceLoad {
    fn object_args(&self) -> Result<crate::commands::object_args::ObjectArgs> {
        let prog_type = self
            .prog_type
            .as_deref()
            .map(bpfjet_obj::ProgKind::from_type_name)
            .transpose()
            .map_err(|e| anyhow!("--prog-type: {e}"))?;
        Ok(crate::commands::object_args::ObjectArgs {
            prog_type,
            max_entries: self.max_entries.clone(),
            btf: self.btf.clone(),
            // Replace requests carry no backpressure setting: the new
            // program's ring buffers are created as it declares them.
            ringbuf_backpressure: Vec::new(),
            globals: self.globals.clone(),
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct MapChanges {
    pub kept: Vec<String>,
    pub created: Vec<String>,
    pub dropped: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps: Option<MapChanges>,
    /// From staging the runners to the last worker running them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_ms: Option<f64>,
}

impl Reply {
    fn error(e: &anyhow::Error) -> Reply {
        Reply {
            ok: false,
            error: Some(format!("{e:#}")),
            generation: None,
            program: None,
            engine: None,
            maps: None,
            switch_ms: None,
        }
    }
}

/// Where worker `i`'s runner is built for: its CPU slot and `xdp_md` fields.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSlot {
    pub cpu: usize,
    pub ingress_ifindex: u32,
    pub rx_queue: u32,
}

/// One loaded program generation, kept alive for the whole run: runners
/// and compiled code of every generation may reference its maps.
struct Generation {
    _loaded: LoadedObject,
    prepared: Prepared,
    program: String,
    /// The object's maps, in object order.
    maps: Vec<Arc<Map>>,
}

/// The run's side of the control socket.
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
    instance: String,
    /// A second handle on the instance, to remove maps.
    registry: Instance,
    ncpus: usize,
    engine: EngineChoice,
    unverified: bool,
    switch: ProgramSwitch,
    slots: Vec<WorkerSlot>,
    generations: Vec<Generation>,
    /// Generations staged and then withdrawn after a swap timeout, kept
    /// alive like the others: a worker may have run them.
    withdrawn: Vec<Generation>,
    /// The replace in progress, if any (one at a time).
    pending: Option<Pending>,
    /// CO-RE target of the run (`run --btf`), for replacement objects too.
    kernel_btf: bpfjet_obj::KernelBtf,
}

/// Whether a live map can serve the new object's `spec` with its contents.
/// Frozen maps (`.rodata`) carry the new object's constants and program
/// arrays hold ids of the old object's programs, so both are always fresh.
fn reusable(live: &Map, spec: &MapSpec) -> bool {
    let old = live.spec();
    !spec.frozen
        && !old.frozen
        && spec.map_type != MapType::ProgArray
        && old.name == spec.name
        && old.map_type == spec.map_type
        && old.key_size == spec.key_size
        && old.value_size == spec.value_size
        && old.max_entries == spec.max_entries
        && old.flags == spec.flags
        && old.map_extra == spec.map_extra
        && old.inner == spec.inner
}

impl Control {
    /// Replacement objects are CO-RE relocated against `kernel_btf` (the
    /// run's `--btf`) rather than the running kernel's BTF.
    pub fn with_kernel_btf(mut self, kernel_btf: bpfjet_obj::KernelBtf) -> Control {
        self.kernel_btf = kernel_btf;
        self
    }

    /// Binds the control socket of `instance` (replacing a stale one left
    /// by a crashed run: the instance name itself is already ours).
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        instance: &str,
        ncpus: usize,
        engine: EngineChoice,
        unverified: bool,
        switch: ProgramSwitch,
        slots: Vec<WorkerSlot>,
        loaded: LoadedObject,
        prepared: Prepared,
        object: &bpfjet_obj::Object,
        program: &str,
    ) -> Result<Control> {
        let path = socket_path(instance);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("removing stale control socket {}", path.display()))?;
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("binding control socket {}", path.display()))?;
        // Only the owner may replace the program (connecting needs write
        // permission on the socket), like the maps' 0600.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("restricting {}", path.display()))?;
        }
        listener
            .set_nonblocking(true)
            .context("control socket: non-blocking")?;
        let registry = Instance::open(instance)
            .map_err(|e| anyhow!("opening instance '{instance}' for control: {e}"))?;
        let maps = object_maps(&loaded, object);
        let control = Control {
            listener,
            path,
            instance: instance.to_string(),
            registry,
            ncpus,
            engine,
            unverified,
            switch,
            slots,
            generations: vec![Generation {
                _loaded: loaded,
                prepared,
                program: program.to_string(),
                maps,
            }],
            withdrawn: Vec::new(),
            pending: None,
            kernel_btf: bpfjet_obj::KernelBtf::Running,
        };
        // After `control` exists, so a failure here removes the socket too.
        publish_btf(instance, object)?;
        Ok(control)
    }

    fn current(&self) -> &Generation {
        self.generations.last().expect("the initial generation")
    }

    /// The engine and program running now.
    pub fn engine_name(&self) -> &'static str {
        self.current().prepared.engine.name()
    }

    pub fn program(&self) -> &str {
        &self.current().program
    }

    pub fn stages_frames(&self) -> bool {
        self.current().prepared.stages_frames()
    }

    /// Completed replaces.
    pub fn replaces(&self) -> usize {
        self.generations.len() - 1
    }

    /// Serves every pending request and advances a replace in progress.
    /// Never waits for a compile or a swap: the run loop calls this
    /// between its status checks, and its status line, `--duration` and
    /// signals must keep working while a replace is under way.
    pub fn poll(&mut self) {
        self.advance();
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = self.serve(stream) {
                        eprintln!("bpfjet: control request: {e:#}");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    eprintln!("bpfjet: control socket: {e}");
                    break;
                }
            }
        }
        // A request accepted just now may already be answerable (e.g. a
        // parse error was answered in `serve`; a build is never this fast,
        // but a swap check is cheap).
        self.advance();
    }

    /// Reads one request; a replace starts building off the run loop and
    /// is answered later by [`Control::advance`].
    fn serve(&mut self, stream: UnixStream) -> Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        match serde_json::from_str::<Request>(&line) {
            Ok(Request::Replace { object, prog, load }) => {
                if self.pending.is_some() {
                    let e =
                        anyhow!("another replace is in progress; retry once it has been answered");
                    eprintln!("bpfjet: replace with {} refused: {e:#}", object.display());
                    return answer(&stream, &Reply::error(&e));
                }
                self.start(stream, object, prog, load);
                Ok(())
            }
            Err(e) => answer(&stream, &Reply::error(&anyhow!("bad control request: {e}"))),
        }
    }

    /// Starts loading, verifying and compiling `path` on a thread of its
    /// own, against the maps live now.
    fn start(
        &mut self,
        stream: UnixStream,
        path: PathBuf,
        prog: Option<String>,
        load: ReplaceLoad,
    ) {
        // What the instance holds before the attempt: anything else it
        // holds after a failed attempt is the attempt's and is removed.
        let before: Vec<u32> = self.registry.list().iter().map(|m| m.id).collect();
        let job = BuildJob {
            path: path.clone(),
            prog,
            load,
            instance: self.instance.clone(),
            ncpus: self.ncpus,
            engine: self.engine,
            unverified: self.unverified,
            slots: self.slots.clone(),
            live: self.current().maps.clone(),
            kernel_btf: self.kernel_btf.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("bpfjet-replace".into())
            .spawn(move || job.build());
        match handle {
            Ok(handle) => {
                self.pending = Some(Pending {
                    stream,
                    path,
                    before,
                    stage: Stage::Building(handle),
                })
            }
            Err(e) => {
                let e = anyhow!("starting the replace thread: {e}");
                eprintln!("bpfjet: replace with {} refused: {e:#}", path.display());
                if let Err(e) = answer(&stream, &Reply::error(&e)) {
                    eprintln!("bpfjet: control request: {e:#}");
                }
            }
        }
    }

    /// Moves a replace in progress one step on if it can without waiting:
    /// installs a finished build, answers a completed or timed-out swap.
    /// After the workers end, a staged swap completes here (ended workers
    /// do not hold it up).
    pub fn advance(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        let Pending {
            stream,
            path,
            before,
            stage,
        } = pending;
        let result = match stage {
            Stage::Building(handle) if !handle.is_finished() => {
                self.pending = Some(Pending {
                    stream,
                    path,
                    before,
                    stage: Stage::Building(handle),
                });
                return;
            }
            Stage::Building(handle) => match join_build(handle) {
                Ok(built) => match self.install(built) {
                    Ok(switching) => {
                        self.pending = Some(Pending {
                            stream,
                            path,
                            before,
                            stage: Stage::Switching(Box::new(switching)),
                        });
                        // The workers may have taken it already.
                        return self.advance();
                    }
                    Err(e) => {
                        self.remove_new_maps(&before);
                        Err(e)
                    }
                },
                Err(e) => {
                    self.remove_new_maps(&before);
                    Err(e)
                }
            },
            Stage::Switching(s) => {
                let pending = self.switch.pending(s.generation);
                if pending.is_empty() {
                    self.complete(*s)
                } else if s.started.elapsed() >= SWITCH_TIMEOUT {
                    Err(self.withdraw(*s, &pending))
                } else {
                    self.pending = Some(Pending {
                        stream,
                        path,
                        before,
                        stage: Stage::Switching(s),
                    });
                    return;
                }
            }
        };
        let reply = match result {
            Ok(r) => {
                eprintln!(
                    "bpfjet: replaced by {} ({}) from {}: generation {}",
                    r.program.as_deref().unwrap_or("?"),
                    r.engine.as_deref().unwrap_or("?"),
                    path.display(),
                    r.generation.unwrap_or(0)
                );
                r
            }
            Err(e) => {
                eprintln!("bpfjet: replace with {} refused: {e:#}", path.display());
                Reply::error(&e)
            }
        };
        if let Err(e) = answer(&stream, &reply) {
            eprintln!("bpfjet: control request: {e:#}");
        }
    }

    /// Stages a finished build's runners: from here workers may run it, so
    /// its generation stays alive for the whole run.
    fn install(&mut self, built: Built) -> Result<Switching> {
        let Built {
            object,
            program,
            loaded,
            prepared,
            reused,
            runners,
        } = built;
        let started = Instant::now();
        let generation = self.switch.publish(runners)?;
        let maps = object_maps(&loaded, &object);
        let old_maps = self.current().maps.clone();
        let engine = prepared.engine.name().to_string();
        self.generations.push(Generation {
            _loaded: loaded,
            prepared,
            program: program.clone(),
            maps: maps.clone(),
        });
        Ok(Switching {
            generation,
            started,
            object,
            program,
            engine,
            reused,
            maps,
            old_maps,
        })
    }

    /// Every worker runs the new generation: publishes its BTF, removes
    /// the old maps it does not use and builds the success reply.
    fn complete(&mut self, s: Switching) -> Result<Reply> {
        let switch_ms = s.started.elapsed().as_secs_f64() * 1e3;
        publish_btf(&self.instance, &s.object)?;
        let mut changes = MapChanges::default();
        for (map, kept) in s.maps.iter().zip(&s.reused) {
            if *kept {
                changes.kept.push(map.name().to_string());
            } else {
                changes.created.push(map.name().to_string());
            }
        }
        // Old maps nobody runs with any more leave the instance, so a
        // control plane's `map lookup NAME` finds the live one.
        for old in &s.old_maps {
            if !s.maps.iter().any(|m| Arc::ptr_eq(m, old)) {
                self.registry
                    .remove_map(old.id())
                    .map_err(|e| anyhow!("removing dropped map {}: {e}", old.name()))?;
                changes.dropped.push(old.name().to_string());
            }
        }
        Ok(Reply {
            ok: true,
            error: None,
            generation: Some(s.generation),
            program: Some(s.program),
            engine: Some(s.engine),
            maps: Some(changes),
            switch_ms: Some(switch_ms),
        })
    }

    /// Some worker did not reach a batch boundary in time: stages the
    /// previous program again (a worker that still waits skips straight to
    /// it, one that took the new program goes back at its next boundary),
    /// removes the maps the attempt created and returns the error to reply.
    /// The withdrawn generation stays alive: a worker may still be running
    /// its last batch with it.
    fn withdraw(&mut self, s: Switching, pending: &[usize]) -> anyhow::Error {
        let withdrawn = self.generations.pop().expect("the staged generation");
        let restore = self
            .slots
            .iter()
            .map(|slot| {
                self.current()
                    .prepared
                    .runner(slot.cpu, slot.ingress_ifindex, slot.rx_queue)
            })
            .collect::<Result<Vec<Box<dyn FrameProgram + Send>>>>();
        let restored = restore.and_then(|r| Ok(self.switch.publish(r)?));
        let timeout = format!(
            "worker(s) {pending:?} did not reach a batch boundary within {}s",
            SWITCH_TIMEOUT.as_secs()
        );
        match restored {
            Ok(back) => {
                for map in &s.maps {
                    if !s.old_maps.iter().any(|m| Arc::ptr_eq(m, map)) {
                        let _ = self.registry.remove_map(map.id());
                    }
                }
                self.withdrawn.push(withdrawn);
                anyhow!(
                    "{timeout}; generation {} withdrawn, {} keeps running (restaged as generation {back})",
                    s.generation,
                    self.current().program
                )
            }
            Err(e) => {
                // The new program stays staged: it is the one that will
                // run, so it is the current generation.
                self.generations.push(withdrawn);
                anyhow!(
                    "{timeout}, and restaging the previous program failed ({e:#}): generation {} stays staged and takes over when they do",
                    s.generation
                )
            }
        }
    }

    /// Removes from the instance every map not in `before`.
    fn remove_new_maps(&self, before: &[u32]) {
        for m in self.registry.list() {
            if !before.contains(&m.id) {
                let _ = self.registry.remove_map(m.id);
            }
        }
    }
}

/// Writes `reply` as one JSON line.
fn answer(stream: &UnixStream, reply: &Reply) -> Result<()> {
    let mut out = serde_json::to_string(reply)?;
    out.push('\n');
    let mut w = stream;
    w.write_all(out.as_bytes())?;
    Ok(())
}

/// A replace being worked on: the client waiting for its answer and how
/// far it got.
struct Pending {
    stream: UnixStream,
    path: PathBuf,
    /// The instance's map ids before the attempt.
    before: Vec<u32>,
    stage: Stage,
}

enum Stage {
    /// Loading, verifying, compiling on the replace thread.
    Building(JoinHandle<Result<Built>>),
    /// Staged; waiting for every worker to take it.
    Switching(Box<Switching>),
}

struct Switching {
    generation: u64,
    started: Instant,
    object: bpfjet_obj::Object,
    program: String,
    engine: String,
    reused: Vec<bool>,
    maps: Vec<Arc<Map>>,
    old_maps: Vec<Arc<Map>>,
}

/// What the replace thread produces: everything but the staging.
struct Built {
    object: bpfjet_obj::Object,
    program: String,
    loaded: LoadedObject,
    prepared: Prepared,
    reused: Vec<bool>,
    runners: Vec<Box<dyn FrameProgram + Send>>,
}

fn join_build(handle: JoinHandle<Result<Built>>) -> Result<Built> {
    handle
        .join()
        .unwrap_or_else(|_| Err(anyhow!("the replace thread panicked")))
}

/// The inputs of a build, owned so the replace thread needs nothing of
/// the run loop's.
struct BuildJob {
    path: PathBuf,
    prog: Option<String>,
    load: ReplaceLoad,
    instance: String,
    ncpus: usize,
    engine: EngineChoice,
    unverified: bool,
    slots: Vec<WorkerSlot>,
    /// The maps of the program running when the request came.
    live: Vec<Arc<Map>>,
    kernel_btf: bpfjet_obj::KernelBtf,
}

impl BuildJob {
    /// Loads, verifies and compiles the new object against the live maps
    /// and makes one runner per worker.
    fn build(self) -> Result<Built> {
        let path = &self.path;
        let args = self.load.object_args()?;
        // `--btf` of the replace, else the run's own CO-RE target.
        let kernel_btf = match &args.btf {
            Some(_) => args.kernel_btf(),
            None => self.kernel_btf.clone(),
        };
        let mut object = bpfjet_obj::load_file_with(path, &kernel_btf)
            .with_context(|| format!("loading {}", path.display()))?;
        args.apply(&mut object)
            .with_context(|| format!("loading {}", path.display()))?;
        let program = object
            .runnable_program(self.prog.as_deref())
            .with_context(|| format!("choosing the program of {}", path.display()))?
            .name
            .clone();
        let instance = Instance::open(&self.instance)
            .map_err(|e| anyhow!("opening instance '{}': {e}", self.instance))?;
        let live = &self.live;
        let reuse = |spec: &MapSpec| {
            live.iter()
                .find(|m| m.name() == spec.name && reusable(m, spec))
                .cloned()
        };
        let (loaded, reused) = LoadedObject::load_in(
            &object,
            &ObjectOptions {
                ncpus: self.ncpus,
                unverified: self.unverified,
                instance_name: Some(self.instance.clone()),
                state: None,
                fib: None,
                autoload: vec![program.clone()],
            },
            instance,
            &reuse,
        )
        .map_err(|e| anyhow!("{e}"))?;
        // The run's engine choice applies as at start: `--engine jit` refuses
        // an object the JIT cannot compile rather than interpreting it.
        // An `--aot` artifact belongs to the original object; the new one is
        // compiled here.
        let prepared = engine::prepare(&object, &loaded, &program, self.engine, self.unverified)?;
        let runners = self
            .slots
            .iter()
            .map(|s| prepared.runner(s.cpu, s.ingress_ifindex, s.rx_queue))
            .collect::<Result<Vec<Box<dyn FrameProgram + Send>>>>()?;
        Ok(Built {
            object,
            program,
            loaded,
            prepared,
            reused,
            runners,
        })
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // A replace the run did not finish: its thread may still be adding
        // maps to the instance, so it is waited for (a compile cannot be
        // interrupted) before the instance's owner unlinks it; then the
        // attempt's maps are removed and the client told.
        if let Some(p) = self.pending.take() {
            let e = match p.stage {
                Stage::Building(handle) => {
                    drop(join_build(handle));
                    self.remove_new_maps(&p.before);
                    anyhow!(
                        "the run stopped before the new program was ready; nothing was replaced"
                    )
                }
                // Staged and counted as the run's program; its workers
                // stopped before all of them acknowledged it.
                Stage::Switching(s) => anyhow!(
                    "the run stopped while the workers switched to generation {}",
                    s.generation
                ),
            };
            eprintln!("bpfjet: replace with {} refused: {e:#}", p.path.display());
            let _ = answer(&p.stream, &Reply::error(&e));
        }
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(btf_path(&self.instance));
    }
}

/// The maps of `object` as `loaded` created or reused them.
fn object_maps(loaded: &LoadedObject, object: &bpfjet_obj::Object) -> Vec<Arc<Map>> {
    object
        .maps
        .iter()
        .filter_map(|s| loaded.map(&s.name))
        .collect()
}

/// The client side: sends `request` to instance `name`, returns the reply.
pub fn request(name: &str, request: &Request, timeout: Duration) -> Result<Reply> {
    let path = socket_path(name);
    let stream = UnixStream::connect(&path).map_err(|e| {
        anyhow!(
            "cannot reach instance '{name}' at {}: {e} (is `bpfjet run --name {name}` running?)",
            path.display()
        )
    })?;
    stream.set_read_timeout(Some(timeout))?;
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    (&stream).write_all(line.as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&stream)
        .read_line(&mut reply)
        .with_context(|| format!("waiting for instance '{name}' to answer"))?;
    if reply.is_empty() {
        bail!("instance '{name}' closed the control connection without answering");
    }
    serde_json::from_str(&reply).with_context(|| format!("bad reply from '{name}': {reply}"))
}
