//! What pairwise fusion did, pair by pair, for the report's `"fused"`:
//! the steps decided when the object was loaded (folding, internalising,
//! `crate::attach`) plus the call-through stubs the system-call fast path
//! actually attached (`--fuse inline` and above), and the pairs compiled
//! into one native function (`--fuse compile`, `bpfjet_jit::FusedPair`)
//! with their pair hooks (`bpfjet_probe::set_pair_hooks`).

use crate::alive;
use crate::attach::Agent;
use bpfjet_obj::{ProgKind, SyscallTracepoint};
use bpfjet_probe::{syscall_table, PairCall, PairHook, PtRegs};
use bpfjet_runtime::tracing::{ProbeSite, SysEnterCtx, TracingObject};
use serde_json::Value;
use std::sync::{Mutex, OnceLock};

/// (system call, libc wrapper) attached with a call-through stub.
static CALL_THROUGH: Mutex<Vec<(&'static str, &'static str)>> = Mutex::new(Vec::new());

pub(crate) fn record_call_through(syscall: &'static str, wrapper: &'static str) {
    CALL_THROUGH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((syscall, wrapper));
}

/// Every (entry, exit) pair of `obj` with, for `sys_enter_X`/`sys_exit_X`
/// pairs, the system call X.
pub(crate) fn pairs(obj: &bpfjet_obj::Object) -> Vec<(String, String, Option<String>)> {
    bpfjet_fusion::pairs(obj)
        .into_iter()
        .map(|(entry, exit)| {
            let call = obj
                .programs
                .iter()
                .find(|p| p.name == entry)
                .and_then(|p| match &p.kind {
                    ProgKind::Tracepoint { category, name } if category == "syscalls" => {
                        name.strip_prefix("sys_enter_").map(str::to_string)
                    }
                    // A kernel probe on the call's entry point.
                    ProgKind::Probe(probe) => {
                        probe.syscall_entry().ok().map(|e| e.syscall.to_string())
                    }
                    _ => None,
                });
            (entry, exit, call)
        })
        .collect()
}

/// The report's `"fused"`: each pair to which a step applied, with its
/// steps in ladder order (`inline-call-through` first, naming the wrappers
/// in `"call_through"`).
pub(crate) fn report(agent: &Agent) -> Vec<Value> {
    let through = CALL_THROUGH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut out = Vec::new();
    for (entry, exit, call) in &agent.pairs {
        let wrappers: Vec<&str> = call
            .as_deref()
            .map(|c| {
                through
                    .iter()
                    .filter(|(s, _)| *s == c)
                    .map(|(_, w)| *w)
                    .collect()
            })
            .unwrap_or_default();
        let found = agent
            .fused
            .iter()
            .find(|f| f["entry"] == entry.as_str() && f["exit"] == exit.as_str());
        let mut v = match found {
            Some(f) => f.clone(),
            None if !wrappers.is_empty() => serde_json::json!({
                "entry": entry, "exit": exit, "internalised": [], "steps": [],
            }),
            None => continue,
        };
        if !wrappers.is_empty() {
            if let Some(steps) = v["steps"].as_array_mut() {
                steps.insert(0, Value::from("inline-call-through"));
                let nr = call.as_deref().and_then(syscall_table::tracepoint_number);
                if nr.is_some_and(compiled_call) {
                    steps.push(Value::from("compile-pair"));
                }
            }
            v["call_through"] = Value::from(wrappers);
        }
        out.push(v);
    }
    out
}

