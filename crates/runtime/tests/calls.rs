//! bpf-to-bpf calls, helpers, kfuncs, callx, tail calls and callbacks.

mod common;

use bpfjet_isa::{CallTarget, Insn, JmpOp, LdDwKind, Size, Width};
use bpfjet_runtime::*;
use common::*;
use std::sync::Arc;

/// A recursive function that nests `depth` frames below the entry frame and
/// returns the depth it reached.
fn nested_calls(depth: i32) -> Vec<Insn> {
    P::new()
        .mov(1, k(1))
        .call_local(1) // -> 3
        .exit()
        .mov(0, r(1)) // 3: f
        .jmp(Width::W64, JmpOp::Jeq, 1, k(depth), 2) // -> 7
        .add(1, k(1))
        .call_local(-4) // -> 3
        .exit()
        .build()
}

#[test]
fn call_depth_limit_is_eight_frames() {
    assert_eq!(run_both(nested_calls(7)), 7);
    let fault = run_checked(nested_calls(8), &mut []).unwrap_err();
    assert_eq!(fault, Fault::CallDepthExceeded { pc: 6, max: 8 });
}

#[test]
fn callee_saved_registers_survive_calls() {
    let p = P::new()
        .mov(6, k(6))
        .mov(7, k(7))
        .mov(8, k(8))
        .mov(9, k(9))
        .mov(1, k(100))
        .call_local(6) // -> 12
        .add(0, r(6)) // 6
        .add(0, r(7))
        .add(0, r(8))
        .add(0, r(9))
        .exit() // 10
        .exit() // 11 (unused)
        .mov(6, k(0)) // 12: callee clobbers r6-r9, returns r1
        .mov(7, k(0))
        .mov(8, k(0))
        .mov(9, k(0))
        .mov(0, r(1))
        .exit()
        .build();
    assert_eq!(run_both(p), 100 + 6 + 7 + 8 + 9);
}

#[test]
fn every_frame_gets_its_own_stack() {
    // main: [r10-8] = 1; r1 = &[r10-8]; r6 = r10; call f
    // f: [r10-8] = 2; r0 = *r1 (caller's slot, through a pointer) * 10
    //    + [r10-8]; r2 = r6 - r10 (distance between frame pointers); exit
    // main: r0 += [r10-8] * 1000 (still 1); r0 += (r2 == FRAME_STRIDE) * 1e6
    let p = P::new()
        .st(Size::DW, 10, -8, k(1))
        .mov(1, r(10))
        .add(1, k(-8))
        .mov(6, r(10))
        .call_local(9) // 4 -> 14
        .ldx(Size::DW, 3, 10, -8)
        .alu64(bpfjet_isa::AluOp::Mul, 3, k(1000))
        .add(0, r(3))
        .jmp(Width::W64, JmpOp::Jne, 2, k(FRAME_STRIDE as i32), 1)
        .add(0, k(1_000_000))
        .exit() // 10
        .exit()
        .exit()
        .exit()
        .st(Size::DW, 10, -8, k(2)) // 14: f
        .ldx(Size::DW, 0, 1, 0)
        .alu64(bpfjet_isa::AluOp::Mul, 0, k(10))
        .ldx(Size::DW, 3, 10, -8)
        .add(0, r(3))
        .mov(2, r(6))
        .alu64(bpfjet_isa::AluOp::Sub, 2, r(10))
        .exit()
        .build();
    assert_eq!(run_both(p), 1_000_000 + 1000 + 10 + 2);
}

#[test]
fn helpers_get_r1_to_r5_and_set_r0() {
    let helpers = HelperRegistry::new().with(Helper::new(7, "sum", |_, a| Ok(a.iter().sum())));
    let p = P::new()
        .mov(1, k(1))
        .mov(2, k(2))
        .mov(3, k(3))
        .mov(4, k(4))
        .mov(5, k(5))
        .call(7)
        .exit()
        .build();
    let program = load(p, LoadOptions::bounds_checked().with_helpers(helpers));
    assert_eq!(program.run(&mut RunState::new(), &mut (), &[]), Ok(15));
}

#[test]
fn helper_errors_reach_the_program_as_negative_errno() {
    let helpers = HelperRegistry::new().with(Helper::new(3, "fails", |_, _| {
        Ok(errno::neg(errno::ENOENT))
    }));
    let program = load(
        P::new().call(3).exit().build(),
        LoadOptions::bounds_checked().with_helpers(helpers),
    );
    assert_eq!(
        program.run(&mut RunState::new(), &mut (), &[]),
        Ok((-2i64) as u64)
    );
}

