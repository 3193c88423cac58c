//! Differential testing: random valid programs (ALU of both widths, byte
//! swaps, loads and stores of every size on the stack — through r10 and
//! through a derived pointer — and on a memory buffer, atomics, forward
//! branches, bounded loops, helper calls) run on the bounds-checked
//! interpreter and on the JIT; r0 (which folds in the registers and the
//! stack) and the final buffer must agree. The budget is bounded so that
//! `make test` stays fast.

mod common;

use bpfjet_isa::{AluOp, AtomicOp, ByteOrder, Insn, JmpOp, LdDwKind, Operand, Reg, Size, Width};
use bpfjet_runtime::*;
use common::*;
use proptest::prelude::*;

/// Registers the generator writes (r7: buffer pointer, r8: loop counter, r9:
/// stack pointer r10-32 are reserved).
const DATA_REGS: std::ops::RangeInclusive<u8> = 0..=6;
const MEM_LEN: usize = 64;

#[derive(Clone, Debug)]
enum Src {
    Reg(Reg),
    Imm(i32),
}

#[derive(Clone, Copy, Debug)]
enum Base {
    /// r10 + off, off in [-64, -size]
    Frame,
    /// r9 (= r10 - 32) + off, off in [-32, 32 - size]
    Derived,
    /// r7 (the buffer) + off, off in [0, 64 - size]
    Buffer,
}

#[derive(Clone, Debug)]
enum Op {
    Alu {
        wide: bool,
        op: AluOp,
        dst: Reg,
        src: Src,
    },
    Endian {
        order: ByteOrder,
        bits: u8,
        dst: Reg,
    },
    Store {
        size: Size,
        base: Base,
        pos: u8,
        src: Src,
    },
    Load {
        size: Size,
        sign_extend: bool,
        dst: Reg,
        base: Base,
        pos: u8,
    },
    Atomic {
        wide: bool,
        op: AtomicOp,
        fetch: bool,
        slot: u8,
        src: Reg,
    },
    Jmp {
        wide: bool,
        op: JmpOp,
        dst: Reg,
        src: Src,
        skip: u8,
    },
    /// r1 = src; call helper 5 (identity)
    Call { src: Reg },
}

#[derive(Clone, Debug)]
enum Block {
    Straight(Vec<Op>),
    Loop { count: u8, body: Vec<Op> },
}

fn imm() -> impl Strategy<Value = i32> {
    prop_oneof![
        3 => any::<i32>(),
        2 => prop::sample::select(vec![0, 1, -1, 2, 7, 31, 32, 63, 64, i32::MIN, i32::MAX, 0x7f, 0x80, 0xffff]),
    ]
}

fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => any::<u64>(),
        1 => prop::sample::select(vec![0, 1, u64::MAX, 1 << 63, 0x8000_0000, 0xffff_ffff, 0x7fff_ffff, 2]),
    ]
}

fn data_reg() -> impl Strategy<Value = Reg> {
    DATA_REGS
}

fn src() -> impl Strategy<Value = Src> {
    prop_oneof![
        // r8, the loop counter, is a fine value to read.
        (prop_oneof![data_reg(), Just(8u8)]).prop_map(Src::Reg),
        imm().prop_map(Src::Imm),
    ]
}

fn size() -> impl Strategy<Value = Size> {
    prop::sample::select(vec![Size::B, Size::H, Size::W, Size::DW])
}

fn base() -> impl Strategy<Value = Base> {
    prop::sample::select(vec![Base::Frame, Base::Derived, Base::Buffer])
}

fn alu_op() -> impl Strategy<Value = AluOp> {
    prop::sample::select(vec![
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::SDiv,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Neg,
        AluOp::Mod,
        AluOp::SMod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::MovSx(8),
        AluOp::MovSx(16),
        AluOp::MovSx(32),
        AluOp::Arsh,
    ])
}

