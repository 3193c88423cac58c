//! Every fault of bounds-checked mode, with the faulting slot.

mod common;

use bpfjet_isa::{AtomicOp, JmpOp, LdDwKind, Size, Width};
use bpfjet_runtime::*;
use common::*;

fn fault(p: P, mem: &mut [u8]) -> Fault {
    run_checked(p.build(), mem).expect_err("must fault")
}

fn oob(f: &Fault) -> (usize, u64, Access) {
    match *f {
        Fault::OutOfBounds {
            pc, size, access, ..
        } => (pc, size, access),
        ref other => panic!("expected OutOfBounds, got {other:?}"),
    }
}

#[test]
fn stack_below_the_frame() {
    let f = fault(
        P::new().mov(0, k(0)).ldx(Size::B, 0, 10, -513).exit(),
        &mut [],
    );
    assert_eq!(oob(&f), (1, 1, Access::Read));
    // Straddling the bottom edge.
    let f = fault(P::new().st(Size::DW, 10, -516, k(0)).exit(), &mut []);
    assert_eq!(oob(&f), (0, 8, Access::Write));
    // The bottom byte itself is fine.
    assert_eq!(
        run_checked(P::new().ldx(Size::B, 0, 10, -512).exit().build(), &mut []).map(|_| ()),
        Ok(())
    );
}

#[test]
fn stack_above_r10() {
    let f = fault(P::new().ldx(Size::B, 0, 10, 0).exit(), &mut []);
    assert_eq!(oob(&f), (0, 1, Access::Read));
    let f = fault(P::new().st(Size::DW, 10, -4, k(0)).exit(), &mut []);
    assert_eq!(oob(&f), (0, 8, Access::Write));
    // Above a callee's r10 lies the guard, not the caller's frame.
    let p = P::new().call_local(1).exit().ldx(Size::DW, 0, 10, 8).exit();
    assert_eq!(oob(&fault(p, &mut [])), (2, 8, Access::Read));
}

#[test]
fn returned_frames_are_dead() {
    // f returns its frame pointer; the caller dereferences below it.
    let p = P::new()
        .call_local(2)
        .ldx(Size::DW, 0, 0, -8)
        .exit()
        .mov(0, r(10))
        .exit();
    assert_eq!(oob(&fault(p, &mut [])), (1, 8, Access::Read));
}

#[test]
fn past_the_end_of_a_region() {
    let mut mem = [0u8; 8];
    let f = fault(P::new().ldx(Size::DW, 0, 1, 4).exit(), &mut mem);
    assert_eq!(oob(&f), (0, 8, Access::Read));
    let f = fault(P::new().st(Size::B, 1, 8, k(1)).exit(), &mut mem);
    assert_eq!(oob(&f), (0, 1, Access::Write));
    let f = fault(P::new().ldx(Size::B, 0, 1, -1).exit(), &mut mem);
    assert_eq!(oob(&f), (0, 1, Access::Read));
    // The last byte is fine.
    assert_eq!(
        run_checked(P::new().ldx(Size::B, 0, 1, 7).exit().build(), &mut mem),
        Ok(0)
    );
}

#[test]
fn null_and_wild_pointers() {
    // No memory: r1 is 0.
    let f = fault(P::new().ldx(Size::W, 0, 1, 0).exit(), &mut []);
    assert!(matches!(
        f,
        Fault::OutOfBounds {
            pc: 0,
            addr: 0,
            size: 4,
            ..
        }
    ));
    let f = fault(
        P::new().lddw(2, u64::MAX - 2).ldx(Size::DW, 0, 2, 0).exit(),
        &mut [],
    );
    assert!(matches!(f, Fault::OutOfBounds { pc: 2, addr, .. } if addr == u64::MAX - 2));
    let f = fault(
        P::new()
            .mov(2, k(0))
            .atomic(Width::W64, AtomicOp::Add, false, 2, 1, 0)
            .exit(),
        &mut [],
    );
    assert!(matches!(
        f,
        Fault::OutOfBounds {
            pc: 1,
            access: Access::Atomic,
            ..
        }
    ));
}

#[test]
fn read_only_regions_refuse_writes() {
    let rodata = [1u8; 8];
    let maps = vec![MapBinding {
        handle: 0,
        value: Some(Region::of_slice(&rodata)),
        view: None,
    }];
    let opts = || LoadOptions::bounds_checked().with_maps(maps.clone());
    let read = P::new()
        .lddw_kind(LdDwKind::MapIdxValue, 1, 0)
        .ldx(Size::B, 0, 1, 7)
        .exit();
    assert_eq!(
        load(read.build(), opts()).run(&mut RunState::new(), &mut (), &[]),
        Ok(1)
    );
    let write = P::new()
        .lddw_kind(LdDwKind::MapIdxValue, 1, 0)
        .st(Size::B, 1, 0, k(2))
        .exit();
    let f = load(write.build(), opts())
        .run(&mut RunState::new(), &mut (), &[])
        .unwrap_err();
    assert_eq!(oob(&f), (2, 1, Access::Write));
    assert_eq!(rodata, [1; 8]);
}

#[test]
fn misaligned_atomics() {
    let mut mem = [0u64; 2];
    let bytes = unsafe { std::slice::from_raw_parts_mut(mem.as_mut_ptr() as *mut u8, 16) };
    let f = fault(
        P::new()
            .atomic(Width::W64, AtomicOp::Add, false, 1, 2, 4)
            .exit(),
        bytes,
    );
    assert!(matches!(f, Fault::Misaligned { pc: 0, size: 8, .. }));
    // Aligned 32-bit at offset 4 is fine.
    let p = P::new()
        .mov(0, k(0))
        .atomic(Width::W32, AtomicOp::Add, false, 1, 0, 4)
        .exit();
    assert_eq!(run_checked(p.build(), bytes), Ok(0));
}

#[test]
fn budget_ends_infinite_loops() {
    let program = load(
        P::new().mov(0, k(0)).ja(-1).build(),
        LoadOptions::bounds_checked(),
    );
    let mut state = RunState::new();
    state.set_insn_budget(Some(1000));
    assert_eq!(
        program.run(&mut state, &mut (), &[]),
        Err(Fault::BudgetExceeded {
            pc: 1,
            budget: 1000
        })
    );
    assert_eq!(state.executed_insns(), 1000);
    // Exactly enough budget is enough.
    let program = load(
        P::new().mov(0, k(3)).exit().build(),
        LoadOptions::bounds_checked(),
    );
    state.set_insn_budget(Some(2));
    assert_eq!(program.run(&mut state, &mut (), &[]), Ok(3));
}

#[test]
fn falling_off_the_end() {
    // Branch targets are checked at load; the last slot is not.
    let p = P::new()
        .mov(0, k(0))
        .jmp(Width::W64, JmpOp::Jeq, 0, k(1), -2);
    assert_eq!(fault(p, &mut []), Fault::BadPc { pc: 2 });
}

#[test]
fn faults_name_the_instruction() {
    let f = fault(
        P::new()
            .mov(0, k(0))
            .mov(0, k(1))
            .ldx(Size::B, 0, 0, 0)
            .exit(),
        &mut [],
    );
    assert_eq!(f.pc(), 2);
    assert!(
        f.to_string()
            .starts_with("insn 2: out-of-bounds read of 1 bytes at 0x1"),
        "{f}"
    );
}