#[test]
fn helper_faults_abort_the_run() {
    let helpers = HelperRegistry::new().with(Helper::new(3, "strict", |ctx, _| {
        Err(ctx.fault("bad flags"))
    }));
    let program = load(
        P::new().mov(0, k(0)).call(3).exit().build(),
        LoadOptions::bounds_checked().with_helpers(helpers),
    );
    let fault = program.run(&mut RunState::new(), &mut (), &[]).unwrap_err();
    assert_eq!(
        fault,
        Fault::Helper {
            pc: 1,
            helper: "strict",
            reason: "bad flags".into()
        }
    );
}

#[test]
fn helpers_reach_the_per_run_context() {
    struct Packets(u64);
    let helpers = HelperRegistry::new().with(Helper::new(9, "count", |ctx, a| {
        let packets = ctx.user_ctx::<Packets>()?;
        packets.0 += a[0];
        Ok(packets.0)
    }));
    let program = load(
        P::new().mov(1, k(3)).call(9).call(9).exit().build(),
        LoadOptions::bounds_checked().with_helpers(helpers),
    );
    let mut packets = Packets(10);
    assert_eq!(program.run(&mut RunState::new(), &mut packets, &[]), Ok(16));
    assert_eq!(packets.0, 16);
    // The wrong context type is the helper's business: here, a fault.
    assert!(matches!(
        program.run(&mut RunState::new(), &mut (), &[]),
        Err(Fault::Helper { .. })
    ));
}

#[test]
fn callx_calls_the_helper_whose_id_is_in_the_register() {
    // The conformance suite's callx test: `mov r2, 5; call r2` calls helper 5.
    let p = P::new()
        .mov(1, k(42))
        .mov(2, k(5))
        .insn(Insn::CallReg { reg: 2 })
        .exit()
        .build();
    assert_eq!(run_both(p), 42);
    let p = P::new()
        .mov(2, k(6))
        .insn(Insn::CallReg { reg: 2 })
        .exit()
        .build();
    assert_eq!(
        run_checked(p, &mut []),
        Err(Fault::UnknownHelper { pc: 1, id: 6 })
    );
}

#[test]
fn kfuncs_come_from_their_own_registry() {
    let kfuncs =
        HelperRegistry::new().with(Helper::new(
            100_123,
            "bpf_kfunc_mul",
            |_, a| Ok(a[0] * a[1]),
        ));
    let p = P::new()
        .mov(1, k(6))
        .mov(2, k(7))
        .insn(Insn::Call(CallTarget::Kfunc(100_123)))
        .exit()
        .build();
    let program = load(p.clone(), LoadOptions::bounds_checked().with_kfuncs(kfuncs));
    assert_eq!(program.run(&mut RunState::new(), &mut (), &[]), Ok(42));
    // A helper of the same number is not a kfunc.
    let helpers = HelperRegistry::new().with(Helper::new(100_123, "helper", |_, _| Ok(0)));
    assert!(matches!(
        Program::new(p, LoadOptions::bounds_checked().with_helpers(helpers)),
        Err(LoadError::UnknownKfunc { .. })
    ));
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
    // Tail-calls itself until refused, then returns the helper's result.
    let p = P::new().mov(3, k(0)).call(12).exit().build();
    let program = load(
        p,
        LoadOptions::bounds_checked().with_helpers(tail_call_helpers()),
    );
    let mut state = RunState::new();
    state.set_program_table(vec![Some(program.clone())]);
    let mut helper_calls = 0u32;
    let r0 = program.run(&mut state, &mut helper_calls, &[]).unwrap();
    assert_eq!(r0, errno::neg(errno::E2BIG));
    assert_eq!(state.tail_calls(), MAX_TAIL_CALLS);
    assert_eq!(helper_calls, MAX_TAIL_CALLS + 1);
    // The counter is per run.
    helper_calls = 0;
    program.run(&mut state, &mut helper_calls, &[]).unwrap();
    assert_eq!(helper_calls, MAX_TAIL_CALLS + 1);
}

