//! Shared test scaffolding: a small program builder over typed instructions
//! (independent of the assembler) and runners for both memory modes.
#![allow(dead_code)]

use bpfjet_isa::*;
use bpfjet_runtime::*;

pub fn r(reg: Reg) -> Operand {
    Operand::Reg(reg)
}

pub fn k(imm: i32) -> Operand {
    Operand::Imm(imm)
}

/// Appends typed instructions in slot form.
#[derive(Default, Clone)]
pub struct P(pub Vec<Insn>);

impl P {
    pub fn new() -> Self {
        P(Vec::new())
    }
    pub fn insn(mut self, insn: Insn) -> Self {
        self.0.push(insn);
        self
    }
    pub fn alu(self, width: Width, op: AluOp, dst: Reg, src: Operand) -> Self {
        self.insn(Insn::Alu {
            width,
            op,
            dst,
            src,
        })
    }
    pub fn alu64(self, op: AluOp, dst: Reg, src: Operand) -> Self {
        self.alu(Width::W64, op, dst, src)
    }
    pub fn alu32(self, op: AluOp, dst: Reg, src: Operand) -> Self {
        self.alu(Width::W32, op, dst, src)
    }
    pub fn mov(self, dst: Reg, src: Operand) -> Self {
        self.alu64(AluOp::Mov, dst, src)
    }
    pub fn add(self, dst: Reg, src: Operand) -> Self {
        self.alu64(AluOp::Add, dst, src)
    }
    pub fn endian(self, order: ByteOrder, bits: u8, dst: Reg) -> Self {
        self.insn(Insn::Endian { order, bits, dst })
    }
    pub fn lddw_kind(self, kind: LdDwKind, dst: Reg, imm: u64) -> Self {
        self.insn(Insn::LdDw { kind, dst, imm })
            .insn(Insn::LdDwTail)
    }
    pub fn lddw(self, dst: Reg, imm: u64) -> Self {
        self.lddw_kind(LdDwKind::Imm, dst, imm)
    }
    pub fn ldx(self, size: Size, dst: Reg, src: Reg, off: i16) -> Self {
        self.insn(Insn::Load {
            size,
            sign_extend: false,
            dst,
            src,
            off,
        })
    }
    pub fn ldxs(self, size: Size, dst: Reg, src: Reg, off: i16) -> Self {
        self.insn(Insn::Load {
            size,
            sign_extend: true,
            dst,
            src,
            off,
        })
    }
    pub fn st(self, size: Size, dst: Reg, off: i16, src: Operand) -> Self {
        self.insn(Insn::Store {
            size,
            dst,
            off,
            src,
        })
    }
    pub fn atomic(
        self,
        width: Width,
        op: AtomicOp,
        fetch: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    ) -> Self {
        self.insn(Insn::Atomic {
            width,
            op,
            fetch,
            dst,
            src,
            off,
        })
    }
    pub fn jmp(self, width: Width, op: JmpOp, dst: Reg, src: Operand, off: i16) -> Self {
        self.insn(Insn::Jmp {
            width,
            op,
            dst,
            src,
            off,
        })
    }
    pub fn ja(self, off: i32) -> Self {
        self.insn(Insn::Ja { off })
    }
    pub fn call(self, id: i32) -> Self {
        self.insn(Insn::Call(CallTarget::Helper(id)))
    }
    pub fn call_local(self, off: i32) -> Self {
        self.insn(Insn::Call(CallTarget::Local(off)))
    }
    pub fn exit(self) -> Self {
        self.insn(Insn::Exit)
    }
    /// Slot index the next instruction will get.
    pub fn here(&self) -> usize {
        self.0.len()
    }
    pub fn build(self) -> Vec<Insn> {
        self.0
    }
}

/// The conformance suite's helper: id 5 returns its first argument.
pub fn conformance_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(5, "identity", |_, a| Ok(a[0])))
}

pub fn verified() -> LoadOptions {
    // SAFETY: test programs are written to stay in bounds; the ones that do
    // not are only ever run bounds-checked.
    LoadOptions::verified(unsafe { VerifiedProof::assume_verified() })
}

pub fn load(insns: Vec<Insn>, options: LoadOptions) -> Program {
    Program::new(insns, options).expect("program loads")
}

/// Run bounds-checked on `mem` (conformance convention).
pub fn run_checked(insns: Vec<Insn>, mem: &mut [u8]) -> Result<u64, Fault> {
    let program = load(
        insns,
        LoadOptions::bounds_checked().with_helpers(conformance_helpers()),
    );
    program.run_on_memory(&mut RunState::new(), mem)
}

/// Run in both memory modes on copies of `mem`; both must agree (result and
/// final memory). Returns the result and the final memory.
pub fn run_both_mem(insns: Vec<Insn>, mem: &[u8]) -> (u64, Vec<u8>) {
    let mut checked_mem = mem.to_vec();
    let checked =
        run_checked(insns.clone(), &mut checked_mem).expect("bounds-checked run succeeds");
    let program = load(insns, verified().with_helpers(conformance_helpers()));
    let mut verified_mem = mem.to_vec();
    let fast = program
        .run_on_memory(&mut RunState::new(), &mut verified_mem)
        .expect("verified run succeeds");
    assert_eq!(checked, fast, "modes disagree on r0");
    assert_eq!(checked_mem, verified_mem, "modes disagree on memory");
    (checked, checked_mem)
}

pub fn run_both(insns: Vec<Insn>) -> u64 {
    run_both_mem(insns, &[]).0
}
