//! Helpers, kfuncs, callx, bpf-to-bpf calls, callbacks, tail calls and
//! faults through the JIT's trampolines, each checked against the
//! interpreter.

mod common;

use bpfjet_isa::{AluOp, CallTarget, Insn, JmpOp, LdDwKind, Size};
use bpfjet_jit::{JitError, JitOptions, JitProgram};
use bpfjet_runtime::*;
use common::*;

/// Run on both engines with fresh states and `()` as context; they must agree.
fn both(insns: &[Insn], options: LoadOptions, args: &[u64]) -> Result<u64, Fault> {
    let j = jit(insns, &options).run(&mut RunState::new(), &mut (), args);
    let i = interp(insns, options).run(&mut RunState::new(), &mut (), args);
    assert_eq!(j, i, "JIT and interpreter disagree");
    j
}

#[test]
fn helpers_get_r1_to_r5_and_set_r0() {
    let helpers = HelperRegistry::new().with(Helper::new(7, "sum", |_, a| {
        Ok(a.iter().enumerate().map(|(i, v)| v << (8 * i)).sum())
    }));
    let p = P::new()
        .mov(1, k(1))
        .mov(2, k(2))
        .mov(3, k(3))
        .mov(4, k(4))
        .mov(5, k(5))
        .call(7)
        .add(0, r(1)) // r1-r5 survive helper calls in both engines
        .exit()
        .build();
    assert_eq!(
        both(&p, verified().with_helpers(helpers), &[]),
        Ok(0x05_04_03_02_01 + 1)
    );
}

#[test]
fn kfuncs_and_callx_dispatch_through_their_registries() {
    let kfuncs = HelperRegistry::new().with(Helper::new(100_123, "kmul", |_, a| Ok(a[0] * a[1])));
    let p = P::new()
        .mov(1, k(6))
        .mov(2, k(7))
        .insn(Insn::Call(CallTarget::Kfunc(100_123)))
        .mov(1, r(0))
        .mov(2, k(5))
        .insn(Insn::CallReg { reg: 2 }) // helper 5: identity
        .exit()
        .build();
    let options = verified()
        .with_helpers(conformance_helpers())
        .with_kfuncs(kfuncs);
    assert_eq!(both(&p, options, &[]), Ok(42));
    // callx to an unknown id faults in both engines at the same pc.
    let p = P::new()
        .mov(2, k(6))
        .insn(Insn::CallReg { reg: 2 })
        .exit()
        .build();
    assert_eq!(
        both(&p, verified().with_helpers(conformance_helpers()), &[]),
        Err(Fault::UnknownHelper { pc: 1, id: 6 })
    );
}

#[test]
fn helper_faults_and_context_reach_the_caller() {
    struct Packets(u64);
    let helpers = HelperRegistry::new()
        .with(Helper::new(9, "count", |ctx, a| {
            let packets = ctx.user_ctx::<Packets>()?;
            packets.0 += a[0];
            Ok(packets.0)
        }))
        .with(Helper::new(3, "strict", |ctx, _| {
            Err(ctx.fault("bad flags"))
        }));
    let options = verified().with_helpers(helpers);
    let p = P::new().mov(1, k(3)).call(9).call(9).exit().build();
    let program = jit(&p, &options);
    let mut packets = Packets(10);
    assert_eq!(program.run(&mut RunState::new(), &mut packets, &[]), Ok(16));
    assert_eq!(packets.0, 16);
    assert!(matches!(
        program.run(&mut RunState::new(), &mut (), &[]),
        Err(Fault::Helper { pc: 1, .. })
    ));
    let p = P::new().mov(0, k(0)).call(3).mov(0, k(1)).exit().build();
    assert_eq!(
        both(&p, options, &[]),
        Err(Fault::Helper {
            pc: 1,
            helper: "strict",
            reason: "bad flags".into()
        })
    );
}

#[test]
fn helper_panics_propagate_to_the_runner() {
    let helpers = HelperRegistry::new().with(Helper::new(4, "panics", |_, _| panic!("boom")));
    let program = jit(
        &P::new().call(4).exit().build(),
        &verified().with_helpers(helpers),
    );
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        program.run(&mut RunState::new(), &mut (), &[])
    }));
    assert!(caught.is_err());
}

