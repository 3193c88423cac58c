//! Compile statistics and the content-hash cache as seen through the API.

mod common;

use bpfjet_isa::{AluOp, Insn, JmpOp, Size};
use bpfjet_jit::{CacheMode, CpuTarget, JitOptions, JitProgram, OptLevel};
use bpfjet_runtime::*;
use common::*;

fn program(seed: i32) -> Vec<Insn> {
    // sum of 0..seed through a stack slot
    P::new()
        .st(Size::DW, 10, -8, k(0))
        .mov(1, k(0))
        .ldx(Size::DW, 0, 10, -8) // 2: loop
        .add(0, r(1))
        .st(Size::DW, 10, -8, r(0))
        .add(1, k(1))
        .jmp64(JmpOp::Jlt, 1, k(seed), -5)
        .exit()
        .build()
}

#[test]
fn a_second_compile_hits_the_disk_cache() {
    let dir = std::env::temp_dir().join(format!("bpfjet-jit-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let jit_opts = JitOptions {
        cache: CacheMode::Disk(dir.clone()),
        ..JitOptions::default()
    };
    let insns = program(1000 + std::process::id() as i32 % 1000);
    let first = JitProgram::compile(&insns, &verified(), &jit_opts).unwrap();
    let stats = first.compile_stats();
    assert!(!stats.cache_hit);
    assert!(stats.ir_insns_lifted > 0 && stats.ir_insns_optimized > 0);
    assert!(stats.object_bytes > 0 && stats.code_bytes > 0);
    assert_eq!((stats.bpf_insns, stats.functions), (insns.len(), 1));
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, 1, "one object file in the cache directory");
    let second = JitProgram::compile(&insns, &verified(), &jit_opts).unwrap();
    assert!(second.compile_stats().cache_hit);
    assert_eq!(
        second.compile_stats().ir_insns_optimized,
        stats.ir_insns_optimized
    );
    let want = first.run(&mut RunState::new(), &mut (), &[]);
    assert_eq!(second.run(&mut RunState::new(), &mut (), &[]), want);
    // Different options are a different key.
    let other = JitOptions {
        opt_level: OptLevel::O1,
        ..jit_opts.clone()
    };
    let third = JitProgram::compile(&insns, &verified(), &other).unwrap();
    assert!(!third.compile_stats().cache_hit);
    assert_eq!(third.run(&mut RunState::new(), &mut (), &[]), want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_opt_level_and_the_portable_target_agree() {
    let insns = program(77);
    let want = interp(&insns, verified()).run(&mut RunState::new(), &mut (), &[]);
    for opt_level in [OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3] {
        for cpu in [CpuTarget::Host, CpuTarget::Portable] {
            let jit_opts = JitOptions {
                opt_level,
                cpu: cpu.clone(),
                zero_stack: opt_level == OptLevel::O1,
                ..JitOptions::uncached()
            };
            let p = JitProgram::compile(&insns, &verified(), &jit_opts).unwrap();
            assert_eq!(
                p.run(&mut RunState::new(), &mut (), &[]),
                want,
                "{opt_level:?} {cpu:?}"
            );
        }
    }
}

/// A long straight-line-and-branches program (about 2000 slots): the JIT's
/// answer must match the interpreter's; compile time is printed (speed is a
/// benchmark's business, so it is not asserted).
#[test]
fn a_2000_instruction_program_compiles_and_agrees() {
    let mut p = P::new();
    for i in 0..10 {
        p = p.st(Size::DW, 10, -8 * (i + 1), r(1));
    }
    // Everything depends on the argument, so nothing folds to a constant.
    p = p.mov(0, r(1)).mov(2, r(1)).alu64(AluOp::Or, 2, k(3));
    let mut i = 0i32;
    while p.0.len() < 2000 {
        let reg = (i % 5 + 1) as u8;
        let slot = -8 * (i16::try_from(i % 10).unwrap() + 1);
        p = p
            .ldx(Size::DW, reg, 10, slot)
            .alu64(AluOp::Mul, reg, k(i | 1))
            .alu64(AluOp::Xor, 0, r(reg))
            .jmp64(JmpOp::Jset, 0, k(1 << (i % 31)), 1)
            .alu64(AluOp::Add, 0, k(i))
            .alu64(AluOp::Div, 0, r(2))
            .alu64(AluOp::Lsh, 0, k(3))
            .st(Size::DW, 10, slot, r(0));
        i += 1;
    }
    let insns = p.exit().build();
    let compiled = jit(&insns, &verified());
    let reference = interp(&insns, verified());
    for arg in [0u64, 1, 12345, u64::MAX] {
        let want = reference.run(&mut RunState::new(), &mut (), &[arg]);
        assert_eq!(compiled.run(&mut RunState::new(), &mut (), &[arg]), want);
    }
    let s = compiled.compile_stats();
    eprintln!(
        "{} slots: lift {:.1} ms, optimize {:.1} ms, codegen {:.1} ms, load {:.2} ms, total {:.1} ms; IR {} -> {}",
        s.bpf_insns, s.lift_ms, s.optimize_ms, s.codegen_ms, s.load_ms, s.total_ms,
        s.ir_insns_lifted, s.ir_insns_optimized
    );
}
