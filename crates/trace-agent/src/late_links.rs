//! Probe links a control plane makes after a traced process started.
//!
//! The kernel attaches a uprobe in every process the moment its link is
//! made. A process of `bpfjet trace --instance` loads the instance's links
//! at its start; for a link made later, `bpfjet trace` (which watches the
//! instance's link generation) stops every thread of each traced process
//! at a safe point with ptrace — none inside the bytes a patch will
//! displace, nor in the dynamic loader or the allocator — and makes one
//! thread call [`bpfjet_take_new_links`]: the links this process has not
//! loaded become one more tracing object on the instance's maps, its
//! uprobes and uretprobes patched as at the start, each program running
//! while its link lasts (crates/runtime/src/tracing/link_watch.rs).
//!
//! A function already patched in the process (for earlier links) gets
//! the new programs added to its site ([`SiteExtra`]), when the site has
//! the half they need: a uretprobe needs a return handler, which a site
//! patched for entry programs only does not have.
//!
//! A system-call tracepoint joins the process's system-call hooks; in a
//! process that traced no system call, its first one installs them
//! ([`attach::add_late_syscalls`]) and the tracer then dispatches every
//! thread in the same stop.
//!
//! Not taken late, with a line on the process's stderr saying so: a USDT
//! probe of bpfjet's own sections, and a return probe on a site without
//! a return handler. Such a link reaches the processes that start after
//! it.

use crate::{alive, attach};
use bpfjet_obj::{ProbeFlavor, ProbeTarget, ProgKind};
use bpfjet_probe::inject;
use bpfjet_probe::symbols::{loaded_objects, resolve, UprobeTarget};
use bpfjet_probe::PtRegs;
use bpfjet_runtime::tracing::{ProbeSite, TracingObject, TracingOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

/// Link ids this process has loaded (or refused): the next call takes
/// only the others.
static LOADED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Every patched function's extension point, by address.
static SITES: Mutex<BTreeMap<u64, &'static SiteExtra>> = Mutex::new(BTreeMap::new());

/// The objects loaded for late links (the report adds their maps and
/// counts to the start's object's).
static LATE_OBJECTS: Mutex<Vec<&'static TracingObject>> = Mutex::new(Vec::new());

/// The objects loaded for links made after the process started.
pub(crate) fn late_objects() -> Vec<&'static TracingObject> {
    LATE_OBJECTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The links loaded at the start.
pub(crate) fn loaded(ids: impl Iterator<Item = u32>) {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).extend(ids);
}

