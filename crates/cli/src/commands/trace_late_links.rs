//! Probe links made while `bpfjet trace --instance NAME -- CMD` runs.
//!
//! The kernel attaches a uprobe in every process the moment its link is
//! made; a process of the traced tree loads the instance's links when it
//! starts. While the command runs, `bpfjet trace` watches the instance's
//! link generation (the server bumps it when a probe link is made or
//! goes); when links appear that it has not seen, it makes every running
//! process of the tree take them: every thread stopped at a safe point for
//! the patches (ptrace, as `--pid` attaches), one thread calls the agent's
//! `bpfjet_take_new_links` (crates/trace-agent/src/late_links.rs). When
//! that installed the system-call hooks (the first system-call tracepoint
//! of a process), every thread then dispatches its own calls, through
//! `bpfjet_late_enable_thread` in the same stop.

use bpfjet_probe::inject;
use bpfjet_server::Namespace;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the link generation is read.
const POLL: Duration = Duration::from_millis(50);
/// How many polls a process whose agent is not ready yet is asked again
/// (an `exec` under way, an agent still starting): 5 s.
const AGAIN_LIMIT: u32 = 100;

/// The watch, running until `stop`.
pub(super) struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Which processes take the new links.
#[derive(Clone, Copy)]
pub(super) enum Targets {
    /// The running processes of the command's tree.
    Tree,
    /// The one process `bpfjet trace --pid` attached to.
    Pid(i32),
}

/// Starts watching instance `name` (under `run`) for links made from now
/// on; `agent` is the agent library the traced processes loaded.
pub(super) fn watch(name: &str, run: &Path, agent: &Path, targets: Targets) -> Watch {
    let stop = Arc::new(AtomicBool::new(false));
    let (name, run, agent) = (name.to_string(), run.to_path_buf(), agent.to_path_buf());
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("bpfjet-links".into())
        .spawn(move || watch_loop(&name, &run, &agent, targets, &flag))
        .ok();
    Watch { stop, thread }
}

/// The instance's probe links for every process (their ids).
fn link_ids(ns: &Namespace) -> BTreeSet<u32> {
    bpfjet_server::traced_object(ns, 0)
        .map(|t| t.programs.iter().map(|p| p.link_id).collect())
        .unwrap_or_default()
}

fn generation(path: &Path) -> Option<u64> {
    let b = std::fs::read(path).ok()?;
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

fn watch_loop(name: &str, run: &Path, agent: &Path, targets: Targets, stop: &AtomicBool) {
    let Ok(ns) = Namespace::open(name, run) else {
        return;
    };
    let gen_path = bpfjet_server::links_generation(&ns);
    let mut seen_gen = generation(&gen_path);
    let mut seen = link_ids(&ns);
    // Processes whose agent was still starting: asked again, a while.
    let mut again: BTreeMap<i32, u32> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let g = generation(&gen_path);
        if g == seen_gen && again.is_empty() {
            continue;
        }
        seen_gen = g;
        let ids = link_ids(&ns);
        let fresh = !ids.is_subset(&seen);
        seen = ids;
        let pids: BTreeSet<i32> = if fresh {
            match targets {
                Targets::Tree => traced_processes(name, run),
                Targets::Pid(pid) => BTreeSet::from([pid]),
            }
        } else {
            again.keys().copied().collect()
        };
        for pid in pids {
            match take_in(pid, &ns, agent) {
                Ok(r) if r == -(libc::EAGAIN as i64) => {
                    let n = again.entry(pid).or_insert(0);
                    *n += 1;
                    if *n > AGAIN_LIMIT {
                        again.remove(&pid);
                    }
                    continue;
                }
                Ok(r) if r < 0 && r != -(libc::ENOENT as i64) => eprintln!(
                    "bpfjet trace: process {pid} did not take the new links: {}",
                    std::io::Error::from_raw_os_error(-r as i32)
                ),
                Ok(_) => {}
                // A process that ended meanwhile has nothing to take.
                Err(e) if Path::new(&format!("/proc/{pid}")).exists() => {
                    eprintln!("bpfjet trace: process {pid}: new links not attached: {e}")
                }
                Err(_) => {}
            }
            again.remove(&pid);
        }
    }
}

/// The running processes of the traced tree: their environment names the
/// instance (the agent's settings, which every `exec` of the tree keeps).
fn traced_processes(name: &str, run: &Path) -> BTreeSet<i32> {
    let want_instance = format!("BPFJET_TRACE_CONTROL_PLANE={name}");
    let want_run = format!("BPFJET_RUN_DIR={}", run.display());
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
            vars.contains(&want_instance.as_bytes()) && vars.contains(&want_run.as_bytes())
        })
        .collect()
}

/// Makes process `pid` take the links it has not loaded: the result of
/// its agent's `bpfjet_take_new_links`.
fn take_in(pid: i32, ns: &Namespace, agent: &Path) -> Result<i64, String> {
    // The process already has the agent (`check_target` is for a first
    // attach): only its mapped objects are needed.
    let target = inject::Target {
        pid,
        exe: std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| e.to_string())?,
        dlopen: 0,
        objects: inject::process_objects(pid)?,
    };
    let agent: PathBuf = agent.canonicalize().unwrap_or(agent.to_path_buf());
    if !target
        .objects
        .iter()
        .any(|o| o.path.canonicalize().unwrap_or(o.path.clone()) == agent)
    {
        // Not started by the agent yet (or an `exec` under way).
        return Ok(-(libc::EAGAIN as i64));
    }
    // No thread may be stopped inside the bytes a new patch displaces:
    // every uprobe of the links this process gets (one at a time, so that
    // a file it does not map does not hide the others).
    let traced = bpfjet_server::traced_object(ns, pid as u32)?;
    let mut addrs = Vec::new();
    for p in &traced.object.programs {
        let mut one = traced.object.clone();
        one.programs = vec![p.clone()];
        if let Ok(a) = super::trace_pid::patch_addresses(&one, &target) {
            addrs.extend(a);
        }
    }
    // System-call tracepoints: the agent may patch libc's wrappers for
    // the fast path (and then every thread is dispatched).
    let syscalls = traced
        .object
        .programs
        .iter()
        .any(|p| p.kind.syscall_tracepoint().is_some());
    if syscalls {
        addrs.extend(inject::libc_functions(
            &target,
            &bpfjet_probe::fast_syscalls::wrapper_names().collect::<Vec<_>>(),
        ));
    }
    let mut hazards = inject::patch_hazards(pid, &addrs)?;
    // The agent allocates while it loads the links.
    hazards.allocator = inject::allocator_hazards(&target)?;
    let (r, _) =
        inject::call_in_process_then(pid, &agent, "bpfjet_take_new_links", &hazards, |r| {
            (r >= 0 && r & inject::DISPATCH_THREADS != 0).then_some(super::trace_pid::ENABLE_THREAD)
        })?;
    Ok(if r >= 0 {
        r & !inject::DISPATCH_THREADS
    } else {
        r
    })
}
