//! `bpfjet serve-attachment --instance NAME --ifindex N` (internal): the
//! data plane of one XDP attachment made through `bpfjet exec` (netlink or
//! an XDP link), started by the attaching process and outliving it.
//!
//! It runs the attached program from the instance's records on every
//! receive queue of the interface over AF_XDP, exactly as `bpfjet run
//! --iface` (kernel steering program, `XDP_PASS` through the TAP), and
//! polls the attachment record (`bpfjet_server::attach`): a new program id
//! or revision (an EXT program linked into one of the program's functions)
//! is a hot replace between batches, a removed record (detach, the link's
//! last reference gone) or SIGTERM stops it. Its state and counters go to
//! the attachment's status file, which `bpfjet status` prints.

use super::attachment_events::EventWatch;
use super::run::engine::{self, EngineChoice, Prepared};
use anyhow::{anyhow, Context, Result};
use bpfjet_io::afxdp::{AttachMode, IfaceSpec, Session, XskConfig};
use bpfjet_io::run::{FrameProgram, ProgramSwitch, StopSignal};
use bpfjet_io::OutputRoute;
use bpfjet_runtime::LoadedObject;
use bpfjet_server::attach::{DataPlaneStatus, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use bpfjet_server::{data_plane_program, BpfjetBackend, Namespace};
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct ServeAttachmentArgs {
    #[arg(long)]
    pub instance: String,
    #[arg(long)]
    pub ifindex: u32,
}

/// A program ready to run: kept alive while any worker may still run it.
struct Generation {
    prog_id: u32,
    revision: u64,
    name: String,
    prepared: Prepared,
    _loaded: LoadedObject,
}

fn prepare(ns: &Namespace, prog_id: u32, revision: u64) -> Result<Generation> {
    let (object, loaded, name) =
        data_plane_program(ns, prog_id).map_err(|e| anyhow!("program id {prog_id}: {e}"))?;
    let prepared = engine::prepare(&object, &loaded, &name, EngineChoice::Auto, false)?;
    Ok(Generation {
        prog_id,
        revision,
        name,
        prepared,
        _loaded: loaded,
    })
}

/// The interface's receive queues (`/sys/class/net/IF/queues/rx-*`).
fn rx_queues(ifname: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

pub fn run(args: &ServeAttachmentArgs) -> Result<ExitCode> {
    let run_dir = std::env::var_os("BPFJET_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/bpfjet"));
    let ns = Namespace::open(&args.instance, &run_dir).map_err(|e| anyhow!(e))?;
    let mut status = DataPlaneStatus {
        pid: std::process::id(),
        state: "starting".into(),
        ..DataPlaneStatus::default()
    };
    let _ = ns.write_data_plane_status(args.ifindex, &status);
    let served = serve(&ns, args.ifindex, &mut status);
    let _no_sweep_in_flight = SWEEPING.lock().unwrap_or_else(PoisonError::into_inner);
    match served {
        Ok(()) => {
            status.state = "stopped".into();
            let _ = ns.write_data_plane_status(args.ifindex, &status);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            status.state = "failed".into();
            status.error = format!("{e:#}");
            let _ = ns.write_data_plane_status(args.ifindex, &status);
            Err(e)
        }
    }
}

fn serve(ns: &Namespace, ifindex: u32, status: &mut DataPlaneStatus) -> Result<()> {
    let signal = StopSignal::install().context("installing SIGINT/SIGTERM handlers")?;
    let a = ns
        .attachment(ifindex)
        .ok_or_else(|| anyhow!("no attachment on ifindex {ifindex}"))?;
    sweep_periodically(ns);
    let mut current = prepare(ns, a.prog_id, a.revision)?;
    let mut events = EventWatch::new(ns);
    if let Err(e) = events.refresh(ns) {
        status.error = format!("{e:#}");
    }
    status.tracepoints = events.running.clone();
    let queues = rx_queues(&a.ifname);
    let spec = IfaceSpec::parse(&format!("{}:{queues}", a.ifname))?;
    let cfg = XskConfig {
        attach: if a.mode & XDP_FLAGS_SKB_MODE != 0 {
            AttachMode::Generic
        } else if a.mode & XDP_FLAGS_DRV_MODE != 0 {
            AttachMode::Native
        } else {
            AttachMode::Auto
        },
        kern_obj: bpfjet_io::afxdp::default_object(),
        ..XskConfig::default()
    };
    let workers = spec.queues.len();
    let switch = ProgramSwitch::new(workers);
    let slots = RefCell::new(vec![(0u32, 0u32); workers]);
    let make = |i: usize, ifindex: u32, queue: u32| {
        let runner = current
            .prepared
            .runner_with_events(
                i,
                ifindex,
                queue,
                events.events(),
                bpfjet_server::prog_facts(ns, current.prog_id),
            )
            .map_err(|e| e.to_string())?;
        slots.borrow_mut()[i] = (ifindex, queue);
        Ok(Box::new(switch.wrap(i, runner)) as Box<dyn FrameProgram + Send>)
    };
    let session = Session::start(
        &spec,
        &cfg,
        &make,
        false,
        bpfjet_io::DEFAULT_BATCH_SIZE,
        signal.flag(),
    )?;
    let slots = slots.into_inner();
    status.describe = session.describe();
    let (pool, teardown) = session.into_parts();
    status.engine = current.prepared.engine.name().into();
    status.prog_id = current.prog_id;
    status.revision = current.revision;
    status.prog_name = current.name.clone();
    status.state = "running".into();
    ns.write_data_plane_status(ifindex, status)?;
    // The generation before the last swap, until every worker left it.
    let mut previous: Option<Generation> = None;
    let mut next_status = Instant::now();
    let mut outcome = Ok(());
    while !pool.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        if signal.poll() {
            break;
        }
        let Some(a) = ns.attachment(ifindex) else {
            break;
        };
        if a.prog_id != current.prog_id || a.revision != current.revision {
            match swap(ns, &switch, &slots, &events, a.prog_id, a.revision) {
                Ok(g) => {
                    previous = Some(std::mem::replace(&mut current, g));
                    status.replaces += 1;
                    status.prog_id = current.prog_id;
                    status.revision = current.revision;
                    status.prog_name = current.name.clone();
                    status.engine = current.prepared.engine.name().into();
                    status.error.clear();
                    next_status = Instant::now();
                }
                Err(e) => {
                    outcome = Err(e.context(format!("replacing with program id {}", a.prog_id)));
                    break;
                }
            }
        }
        if Instant::now() >= next_status {
            // The device went away (deleted, or its namespace's last
            // process left): the kernel detaches its XDP program then, so
            // the attachment goes and the data plane stops.
            if bpfjet_server::attach::ifname(ifindex).is_err() {
                ns.remove_attachment(ifindex);
                status.error = format!(
                    "interface {} (ifindex {ifindex}) went away: detached",
                    a.ifname
                );
                break;
            }
            match events.refresh(ns) {
                Ok(()) => {
                    if status.tracepoints != events.running {
                        status.tracepoints = events.running.clone();
                        status.error.clear();
                    }
                }
                Err(e) => {
                    status.tracepoints.clear();
                    status.error = format!("{e:#}");
                }
            }
            if let (n @ 1.., Some(last)) = events.faults() {
                status.error = format!("{n} tracepoint program run(s) faulted; the last: {last}");
            }
            let s = pool.stats().snapshot();
            status.packets = s.packets;
            status.pass = s.action(OutputRoute::Pass);
            status.drop = s.action(OutputRoute::Drop);
            status.tx = s.action(OutputRoute::Tx);
            status.redirect = s.action(OutputRoute::Redirect);
            status.aborted = s.action(OutputRoute::Aborted);
            ns.write_data_plane_status(ifindex, status)?;
            next_status = Instant::now() + Duration::from_millis(200);
        }
    }
    pool.stop();
    let joined = pool.join();
    // Detaches the kernel steering program and closes the sockets.
    drop(teardown);
    drop(previous);
    if outcome.is_ok() {
        if let Some(e) = joined.errors.first() {
            outcome = Err(anyhow!("{e}"));
        }
    }
    outcome
}

