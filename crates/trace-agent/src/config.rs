//! What `bpfjet trace` tells the agent, through the environment.

use std::path::PathBuf;

pub const ENV_OBJECT: &str = "BPFJET_TRACE_OBJ";
pub const ENV_ENGINE: &str = "BPFJET_TRACE_ENGINE";
pub const ENV_REPORT: &str = "BPFJET_TRACE_REPORT";
pub const ENV_EVENTS: &str = "BPFJET_TRACE_EVENTS";
/// `MAP=MS,...`: ring buffers in backpressure mode (MS 0: the default
/// stall limit).
pub const ENV_BACKPRESSURE: &str = "BPFJET_TRACE_BACKPRESSURE";
/// `MAP=BYTES,...`: ring buffers created with this size instead of the
/// object's `max_entries` (as a libbpf skeleton's
/// `bpf_map__set_max_entries` before load).
pub const ENV_RINGBUF_SIZE: &str = "BPFJET_TRACE_RINGBUF_SIZE";
pub const ENV_MAX_ENTRIES: &str = "BPFJET_TRACE_MAX_ENTRIES";
/// `--global`, `--no-autoload`, `--attach` (`bpfjet_obj::LoaderSettings`).
pub const ENV_GLOBALS: &str = "BPFJET_TRACE_GLOBALS";
pub const ENV_NO_AUTOLOAD: &str = "BPFJET_TRACE_NO_AUTOLOAD";
pub const ENV_ATTACH: &str = "BPFJET_TRACE_ATTACH";
pub const ENV_VALUE_SIZE: &str = "BPFJET_TRACE_VALUE_SIZE";
/// `MAP=DIR,...`: cgroups put into slot 0 of CGROUP_ARRAY maps.
pub const ENV_CGROUP_ARRAY: &str = "BPFJET_TRACE_CGROUP_ARRAY";
/// Microseconds the ring-buffer consumer keeps polling after the last
/// record before it sleeps (default [`DEFAULT_CONSUMER_SPIN_US`]: it
/// sleeps at once, in batches).
pub const ENV_CONSUMER_SPIN_US: &str = "BPFJET_TRACE_CONSUMER_SPIN_US";
/// 0: measured on a 2-CPU machine with no idle CPU, a polling consumer
/// kept a quarter of rw-tracer-all's records where a sleeping one kept
/// three quarters (docs/PERFORMANCE.md, "The generic per-hit path"); with
/// a CPU to spare, polling (e.g. 50) reads records as they are committed.
pub const DEFAULT_CONSUMER_SPIN_US: u64 = 0;
/// The instance name the process tree's maps are published under
/// (`bpfjet trace` follows `exec`, unless `--no-follow`): the command's
/// agent creates it, the agents of programs the tree executes join it.
pub const ENV_INSTANCE: &str = "BPFJET_TRACE_INSTANCE";
/// Set (to `1`) by the command's agent in its environment: an agent that
/// finds it was started by an `exec` in the traced tree and joins
/// [`ENV_INSTANCE`] instead of creating the maps.
pub const ENV_JOIN: &str = "BPFJET_TRACE_JOIN";
/// The command's process id, set by its agent next to [`ENV_JOIN`]: an
/// image with this id is the command itself after an `exec` (`sh -c
/// 'exec prog'`), whose agent goes on consuming and writes the report.
pub const ENV_ROOT: &str = "BPFJET_TRACE_ROOT";
/// The `bpf()` instance (`bpfjet exec --instance NAME`) whose probe links
/// say what to run (`bpfjet trace --instance NAME`): the programs a
/// control plane linked to uprobes and system-call tracepoints, on its
/// maps, instead of an object file. `BPFJET_RUN_DIR` locates it.
pub const ENV_CONTROL_PLANE: &str = "BPFJET_TRACE_CONTROL_PLANE";
/// Which pairwise-fusion optimisations to apply: `none`, `fold`,
/// `internalise-calls`, `internalise`, `compile`, `all` (unset: `none`).
pub const ENV_FUSE: &str = "BPFJET_TRACE_FUSE";
/// `0`: the JIT does not fold frozen `.rodata` loads (to measure what that
/// folding is worth); anything else or unset: it does.
pub const ENV_FOLD_RODATA: &str = "BPFJET_TRACE_FOLD_RODATA";
/// Set (to `1`) by a control plane's `exec` of a program
/// (crates/preload, exec.rs): the agent does nothing at all when the
/// instance links no program for this process.
pub const ENV_IF_LINKED: &str = "BPFJET_TRACE_IF_LINKED";
/// Samples per second of each thread's CPU time for `perf_event`
/// programs (`bpfjet trace --sample-freq`; unset: [`DEFAULT_SAMPLE_FREQ`]).
pub const ENV_SAMPLE_FREQ: &str = "BPFJET_TRACE_SAMPLE_FREQ";
/// libbpf-tools' `profile` samples at 49 Hz unless told otherwise.
pub const DEFAULT_SAMPLE_FREQ: u64 = 49;

