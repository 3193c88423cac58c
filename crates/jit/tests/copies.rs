//! Runs of load/store pairs (clang's lowering of `__builtin_memcpy`) that
//! the lifter turns into `memcpy`: generated runs of every access size,
//! both directions, pairwise or interleaved, between the stack and a memory
//! buffer, with source and destination disjoint or overlapping, must give
//! the interpreter's result (registers, stack, buffer). Disjoint runs must
//! become a `memcpy` and overlapping ones must not.

mod common;

use bpfjet_isa::{AluOp, Insn, Reg, Size};
use bpfjet_jit::{DumpStage, JitOptions, JitProgram};
use bpfjet_runtime::*;
use common::*;
use proptest::prelude::*;

const MEM_LEN: usize = 128;
/// Bytes of stack the programs use (r10 - 128 .. r10).
const STACK_USED: i16 = 128;

/// Where a copy reads or writes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Base {
    /// r7: the memory buffer.
    Buffer,
    /// r6 = r7 + 16: the same buffer, 16 bytes further.
    Shifted,
    /// r10: the frame pointer (offsets negative).
    Frame,
    /// r9 = r10 - 64.
    Derived,
}

impl Base {
    fn reg(self) -> Reg {
        match self {
            Base::Buffer => 7,
            Base::Shifted => 6,
            Base::Frame => 10,
            Base::Derived => 9,
        }
    }

    /// The offsets valid for an access through this base: `lo..hi`.
    fn window(self) -> (i64, i64) {
        match self {
            Base::Buffer => (0, MEM_LEN as i64),
            Base::Shifted => (-16, MEM_LEN as i64 - 16),
            Base::Frame => (-i64::from(STACK_USED), 0),
            Base::Derived => (-64, 64),
        }
    }

    /// Start of the window in one address space per memory region (buffer
    /// offsets from r7, stack offsets from r10).
    fn region_start(self) -> (bool, i64) {
        match self {
            Base::Buffer => (false, 0),
            Base::Shifted => (false, 16),
            Base::Frame => (true, 0),
            Base::Derived => (true, -64),
        }
    }
}

#[derive(Clone, Debug)]
struct Copy {
    size: Size,
    pairs: usize,
    src: Base,
    dst: Base,
    /// Fractions (0..=255) placing the source and destination in their
    /// windows.
    src_pos: u8,
    dst_pos: u8,
    descending: bool,
    /// Two loads before two stores, as clang schedules long copies.
    interleaved: bool,
}

impl Copy {
    fn bytes(&self) -> i64 {
        (self.size.bytes() * self.pairs) as i64
    }

    /// The source and destination offsets from their base registers.
    fn offsets(&self) -> (i64, i64) {
        let place = |base: Base, pos: u8| {
            let (lo, hi) = base.window();
            let room = hi - lo - self.bytes();
            lo + room * i64::from(pos) / 255
        };
        (place(self.src, self.src_pos), place(self.dst, self.dst_pos))
    }

    /// Whether the two byte ranges share memory.
    fn overlaps(&self) -> bool {
        let (s, d) = self.offsets();
        let (s_stack, s_base) = self.src.region_start();
        let (d_stack, d_base) = self.dst.region_start();
        if s_stack != d_stack {
            return false;
        }
        let (s, d) = (s_base + s, d_base + d);
        s < d + self.bytes() && d < s + self.bytes()
    }

    fn lower(&self, out: &mut Vec<Insn>) {
        let (s, d) = self.offsets();
        let step = self.size.bytes() as i64;
        let mut order: Vec<i64> = (0..self.pairs as i64).map(|i| i * step).collect();
        if self.descending {
            order.reverse();
        }
        let load = |t: Reg, at: i64| Insn::Load {
            size: self.size,
            sign_extend: false,
            dst: t,
            src: self.src.reg(),
            off: (s + at) as i16,
        };
        let store = |t: Reg, at: i64| Insn::Store {
            size: self.size,
            dst: self.dst.reg(),
            off: (d + at) as i16,
            src: r(t),
        };
        if self.interleaved {
            for chunk in order.chunks(2) {
                for (t, &at) in [2u8, 3].iter().zip(chunk) {
                    out.push(load(*t, at));
                }
                for (t, &at) in [2u8, 3].iter().zip(chunk) {
                    out.push(store(*t, at));
                }
            }
        } else {
            for &at in &order {
                out.push(load(2, at));
                out.push(store(2, at));
            }
        }
    }
}

