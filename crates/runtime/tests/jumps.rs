//! JMP and JMP32: every comparison, immediate sign extension, ja and gotol.

mod common;

use bpfjet_isa::{JmpOp, JmpOp::*, Width, Width::*};
use common::*;

/// 1 if `a op b` branches, else 0. `b` is an imm when `imm` is set.
fn taken(width: Width, op: JmpOp, a: u64, b: u64, imm: bool) -> u64 {
    let p = P::new().lddw(1, a).mov(0, k(0));
    let p = if imm {
        p.jmp(width, op, 1, k(b as i32), 1)
    } else {
        p.lddw(2, b).jmp(width, op, 1, r(2), 1)
    };
    run_both(p.exit().mov(0, k(1)).exit().build())
}

#[test]
fn every_comparison_64() {
    let neg = (-5i64) as u64;
    let cases: &[(JmpOp, u64, u64, u64)] = &[
        (Jeq, 5, 5, 1),
        (Jeq, 5, 6, 0),
        (Jne, 5, 6, 1),
        (Jne, 5, 5, 0),
        (Jset, 0b1010, 0b0010, 1),
        (Jset, 0b1010, 0b0101, 0),
        (Jgt, neg, 5, 1),
        (Jgt, 5, 5, 0),
        (Jge, 5, 5, 1),
        (Jge, 4, 5, 0),
        (Jlt, 4, 5, 1),
        (Jlt, neg, 5, 0),
        (Jle, 5, 5, 1),
        (Jle, 6, 5, 0),
        (Jsgt, 5, neg, 1),
        (Jsgt, neg, 5, 0),
        (Jsge, neg, neg, 1),
        (Jsge, neg, 4, 0),
        (Jslt, neg, 4, 1),
        (Jslt, 4, neg, 0),
        (Jsle, neg, neg, 1),
        (Jsle, 4, neg, 0),
    ];
    for &(op, a, b, want) in cases {
        assert_eq!(
            taken(W64, op, a, b, false),
            want,
            "{op:?} {a:#x} {b:#x} (reg)"
        );
        assert_eq!(
            taken(W64, op, a, b, true),
            want,
            "{op:?} {a:#x} {b:#x} (imm)"
        );
    }
}

#[test]
fn immediates_are_sign_extended_in_64_bit_jumps() {
    // -1 as an imm compares equal to u64::MAX, not to 0xffff_ffff.
    assert_eq!(taken(W64, Jeq, u64::MAX, (-1i32) as u32 as u64, true), 1);
    assert_eq!(taken(W64, Jeq, 0xffff_ffff, (-1i32) as u32 as u64, true), 0);
    assert_eq!(taken(W64, Jgt, u64::MAX, (-2i32) as u32 as u64, true), 1);
    assert_eq!(taken(W64, Jsgt, 0, (-1i32) as u32 as u64, true), 1);
}

#[test]
fn jmp32_compares_low_halves_only() {
    let hi = 0xffff_ffff_0000_0000;
    let cases: &[(JmpOp, u64, u64, u64)] = &[
        (Jeq, hi | 5, 5, 1),
        (Jne, hi | 5, 5, 0),
        (Jgt, 0x1_0000_0000, 1, 0),
        (Jgt, 0xffff_ffff, 1, 1),
        (Jge, hi, 0, 1),
        (Jlt, hi | 1, 2, 1),
        (Jle, 2, hi | 1, 0),
        (Jsgt, 1, 0xffff_ffff, 1),
        (Jsge, 0x8000_0000, 0, 0),
        (Jslt, 0x8000_0000, 0, 1),
        (Jsle, 0x7fff_ffff, hi, 0),
        (Jset, hi, hi, 0),
        (Jset, hi | 1, 1, 1),
    ];
    for &(op, a, b, want) in cases {
        assert_eq!(
            taken(W32, op, a, b, false),
            want,
            "{op:?} {a:#x} {b:#x} (reg)"
        );
        assert_eq!(
            taken(W32, op, a, b, true),
            want,
            "{op:?} {a:#x} {b:#x} (imm)"
        );
    }
}

#[test]
fn ja_and_gotol_jump_both_ways() {
    // 0: r0 = 0; 1: ja +2; 2: r0 += 100; 3: exit; 4: r0 += 1; 5: ja -4 (to 2)
    let p = P::new()
        .mov(0, k(0))
        .ja(2)
        .add(0, k(100))
        .exit()
        .add(0, k(1))
        .ja(-4)
        .build();
    assert_eq!(run_both(p), 101);
    // gotol carries its offset in the same typed field; a long forward jump.
    let mut p = P::new().mov(0, k(1)).ja(1000);
    for _ in 0..1000 {
        p = p.mov(0, k(2));
    }
    assert_eq!(run_both(p.exit().build()), 1);
}

#[test]
fn a_loop_counts_down() {
    // r0 = 0; r1 = 10; loop: r0 += r1; r1 -= 1; if r1 != 0 goto loop; exit
    let p = P::new()
        .mov(0, k(0))
        .mov(1, k(10))
        .add(0, r(1))
        .alu64(bpfjet_isa::AluOp::Sub, 1, k(1))
        .jmp(W64, Jne, 1, k(0), -3)
        .exit()
        .build();
    assert_eq!(run_both(p), 55);
}