/// Pairwise fusion's ladder (docs/TRACING.md "Pairwise fusion"): each
/// level includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fuse {
    None,
    /// A pair on a libc system-call wrapper runs as one call-through stub
    /// (entry half, the wrapper, exit half in one frame; no return probe).
    Inline,
    /// Attach-site constants folded by the JIT (the system-call number of
    /// `tracepoint/syscalls/sys_enter_X|sys_exit_X` records).
    Fold,
    /// + hand-off maps kept per thread, slot operations as native calls.
    InternaliseCalls,
    /// + the slot operations compiled into the programs (JIT).
    Internalise,
    /// Each eligible pair's entry and exit programs also compiled into one
    /// native function around the wrapper's call (JIT; the interpreter
    /// stays at `Internalise`).
    Compile,
}

impl Fuse {
    /// The level named `s` (`all` is the highest).
    pub fn parse(s: &str) -> Option<Fuse> {
        Some(match s {
            "none" => Fuse::None,
            "inline" => Fuse::Inline,
            "fold" => Fuse::Fold,
            "internalise-calls" => Fuse::InternaliseCalls,
            "internalise" => Fuse::Internalise,
            "compile" | "all" => Fuse::Compile,
            _ => return None,
        })
    }
}

/// Every setting's name.
const ALL: [&str; 21] = [
    ENV_SAMPLE_FREQ,
    ENV_CONTROL_PLANE,
    ENV_ROOT,
    ENV_INSTANCE,
    ENV_JOIN,
    ENV_CGROUP_ARRAY,
    ENV_VALUE_SIZE,
    ENV_GLOBALS,
    ENV_NO_AUTOLOAD,
    ENV_ATTACH,
    ENV_OBJECT,
    ENV_ENGINE,
    ENV_REPORT,
    ENV_EVENTS,
    ENV_BACKPRESSURE,
    ENV_RINGBUF_SIZE,
    ENV_MAX_ENTRIES,
    ENV_CONSUMER_SPIN_US,
    ENV_FUSE,
    ENV_FOLD_RODATA,
    ENV_IF_LINKED,
];

/// Exit status of a traced process whose agent could not attach (the
/// program's `main` never ran; the report says why).
pub const AGENT_ERROR_EXIT: i32 = 125;

#[derive(Clone, Debug)]
pub struct Config {
    pub object: PathBuf,
    pub jit: bool,
    pub report: PathBuf,
    pub events: Option<PathBuf>,
    /// Ring buffers that wait for the consumer instead of dropping:
    /// (map, stall limit in ms, 0 = default).
    pub backpressure: Vec<(String, u32)>,
    /// Ring buffers resized before load: (map, bytes).
    pub ringbuf_size: Vec<(String, String)>,
    /// `--max-entries MAP=N`: (map, N as given).
    pub max_entries: Vec<(String, String)>,
    /// `--global`, `--no-autoload`, `--attach`.
    pub loader: bpfjet_obj::LoaderSettings,
    /// `--cgroup-array MAP=DIR`.
    pub cgroup_array: Vec<(String, String)>,
    /// See [`ENV_CONSUMER_SPIN_US`].
    pub consumer_spin: std::time::Duration,
    pub fuse: Fuse,
    /// The JIT folds frozen `.rodata` loads.
    pub fold_rodata: bool,
    /// [`ENV_INSTANCE`]: the maps are shared by the traced process tree
    /// under this name (None: `--no-follow`, or `--pid`; private maps).
    pub instance: Option<String>,
    /// This agent was started by an `exec` in the traced tree: it joins
    /// [`Config::instance`], runs the `exec`'s exit programs, and leaves
    /// the consumers and the report to the command's agent.
    pub joined: bool,
    /// [`ENV_ROOT`]: the command's process id (set in joined agents).
    pub root_pid: Option<u32>,
    /// [`ENV_CONTROL_PLANE`]: run what this instance's probe links attach
    /// ([`Config::object`] is empty).
    pub control_plane: Option<String>,
    /// `BPFJET_RUN_DIR`: where that instance's records are (`bpfjet
    /// exec`'s default `/run/bpfjet` when unset).
    pub run_dir: String,
    /// [`ENV_IF_LINKED`].
    pub if_linked: bool,
    /// [`ENV_SAMPLE_FREQ`].
    pub sample_freq: u64,
}