fn base() -> impl Strategy<Value = Base> {
    prop::sample::select(vec![
        Base::Buffer,
        Base::Shifted,
        Base::Frame,
        Base::Derived,
    ])
}

fn copy() -> impl Strategy<Value = Copy> {
    (
        prop::sample::select(vec![Size::B, Size::H, Size::W, Size::DW]),
        1usize..=12,
        base(),
        base(),
        any::<u8>(),
        any::<u8>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(size, pairs, src, dst, src_pos, dst_pos, descending, interleaved)| Copy {
                size,
                pairs,
                src,
                dst,
                src_pos,
                dst_pos,
                descending,
                interleaved,
            },
        )
}

/// The program: set up the bases, fill the used stack from the buffer (so
/// that every stack byte is defined), run the copies, then fold the
/// temporaries and the stack into r0.
fn program(copies: &[Copy]) -> Vec<Insn> {
    let mut p = P::new()
        .mov(7, r(1))
        .mov(6, r(1))
        .add(6, k(16))
        .mov(9, r(10))
        .add(9, k(-64))
        .mov(2, k(0))
        .mov(3, k(0));
    for i in 0..STACK_USED / 8 {
        p = p
            .ldx(Size::DW, 1, 7, i * 8)
            .alu64(AluOp::Xor, 1, k(0x5a5a_5a5a))
            .st(Size::DW, 10, -8 * (i + 1), r(1));
    }
    let mut out = p.build();
    for c in copies {
        c.lower(&mut out);
    }
    let mut p = P(out).mov(0, r(2)).alu64(AluOp::Mul, 0, k(31)).add(0, r(3));
    for i in 0..STACK_USED / 8 {
        p = p
            .ldx(Size::DW, 1, 10, -8 * (i + 1))
            .alu64(AluOp::Mul, 0, k(31))
            .add(0, r(1));
    }
    p.exit().build()
}

fn lifted(insns: &[Insn]) -> String {
    JitProgram::dump(
        insns,
        &verified().with_helpers(conformance_helpers()),
        &JitOptions::uncached(),
        DumpStage::LiftedIr,
    )
    .expect("dump")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn copies_match_the_interpreter(
        copies in prop::collection::vec(copy(), 1..4),
        mem in prop::collection::vec(any::<u8>(), MEM_LEN),
    ) {
        let insns = program(&copies);
        let checked = LoadOptions::bounds_checked().with_helpers(conformance_helpers());
        let program = Program::new(insns.clone(), checked).expect("generated programs load");
        let mut interp_mem = mem.clone();
        let expected = program.run_on_memory(&mut RunState::new(), &mut interp_mem);
        prop_assert!(expected.is_ok(), "interpreter faulted: {:?}", expected);
        let jitted = jit(&insns, &verified().with_helpers(conformance_helpers()));
        let mut jit_mem = mem.clone();
        let got = jitted.run_on_memory(&mut jit_mem);
        prop_assert_eq!(got, expected);
        prop_assert_eq!(jit_mem, interp_mem);
    }
}

fn one(src: Base, dst: Base, src_pos: u8, dst_pos: u8) -> Copy {
    Copy {
        size: Size::B,
        pairs: 12,
        src,
        dst,
        src_pos,
        dst_pos,
        descending: true,
        interleaved: true,
    }
}

#[test]
fn disjoint_runs_become_memcpy() {
    for c in [
        // Two halves of one buffer (registers a known distance apart).
        one(Base::Buffer, Base::Shifted, 0, 255),
        // Stack to stack through r10 and a derived pointer.
        one(Base::Frame, Base::Derived, 0, 255),
    ] {
        assert!(!c.overlaps(), "{c:?}");
        let ir = lifted(&program(std::slice::from_ref(&c)));
        assert!(ir.contains("@llvm.memcpy"), "{c:?}: no memcpy in\n{ir}");
    }
}

#[test]
fn overlapping_or_unrelated_runs_stay_pairs() {
    // Overlapping: the pairs' order matters, so no memcpy.
    let overlapping = one(Base::Buffer, Base::Shifted, 0, 0);
    assert!(overlapping.overlaps());
    // Buffer to stack: disjoint in fact, but the analysis cannot prove that
    // a pointer argument does not point into the frame, so no memcpy.
    let unrelated = one(Base::Buffer, Base::Frame, 0, 0);
    for c in [overlapping, unrelated] {
        let ir = lifted(&program(std::slice::from_ref(&c)));
        assert!(!ir.contains("@llvm.memcpy"), "{c:?}: memcpy in\n{ir}");
    }
}
