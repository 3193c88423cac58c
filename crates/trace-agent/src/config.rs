//! What `bpfjet trace` tells the agent, through the environment.

use std::path::PathBuf;

pub const ENV_OBJECT: &str = "BPFJET_TRACE_OBJ";
pub const ENV_ENGINE: &str = "BPFJET_TRACE_ENGINE";
pub const ENV_REPORT: &str = "BPFJET_TRACE_REPORT";
pub const ENV_EVENTS: &str = "BPFJET_TRACE_EVENTS";

/// Exit status of a traced process whose agent could not attach (the
/// program's `main` never ran; the report says why).
pub const AGENT_ERROR_EXIT: i32 = 125;

#[derive(Clone, Debug)]
pub struct Config {
    pub object: PathBuf,
    pub jit: bool,
    pub report: PathBuf,
    pub events: Option<PathBuf>,
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
        };
        for v in [ENV_OBJECT, ENV_ENGINE, ENV_REPORT, ENV_EVENTS] {
            // SAFETY: the constructor runs before main, single-threaded.
            unsafe { std::env::remove_var(v) };
        }
        Some(cfg)
    }
}