impl Config {
    /// Whether this agent consumes the buffers and writes the report: the
    /// command's, before or after an `exec` of the command's process.
    pub fn reporter(&self) -> bool {
        !self.joined || self.root_pid == Some(std::process::id())
    }
}

impl Config {
    /// The settings. Without an instance to share (`--no-follow`) they
    /// are removed from the environment, so that programs this one
    /// executes are not traced. With one they stay, for the agents of the
    /// programs the tree executes, and the command's agent marks them as
    /// joining ([`ENV_JOIN`]).
    pub fn from_env() -> Option<Config> {
        let cfg = Config::from_vars(|name| std::env::var(name).ok())?;
        // A control plane's programs are loaded anew in every image the
        // tree executes (its maps are the instance's): they follow too.
        if cfg.instance.is_none() && cfg.control_plane.is_none() {
            for v in ALL {
                // SAFETY: the constructor runs before main, single-threaded.
                unsafe { std::env::remove_var(v) };
            }
        } else if !cfg.joined {
            // SAFETY: as above.
            unsafe {
                std::env::set_var(ENV_JOIN, "1");
                std::env::set_var(ENV_ROOT, std::process::id().to_string());
            }
        }
        Some(cfg)
    }

    /// The settings from `get` (the environment, or the file `bpfjet trace
    /// --pid` writes: the same names, one `NAME=VALUE` a line).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let control_plane = get(ENV_CONTROL_PLANE).filter(|s| !s.is_empty());
        let object = match get(ENV_OBJECT) {
            Some(o) => o,
            None if control_plane.is_some() => String::new(),
            None => return None,
        };
        let var = |name: &str| get(name).ok_or(());
        Some(Config {
            object: object.into(),
            jit: var(ENV_ENGINE).is_ok_and(|e| e == "jit"),
            report: get(ENV_REPORT)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/dev/stderr")),
            events: get(ENV_EVENTS).map(PathBuf::from),
            backpressure: var(ENV_BACKPRESSURE)
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| match s.rsplit_once('=') {
                    Some((map, ms)) => (map.to_string(), ms.parse().unwrap_or(0)),
                    None => (s.to_string(), 0),
                })
                .collect(),
            ringbuf_size: pairs(get(ENV_RINGBUF_SIZE)),
            max_entries: pairs(get(ENV_MAX_ENTRIES)),
            cgroup_array: pairs(get(ENV_CGROUP_ARRAY)),
            loader: bpfjet_obj::LoaderSettings::decode([
                &get(ENV_GLOBALS).unwrap_or_default(),
                &get(ENV_NO_AUTOLOAD).unwrap_or_default(),
                &get(ENV_ATTACH).unwrap_or_default(),
                &get(ENV_VALUE_SIZE).unwrap_or_default(),
            ]),
            consumer_spin: std::time::Duration::from_micros(
                get(ENV_CONSUMER_SPIN_US)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(DEFAULT_CONSUMER_SPIN_US),
            ),
            // The control plane can read every map: nothing is kept per
            // thread, and its pairs run as linked.
            fuse: get(ENV_FUSE)
                .and_then(|s| Fuse::parse(&s))
                .filter(|_| control_plane.is_none())
                .unwrap_or(Fuse::None),
            fold_rodata: get(ENV_FOLD_RODATA).is_none_or(|v| v != "0"),
            instance: get(ENV_INSTANCE).filter(|s| !s.is_empty()),
            joined: get(ENV_JOIN).is_some_and(|v| v == "1"),
            root_pid: get(ENV_ROOT).and_then(|v| v.parse().ok()),
            control_plane,
            run_dir: get("BPFJET_RUN_DIR").unwrap_or_else(|| "/run/bpfjet".into()),
            if_linked: get(ENV_IF_LINKED).is_some_and(|v| v == "1"),
            sample_freq: get(ENV_SAMPLE_FREQ)
                .and_then(|v| v.parse().ok())
                .filter(|&f| f > 0)
                .unwrap_or(DEFAULT_SAMPLE_FREQ),
        })
    }
}

/// `MAP=VALUE,MAP=VALUE` lists of the CLI's repeatable options.
fn pairs(list: Option<String>) -> Vec<(String, String)> {
    list.unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.rsplit_once('=') {
            Some((map, v)) => (map.to_string(), v.to_string()),
            None => (s.to_string(), String::new()),
        })
        .collect()
}