/// Build `prog_id` (with the EXT programs linked into it now) and stage it on every worker; returns once all run it.
fn swap(
    ns: &Namespace,
    switch: &ProgramSwitch,
    slots: &[(u32, u32)],
    events: &EventWatch,
    prog_id: u32,
    revision: u64,
) -> Result<Generation> {
    let g = prepare(ns, prog_id, revision)?;
    let facts = bpfjet_server::prog_facts(ns, prog_id);
    let runners = slots
        .iter()
        .enumerate()
        .map(|(i, &(ifindex, queue))| {
            g.prepared
                .runner_with_events(i, ifindex, queue, events.events(), facts)
        })
        .collect::<Result<Vec<_>>>()?;
    let generation = switch.publish(runners).map_err(|e| anyhow!("{e}"))?;
    switch
        .wait_adopted(generation, Duration::from_secs(10))
        .map_err(|e| anyhow!("{e}"))?;
    Ok(g)
}

/// Free, every second, what holders that were killed left in the instance.
/// The kernel detaches an XDP link when its holder dies; the sweep does it
/// for a bpfjet link (this data plane stops if the link was its own).
fn sweep_periodically(ns: &Namespace) {
    let Ok(sweeper) = Namespace::open(ns.name(), ns.run_dir()).map(BpfjetBackend::new) else {
        return;
    };
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let _sweeping = SWEEPING.lock().unwrap_or_else(PoisonError::into_inner);
        sweeper.sweep();
    });
}

/// Held while a sweep runs: the data plane does not exit in the middle of
/// one (a sweep that detached this data plane's own link goes on to free
/// the link's program and maps).
static SWEEPING: Mutex<()> = Mutex::new(());
