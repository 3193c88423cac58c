//! The bpfjet trace agent, `libbpfjet_trace.so`.
//!
//! `bpfjet trace OBJ -- CMD` runs CMD with this library preloaded. Its
//! constructor runs before CMD's `main`: it loads OBJ with bpfjet's verifier
//! (interpreter or JIT), resolves every program's attach target in the
//! process, patches the probes in and installs system-call dispatch, then
//! lets the program run; programs run inline on the thread that hits them.
//! At exit (the `exit_group` system call, or libc's `_exit` when system
//! calls are not traced) it writes the report the CLI prints: every map in
//! STATE.json form, ring-buffer counts, runs missed and faulted.
//!
//! The command's process tree is traced: a forked child runs the programs
//! with the maps it shares with its parent; a program the tree executes
//! starts with the settings in its environment, and its agent joins the
//! maps the command's agent published (config.rs `ENV_INSTANCE`) and runs
//! the `exec`'s exit programs. Only the command's agent consumes the ring
//! and perf buffers and writes the report. `--no-follow` removes the
//! settings from the environment: executed programs start untraced.
//!
//! Any attach error is reported before `main` runs and the process exits
//! with [`config::AGENT_ERROR_EXIT`].
//!
//! `bpfjet trace OBJ --pid PID` loads this library into a process that is
//! already running (ptrace-driven `dlopen`): see late_attach.rs.

mod alive;
mod attach;
mod config;
mod dlopen;
mod events;
mod exec_env;
mod exec_note;
mod fused;
mod late_attach;
mod late_links;
mod report;
mod sampling;
mod stack_scrub;
mod teardown;
mod threads;
mod usdt;

use config::Config;

#[used]
#[link_section = ".init_array"]
static AGENT_INIT: extern "C" fn() = agent_init;

extern "C" fn agent_init() {
    // The settings are read, and dropped, as the agent's own work: a probe
    // on libc's allocator attached meanwhile must not count their frees.
    let Some(cfg) = alive::agent_work(Config::from_env) else {
        // Not preloaded by `bpfjet trace -- CMD`: loaded into a running
        // process by `bpfjet trace --pid`, or by someone else (nothing).
        late_attach::init();
        return;
    };
    if let Err(e) = alive::agent_work(|| attach::start(cfg.clone())) {
        attach::abandon();
        if cfg.joined {
            // A program the traced tree executed: it runs untraced rather
            // than not at all (the command's report is not this one's).
            eprintln!(
                "bpfjet trace: not tracing pid {} ({}): {e}",
                std::process::id(),
                std::env::args().next().unwrap_or_default()
            );
            return;
        }
        report::write_error(&cfg, &e);
        // SAFETY: ends the process before the traced program's main.
        unsafe { libc::_exit(config::AGENT_ERROR_EXIT) };
    }
    attach::exec_returned();
    alive::agent_work(|| drop(cfg));
}
