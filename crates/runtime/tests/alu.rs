//! ALU and ALU64: every operation, register and immediate sources, and the
//! RFC 9669 edge cases.

mod common;

use bpfjet_isa::{AluOp, AluOp::*, ByteOrder, Width, Width::*};
use common::*;

enum Src {
    R(u64),
    K(i32),
}

/// r0 = dst; r0 op= src; exit.
fn eval(width: Width, op: AluOp, dst: u64, src: Src) -> u64 {
    let p = P::new().lddw(0, dst);
    let p = match src {
        Src::R(v) => p.lddw(1, v).alu(width, op, 0, r(1)),
        Src::K(imm) => p.alu(width, op, 0, k(imm)),
    };
    run_both(p.exit().build())
}

fn check(cases: &[(Width, AluOp, u64, Src, u64)]) {
    for (i, (width, op, dst, src, expected)) in cases.iter().enumerate() {
        let src = match src {
            Src::R(v) => Src::R(*v),
            Src::K(v) => Src::K(*v),
        };
        let got = eval(*width, *op, *dst, src);
        assert_eq!(
            got, *expected,
            "case {i}: {width:?} {op:?} dst={dst:#x} -> {got:#x}, want {expected:#x}"
        );
    }
}

const HI: u64 = 0xdead_beef_0000_0000;

#[test]
fn arithmetic() {
    check(&[
        (W64, Add, 1, Src::K(2), 3),
        (W64, Add, 1, Src::K(-2), u64::MAX),
        (W32, Add, HI | 1, Src::K(-2), 0xffff_ffff),
        (W64, Add, u64::MAX, Src::R(2), 1),
        (W64, Sub, 1, Src::R(2), u64::MAX),
        (W32, Sub, 1, Src::R(2), 0xffff_ffff),
        (W64, Mul, 3, Src::K(-1), (-3i64) as u64),
        (W32, Mul, 3, Src::K(-1), 0xffff_fffd),
        (
            W64,
            Mul,
            0x1_0000_0001,
            Src::R(0x1_0000_0001),
            0x2_0000_0001,
        ),
        (W32, Mul, 0x8000_0000, Src::K(-1), 0x8000_0000),
        (W64, Neg, 1, Src::K(0), u64::MAX),
        (W32, Neg, HI | 1, Src::K(0), 0xffff_ffff),
        (
            W64,
            Neg,
            0x8000_0000_0000_0000,
            Src::K(0),
            0x8000_0000_0000_0000,
        ),
        (W32, Neg, 0x8000_0000, Src::K(0), 0x8000_0000),
    ]);
}

#[test]
fn bitwise() {
    check(&[
        (W64, Or, 0xf0, Src::K(0x0f), 0xff),
        (W64, Or, 0, Src::K(-1), u64::MAX),
        (W32, Or, HI, Src::K(1), 1),
        (W64, And, u64::MAX, Src::K(-16), !15),
        (W32, And, u64::MAX, Src::R(0xff), 0xff),
        (W64, Xor, 0xff, Src::R(0x0f), 0xf0),
        (W32, Xor, HI | 0xff, Src::K(-1), 0xffff_ff00),
    ]);
}

#[test]
fn moves_and_sign_extended_immediates() {
    check(&[
        (W64, Mov, 7, Src::K(-1), u64::MAX),
        (W32, Mov, 7, Src::K(-1), 0xffff_ffff),
        (W64, Mov, 7, Src::R(HI | 5), HI | 5),
        (W32, Mov, 7, Src::R(HI | 5), 5),
        (W64, Mov, 0, Src::K(i32::MIN), 0xffff_ffff_8000_0000),
    ]);
}

#[test]
fn movsx() {
    check(&[
        (W64, MovSx(8), 0, Src::R(0x80), 0xffff_ffff_ffff_ff80),
        (W64, MovSx(8), 0, Src::R(0x17f), 0x7f),
        (W64, MovSx(16), 0, Src::R(0x8000), 0xffff_ffff_ffff_8000),
        (
            W64,
            MovSx(32),
            0,
            Src::R(0x8000_0000),
            0xffff_ffff_8000_0000,
        ),
        (W64, MovSx(32), 0, Src::R(HI | 0x7fff_ffff), 0x7fff_ffff),
        (W32, MovSx(8), HI, Src::R(0x80), 0xffff_ff80),
        (W32, MovSx(16), HI, Src::R(0xffff_8000), 0xffff_8000),
        (W32, MovSx(16), 0, Src::R(0x1_7fff), 0x7fff),
    ]);
}