#[test]
fn callee_saved_registers_and_per_frame_stacks_survive_calls() {
    // main: r6..r9 = 6..9; [r10-8] = 1; r1 = 100; call f; r0 += r6+r7+r8+r9
    //       + [r10-8] * 1000
    // f: clobbers r6-r9 and its own [r10-8]; returns r1
    let p = P::new()
        .mov(6, k(6))
        .mov(7, k(7))
        .mov(8, k(8))
        .mov(9, k(9))
        .st(Size::DW, 10, -8, k(1))
        .mov(1, k(100))
        .call_local(8) // 6 -> 15
        .add(0, r(6))
        .add(0, r(7))
        .add(0, r(8))
        .add(0, r(9))
        .ldx(Size::DW, 1, 10, -8)
        .alu64(AluOp::Mul, 1, k(1000))
        .add(0, r(1))
        .exit() // 14
        .mov(6, k(0)) // 15: f
        .mov(7, k(0))
        .mov(8, k(0))
        .mov(9, k(0))
        .st(Size::DW, 10, -8, k(55))
        .mov(0, r(1))
        .exit()
        .build();
    assert_eq!(both(&p, verified(), &[]), Ok(100 + 6 + 7 + 8 + 9 + 1000));
}

/// Recurses until `depth` frames below the entry, returning the depth.
fn nested_calls(depth: i32) -> Vec<Insn> {
    P::new()
        .mov(1, k(1))
        .call_local(1) // -> 3
        .exit()
        .mov(0, r(1)) // 3: f
        .jmp64(JmpOp::Jeq, 1, k(depth), 2) // -> 7
        .add(1, k(1))
        .call_local(-4) // -> 3
        .exit()
        .build()
}

#[test]
fn call_depth_is_limited_to_eight_frames() {
    assert_eq!(both(&nested_calls(7), verified(), &[]), Ok(7));
    assert_eq!(
        both(&nested_calls(8), verified(), &[]),
        Err(Fault::CallDepthExceeded { pc: 6, max: 8 })
    );
}

/// Helper 181, `bpf_loop(nr, callback, ctx)`.
fn loop_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(181, "bpf_loop", |ctx, a| {
        for i in 0..a[0] {
            if ctx.call_subprog(a[1], &[i, a[2]])? != 0 {
                return Ok(i + 1);
            }
        }
        Ok(a[0])
    }))
}

/// main: [r10-8] = 0; bpf_loop(nr, cb, &[r10-8]); r0 = [r10-8] * 1000 + result
/// cb: *ctx += i; r0 = (i == stop_at)
fn loop_program(nr: i32, stop_at: i32) -> Vec<Insn> {
    P::new()
        .st(Size::DW, 10, -8, k(0))
        .mov(1, k(nr))
        .lddw_kind(LdDwKind::Func, 2, 8) // slot 2 + 1 + 8 = 11
        .mov(3, r(10))
        .add(3, k(-8))
        .call(181) // 6
        .ldx(Size::DW, 1, 10, -8)
        .alu64(AluOp::Mul, 1, k(1000))
        .add(0, r(1))
        .exit() // 10
        .ldx(Size::DW, 3, 2, 0) // 11: cb
        .add(3, r(1))
        .st(Size::DW, 2, 0, r(3))
        .mov(0, k(0))
        .jmp64(JmpOp::Jne, 1, k(stop_at), 1)
        .mov(0, k(1))
        .st(Size::DW, 10, -8, r(0)) // the callback's own frame
        .exit()
        .build()
}

#[test]
fn callbacks_run_native_code_through_call_subprog() {
    let options = verified().with_helpers(loop_helpers());
    assert_eq!(
        both(&loop_program(10, -1), options.clone(), &[]),
        Ok(45_000 + 10)
    );
    assert_eq!(both(&loop_program(10, 3), options, &[]), Ok(6_000 + 4));
}

#[test]
fn callbacks_count_against_the_call_depth() {
    let helpers = HelperRegistry::new().with(Helper::new(181, "bpf_loop", |ctx, a| {
        ctx.call_subprog(a[1], &[0, a[1]])
    }));
    let p = P::new()
        .lddw_kind(LdDwKind::Func, 2, 3) // -> 4
        .call(181)
        .exit()
        .mov(2, r(2)) // 4: callback calls bpf_loop on itself
        .call(181)
        .exit()
        .build();
    assert_eq!(
        both(&p, verified().with_helpers(helpers), &[]),
        Err(Fault::CallDepthExceeded {
            pc: 5,
            max: MAX_CALL_DEPTH
        })
    );
}

/// Helper 12: tail call into program-table entry r3; on refusal r0 = -errno.
fn tail_call_helpers() -> HelperRegistry {
    HelperRegistry::new()
        .with(Helper::new(12, "bpf_tail_call", |ctx, a| {
            if let Some(calls) = ctx.user_as::<u32>() {
                *calls += 1;
            }
            Ok(match ctx.tail_call_index(a[2] as u32) {
                Ok(()) => 0,
                Err(e) => errno::neg(e.errno()),
            })
        }))
        .with(Helper::new(5, "identity", |_, a| Ok(a[0])))
}

