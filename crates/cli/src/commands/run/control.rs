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
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
    },
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

    /// Serves every pending request (the run loop calls this between its
    /// status checks; a replace blocks it while the new object compiles).
    pub fn poll(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = self.serve(stream) {
                        eprintln!("bpfjet: control request: {e:#}");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    eprintln!("bpfjet: control socket: {e}");
                    return;
                }
            }
        }
    }

    fn serve(&mut self, stream: UnixStream) -> Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Replace { object, prog }) => match self.replace(&object, prog.as_deref()) {
                Ok(r) => {
                    eprintln!(
                        "bpfjet: replaced by {} ({}) from {}: generation {}",
                        r.program.as_deref().unwrap_or("?"),
                        r.engine.as_deref().unwrap_or("?"),
                        object.display(),
                        r.generation.unwrap_or(0)
                    );
                    r
                }
                Err(e) => {
                    eprintln!("bpfjet: replace with {} refused: {e:#}", object.display());
                    Reply::error(&e)
                }
            },
            Err(e) => Reply::error(&anyhow!("bad control request: {e}")),
        };
        let mut out = serde_json::to_string(&reply)?;
        out.push('\n');
        (&stream).write_all(out.as_bytes())?;
        Ok(())
    }

    fn replace(&mut self, path: &Path, prog: Option<&str>) -> Result<Reply> {
        let object =
            bpfjet_obj::load_file(path).with_context(|| format!("loading {}", path.display()))?;
        let program = object
            .runnable_program(prog)
            .with_context(|| format!("choosing the program of {}", path.display()))?
            .name
            .clone();
        let before: Vec<u32> = self.registry.list().iter().map(|m| m.id).collect();
        let attempt = self.build(&object, &program);
        let (loaded, prepared, reused) = match attempt {
            Ok(built) => built,
            Err(e) => {
                // Remove whatever the attempt registered in the instance.
                for m in self.registry.list() {
                    if !before.contains(&m.id) {
                        let _ = self.registry.remove_map(m.id);
                    }
                }
                return Err(e);
            }
        };
        let runners = self
            .slots
            .iter()
            .map(|s| prepared.runner(s.cpu, s.ingress_ifindex, s.rx_queue))
            .collect::<Result<Vec<Box<dyn FrameProgram + Send>>>>()?;
        let started = Instant::now();
        let generation = self.switch.publish(runners)?;
        let maps = object_maps(&loaded, &object);
        let old_maps = self.current().maps.clone();
        let engine = prepared.engine.name().to_string();
        // From here workers may run it: it stays alive for the whole run.
        self.generations.push(Generation {
            _loaded: loaded,
            prepared,
            program: program.clone(),
            maps: maps.clone(),
        });
        self.switch
            .wait_adopted(generation, SWITCH_TIMEOUT)
            .map_err(|e| anyhow!("new program staged as generation {generation}, but {e}"))?;
        let switch_ms = started.elapsed().as_secs_f64() * 1e3;

        publish_btf(&self.instance, &object)?;
        let mut changes = MapChanges::default();
        for (map, kept) in maps.iter().zip(&reused) {
            if *kept {
                changes.kept.push(map.name().to_string());
            } else {
                changes.created.push(map.name().to_string());
            }
        }
        // Old maps nobody runs with any more leave the instance, so a
        // control plane's `map lookup NAME` finds the live one.
        for old in &old_maps {
            if !maps.iter().any(|m| Arc::ptr_eq(m, old)) {
                self.registry
                    .remove_map(old.id())
                    .map_err(|e| anyhow!("removing dropped map {}: {e}", old.name()))?;
                changes.dropped.push(old.name().to_string());
            }
        }
        Ok(Reply {
            ok: true,
            error: None,
            generation: Some(generation),
            program: Some(program),
            engine: Some(engine),
            maps: Some(changes),
            switch_ms: Some(switch_ms),
        })
    }

    /// Loads, verifies and compiles the new object against the live maps.
    fn build(
        &self,
        object: &bpfjet_obj::Object,
        program: &str,
    ) -> Result<(LoadedObject, Prepared, Vec<bool>)> {
        let instance = Instance::open(&self.instance)
            .map_err(|e| anyhow!("opening instance '{}': {e}", self.instance))?;
        let live = &self.current().maps;
        let reuse = |spec: &MapSpec| {
            live.iter()
                .find(|m| m.name() == spec.name && reusable(m, spec))
                .cloned()
        };
        let (loaded, reused) = LoadedObject::load_in(
            object,
            &ObjectOptions {
                ncpus: self.ncpus,
                unverified: self.unverified,
                instance_name: Some(self.instance.clone()),
                state: None,
                fib: None,
            },
            instance,
            &reuse,
        )
        .map_err(|e| anyhow!("{e}"))?;
        // The run's engine choice applies as at start: `--engine jit` refuses
        // an object the JIT cannot compile rather than interpreting it.
        // An `--aot` artifact belongs to the original object; the new one is
        // compiled here.
        let prepared = engine::prepare(object, &loaded, program, self.engine, self.unverified)?;
        Ok((loaded, prepared, reused))
    }
}

impl Drop for Control {
    fn drop(&mut self) {
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
