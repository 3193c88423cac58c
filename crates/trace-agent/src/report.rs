//! The report the agent leaves for `bpfjet trace`: one JSON object in the
//! file the CLI named, written when the traced process ends (or, with
//! `error`, when attaching failed before `main`).

use crate::attach::Agent;
use crate::config::Config;
use crate::events::Counts;
use serde_json::{json, Map, Value};

fn write(cfg: &Config, v: &Value) {
    let text = v.to_string();
    if let Err(e) = std::fs::write(&cfg.report, text) {
        eprintln!(
            "bpfjet trace: writing the report {}: {e}",
            cfg.report.display()
        );
    }
}

/// What a process of the tree other than the command's own image ran:
/// its own counts and trace lines (maps and buffers are shared), in a file
/// next to the report, `REPORT.<pid>.<ns>`, which `bpfjet trace` adds to
/// the report. A forked child's counts start at its fork, an executed
/// program's at its start; an image ending in `exec` writes its part then.
pub fn write_process_part(agent: &Agent) {
    let (faults, last_fault) = agent.object.faults();
    let (trace_lines, trace_loss) = agent.object.take_trace_lines();
    let part = json!({
        "pid": std::process::id(),
        "program": std::env::args().next().unwrap_or_default(),
        "missed_runs": agent.object.missed_runs(),
        "skipped_at_thread_exit": crate::alive::skipped(),
        "faults": faults,
        "last_fault": last_fault,
        "trace_lines": trace_lines,
        "trace_lines_lost": loss_json(trace_loss),
        "perf_event": crate::sampling::report(),
    });
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut path = agent.cfg.report.clone().into_os_string();
    path.push(format!(".{}.{stamp}", std::process::id()));
    if let Err(e) = std::fs::write(&path, part.to_string()) {
        eprintln!(
            "bpfjet trace: {}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

pub fn write_error(cfg: &Config, err: &str) {
    write(cfg, &json!({ "error": err }));
}

pub fn write_report(agent: &Agent, counts: &Counts) {
    // Maps kept per thread go back into their maps first, so the dump is
    // what the unfused programs would have left.
    let written_back = agent.object.write_back_thread_maps();
    let mut maps = match written_back.and_then(|()| agent.object.loaded().dump_state()) {
        Ok(state) => serde_json::to_value(&state).unwrap_or(Value::Null),
        Err(e) => json!({ "error": e.to_string() }),
    };
    // The maps of links taken after the start (the instance's: the same
    // map under one name in every object).
    let late = crate::late_links::late_objects();
    for object in &late {
        if let (Some(all), Ok(state)) = (maps.as_object_mut(), object.loaded().dump_state()) {
            if let Value::Object(more) = serde_json::to_value(&state).unwrap_or(Value::Null) {
                for (name, v) in more {
                    all.entry(name).or_insert(v);
                }
            }
        }
    }
    let (mut faults, mut last_fault) = agent.object.faults();
    let mut missed = agent.object.missed_runs();
    let (mut trace_lines, mut trace_loss) = agent.object.take_trace_lines();
    for object in &late {
        let (f, last) = object.faults();
        faults += f;
        last_fault = last_fault.or(last);
        missed += object.missed_runs();
        let (lines, loss) = object.take_trace_lines();
        trace_lines.extend(lines);
        trace_loss.add(loss);
    }
    let mut ringbufs = Map::new();
    for (name, s) in &counts.rings {
        ringbufs.insert(
            name.clone(),
            json!({
                "produced": s.produced,
                "consumed": s.consumed,
                "dropped": s.dropped,
                "discarded": s.discarded,
            }),
        );
    }
    let mut perfbufs = Map::new();
    for (name, s) in &counts.perfs {
        perfbufs.insert(
            name.clone(),
            json!({
                "produced": s.produced,
                "consumed": s.consumed,
                "dropped": s.dropped,
            }),
        );
    }
    write(
        &agent.cfg,
        &json!({
            "maps": maps,
            "ringbufs": ringbufs,
            "perfbufs": perfbufs,
            "missed_runs": missed,
            "skipped_at_thread_exit": crate::alive::skipped(),
            "faults": faults,
            "syscalls": {
                "signal": bpfjet_probe::syscalls::trapped(),
                "fast_path": bpfjet_probe::fast_syscalls::fast_calls(),
                "wrapper_copies": wrapper_copies(),
            },
            "last_fault": last_fault,
            "trace_lines": trace_lines,
            "trace_lines_lost": loss_json(trace_loss),
            "fused": crate::fused::report(agent),
            "fusion": agent.fusion,
            "fusion_refusals": agent.fusion_refusals,
            "fusion_compile_refusals": crate::fused::compile_refusals(),
            "usdt": crate::usdt::report(),
            "int3_probes": crate::attach::int3_report(agent),
            "dlopen": crate::dlopen::report(),
            "perf_event": crate::sampling::report(),
            // `bpfjet trace --pid`: the status passed to `_exit` (null
            // when bpfjet detached before the process ended).
            "exit_status": crate::late_attach::exit_status(),
        }),
    );
}

/// The fast path's wrappers that run traced calls in a copy inside the
/// allowed range, and those that do not, with the reason.
fn wrapper_copies() -> serde_json::Value {
    let (copied, not) = bpfjet_probe::fast_syscalls::copy_report();
    let not: serde_json::Map<String, serde_json::Value> = not
        .into_iter()
        .map(|(w, why)| (w.to_string(), json!(why)))
        .collect();
    json!({"copied": copied, "not_copied": not})
}

/// The report's `"trace_lines_lost"`: lines given up behind a busy ring
/// and lines pushed out by newer ones before the report read them.
fn loss_json(loss: bpfjet_runtime::tracing::TraceLoss) -> Value {
    json!({"busy": loss.busy, "pushed_out": loss.pushed_out})
}