#[test]
fn tail_calls_stop_after_33() {
    let options = verified().with_helpers(tail_call_helpers());
    let program = jit(&P::new().mov(3, k(0)).call(12).exit().build(), &options);
    let mut state = RunState::new();
    state.set_program_table(vec![Some(program.program().clone())]);
    for _ in 0..2 {
        let mut helper_calls = 0u32;
        let r0 = program.run(&mut state, &mut helper_calls, &[]).unwrap();
        assert_eq!(r0, errno::neg(errno::E2BIG));
        assert_eq!(state.tail_calls(), MAX_TAIL_CALLS);
        assert_eq!(helper_calls, MAX_TAIL_CALLS + 1);
    }
}

#[test]
fn a_tail_call_replaces_the_program_and_returns_to_the_callers_caller() {
    let options = verified().with_helpers(tail_call_helpers());
    // target: r0 = r1 + 1000
    let target = jit(
        &P::new().mov(0, r(1)).add(0, k(1000)).exit().build(),
        &options,
    );
    let caller = jit(
        &P::new().mov(3, k(1)).call(12).mov(0, k(1)).exit().build(),
        &options,
    );
    let mut state = RunState::new();
    state.set_program_table(vec![None, Some(target.program().clone())]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(1007));
    state.set_program_table(vec![]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(1));
    // From a subprogram: the target replaces f, main continues with r6 intact.
    let caller = jit(
        &P::new()
            .mov(6, k(5))
            .call_local(3) // -> 5
            .alu64(AluOp::Mul, 6, k(1_000_000))
            .add(0, r(6))
            .exit()
            .mov(6, k(0)) // 5: f
            .mov(3, k(0))
            .call(12)
            .mov(0, k(99))
            .exit()
            .build(),
        &options,
    );
    state.set_program_table(vec![Some(target.program().clone())]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(5_000_000 + 1007));
}

#[test]
fn tail_calls_into_programs_without_native_code_fault() {
    let options = verified().with_helpers(tail_call_helpers());
    let interpreted = interp(&P::new().mov(0, k(1)).exit().build(), options.clone());
    let caller = jit(&P::new().mov(3, k(0)).call(12).exit().build(), &options);
    let mut state = RunState::new();
    state.set_program_table(vec![Some(interpreted)]);
    assert!(matches!(
        caller.run(&mut state, &mut (), &[]),
        Err(Fault::Helper { pc: 1, .. })
    ));
}

#[test]
fn map_bindings_become_constants() {
    let mut value = vec![0u8; 16];
    value[8] = 42;
    let region = Region::of_mut_slice(&mut value);
    let maps = vec![
        MapBinding {
            handle: 0xdead_beef,
            value: None,
            view: None,
        },
        MapBinding {
            handle: 7,
            value: Some(region),
            view: None,
        },
    ];
    let p = P::new()
        .lddw_kind(LdDwKind::MapIdx, 1, 0)
        .lddw_kind(LdDwKind::MapIdxValue, 2, 1 | (8 << 32))
        .ldx(Size::B, 0, 2, 0)
        .st(Size::B, 2, 1, k(9))
        .add(0, r(1))
        .exit()
        .build();
    let options = verified().with_maps(maps);
    assert_eq!(both(&p, options, &[]), Ok(0xdead_beef + 42));
    assert_eq!(value[9], 9);
}

#[test]
fn the_jit_refuses_bounds_checked_and_malformed_programs() {
    let p = P::new().mov(0, k(0)).exit().build();
    assert_eq!(
        JitProgram::compile(&p, &LoadOptions::bounds_checked(), &JitOptions::uncached())
            .unwrap_err(),
        JitError::NotVerified
    );
    // Falls off the end.
    let p = P::new().mov(0, k(0)).build();
    assert!(matches!(
        JitProgram::compile(&p, &verified(), &JitOptions::uncached()),
        Err(JitError::Unsupported { .. })
    ));
    // Unknown helper: a load error, as in the interpreter.
    let p = P::new().call(99).exit().build();
    assert!(matches!(
        JitProgram::compile(&p, &verified(), &JitOptions::uncached()),
        Err(JitError::Load(_))
    ));
}

#[test]
fn compiled_programs_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<JitProgram>();
    let program = jit(&nested_calls(5), &verified());
    std::thread::scope(|s| {
        for _ in 0..2 {
            let program = program.clone();
            s.spawn(move || {
                let mut state = RunState::new();
                for _ in 0..100 {
                    assert_eq!(program.run(&mut state, &mut (), &[]), Ok(5));
                }
            });
        }
    });
}
