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
/// Which pairwise-fusion optimisations to apply: `none`, `fold`,
/// `internalise-calls`, `internalise`, `compile`, `all` (unset: `none`).
pub const ENV_FUSE: &str = "BPFJET_TRACE_FUSE";
/// `0`: the JIT does not fold frozen `.rodata` loads (to measure what that
/// folding is worth); anything else or unset: it does.
pub const ENV_FOLD_RODATA: &str = "BPFJET_TRACE_FOLD_RODATA";

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
const ALL: [&str; 15] = [
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
}

impl Config {
    /// The settings, removed from the environment so that programs this
    /// one executes are not traced again into the same report.
    pub fn from_env() -> Option<Config> {
        let cfg = Config::from_vars(|name| std::env::var(name).ok())?;
        for v in ALL {
            // SAFETY: the constructor runs before main, single-threaded.
            unsafe { std::env::remove_var(v) };
        }
        Some(cfg)
    }

    /// The settings from `get` (the environment, or the file `bpfjet trace
    /// --pid` writes: the same names, one `NAME=VALUE` a line).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let object = get(ENV_OBJECT)?;
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
            fuse: get(ENV_FUSE)
                .and_then(|s| Fuse::parse(&s))
                .unwrap_or(Fuse::None),
            fold_rodata: get(ENV_FOLD_RODATA).is_none_or(|v| v != "0"),
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
