//! Every bpf_conformance vector through the JIT, compared with the expected
//! result and with the interpreter. The vectors live outside the repository
//! (`CONFORMANCE`, default ../shared/conformance/tests); without them the
//! test fails.

mod common;

use bpfjet_runtime::*;
use common::*;

#[test]
fn conformance_vectors_pass_on_the_jit_and_match_the_interpreter() {
    // Missing vectors fail the test: a conformance run must not pass empty.
    let vectors = bpfjet_isa::conformance::load_default();
    let mut failures = Vec::new();
    let mut passed = 0;
    let mut compile_ms = Vec::new();
    for v in &vectors {
        let name = &v.name;
        let insns = match bpfjet_isa::assemble(&v.asm) {
            Ok(insns) => insns,
            Err(e) => {
                if v.error.is_some() {
                    passed += 1;
                } else {
                    failures.push(format!("{name}: assembler: {e}"));
                }
                continue;
            }
        };
        let options = verified().with_helpers(conformance_helpers());
        let jit_outcome =
            bpfjet_jit::JitProgram::compile(&insns, &options, &bpfjet_jit::JitOptions::uncached())
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    compile_ms.push(p.compile_stats().total_ms);
                    let mut mem = v.mem.clone();
                    p.run_on_memory(&mut mem).map_err(|f| f.to_string())
                });
        let interp_outcome = Program::new(insns.clone(), options)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                let mut mem = v.mem.clone();
                p.run_on_memory(&mut RunState::new(), &mut mem)
                    .map_err(|f| f.to_string())
            });
        let ok = match (&jit_outcome, v.result) {
            (Ok(r0), Some(want)) => *r0 == want,
            (Err(_), None) => v.error.is_some(),
            _ => false,
        };
        let agree = match (&jit_outcome, &interp_outcome) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if ok && agree {
            passed += 1;
        } else {
            failures.push(format!(
                "{name}: jit {jit_outcome:x?}, interpreter {interp_outcome:x?}, want {:x?}",
                v.result
            ));
        }
    }
    compile_ms.sort_by(f64::total_cmp);
    if let (Some(max), false) = (compile_ms.last(), compile_ms.is_empty()) {
        eprintln!(
            "compile ms: median {:.2}, max {:.2}",
            compile_ms[compile_ms.len() / 2],
            max
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
    eprintln!(
        "{passed} of {} conformance vectors passed on the JIT",
        vectors.len()
    );
}
