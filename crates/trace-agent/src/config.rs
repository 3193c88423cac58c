//! What `bpfjet trace` tells the agent, through the environment.

use std::path::PathBuf;

pub const ENV_OBJECT: &str = "BPFJET_TRACE_OBJ";
pub const ENV_ENGINE: &str = "BPFJET_TRACE_ENGINE";
pub const ENV_REPORT: &str = "BPFJET_TRACE_REPORT";
pub const ENV_EVENTS: &str = "BPFJET_TRACE_EVENTS";
/// `MAP=MS,...`: ring buffers in backpressure mode (MS 0: the default
/// stall limit).
pub const ENV_BACKPRESSURE: &str = "BPFJET_TRACE_BACKPRESSURE";
/// Which pairwise-fusion optimisations to apply: `none`, `internalise`,
/// `all` (unset: `none`).
pub const ENV_FUSE: &str = "BPFJET_TRACE_FUSE";

/// Pairwise fusion (docs/TRACING.md "Pairwise fusion").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fuse {
    None,
    /// Hand-off maps kept per thread.
    Internalise,
}

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
    pub fuse: Fuse,
}

impl Config {
    /// The settings, removed from the environment so that programs this
    /// one executes are not traced again into the same report.
    pub fn from_env() -> Option<Config> {
        let object = std::env::var_os(ENV_OBJECT)?;
        let cfg = Config {
            object: object.into(),
            jit: std::env::var(ENV_ENGINE).is_ok_and(|e| e == "jit"),
            report: std::env::var_os(ENV_REPORT)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/dev/stderr")),
            events: std::env::var_os(ENV_EVENTS).map(PathBuf::from),
            backpressure: std::env::var(ENV_BACKPRESSURE)
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| match s.rsplit_once('=') {
                    Some((map, ms)) => (map.to_string(), ms.parse().unwrap_or(0)),
                    None => (s.to_string(), 0),
                })
                .collect(),
            fuse: match std::env::var(ENV_FUSE).as_deref() {
                Ok("internalise") | Ok("all") => Fuse::Internalise,
                _ => Fuse::None,
            },
        };
        for v in [
            ENV_OBJECT,
            ENV_ENGINE,
            ENV_REPORT,
            ENV_EVENTS,
            ENV_BACKPRESSURE,
            ENV_FUSE,
        ] {
            // SAFETY: the constructor runs before main, single-threaded.
            unsafe { std::env::remove_var(v) };
        }
        Some(cfg)
    }
}
