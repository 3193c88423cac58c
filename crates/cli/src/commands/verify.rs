//! `bpfjet verify OBJ [--prog NAME] [--json] [--unprivileged]`: run bpfjet's
//! verifier on the programs of an object. Exit 0 when every verified program
//! is accepted, 1 when one is rejected (the reason on stderr: instruction,
//! disassembly, source line, rule, register state).
//!
//! Needs `bpfjet-verifier` in this crate's dependencies.

use crate::commands::object_args::CoreArgs;
use anyhow::{Context, Result};
use bpfjet_verifier::{verify, ObjectProgramEnv, Policy};
use std::path::Path;
use std::process::ExitCode;

pub fn run(
    obj: &Path,
    prog: Option<&str>,
    json: bool,
    unprivileged: bool,
    core: &CoreArgs,
) -> Result<ExitCode> {
    let object = core.load(obj)?;
    let programs: Vec<&bpfjet_obj::Program> = match prog {
        Some(name) => vec![object
            .program(name)
            .with_context(|| format!("{} has no program named {name}", obj.display()))?],
        None => object
            .programs
            .iter()
            .filter(|p| p.kind.is_supported())
            .collect(),
    };
    anyhow::ensure!(!programs.is_empty(), "{} has no XDP program", obj.display());
    let policy = if unprivileged {
        Policy::Unprivileged
    } else {
        Policy::Privileged
    };
    let mut rejected = false;
    let mut reports = Vec::new();
    for p in programs {
        let insns = bpfjet_isa::decode_program(&p.insns)
            .with_context(|| format!("decoding program {}", p.name))?;
        let inputs = ObjectProgramEnv::new(&object, p);
        let env = inputs.env(&object, policy);
        let start = std::time::Instant::now();
        let result = verify(&insns, &env).map_err(|e| explain_unresolved_core(p, e));
        let elapsed = start.elapsed();
        match result {
            Ok(facts) => {
                if json {
                    reports.push(serde_json::json!({
                        "program": p.name,
                        "verdict": "accepted",
                        "insns": insns.len(),
                        "insns_processed": facts.insns_processed,
                        "states": facts.states_stored,
                        "micros": elapsed.as_micros() as u64,
                        "facts": facts,
                    }));
                } else {
                    println!(
                        "{}: accepted ({} insns, {} processed, {:.2?})",
                        p.name,
                        insns.len(),
                        facts.insns_processed,
                        elapsed
                    );
                }
            }
            Err(e) => {
                rejected = true;
                if json {
                    reports.push(serde_json::json!({
                        "program": p.name,
                        "verdict": "rejected",
                        "error": e,
                    }));
                }
                eprintln!("{}: {e}", p.name);
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(if rejected {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A rejection at an instruction poisoned by an unresolved CO-RE relocation
/// is about the relocation, not the unknown helper the poison calls.
fn explain_unresolved_core(
    prog: &bpfjet_obj::Program,
    mut e: bpfjet_verifier::VerifyError,
) -> bpfjet_verifier::VerifyError {
    if let Some(u) = e.pc.and_then(|pc| prog.unresolved_core_at(pc)) {
        e.message = u.summary();
        e.rule = "unresolved_core_relo";
    }
    e
}
