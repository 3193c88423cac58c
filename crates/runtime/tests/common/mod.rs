//! Shared test scaffolding: a small program builder over typed instructions
//! (independent of the assembler) and runners for both memory modes.
#![allow(dead_code)]

use bpfjet_isa::*;
use bpfjet_runtime::*;

// The typed instruction builder lives in bpfjet-testsupport (shared with
// the JIT's tests).
#[allow(unused_imports)] // each test binary uses its own part
pub use bpfjet_testsupport::insn::{k, r, P};

/// The conformance suite's helper: id 5 returns its first argument.
pub fn conformance_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(5, "identity", |_, a| Ok(a[0])))
}

pub fn verified() -> LoadOptions {
    // SAFETY: test programs are written to stay in bounds; the ones that do
    // not are only ever run bounds-checked.
    LoadOptions::verified(unsafe { VerifiedProof::assume_verified() })
}

pub fn load(insns: Vec<Insn>, options: LoadOptions) -> Program {
    Program::new(insns, options).expect("program loads")
}

/// Run bounds-checked on `mem` (conformance convention).
pub fn run_checked(insns: Vec<Insn>, mem: &mut [u8]) -> Result<u64, Fault> {
    let program = load(
        insns,
        LoadOptions::bounds_checked().with_helpers(conformance_helpers()),
    );
    program.run_on_memory(&mut RunState::new(), mem)
}

/// Run in both memory modes on copies of `mem`; both must agree (result and
/// final memory). Returns the result and the final memory.
pub fn run_both_mem(insns: Vec<Insn>, mem: &[u8]) -> (u64, Vec<u8>) {
    let mut checked_mem = mem.to_vec();
    let checked =
        run_checked(insns.clone(), &mut checked_mem).expect("bounds-checked run succeeds");
    let program = load(insns, verified().with_helpers(conformance_helpers()));
    let mut verified_mem = mem.to_vec();
    let fast = program
        .run_on_memory(&mut RunState::new(), &mut verified_mem)
        .expect("verified run succeeds");
    assert_eq!(checked, fast, "modes disagree on r0");
    assert_eq!(checked_mem, verified_mem, "modes disagree on memory");
    (checked, checked_mem)
}

pub fn run_both(insns: Vec<Insn>) -> u64 {
    run_both_mem(insns, &[]).0
}