fn jmp_op() -> impl Strategy<Value = JmpOp> {
    prop::sample::select(vec![
        JmpOp::Jeq,
        JmpOp::Jgt,
        JmpOp::Jge,
        JmpOp::Jset,
        JmpOp::Jne,
        JmpOp::Jsgt,
        JmpOp::Jsge,
        JmpOp::Jlt,
        JmpOp::Jle,
        JmpOp::Jslt,
        JmpOp::Jsle,
    ])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), alu_op(), data_reg(), src()).prop_map(|(wide, op, dst, src)| {
            // movsx32 exists only in ALU64.
            let wide = wide || op == AluOp::MovSx(32);
            Op::Alu { wide, op, dst, src }
        }),
        1 => (
            prop::sample::select(vec![ByteOrder::ToLe, ByteOrder::ToBe, ByteOrder::Swap]),
            prop::sample::select(vec![16u8, 32, 64]),
            data_reg()
        )
            .prop_map(|(order, bits, dst)| Op::Endian { order, bits, dst }),
        2 => (size(), base(), any::<u8>(), src())
            .prop_map(|(size, base, pos, src)| Op::Store { size, base, pos, src }),
        2 => (size(), any::<bool>(), data_reg(), base(), any::<u8>()).prop_map(
            |(size, sign_extend, dst, base, pos)| Op::Load { size, sign_extend, dst, base, pos }
        ),
        1 => (
            any::<bool>(),
            prop::sample::select(vec![
                AtomicOp::Add,
                AtomicOp::Or,
                AtomicOp::And,
                AtomicOp::Xor,
                AtomicOp::Xchg,
                AtomicOp::CmpXchg
            ]),
            any::<bool>(),
            any::<u8>(),
            data_reg()
        )
            .prop_map(|(wide, op, fetch, slot, src)| Op::Atomic { wide, op, fetch, slot, src }),
        2 => (any::<bool>(), jmp_op(), data_reg(), src(), 0u8..4)
            .prop_map(|(wide, op, dst, src, skip)| Op::Jmp { wide, op, dst, src, skip }),
        1 => data_reg().prop_map(|src| Op::Call { src }),
    ]
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        3 => prop::collection::vec(op(), 1..12).prop_map(Block::Straight),
        1 => (1u8..6, prop::collection::vec(op(), 1..8))
            .prop_map(|(count, body)| Block::Loop { count, body }),
    ]
}

fn operand(src: &Src) -> Operand {
    match *src {
        Src::Reg(r) => Operand::Reg(r),
        Src::Imm(k) => Operand::Imm(k),
    }
}

/// (base register, offset) of an access of `bytes` selected by `pos`.
fn place(base: Base, pos: u8, bytes: usize) -> (Reg, i16) {
    let span = (MEM_LEN - bytes + 1) as i16; // 64-byte windows everywhere
    let p = i16::from(pos) % span;
    match base {
        Base::Frame => (10, -64 + p),
        Base::Derived => (9, -32 + p),
        Base::Buffer => (7, p),
    }
}

fn lower_op(op: &Op, out: &mut Vec<Insn>, jump_to: Option<i16>) {
    match op {
        Op::Alu { wide, op, dst, src } => out.push(Insn::Alu {
            width: if *wide { Width::W64 } else { Width::W32 },
            op: *op,
            dst: *dst,
            src: operand(src),
        }),
        Op::Endian { order, bits, dst } => {
            // bswap is the ALU64 form; le/be the ALU form: both are typed here.
            out.push(Insn::Endian {
                order: *order,
                bits: *bits,
                dst: *dst,
            })
        }
        Op::Store {
            size,
            base,
            pos,
            src,
        } => {
            let (reg, off) = place(*base, *pos, size.bytes());
            out.push(Insn::Store {
                size: *size,
                dst: reg,
                off,
                src: operand(src),
            })
        }
        Op::Load {
            size,
            sign_extend,
            dst,
            base,
            pos,
        } => {
            let (reg, off) = place(*base, *pos, size.bytes());
            out.push(Insn::Load {
                size: *size,
                sign_extend: *sign_extend && *size != Size::DW,
                dst: *dst,
                src: reg,
                off,
            })
        }
        Op::Atomic {
            wide,
            op,
            fetch,
            slot,
            src,
        } => {
            let bytes: i16 = if *wide { 8 } else { 4 };
            let count = 64 / bytes;
            let off = -bytes * (1 + i16::from(*slot) % count);
            out.push(Insn::Atomic {
                width: if *wide { Width::W64 } else { Width::W32 },
                op: *op,
                fetch: *fetch || matches!(op, AtomicOp::Xchg | AtomicOp::CmpXchg),
                dst: 10,
                src: *src,
                off,
            })
        }
        Op::Jmp {
            wide, op, dst, src, ..
        } => out.push(Insn::Jmp {
            width: if *wide { Width::W64 } else { Width::W32 },
            op: *op,
            dst: *dst,
            src: operand(src),
            off: jump_to.unwrap_or(0),
        }),
        Op::Call { src } => {
            out.push(Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: 1,
                src: Operand::Reg(*src),
            });
            out.push(Insn::Call(bpfjet_isa::CallTarget::Helper(5)));
        }
    }
}

