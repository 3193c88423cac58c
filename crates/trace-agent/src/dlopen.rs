//! Probes on libraries the traced program loads later with `dlopen`.
//!
//! A `uprobe`, `uretprobe`, `uprobe.multi` or `usdt` program whose PATH
//! names a file that is not loaded when the agent starts is kept pending
//! (the CLI already checked the file and its symbol). The agent interposes
//! `dlopen` (it is preloaded, so the program's and its libraries' calls
//! through the PLT reach it first): after the real `dlopen` returns, every
//! pending program whose file is now loaded is resolved against the new
//! object's load bias and patched — constructors of the library have
//! already run, so their calls are not seen. `dlclose` is interposed the
//! same way: after the real `dlclose`, an object that is no longer loaded
//! had its code unmapped, so its probes are forgotten (nothing is written:
//! there is nothing left to restore; trampolines stay mapped), and the
//! programs become pending again for the next `dlopen` of the file.
//! Errors (a function that cannot be patched while threads run) do not end
//! the process: they are listed in the report's `"dlopen"` entries.
//!
//! Not seen: `dlmopen`, and glibc's internal loads (NSS modules, iconv
//! modules: `__libc_dlopen_mode`), which do not go through `dlopen`.

use crate::attach::regs_view;
use crate::{alive, usdt};
use bpfjet_probe::symbols::{loaded_objects, resolve, LoadedObject, UprobeTarget};
use bpfjet_probe::{Attachment, PtRegs, ResolvedSymbol};
use bpfjet_runtime::tracing::{ProbeSite, ProgId, TracingObject};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// What a pending program attaches to in its file.
#[derive(Clone, Debug)]
pub enum PendingTarget {
    Probe {
        ret: bool,
        multi: bool,
        symbol: String,
        offset: u64,
    },
    Usdt {
        provider: String,
        name: String,
    },
}

#[derive(Clone, Debug)]
pub struct Pending {
    pub program: ProgId,
    pub section: String,
    /// The file, canonical (as `dl_iterate_phdr` names it).
    pub file: PathBuf,
    pub target: PendingTarget,
}

struct Loaded {
    file: PathBuf,
    bias: u64,
    probes: Vec<Attachment>,
}

struct State {
    object: &'static TracingObject,
    pending: Vec<Pending>,
    loaded: Vec<Loaded>,
    /// Report entries: one per load and unload of a pending file.
    events: Vec<serde_json::Value>,
}

static STATE: OnceLock<Mutex<State>> = OnceLock::new();

/// Keeps `pending` for later loads (once, at start).
pub fn set_pending(object: &'static TracingObject, pending: Vec<Pending>) {
    if pending.is_empty() {
        return;
    }
    let _ = STATE.set(Mutex::new(State {
        object,
        pending,
        loaded: Vec::new(),
        events: Vec::new(),
    }));
}

/// The report's `"dlopen"` entries.
pub fn report() -> serde_json::Value {
    STATE
        .get()
        .map(|s| serde_json::Value::Array(s.lock().unwrap().events.clone()))
        .unwrap_or_else(|| serde_json::Value::Array(Vec::new()))
}

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

fn real<F: Copy>(name: &'static [u8], slot: &'static OnceLock<usize>) -> Option<F> {
    let addr = *slot.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize }
    });
    // SAFETY: F is the function-pointer type of the symbol looked up.
    (addr != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&addr) })
}

/// The interposed `dlopen`: the real one, then attach what was pending.
///
/// # Safety
/// As `dlopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    static REAL: OnceLock<usize> = OnceLock::new();
    let Some(real_dlopen) = real::<DlopenFn>(b"dlopen\0", &REAL) else {
        return std::ptr::null_mut();
    };
    let handle = real_dlopen(file, flags);
    if !handle.is_null() && STATE.get().is_some() {
        // The agent's own system calls (reading ELF files, mprotect) are
        // not the program's.
        bpfjet_probe::syscalls::allowed(|| alive::agent_work(on_loaded));
    }
    handle
}

/// The interposed `dlclose`: the real one, then forget the probes of
/// objects that are gone.
///
/// # Safety
/// As `dlclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    static REAL: OnceLock<usize> = OnceLock::new();
    let Some(real_dlclose) = real::<DlcloseFn>(b"dlclose\0", &REAL) else {
        return -1;
    };
    let r = real_dlclose(handle);
    if r == 0 && STATE.get().is_some() {
        bpfjet_probe::syscalls::allowed(|| alive::agent_work(on_closed));
    }
    r
}