/// Programs (object, id) a site runs besides those it was patched with.
type Extra = Vec<(&'static TracingObject, usize)>;

/// The programs of later links on a function already patched: its entry
/// and return handlers run them after their own. The lists are replaced
/// whole (a run may be reading the old one: it is leaked), so a hit
/// reads them with one atomic load and no lock (a hit may be in a signal
/// handler).
pub(crate) struct SiteExtra {
    address: u64,
    /// [`ProbeSite::ret_at_sp`] of the entry half.
    ret_at_sp: bool,
    entries: AtomicPtr<Extra>,
    returns: AtomicPtr<Extra>,
    /// Which handlers the site was patched with: a late program needs its
    /// half (a return probe needs the return trampoline).
    has_entry: AtomicBool,
    has_return: AtomicBool,
}

impl SiteExtra {
    /// A new, empty extension point for the site at `address`, registered.
    pub(crate) fn new(address: u64, ret_at_sp: bool) -> &'static SiteExtra {
        let e: &'static SiteExtra = Box::leak(Box::new(SiteExtra {
            address,
            ret_at_sp,
            entries: AtomicPtr::new(std::ptr::null_mut()),
            returns: AtomicPtr::new(std::ptr::null_mut()),
            has_entry: AtomicBool::new(false),
            has_return: AtomicBool::new(false),
        }));
        SITES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(address, e);
        e
    }

    pub(crate) fn set_halves(&self, entry: bool, ret: bool) {
        self.has_entry.store(entry, Ordering::Release);
        self.has_return.store(ret, Ordering::Release);
    }

    /// Runs the added programs of the entry (`ret` false) or return half.
    #[inline]
    pub(crate) fn run(&self, ret: bool, regs: &mut PtRegs) {
        let list = if ret { &self.returns } else { &self.entries };
        let p = list.load(Ordering::Acquire);
        if p.is_null() {
            return;
        }
        // SAFETY: lists are leaked, never freed.
        let list = unsafe { &*p };
        let site = ProbeSite {
            func_ip: self.address,
            cookie: 0,
            regs: 0,
            ret_at_sp: self.ret_at_sp && !ret,
        };
        if let Some(armed) = alive::can_run() {
            for &(object, id) in list {
                object.run_regs(id, attach::regs_view(regs), &site);
            }
            alive::ran(armed);
        }
    }

    /// Adds programs to a half; false when the site has no such half.
    fn add(&self, ret: bool, programs: &[(&'static TracingObject, usize)]) -> bool {
        let (list, has) = if ret {
            (&self.returns, &self.has_return)
        } else {
            (&self.entries, &self.has_entry)
        };
        if !has.load(Ordering::Acquire) {
            return false;
        }
        let old = list.load(Ordering::Acquire);
        // SAFETY: lists are leaked, never freed.
        let mut new = if old.is_null() {
            Vec::new()
        } else {
            unsafe { (*old).clone() }
        };
        new.extend_from_slice(programs);
        list.store(Box::into_raw(Box::new(new)), Ordering::Release);
        true
    }
}

/// Called by `bpfjet trace` through ptrace, every other thread stopped:
/// loads and attaches the links made since the process loaded its own.
/// Returns how many programs it attached, -ENOENT when this process runs
/// no control plane's links, -EAGAIN when its agent has not finished
/// starting (the caller tries again), -EINVAL when the new links could
/// not be loaded (the reason on stderr).
#[no_mangle]
pub extern "C" fn bpfjet_take_new_links() -> i64 {
    let Some(agent) = attach::agent() else {
        return -(libc::EAGAIN as i64);
    };
    let Some(name) = agent.cfg.control_plane.clone() else {
        return -(libc::ENOENT as i64);
    };
    if alive::is_detached() {
        return -(libc::ENOENT as i64);
    }
    let taken = alive::agent_work(|| match take(agent, &name) {
        Ok((n, false)) => n as i64,
        Ok((n, true)) => n as i64 | inject::DISPATCH_THREADS,
        Err(e) => {
            eprintln!(
                "bpfjet trace: pid {}: links of instance {name} made after it started: {e}",
                std::process::id()
            );
            -(libc::EINVAL as i64)
        }
    });
    // The loading's allocator frames must not stay in the dead stack,
    // where the next safe-point scan would find them (stack_scrub.rs).
    crate::stack_scrub::scrub_below();
    taken
}

/// Why a late link is not attached in this process, if it is not.
fn refusal(kind: &ProgKind, section: &str) -> Option<String> {
    match kind {
        ProgKind::Probe(p) if matches!(p.flavor, ProbeFlavor::Uprobe | ProbeFlavor::Uretprobe) => {
            None
        }
        ProgKind::Tracepoint { .. } | ProgKind::RawTracepoint { .. }
            if kind.syscall_tracepoint().is_some() =>
        {
            None
        }
        _ => Some(format!(
            "{section}: a link made after the process started attaches uprobes, uretprobes \
             and system-call tracepoints only; it reaches the processes that start from now on"
        )),
    }
}

/// Loads and attaches the new links: how many programs were attached, and
/// whether the system-call hooks were installed for them (every thread
/// of the process must then be dispatched by the tracer).
fn take(agent: &'static attach::Agent, name: &str) -> Result<(usize, bool), String> {
    let traced = attach::control_plane_object(name, &agent.cfg.run_dir)?;
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    let new: Vec<_> = traced
        .programs
        .iter()
        .filter(|p| !loaded.contains(&p.link_id))
        .cloned()
        .collect();
    if new.is_empty() {
        return Ok((0, false));
    }
    let mut object = traced.object.clone();
    object
        .programs
        .retain(|p| new.iter().any(|n| n.name == p.name) && refusal(&p.kind, &p.section).is_none());
    for p in traced
        .object
        .programs
        .iter()
        .filter(|p| new.iter().any(|n| n.name == p.name))
    {
        if let Some(why) = refusal(&p.kind, &p.section) {
            eprintln!("bpfjet trace: pid {}: {why}", std::process::id());
        }
    }
    loaded.extend(new.iter().map(|p| p.link_id));
    if object.programs.is_empty() {
        return Ok((0, false));
    }
    let opts = TracingOptions {
        control_plane: Some((name.to_string(), traced.maps.clone())),
        ..TracingOptions::default()
    };
    let mut tracing = if agent.cfg.jit {
        bpfjet_jit::load_tracing_with(
            &object,
            &opts,
            &bpfjet_jit::JitOptions::default(),
            &bpfjet_jit::TracingJit {
                inline_thread_maps: false,
                fold_rodata: agent.cfg.fold_rodata,
                ctx_constants: Default::default(),
            },
        )
        .map_err(|e| e.to_string())?
    } else {
        TracingObject::load(&object, &opts).map_err(|e| e.to_string())?
    };
    for p in &new {
        if let Some(id) = tracing.program_id(&p.name) {
            tracing.set_cookie(id, p.cookie);
            tracing.set_link(id, &p.link_record);
        }
    }
    tracing
        .watch_links(&traced.links_generation)
        .map_err(|e| format!("{}: {e}", traced.links_generation.display()))?;
    let object_ref: &'static TracingObject = Box::leak(Box::new(tracing));
    LATE_OBJECTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(object_ref);
    let semaphores: Vec<(String, u64)> = new
        .iter()
        .filter(|p| object_ref.program_id(&p.name).is_some())
        .filter_map(|p| p.semaphore.clone())
        .collect();
    // System-call tracepoints: run by the system-call hooks, installed now
    // if the process traced no system call yet.
    let syscall_programs: Vec<usize> = object_ref
        .programs()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind().syscall_tracepoint().is_some())
        .map(|(id, _)| id)
        .collect();
    let mut attached = 0;
    let mut dispatch_threads = false;
    if !syscall_programs.is_empty() {
        match attach::add_late_syscalls(object_ref, &syscall_programs) {
            Ok(installed) => {
                attached += syscall_programs.len();
                dispatch_threads = installed;
            }
            Err(e) => eprintln!(
                "bpfjet trace: pid {}: system-call tracepoints of links made after the process \
                 started: {e}",
                std::process::id()
            ),
        }
    }
    let objects = loaded_objects();
    // One site per function: its new entry and return programs.
    type Site = (bpfjet_probe::ResolvedSymbol, Vec<usize>, Vec<usize>, String);
    let mut sites: BTreeMap<u64, Site> = BTreeMap::new();
    for (id, p) in object_ref.programs().iter().enumerate() {
        let ProgKind::Probe(probe) = p.kind() else {
            continue;
        };
        let ProbeTarget::User {
            path,
            symbol,
            offset,
        } = &probe.target
        else {
            continue;
        };
        let target = UprobeTarget {
            path: path.clone(),
            symbol: symbol.clone(),
            offset: *offset,
        };
        let found = match resolve(&target, &objects) {
            Ok(r) => r,
            // A file this process does not map: nothing to patch here.
            Err(bpfjet_probe::ProbeError::NotLoaded { .. }) => continue,
            Err(e) => {
                eprintln!(
                    "bpfjet trace: pid {}: {}: {e}",
                    std::process::id(),
                    p.section()
                );
                continue;
            }
        };
        let site = sites
            .entry(found.address)
            .or_insert_with(|| (found, Vec::new(), Vec::new(), p.section().to_string()));
        if probe.flavor == ProbeFlavor::Uretprobe {
            site.2.push(id);
        } else {
            site.1.push(id);
        }
    }
    for (address, (found, entries, returns, section)) in sites {
        let existing = SITES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&address)
            .copied();
        let extra = match existing {
            Some(extra) => extra,
            None => {
                // A function not patched yet: patched now, with an empty
                // site that the programs join below.
                let extra = SiteExtra::new(address, attach::ret_at_sp(&found));
                let half = |ret: bool, any: bool| -> Option<bpfjet_probe::ProbeHandler> {
                    any.then(|| -> bpfjet_probe::ProbeHandler {
                        Box::new(move |regs: &mut PtRegs| extra.run(ret, regs))
                    })
                };
                let (on_entry, on_return) = (
                    half(false, !entries.is_empty()),
                    half(true, !returns.is_empty()),
                );
                extra.set_halves(on_entry.is_some(), on_return.is_some());
                match attach::attach_site(&found, on_entry, on_return) {
                    Ok(a) => {
                        if let Some(a) = a {
                            attach::keep_attachment(a);
                        }
                    }
                    Err(e) => {
                        eprintln!("bpfjet trace: pid {}: {section}: {e}", std::process::id());
                        SITES
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&address);
                        continue;
                    }
                }
                extra
            }
        };
        for (ret, ids) in [(false, entries), (true, returns)] {
            if ids.is_empty() {
                continue;
            }
            let programs: Vec<(&'static TracingObject, usize)> =
                ids.iter().map(|&id| (object_ref, id)).collect();
            if extra.add(ret, &programs) {
                attached += ids.len();
            } else {
                eprintln!(
                    "bpfjet trace: pid {}: {section}: the function was patched in this process \
                     without a {} handler (for earlier links); the link reaches the processes \
                     that start from now on",
                    std::process::id(),
                    if ret { "return" } else { "entry" }
                );
            }
        }
    }
    attach::raise_semaphores(&semaphores)?;
    Ok((attached, dispatch_threads))
}
