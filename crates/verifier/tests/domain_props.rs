//! Soundness of the abstract domains: for random abstract values and random
//! concrete members, the abstract result of every ALU op contains the
//! concrete result, and branch refinement keeps every member that satisfies
//! the condition.

use bpfjet_isa::{AluOp, ByteOrder, JmpOp, Width};
use bpfjet_verifier::range::Scalar;
use bpfjet_verifier::range_ops::{alu, endian, eval, eval_endian};
use bpfjet_verifier::tnum::Tnum;
use bpfjet_verifier::{decide_branch, eval_cond, refine_branch};
use proptest::prelude::*;

/// An abstract value and a concrete member of it.
fn member() -> impl Strategy<Value = (Scalar, u64)> {
    (any::<u64>(), any::<u64>(), any::<u64>(), 0u8..6).prop_map(|(v, a, b, shape)| {
        let s = match shape {
            0 => Scalar::constant(v),
            1 => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let lo = lo.min(v);
                let hi = hi.max(v);
                Scalar::from_urange(lo, hi)
            }
            2 => {
                let m = a & 0xffff;
                Scalar::from_tnum(Tnum {
                    value: v & !m,
                    mask: m,
                })
            }
            3 => {
                let w = (v as i64).wrapping_abs() % 1000;
                Scalar::from_srange(-w - (a % 50) as i64, w + (b % 50) as i64)
            }
            4 => Scalar::from_urange(0, (a % 300).max(v % 300)),
            _ => Scalar::UNKNOWN,
        };
        // Pick a member: clamp v into the abstract value.
        let c = match shape {
            0 => v,
            1 => v.clamp(s.umin, s.umax),
            2 => v,
            3 => ((v as i64).rem_euclid((s.smax - s.smin + 1).max(1)) + s.smin) as u64,
            4 => v % (s.umax + 1),
            _ => v,
        };
        (s, c)
    })
}

fn ops() -> impl Strategy<Value = AluOp> {
    prop_oneof![
        Just(AluOp::Add),
        Just(AluOp::Sub),
        Just(AluOp::Mul),
        Just(AluOp::Div),
        Just(AluOp::SDiv),
        Just(AluOp::Mod),
        Just(AluOp::SMod),
        Just(AluOp::Or),
        Just(AluOp::And),
        Just(AluOp::Lsh),
        Just(AluOp::Rsh),
        Just(AluOp::Arsh),
        Just(AluOp::Neg),
        Just(AluOp::Xor),
        Just(AluOp::Mov),
        Just(AluOp::MovSx(8)),
        Just(AluOp::MovSx(16)),
        Just(AluOp::MovSx(32)),
    ]
}

fn conds() -> impl Strategy<Value = JmpOp> {
    prop_oneof![
        Just(JmpOp::Jeq),
        Just(JmpOp::Jne),
        Just(JmpOp::Jgt),
        Just(JmpOp::Jge),
        Just(JmpOp::Jlt),
        Just(JmpOp::Jle),
        Just(JmpOp::Jsgt),
        Just(JmpOp::Jsge),
        Just(JmpOp::Jslt),
        Just(JmpOp::Jsle),
        Just(JmpOp::Jset),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]

    #[test]
    fn members_are_members((s, c) in member()) {
        prop_assert!(s.contains(c), "{s:?} should contain {c:#x}");
    }

    #[test]
    fn alu_is_sound((a, x) in member(), (b, y) in member(), op in ops(), w64 in any::<bool>()) {
        let width = if w64 { Width::W64 } else { Width::W32 };
        // MovSx(32) only exists in 64-bit form.
        prop_assume!(!(op == AluOp::MovSx(32) && width == Width::W32));
        let r = alu(op, width, &a, &b);
        let c = eval(op, width, x, y);
        prop_assert!(r.contains(c), "{op:?} {width:?}: {a:?} op {b:?} = {r:?} misses {c:#x} ({x:#x}, {y:#x})");
    }

    #[test]
    fn endian_is_sound((a, x) in member(), k in 0usize..9) {
        let (order, bits) = [(ByteOrder::ToLe, 16), (ByteOrder::ToLe, 32), (ByteOrder::ToLe, 64),
            (ByteOrder::ToBe, 16), (ByteOrder::ToBe, 32), (ByteOrder::ToBe, 64),
            (ByteOrder::Swap, 16), (ByteOrder::Swap, 32), (ByteOrder::Swap, 64)][k];
        let r = endian(order, bits, &a);
        prop_assert!(r.contains(eval_endian(order, bits, x)));
    }

    #[test]
    fn branches_are_sound((a, x) in member(), (b, y) in member(), op in conds(), w64 in any::<bool>()) {
        let width = if w64 { Width::W64 } else { Width::W32 };
        let holds = eval_cond(op, width, x, y);
        if let Some(d) = decide_branch(op, width, &a, &b) {
            prop_assert_eq!(d, holds, "{:?} decided wrongly for {:#x} {:#x}", op, x, y);
        }
        match refine_branch(op, width, &a, &b, holds) {
            Some((ra, rb)) => {
                prop_assert!(ra.contains(x), "{op:?} {holds}: {a:?} refined to {ra:?} loses {x:#x}");
                prop_assert!(rb.contains(y), "{op:?} {holds}: {b:?} refined to {rb:?} loses {y:#x}");
            }
            None => prop_assert!(false, "{op:?} side {holds} declared impossible for {x:#x} {y:#x}"),
        }
    }
}
