//! Interpreter throughput on a simple counting loop, in both memory modes.
//! Reported as instructions per second: each iteration executes 5 instructions
//! (add, store to stack, load from stack, add, conditional jump).

use bpfjet_isa::asm::assemble;
use bpfjet_runtime::{LoadOptions, Program, RunState, VerifiedProof};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const ITERATIONS: u64 = 100_000;

fn loop_program() -> Vec<bpfjet_isa::Insn> {
    assemble(&format!(
        "mov %r0, 0\n\
         mov %r1, 0\n\
         loop:\n\
         add %r0, %r1\n\
         stxdw [%r10-8], %r0\n\
         ldxdw %r0, [%r10-8]\n\
         add %r1, 1\n\
         jlt %r1, {ITERATIONS}, loop\n\
         exit\n"
    ))
    .expect("benchmark program assembles")
}

fn bench(c: &mut Criterion) {
    let insns = loop_program();
    let executed = 2 + ITERATIONS * 5 + 1;
    let mut group = c.benchmark_group("interp_loop");
    group.throughput(Throughput::Elements(executed));
    let checked = Program::new(insns.clone(), LoadOptions::bounds_checked()).unwrap();
    // SAFETY: the loop touches only its own stack slot [r10-8].
    let proof = unsafe { VerifiedProof::assume_verified() };
    let fast = Program::new(insns, LoadOptions::verified(proof)).unwrap();
    for (name, prog) in [("bounds_checked", &checked), ("verified", &fast)] {
        group.bench_function(name, |b| {
            let mut state = RunState::new();
            b.iter(|| prog.run_on_memory(&mut state, &mut []).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