#[test]
fn a_tail_call_replaces_the_program_and_keeps_the_context() {
    let opts = || LoadOptions::bounds_checked().with_helpers(tail_call_helpers());
    // target: r0 = r1 + 1000
    let target = load(P::new().mov(0, r(1)).add(0, k(1000)).exit().build(), opts());
    // caller: tail call entry 1, or (on failure) return 1
    let caller = load(
        P::new().mov(3, k(1)).call(12).mov(0, k(1)).exit().build(),
        opts(),
    );
    let mut state = RunState::new();
    state.set_program_table(vec![None, Some(target)]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(1007));
    // An empty table entry: the call fails and execution continues.
    state.set_program_table(vec![]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(1));
}

#[test]
fn a_tail_call_from_a_subprogram_returns_to_its_caller() {
    let opts = || LoadOptions::bounds_checked().with_helpers(tail_call_helpers());
    let target = load(P::new().mov(0, r(1)).add(0, k(1000)).exit().build(), opts());
    // main: r6 = 5; call f; r0 += r6 * 1e6 (r6 restored); exit
    // f: r6 = 0; tail call entry 0 (replaces f's program in f's frame)
    let caller = load(
        P::new()
            .mov(6, k(5))
            .call_local(3) // -> 5
            .alu64(bpfjet_isa::AluOp::Mul, 6, k(1_000_000))
            .add(0, r(6))
            .exit()
            .mov(6, k(0)) // 5: f
            .mov(3, k(0))
            .call(12)
            .mov(0, k(99))
            .exit()
            .build(),
        opts(),
    );
    let mut state = RunState::new();
    state.set_program_table(vec![Some(target)]);
    assert_eq!(caller.run(&mut state, &mut (), &[7]), Ok(5_000_000 + 1007));
}

#[test]
fn verified_programs_cannot_tail_call_into_unchecked_ones() {
    let checked_target = load(
        P::new().mov(0, k(1)).exit().build(),
        LoadOptions::bounds_checked(),
    );
    let caller = load(
        P::new().mov(3, k(0)).call(12).exit().build(),
        verified().with_helpers(tail_call_helpers()),
    );
    let mut state = RunState::new();
    state.set_program_table(vec![Some(checked_target)]);
    assert_eq!(
        caller.run(&mut state, &mut (), &[]),
        Ok(errno::neg(errno::EINVAL))
    );
}

/// Helper 181, `bpf_loop(nr, callback, ctx)`: callback(i, ctx) until it
/// returns nonzero.
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

/// main: [r10-8] = 0; bpf_loop(nr, cb, &[r10-8]); r0 = [r10-8] * 1000 + loop result
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
        .alu64(bpfjet_isa::AluOp::Mul, 1, k(1000))
        .add(0, r(1))
        .exit() // 10
        .ldx(Size::DW, 3, 2, 0) // 11: cb
        .add(3, r(1))
        .st(Size::DW, 2, 0, r(3))
        .mov(0, k(0))
        .jmp(Width::W64, JmpOp::Jne, 1, k(stop_at), 1)
        .mov(0, k(1))
        .st(Size::DW, 10, -8, r(0)) // the callback's own frame
        .exit()
        .build()
}

#[test]
fn callbacks_run_through_call_subprog() {
    for options in [LoadOptions::bounds_checked(), verified()] {
        let program = load(
            loop_program(10, -1),
            options.clone().with_helpers(loop_helpers()),
        );
        assert_eq!(
            program.run(&mut RunState::new(), &mut (), &[]),
            Ok(45_000 + 10)
        );
        let program = load(loop_program(10, 3), options.with_helpers(loop_helpers()));
        assert_eq!(
            program.run(&mut RunState::new(), &mut (), &[]),
            Ok(6_000 + 4)
        );
    }
}

#[test]
fn callback_faults_abort_the_run() {
    // The callback dereferences its index as a pointer.
    let mut p = loop_program(3, -1);
    p[11] = Insn::Load {
        size: Size::DW,
        sign_extend: false,
        dst: 3,
        src: 1,
        off: 0,
    };
    let program = load(
        p,
        LoadOptions::bounds_checked().with_helpers(loop_helpers()),
    );
    let fault = program.run(&mut RunState::new(), &mut (), &[]).unwrap_err();
    assert!(
        matches!(
            fault,
            Fault::OutOfBounds {
                pc: 11,
                addr: 0,
                ..
            }
        ),
        "{fault:?}"
    );
}

