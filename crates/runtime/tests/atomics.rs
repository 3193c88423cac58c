//! Every atomic operation, 32 and 64 bits, with and without fetch.

mod common;

use bpfjet_isa::{AtomicOp, AtomicOp::*, Width, Width::*};
use common::*;

const MEM: u64 = 0xf0f0_f0f0_0000_00f0;
const HI: u64 = 0xaaaa_aaaa_0000_0000;

/// mem = MEM; r2 = operand; r0 = r0_init; atomic [r1], r2; then return
/// (r0, r2, mem) via memory dumps.
fn atomic(width: Width, op: AtomicOp, fetch: bool, operand: u64, r0_init: u64) -> (u64, u64, u64) {
    let p = P::new()
        .lddw(2, operand)
        .lddw(0, r0_init)
        .atomic(width, op, fetch, 1, 2, 0)
        .st(bpfjet_isa::Size::DW, 1, 8, r(2))
        .st(bpfjet_isa::Size::DW, 1, 16, r(0))
        .exit()
        .build();
    let mut mem = [0u8; 24];
    mem[..8].copy_from_slice(&MEM.to_le_bytes());
    let (_, mem) = run_both_mem(p, &mem);
    let word = |i: usize| u64::from_le_bytes(mem[i * 8..i * 8 + 8].try_into().unwrap());
    (word(0), word(1), word(2))
}

#[test]
fn non_fetching_atomics_leave_registers() {
    let operand = HI | 0x0f;
    for (op, want64, want32) in [
        (Add, MEM.wrapping_add(operand), (MEM & !0xffff_ffff) | 0xff),
        (Or, MEM | operand, (MEM & !0xffff_ffff) | 0xff),
        (And, MEM & operand, MEM & !0xffff_ffff),
        (Xor, MEM ^ operand, (MEM & !0xffff_ffff) | 0xff),
    ] {
        assert_eq!(
            atomic(W64, op, false, operand, 7),
            (want64, operand, 7),
            "{op:?} 64"
        );
        // 32-bit forms touch only the low word of memory.
        assert_eq!(
            atomic(W32, op, false, operand, 7),
            (want32, operand, 7),
            "{op:?} 32"
        );
    }
}

#[test]
fn fetching_atomics_return_the_old_value() {
    let operand = HI | 0x0f;
    for op in [Add, Or, And, Xor] {
        let (_, fetched, r0) = atomic(W64, op, true, operand, 7);
        assert_eq!((fetched, r0), (MEM, 7), "{op:?} 64");
        // The 32-bit fetch zero-extends into the register.
        let (_, fetched, _) = atomic(W32, op, true, operand, 7);
        assert_eq!(fetched, MEM & 0xffff_ffff, "{op:?} 32");
    }
}

#[test]
fn xchg() {
    assert_eq!(atomic(W64, Xchg, true, HI | 1, 7), (HI | 1, MEM, 7));
    assert_eq!(
        atomic(W32, Xchg, true, HI | 1, 7),
        ((MEM & !0xffff_ffff) | 1, 0xf0, 7)
    );
}

#[test]
fn cmpxchg_compares_with_r0() {
    // Success: memory takes the operand, r0 gets the old value, r2 unchanged.
    assert_eq!(atomic(W64, CmpXchg, true, 5, MEM), (5, 5, MEM));
    // Failure: memory unchanged, r0 still receives the old value.
    assert_eq!(atomic(W64, CmpXchg, true, 5, MEM + 1), (MEM, 5, MEM));
    // 32-bit: only r0's low half is compared; r0 is zero-extended.
    assert_eq!(
        atomic(W32, CmpXchg, true, 5, HI | 0xf0),
        ((MEM & !0xffff_ffff) | 5, 5, 0xf0)
    );
    assert_eq!(atomic(W32, CmpXchg, true, 5, HI | 0xf1), (MEM, 5, 0xf0));
}

#[test]
fn atomics_on_the_stack() {
    let p = P::new()
        .st(bpfjet_isa::Size::DW, 10, -8, k(40))
        .mov(1, k(2))
        .atomic(W64, Add, true, 10, 1, -8)
        .ldx(bpfjet_isa::Size::DW, 0, 10, -8)
        .add(0, r(1))
        .exit()
        .build();
    assert_eq!(run_both(p), 42 + 40);
}
