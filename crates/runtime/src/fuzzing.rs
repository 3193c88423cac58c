//! The property shared by the `decode_interp` fuzz target and its proptest
//! twin: any byte string that decodes must load or be refused, and a loaded
//! program must run to an exit or a fault in bounds-checked mode, never crash.

use crate::{errno, Helper, HelperRegistry, LoadOptions, Program, RunState};

/// Instruction budget per fuzz run: enough for real work, small enough that
/// infinite loops end quickly.
pub const FUZZ_INSN_BUDGET: u64 = 10_000;

/// Helpers a fuzzed program may call: the conformance identity helper, a
/// callback helper (re-entry) and a tail-call helper.
pub fn fuzz_helpers() -> HelperRegistry {
    HelperRegistry::new()
        .with(Helper::new(5, "identity", |_, args| Ok(args[0])))
        .with(Helper::new(12, "tail_call", |ctx, args| {
            Ok(match ctx.tail_call_index(args[2] as u32) {
                Ok(()) => 0,
                Err(e) => errno::neg(e.errno()),
            })
        }))
        .with(Helper::new(181, "loop", |ctx, args| {
            let iterations = args[0].min(8);
            for i in 0..iterations {
                if ctx.call_subprog(args[1], &[i, args[2]])? != 0 {
                    return Ok(i + 1);
                }
            }
            Ok(iterations)
        }))
}

/// Decode `bytes`; if they form a valid program, load and run it bounds-checked
/// on a 64-byte scratch memory. Returns the run's outcome for inspection.
pub fn decode_and_run(bytes: &[u8]) -> Option<Result<u64, crate::Fault>> {
    let insns = bpfjet_isa::decode::decode_bytes(bytes).ok()?;
    let program = Program::new(
        insns,
        LoadOptions::bounds_checked().with_helpers(fuzz_helpers()),
    )
    .ok()?;
    let mut state = RunState::new();
    state.set_insn_budget(Some(FUZZ_INSN_BUDGET));
    state.set_program_table(vec![Some(program.clone())]);
    let mut mem = [0u8; 64];
    Some(program.run_on_memory(&mut state, &mut mem))
}
