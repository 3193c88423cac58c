//! Shared test scaffolding: a small typed-program builder and runners for
//! the interpreter and the JIT.
#![allow(dead_code)]

use bpfjet_isa::*;
use bpfjet_jit::{JitOptions, JitProgram};
use bpfjet_runtime::*;

// The typed instruction builder lives in bpfjet-testsupport (shared with
// the runtime's tests); `jmp64` is the 64-bit jump.
#[allow(unused_imports)] // each test binary uses its own part
pub use bpfjet_testsupport::insn::{k, r, P};

/// The conformance suite's helper: id 5 returns its first argument.
pub fn conformance_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(5, "identity", |_, a| Ok(a[0])))
}

pub fn verified() -> LoadOptions {
    // SAFETY: test programs are written (or generated) to stay in bounds.
    LoadOptions::verified(unsafe { VerifiedProof::assume_verified() })
}

pub fn jit(insns: &[Insn], options: &LoadOptions) -> JitProgram {
    match JitProgram::compile(insns, options, &JitOptions::uncached()) {
        Ok(p) => p,
        Err(e) => panic!("JIT compile failed: {e}"),
    }
}

pub fn interp(insns: &[Insn], options: LoadOptions) -> Program {
    Program::new(insns.to_vec(), options).expect("program loads")
}
