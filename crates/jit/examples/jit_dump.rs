//! Print the lifted IR, optimized IR or assembly of an assembler-syntax
//! program: `cargo run -p bpfjet-jit --example jit_dump -- FILE.s [lifted|ir|asm]`.

use bpfjet_jit::{DumpStage, JitOptions, JitProgram};
use bpfjet_runtime::{Helper, HelperRegistry, LoadOptions, VerifiedProof};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), stage) = (args.next(), args.next()) else {
        eprintln!("usage: jit_dump FILE.s [lifted|ir|asm]");
        std::process::exit(2);
    };
    let stage = match stage.as_deref() {
        Some("lifted") => DumpStage::LiftedIr,
        Some("asm") => DumpStage::Assembly,
        _ => DumpStage::OptimizedIr,
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    let insns = bpfjet_isa::assemble(&text).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    // Helpers 0..256 exist (as identities) so that any helper call lifts.
    let mut helpers = HelperRegistry::new();
    for id in 0..256 {
        helpers.register(Helper::new(id, "any", |_, a| Ok(a[0])));
    }
    // SAFETY: the program is only lifted and printed, never run.
    let opts =
        LoadOptions::verified(unsafe { VerifiedProof::assume_verified() }).with_helpers(helpers);
    match JitProgram::dump(&insns, &opts, &JitOptions::uncached(), stage) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
