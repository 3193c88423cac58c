//! What pairwise fusion did, pair by pair, for the report's `"fused"`:
//! the steps decided when the object was loaded (folding, internalising,
//! `crate::attach`) plus the call-through stubs the system-call fast path
//! actually attached (`--fuse inline` and above).

use crate::attach::Agent;
use bpfjet_obj::ProgKind;
use serde_json::Value;
use std::sync::Mutex;

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
            }
            v["call_through"] = Value::from(wrappers);
        }
        out.push(v);
    }
    out
}
