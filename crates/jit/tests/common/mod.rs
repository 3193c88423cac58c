//! Shared test scaffolding: a small typed-program builder and runners for
//! the interpreter and the JIT.
#![allow(dead_code)]

use bpfjet_isa::*;
use bpfjet_jit::{JitOptions, JitProgram};
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
    pub fn alu64(self, op: AluOp, dst: Reg, src: Operand) -> Self {
        self.insn(Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src,
        })
    }
    pub fn mov(self, dst: Reg, src: Operand) -> Self {
        self.alu64(AluOp::Mov, dst, src)
    }
    pub fn add(self, dst: Reg, src: Operand) -> Self {
        self.alu64(AluOp::Add, dst, src)
    }
    pub fn lddw_kind(self, kind: LdDwKind, dst: Reg, imm: u64) -> Self {
        self.insn(Insn::LdDw { kind, dst, imm })
            .insn(Insn::LdDwTail)
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
    pub fn st(self, size: Size, dst: Reg, off: i16, src: Operand) -> Self {
        self.insn(Insn::Store {
            size,
            dst,
            off,
            src,
        })
    }
    pub fn jmp(self, op: JmpOp, dst: Reg, src: Operand, off: i16) -> Self {
        self.insn(Insn::Jmp {
            width: Width::W64,
            op,
            dst,
            src,
            off,
        })
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
    pub fn build(self) -> Vec<Insn> {
        self.0
    }
}

/// The conformance suite's helper: id 5 returns its first argument.
pub fn conformance_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(5, "identity", |_, a| Ok(a[0])))
}

pub fn verified() -> LoadOptions {
    // SAFETY: test programs are written (or generated) to stay in bounds.
    LoadOptions::verified(unsafe { VerifiedProof::assume_verified() })
}

pub fn jit(insns: &[Insn], options: &LoadOptions) -> JitProgram {
    match JitProgram::compile(insns, options, &JitOptions::uncached()) {
        Ok(p) => p,
        Err(e) => panic!("JIT compile failed: {e}"),
    }
}

pub fn interp(insns: &[Insn], options: LoadOptions) -> Program {
    Program::new(insns.to_vec(), options).expect("program loads")
}