fn on_loaded() {
    let Some(state) = STATE.get() else { return };
    let mut state = state.lock().unwrap();
    let objects = loaded_objects();
    let fresh: Vec<LoadedObject> = objects
        .iter()
        .filter(|o| {
            state.pending.iter().any(|p| p.file == o.path)
                && !state
                    .loaded
                    .iter()
                    .any(|l| l.file == o.path && l.bias == o.bias)
        })
        .cloned()
        .collect();
    for o in fresh {
        let (probes, usdt_count, errors) = attach_file(&state, &o, &objects);
        state.events.push(serde_json::json!({
            "loaded": o.path.display().to_string(),
            "attached": probes.len() + usdt_count,
            "errors": errors,
        }));
        state.loaded.push(Loaded {
            file: o.path.clone(),
            bias: o.bias,
            probes,
        });
    }
}

fn on_closed() {
    let Some(state) = STATE.get() else { return };
    let mut state = state.lock().unwrap();
    let objects = loaded_objects();
    let (gone, kept): (Vec<Loaded>, Vec<Loaded>) = std::mem::take(&mut state.loaded)
        .into_iter()
        .partition(|l| !objects.iter().any(|o| o.path == l.file && o.bias == l.bias));
    state.loaded = kept;
    for l in gone {
        let n = l.probes.len() + usdt::forget_file(&l.file);
        for a in l.probes {
            a.forget_unmapped();
        }
        state.events.push(serde_json::json!({
            "unloaded": l.file.display().to_string(),
            "forgotten": n,
        }));
    }
}

/// The programs to run at one address of a newly loaded file.
#[derive(Default)]
struct Site {
    target: Option<ResolvedSymbol>,
    entries: Vec<ProgId>,
    returns: Vec<ProgId>,
}

/// Resolves and patches every pending program of `o`'s file.
fn attach_file(
    state: &State,
    o: &LoadedObject,
    objects: &[LoadedObject],
) -> (Vec<Attachment>, usize, Vec<String>) {
    let object = state.object;
    let mut errors = Vec::new();
    let mut sites: BTreeMap<u64, Site> = BTreeMap::new();
    let mut usdt_probes = BTreeMap::new();
    for p in state.pending.iter().filter(|p| p.file == o.path) {
        let file = p.file.display().to_string();
        match &p.target {
            PendingTarget::Probe {
                ret,
                multi,
                symbol,
                offset,
            } => {
                let found = if *multi {
                    bpfjet_probe::multi::resolve_pattern_in(&o.path, o.bias, symbol)
                } else {
                    let t = UprobeTarget {
                        path: file.clone(),
                        symbol: symbol.clone(),
                        offset: *offset,
                    };
                    resolve(&t, objects).map(|r| vec![r])
                };
                match found {
                    Ok(targets) => {
                        for r in targets {
                            let site = sites.entry(r.address).or_default();
                            site.target.get_or_insert(r);
                            if *ret {
                                site.returns.push(p.program);
                            } else {
                                site.entries.push(p.program);
                            }
                        }
                    }
                    Err(e) => errors.push(format!("program section {:?}: {e}", p.section)),
                }
            }
            PendingTarget::Usdt { provider, name } => {
                match bpfjet_probe::usdt::resolve_in(&o.path, o.bias, provider, name) {
                    Ok(found) => usdt::add_sites(&mut usdt_probes, found, p.program),
                    Err(e) => errors.push(format!("program section {:?}: {e}", p.section)),
                }
            }
        }
    }
    let mut attached = Vec::new();
    for (address, site) in sites {
        let Some(target) = site.target else { continue };
        let entries = site.entries;
        let returns = site.returns;
        let at_entry = crate::attach::ret_at_sp(&target);
        let on_entry: Option<bpfjet_probe::ProbeHandler> = (!entries.is_empty()).then(|| {
            Box::new(move |regs: &mut PtRegs| run(object, &entries, address, at_entry, regs))
                as bpfjet_probe::ProbeHandler
        });
        let on_return: Option<bpfjet_probe::ProbeHandler> = (!returns.is_empty()).then(|| {
            Box::new(move |regs: &mut PtRegs| run(object, &returns, address, false, regs))
                as bpfjet_probe::ProbeHandler
        });
        match crate::attach::attach_site(&target, on_entry, on_return) {
            Ok(Some(a)) => attached.push(a),
            Ok(None) => {}
            Err(e) => errors.push(format!("{}:{}: {e}", target.path.display(), target.symbol)),
        }
    }
    let n_usdt = usdt_probes.len();
    let usdt_attached = match usdt::attach(object, usdt_probes) {
        Ok(n) => n,
        Err(e) => {
            errors.push(e);
            0
        }
    };
    debug_assert!(usdt_attached <= n_usdt);
    (attached, usdt_attached, errors)
}

fn run(
    object: &TracingObject,
    programs: &[ProgId],
    address: u64,
    ret_at_sp: bool,
    regs: &mut PtRegs,
) {
    let site = ProbeSite {
        func_ip: address,
        cookie: 0,
        regs: 0,
        ret_at_sp,
    };
    if let Some(armed) = alive::can_run() {
        for &id in programs {
            object.run_regs(id, regs_view(regs), &site);
        }
        alive::ran(armed);
    }
}
