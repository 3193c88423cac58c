//! JIT compile time at the default (highest) optimization level with the
//! cache off: the katran corpus object (build/examples, `make -C examples`)
//! and tests/progs/big_parser.c, a ~2000-instruction parser compiled with
//! clang-19 here. Loading and verification are setup, outside the timing;
//! what is measured is `JitObject::new`: lifting, LLVM's pipeline, code
//! generation and loading the native code.

use bpfjet_jit::{JitObject, JitOptions};
use bpfjet_runtime::{LoadedObject, ObjectOptions};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn katran() -> PathBuf {
    let path = manifest().join("../../build/examples/xdp/katran_lb.o");
    assert!(
        path.exists(),
        "{} is missing; run `make -C examples`",
        path.display()
    );
    path
}

fn big_parser() -> PathBuf {
    fixtures::test_prog("big_parser")
}

fn bench(c: &mut Criterion) {
    let jit = JitOptions::uncached();
    let mut group = c.benchmark_group("jit_compile");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (name, path, prog) in [
        ("katran_lb", katran(), "katran_lb"),
        ("big_parser_2k", big_parser(), "big_parser"),
    ] {
        let obj = bpfjet_obj::load_file(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let load = || {
            LoadedObject::load(&obj, &ObjectOptions::default())
                .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()))
        };
        // Compile once outside the timing to fail loudly on errors (a
        // failed compile would otherwise be timed as a fast one).
        let first = JitObject::new(load(), &jit);
        let stats = first
            .program(prog)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .compile_stats();
        eprintln!("{name}: {} BPF insns", stats.bpf_insns);
        group.bench_function(name, |b| {
            b.iter_batched(
                load,
                |loaded| JitObject::new(loaded, &jit),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