#[test]
fn shifts_are_masked_to_the_width() {
    check(&[
        (W64, Lsh, 1, Src::K(63), 1 << 63),
        (W64, Lsh, 1, Src::K(64), 1),
        (W64, Lsh, 1, Src::R(65), 2),
        (W64, Lsh, 1, Src::K(-1), 1 << 63),
        (W32, Lsh, 1, Src::K(32), 1),
        (W32, Lsh, 1, Src::R(33), 2),
        (W32, Lsh, 1, Src::K(31), 0x8000_0000),
        (W32, Lsh, HI | 1, Src::K(4), 0x10),
        (W64, Rsh, 1 << 63, Src::K(63), 1),
        (W64, Rsh, 0x10, Src::R(0x44), 1),
        (W32, Rsh, HI | 0x8000_0000, Src::K(31), 1),
        (W32, Rsh, 0x10, Src::R(0x24), 1),
        (W64, Arsh, 1 << 63, Src::K(63), u64::MAX),
        (W64, Arsh, 1 << 63, Src::R(64 + 4), 0xf800_0000_0000_0000),
        (W32, Arsh, 0x8000_0000, Src::K(31), 0xffff_ffff),
        (W32, Arsh, HI | 0x8000_0000, Src::R(32 + 4), 0xf800_0000),
        (W32, Arsh, 0x4000_0000, Src::K(30), 1),
    ]);
}

#[test]
fn unsigned_division_and_modulo() {
    check(&[
        (W64, Div, 10, Src::K(3), 3),
        (W64, Div, u64::MAX, Src::K(-1), 1), // imm sign-extended to u64::MAX
        (W32, Div, u64::MAX, Src::K(2), 0x7fff_ffff),
        (W32, Div, 12, Src::R(0x1_0000_0003), 4), // only the low half divides
        (W64, Mod, 10, Src::K(3), 1),
        (W32, Mod, HI | 10, Src::R(3), 1),
        // Division by zero yields 0.
        (W64, Div, 10, Src::K(0), 0),
        (W64, Div, 10, Src::R(0), 0),
        (W32, Div, HI | 10, Src::R(HI), 0),
        // Modulo by zero leaves the destination; 32-bit still zero-extends it.
        (W64, Mod, HI | 10, Src::K(0), HI | 10),
        (W64, Mod, HI | 10, Src::R(0), HI | 10),
        (W32, Mod, HI | 10, Src::K(0), 10),
        (W32, Mod, HI | 10, Src::R(HI), 10),
    ]);
}

#[test]
fn signed_division_and_modulo() {
    let min64 = i64::MIN as u64;
    let min32 = i32::MIN as u32 as u64;
    check(&[
        (W64, SDiv, (-10i64) as u64, Src::K(3), (-3i64) as u64),
        (W64, SDiv, (-10i64) as u64, Src::R((-3i64) as u64), 3),
        (
            W32,
            SDiv,
            (-10i32) as u32 as u64,
            Src::K(3),
            (-3i32) as u32 as u64,
        ),
        (W64, SMod, (-10i64) as u64, Src::K(3), (-1i64) as u64),
        (W64, SMod, 10, Src::K(-3), 1),
        (
            W32,
            SMod,
            (-10i32) as u32 as u64,
            Src::R(3),
            (-1i32) as u32 as u64,
        ),
        // INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0.
        (W64, SDiv, min64, Src::K(-1), min64),
        (W64, SDiv, min64, Src::R(u64::MAX), min64),
        (W32, SDiv, min32, Src::K(-1), min32),
        (W32, SDiv, HI | min32, Src::R(0xffff_ffff), min32),
        (W64, SMod, min64, Src::K(-1), 0),
        (W32, SMod, min32, Src::R(0xffff_ffff), 0),
        // By zero: like the unsigned forms.
        (W64, SDiv, (-10i64) as u64, Src::K(0), 0),
        (W32, SDiv, (-10i64) as u64, Src::R(0), 0),
        (W64, SMod, (-10i64) as u64, Src::K(0), (-10i64) as u64),
        (W32, SMod, (-10i64) as u64, Src::R(0), 0xffff_fff6),
    ]);
}

fn swap(order: ByteOrder, bits: u8, value: u64) -> u64 {
    run_both(
        P::new()
            .lddw(0, value)
            .endian(order, bits, 0)
            .exit()
            .build(),
    )
}

#[test]
fn byte_order_truncates_and_swaps() {
    let v = 0x8877_6655_4433_2211;
    // Little-endian host: le is a truncation, be and bswap swap.
    assert_eq!(swap(ByteOrder::ToLe, 16, v), 0x2211);
    assert_eq!(swap(ByteOrder::ToLe, 32, v), 0x4433_2211);
    assert_eq!(swap(ByteOrder::ToLe, 64, v), v);
    assert_eq!(swap(ByteOrder::ToBe, 16, v), 0x1122);
    assert_eq!(swap(ByteOrder::ToBe, 32, v), 0x1122_3344);
    assert_eq!(swap(ByteOrder::ToBe, 64, v), 0x1122_3344_5566_7788);
    assert_eq!(swap(ByteOrder::Swap, 16, v), 0x1122);
    assert_eq!(swap(ByteOrder::Swap, 32, v), 0x1122_3344);
    assert_eq!(swap(ByteOrder::Swap, 64, v), 0x1122_3344_5566_7788);
}