/// Pairs compiled into one native function (`--fuse compile`), by system
/// call number, and why the other pairs were not.
struct Compiled {
    pairs: Vec<(u32, &'static bpfjet_jit::FusedPair)>,
    refusals: Vec<String>,
}

static COMPILED: OnceLock<Compiled> = OnceLock::new();

/// The `sys_enter_X`/`sys_exit_X` pairs of `obj` that can run as one
/// function around the wrapper's call (X's only enter and exit programs,
/// no programs of every system call's entry or return), and
/// why the others cannot.
pub(crate) fn compile_candidates(
    obj: &bpfjet_obj::Object,
) -> (Vec<(String, String, u32)>, Vec<String>) {
    let tracepoints = |prefix: &str, call: &str| {
        obj.programs
            .iter()
            .filter(|p| {
                matches!(&p.kind, ProgKind::Tracepoint { category, name }
                    if category == "syscalls" && name.strip_prefix(prefix) == Some(call))
            })
            .count()
    };
    let raw = obj
        .programs
        .iter()
        .filter(|p| {
            matches!(
                p.kind.syscall_tracepoint(),
                Some(SyscallTracepoint::EveryEnter { .. } | SyscallTracepoint::EveryExit { .. })
            )
        })
        .count();
    // Kernel probes on a call's entry point run at its hooks too.
    let kernel_probed = |call: &str| {
        obj.programs.iter().any(|p| {
            matches!(&p.kind, ProgKind::Probe(probe)
                if probe.syscall_entry().is_ok_and(|e| e.syscall == call))
        })
    };
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    let is_tracepoint = |prog: &str| {
        obj.programs
            .iter()
            .any(|p| p.name == prog && matches!(p.kind, ProgKind::Tracepoint { .. }))
    };
    for (entry, exit, call) in pairs(obj) {
        let why = match &call {
            Some(_) if !is_tracepoint(&entry) || !is_tracepoint(&exit) => Some(
                "a kernel probe (ksyscall/kprobe) is one of the pair: only sys_enter_X/sys_exit_X \
                 tracepoint pairs are compiled into one function"
                    .to_string(),
            ),
            None => Some("not a sys_enter_X/sys_exit_X pair (uprobe/uretprobe and kernel-probe pairs are not compiled into one function yet)".to_string()),
            Some(c) if syscall_table::tracepoint_number(c).is_none() => {
                Some(format!("no system call named {c:?}"))
            }
            Some(c) if tracepoints("sys_enter_", c) != 1 || tracepoints("sys_exit_", c) != 1 => {
                Some(format!("{c} has more than one enter or exit program"))
            }
            Some(c) if kernel_probed(c) => Some(format!(
                "kernel probes on {}{c} (ksyscall/kprobe) run at this call too",
                bpfjet_probe::ksyscall::ENTRY_PREFIX
            )),
            Some(_) if raw > 0 => Some(
                "programs on every system call's entry or return (raw_tracepoint/sys_*, \
                 tracepoint/raw_syscalls/sys_*) run at this call too"
                    .to_string(),
            ),
            Some(_) => None,
        };
        match (
            why,
            call.as_deref().and_then(syscall_table::tracepoint_number),
        ) {
            (None, Some(nr)) => ok.push((entry, exit, nr)),
            (why, _) => refused.push(format!("{entry} + {exit}: {}", why.unwrap_or_default())),
        }
    }
    (ok, refused)
}

/// Keep what compiling the candidates gave (in their order).
pub(crate) fn keep_compiled(
    candidates: &[(String, String, u32)],
    outcomes: Vec<bpfjet_jit::FusedOutcome>,
    mut refusals: Vec<String>,
) {
    let mut pairs = Vec::new();
    for ((entry, exit, nr), outcome) in candidates.iter().zip(outcomes) {
        match outcome {
            Ok(pair) => pairs.push((*nr, &*Box::leak(Box::new(pair)))),
            Err(why) => refusals.push(format!("{entry} + {exit}: {why}")),
        }
    }
    let _ = COMPILED.set(Compiled { pairs, refusals });
}

/// Why pairs were not compiled into one function (`--fuse compile`).
pub(crate) fn compile_refusals() -> Vec<String> {
    COMPILED
        .get()
        .map(|c| c.refusals.clone())
        .unwrap_or_default()
}

fn compiled_call(nr: u32) -> bool {
    COMPILED
        .get()
        .is_some_and(|c| c.pairs.iter().any(|(n, _)| *n == nr))
}

/// The call-through stubs of the compiled pairs' wrappers run them through
/// one function: before the fast path is installed.
pub(crate) fn install_pair_hooks(object: &'static TracingObject) {
    let Some(compiled) = COMPILED.get() else {
        return;
    };
    if compiled.pairs.is_empty() {
        return;
    }
    let mut hooks: Vec<Option<PairHook>> = (0..syscall_table::count()).map(|_| None).collect();
    for &(nr, pair) in &compiled.pairs {
        if let Some(h) = hooks.get_mut(nr as usize) {
            *h = Some(pair_hook(object, pair));
        }
    }
    bpfjet_probe::set_pair_hooks(hooks);
}

fn pair_hook(object: &'static TracingObject, pair: &'static bpfjet_jit::FusedPair) -> PairHook {
    Box::new(move |regs: &mut PtRegs, call: &mut PairCall| {
        let nr = regs.orig_rax as i64;
        let regs_at = regs as *mut PtRegs;
        let site = ProbeSite {
            func_ip: 0,
            cookie: 0,
            regs: regs_at as u64,
            ret_at_sp: false,
        };
        let mut enter = SysEnterCtx::new(
            nr,
            [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9],
        );
        let entry_armed = alive::can_run();
        let mut exit_armed = None;
        let through = || {
            if let Some(a) = entry_armed {
                alive::ran(a);
            }
            // SAFETY: the stub's record, live for the whole hook; nothing
            // else refers to it during the call.
            let regs = unsafe { &mut *regs_at };
            if !call.call(regs) {
                return None;
            }
            exit_armed = Some(alive::can_run()?);
            Some(regs.rax as i64)
        };
        pair.run(
            object,
            nr,
            &mut enter,
            &site,
            entry_armed.is_some(),
            through,
        );
        if let Some(a) = exit_armed {
            alive::ran(a);
        }
    })
}
