//! Every bpf_conformance vector through this interpreter, in both memory
//! modes. This is the interpreter's own regression check; the user-facing
//! runner is `bpfjet conformance`. The vectors live outside the repository
//! (`CONFORMANCE` as in the Makefile, default ../shared/conformance/tests);
//! without them the test fails.

mod common;

use bpfjet_runtime::*;
use common::*;

#[test]
fn conformance_vectors_pass_in_both_modes() {
    // Missing vectors fail the test: a conformance run must not pass empty.
    let vectors = bpfjet_isa::conformance::load_default();
    let mut failures = Vec::new();
    for v in &vectors {
        let name = &v.name;
        let insns = match bpfjet_isa::assemble(&v.asm) {
            Ok(insns) => insns,
            Err(e) => {
                if v.error.is_none() {
                    failures.push(format!("{name}: assembler: {e}"));
                }
                continue;
            }
        };
        for (mode, options) in [
            ("checked", LoadOptions::bounds_checked()),
            ("verified", verified()),
        ] {
            let outcome = Program::new(insns.clone(), options.with_helpers(conformance_helpers()))
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    let mut mem = v.mem.clone();
                    p.run_on_memory(&mut RunState::new(), &mut mem)
                        .map_err(|f| f.to_string())
                });
            match (outcome, v.result) {
                (Ok(r0), Some(want)) if r0 == want => {}
                (Err(_), None) if v.error.is_some() => {}
                (got, want) => {
                    failures.push(format!("{name} ({mode}): got {got:x?}, want {want:x?}"))
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
    eprintln!("{} conformance vectors passed in both modes", vectors.len());
}
