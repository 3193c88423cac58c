//! `bpfjet verify OBJ [--prog NAME] [--json] [--unprivileged]`: run bpfjet's
//! verifier on the programs of an object. Exit 0 when every verified program
//! is accepted, 1 when one is rejected (the reason on stderr: instruction,
//! disassembly, source line, rule, register state) — also for a malformed
//! encoding the kernel refuses at load; 2 for a file that cannot be read as
//! a BPF object.
//!
//! Needs `bpfjet-verifier` in this crate's dependencies.

use anyhow::{Context, Result};
use bpfjet_verifier::{decode_rejection, verify_decoded, ObjectProgramEnv, Policy};
use std::path::Path;
use std::process::ExitCode;

pub fn run(
    obj: &Path,
    prog: Option<&str>,
    json: bool,
    unprivileged: bool,
    object_args: &super::object_args::ObjectArgs,
) -> Result<ExitCode> {
    let object = object_args
        .load(obj)
        .with_context(|| format!("loading {}", obj.display()))?;
    let programs: Vec<&bpfjet_obj::Program> = match prog {
        Some(name) => vec![object
            .program(name)
            .with_context(|| format!("{} has no program named {name}", obj.display()))?],
        // As `bpftool prog loadall`: a `SEC("?...")` program (autoload
        // off) only when named.
        None => object
            .programs
            .iter()
            .filter(|p| p.kind.is_supported() && p.autoload())
            .collect(),
    };
    if programs.is_empty() {
        let hint = object
            .programs
            .iter()
            .find(|p| p.kind == bpfjet_obj::ProgKind::Unsupported("unknown".into()))
            .map(|p| {
                format!(
                    " (program {} in section {} is of type unknown; {})",
                    p.name,
                    p.section,
                    bpfjet_obj::force_type_hint(&p.section)
                )
            })
            .unwrap_or_default();
        anyhow::bail!("{} has no XDP program{hint}", obj.display());
    }
    // The kernel creates the maps before it verifies: a map it would
    // refuse fails the load whatever the programs are.
    let ncpus = bpfjet_kernel::possible_cpus() as u32;
    for spec in &object.maps {
        let spec = match spec.map_type {
            // libbpf sizes it to the CPUs when the object leaves it at 0.
            bpfjet_maps::MapType::PerfEventArray if spec.max_entries == 0 => {
                let mut sized = spec.clone();
                sized.max_entries = ncpus;
                sized
            }
            _ => spec.clone(),
        };
        bpfjet_maps::check_creatable(&spec, ncpus)
            .map_err(|e| anyhow::anyhow!("{}: map {:?}: {e}", obj.display(), spec.name))?;
    }
    let policy = if unprivileged {
        Policy::Unprivileged
    } else {
        Policy::Privileged
    };
    let mut rejected = false;
    let mut reports = Vec::new();
    for p in programs {
        let inputs = ObjectProgramEnv::new(&object, p);
        let mut env = inputs.env(&object, policy);
        env.extra_kfuncs = bpfjet_runtime::kfuncs::verifier_protos();
        env.module_types = bpfjet_runtime::kfuncs::MODULE_TYPES;
        let start = std::time::Instant::now();
        // A malformed encoding (register above r10, a jump out of the
        // program or into an lddw, a write to r10) is a verdict like any
        // other: the kernel refuses such a program at load, or when its
        // walk reaches the slot (the malformed slots of dead code it
        // accepts and removes).
        // Kfunc addresses (`bpf_ksym_exists`) resolved as the loader
        // resolves them; a missing kfunc not declared weak is a verdict.
        let (insns, result) = match bpfjet_runtime::kfuncs::resolve_ksym_addresses(p, &object) {
            Err(e) => (
                Vec::new(),
                Err(bpfjet_verifier::VerifyError::new(
                    "unsupported_kfunc",
                    e.to_string(),
                )),
            ),
            Ok(slots) => match bpfjet_isa::decode_for_load(&slots) {
                Ok(decoded) => {
                    let result = match kfunc_not_for_type(p, &object, &decoded.insns) {
                        Some(e) => Err(e),
                        None => verify_decoded(&decoded, &slots, &env)
                            .map_err(|e| explain_unresolved_core(p, e)),
                    };
                    (decoded.insns, result)
                }
                Err(e) => (Vec::new(), Err(decode_rejection(&e, &slots))),
            },
        };
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

/// A call to a library kfunc the program's type may not call (node memory
/// from a kprobe), refused as the loader refuses it, naming the kfunc.
fn kfunc_not_for_type(
    p: &bpfjet_obj::Program,
    object: &bpfjet_obj::Object,
    insns: &[bpfjet_isa::Insn],
) -> Option<bpfjet_verifier::VerifyError> {
    let prog_type = p.kind.prog_type()?;
    insns.iter().enumerate().find_map(|(pc, insn)| {
        let bpfjet_isa::Insn::Call(bpfjet_isa::CallTarget::Kfunc(idx)) = *insn else {
            return None;
        };
        let name = usize::try_from(idx)
            .ok()
            .and_then(|i| object.kfuncs.get(i))?;
        let k = bpfjet_kfuncs::by_name(name)?;
        if k.callable_from(prog_type) {
            return None;
        }
        let mut e = bpfjet_verifier::VerifyError::new(
            "kfunc_prog_type",
            format!("kfunc {name} may not be called from {prog_type} programs"),
        );
        e.pc = Some(pc);
        e.insn_text = format!("call kfunc {idx}");
        Some(e)
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