#[test]
fn callbacks_must_start_a_subprogram() {
    let helpers = HelperRegistry::new().with(Helper::new(181, "bpf_loop", |ctx, a| {
        ctx.call_subprog(a[1], &[])
    }));
    let p = P::new().mov(2, k(1)).call(181).exit().build();
    let program = load(p, LoadOptions::bounds_checked().with_helpers(helpers));
    assert_eq!(
        program.run(&mut RunState::new(), &mut (), &[]),
        Err(Fault::BadSubprogram { pc: 1, target: 1 })
    );
}

#[test]
fn callbacks_count_against_the_call_depth() {
    // A callback that calls bpf_loop on itself recurses until the limit.
    let helpers = HelperRegistry::new().with(Helper::new(181, "bpf_loop", |ctx, a| {
        ctx.call_subprog(a[1], &[0, a[1]])
    }));
    // 0-1: r2 = the callback; 2: bpf_loop; 3-4: callback = bpf_loop on itself
    let p = P::new()
        .lddw_kind(LdDwKind::Func, 2, 2) // slot 0 + 1 + 2 = 3
        .call(181)
        .mov(2, r(2)) // 3: callback: r2 is its own address (passed back in r2)
        .call(181)
        .exit()
        .build();
    let program = load(p, LoadOptions::bounds_checked().with_helpers(helpers));
    let fault = program.run(&mut RunState::new(), &mut (), &[]).unwrap_err();
    assert_eq!(
        fault,
        Fault::CallDepthExceeded {
            pc: 4,
            max: MAX_CALL_DEPTH
        }
    );
}

#[test]
fn helpers_check_and_register_memory() {
    // Helper 20 sums `len` bytes at `ptr` (r1, r2) after checking them.
    // Helper 21 hands out a pointer to a buffer it owns and registers it.
    let buffer: Arc<Vec<u8>> = Arc::new(vec![9; 16]);
    let owned = Arc::clone(&buffer);
    let helpers = HelperRegistry::new()
        .with(Helper::new(20, "sum_bytes", |ctx, a| {
            Ok(ctx
                .read_mem(a[0], a[1])?
                .iter()
                .map(|&b| u64::from(b))
                .sum())
        }))
        .with(Helper::new(21, "get_buffer", move |ctx, _| {
            ctx.register_region(Region::of_slice(&owned));
            Ok(owned.as_ptr() as u64)
        }));
    let opts = LoadOptions::bounds_checked().with_helpers(helpers);
    // Reads a registered buffer: fine.
    let p = P::new()
        .call(21)
        .mov(1, r(0))
        .mov(2, k(16))
        .call(20)
        .exit()
        .build();
    assert_eq!(
        load(p, opts.clone()).run(&mut RunState::new(), &mut (), &[]),
        Ok(9 * 16)
    );
    // One byte past it: the helper's check faults.
    let p = P::new()
        .call(21)
        .mov(1, r(0))
        .mov(2, k(17))
        .call(20)
        .exit()
        .build();
    assert!(matches!(
        load(p, opts.clone()).run(&mut RunState::new(), &mut (), &[]),
        Err(Fault::OutOfBounds {
            pc: 3,
            size: 17,
            ..
        })
    ));
    // The program itself can load from the registered region...
    let p = P::new().call(21).ldx(Size::B, 0, 0, 15).exit().build();
    assert_eq!(
        load(p, opts.clone()).run(&mut RunState::new(), &mut (), &[]),
        Ok(9)
    );
    // ...but not write it (registered read-only).
    let p = P::new().call(21).st(Size::B, 0, 0, k(1)).exit().build();
    assert!(matches!(
        load(p, opts.clone()).run(&mut RunState::new(), &mut (), &[]),
        Err(Fault::OutOfBounds {
            access: Access::Write,
            ..
        })
    ));
    // Run-time regions die with the run.
    let p = P::new().call(21).exit().build();
    let mut state = RunState::new();
    let addr = load(p, opts.clone()).run(&mut state, &mut (), &[]).unwrap();
    let p = P::new().lddw(1, addr).mov(2, k(1)).call(20).exit().build();
    assert!(matches!(
        load(p, opts).run(&mut state, &mut (), &[]),
        Err(Fault::OutOfBounds { .. })
    ));
    assert_eq!(buffer[0], 9);
}
