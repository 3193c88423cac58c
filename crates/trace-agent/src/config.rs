//! What `bpfjet trace` tells the agent, through the environment.

use std::path::PathBuf;

pub const ENV_OBJECT: &str = "BPFJET_TRACE_OBJ";
pub const ENV_ENGINE: &str = "BPFJET_TRACE_ENGINE";
pub const ENV_REPORT: &str = "BPFJET_TRACE_REPORT";
pub const ENV_EVENTS: &str = "BPFJET_TRACE_EVENTS";
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
            fuse: match std::env::var(ENV_FUSE).as_deref() {
                Ok("internalise") | Ok("all") => Fuse::Internalise,
                _ => Fuse::None,
            },
        };
        for v in [ENV_OBJECT, ENV_ENGINE, ENV_REPORT, ENV_EVENTS, ENV_FUSE] {
            // SAFETY: the constructor runs before main, single-threaded.
            unsafe { std::env::remove_var(v) };
        }
        Some(cfg)
    }
}