fn op_slots(op: &Op) -> usize {
    match op {
        Op::Call { .. } => 2,
        _ => 1,
    }
}

/// Lower a list of ops; forward jumps skip up to `skip` ops but stay inside
/// the list (a jump may land just past its end).
fn lower_ops(ops: &[Op], out: &mut Vec<Insn>) {
    let mut starts = Vec::with_capacity(ops.len() + 1);
    let mut pos = out.len();
    for op in ops {
        starts.push(pos);
        pos += op_slots(op);
    }
    starts.push(pos);
    for (i, op) in ops.iter().enumerate() {
        let jump_to = match op {
            Op::Jmp { skip, .. } => {
                let target = starts[(i + 1 + usize::from(*skip)).min(ops.len())];
                Some((target - (starts[i] + 1)) as i16)
            }
            _ => None,
        };
        lower_op(op, out, jump_to);
    }
}

fn build(init: &[u64; 7], blocks: &[Block]) -> Vec<Insn> {
    let mut p = P::new()
        .mov(7, r(1))
        .mov(9, r(10))
        .add(9, k(-32))
        .mov(8, k(0));
    for i in 1..=8 {
        p = p.st(Size::DW, 10, -8 * i, k(0));
    }
    for (reg, v) in init.iter().enumerate() {
        p = p.lddw_kind(LdDwKind::Imm, reg as Reg, *v);
    }
    let mut out = p.build();
    for b in blocks {
        match b {
            Block::Straight(ops) => lower_ops(ops, &mut out),
            Block::Loop { count, body } => {
                out.push(Insn::Alu {
                    width: Width::W64,
                    op: AluOp::Mov,
                    dst: 8,
                    src: Operand::Imm(i32::from(*count)),
                });
                let start = out.len();
                lower_ops(body, &mut out);
                out.push(Insn::Alu {
                    width: Width::W64,
                    op: AluOp::Add,
                    dst: 8,
                    src: Operand::Imm(-1),
                });
                let back = start as i64 - (out.len() as i64 + 1);
                out.push(Insn::Jmp {
                    width: Width::W64,
                    op: JmpOp::Jne,
                    dst: 8,
                    src: Operand::Imm(0),
                    off: back as i16,
                });
            }
        }
    }
    // Fold the registers and the stack into r0.
    let mut p = P(out);
    for reg in [1u8, 2, 3, 4, 5, 6, 8] {
        p = p
            .alu64(AluOp::Mul, 0, k(0x9e37_79b1u32 as i32))
            .alu64(AluOp::Xor, 0, r(reg));
    }
    for i in 1..=8 {
        p = p
            .ldx(Size::DW, 1, 10, -8 * i)
            .alu64(AluOp::Mul, 0, k(31))
            .add(0, r(1));
    }
    p.exit().build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn jit_matches_the_interpreter(
        init in prop::array::uniform7(value()),
        blocks in prop::collection::vec(block(), 1..5),
        mem in prop::collection::vec(any::<u8>(), MEM_LEN),
    ) {
        let insns = build(&init, &blocks);
        let checked = LoadOptions::bounds_checked().with_helpers(conformance_helpers());
        let program = Program::new(insns.clone(), checked).expect("generated programs load");
        let mut interp_mem = mem.clone();
        let expected = program.run_on_memory(&mut RunState::new(), &mut interp_mem);
        // Generated programs are valid: the bounds-checked run must not fault
        // (otherwise the JIT, which trusts the program, must not run it).
        prop_assert!(expected.is_ok(), "interpreter faulted: {:?}", expected);
        let jitted = jit(&insns, &verified().with_helpers(conformance_helpers()));
        let mut jit_mem = mem.clone();
        let got = jitted.run_on_memory(&mut jit_mem);
        prop_assert_eq!(got, expected);
        prop_assert_eq!(jit_mem, interp_mem);
    }
}
