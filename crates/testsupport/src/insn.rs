//! A small program builder over typed instructions, independent of the
//! assembler (so assembler bugs cannot hide interpreter or JIT bugs):
//! `P::new().mov(R0, k(1)).exit().build()`.

use bpfjet_isa::*;

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
    /// A 64-bit conditional jump.
    pub fn jmp64(self, op: JmpOp, dst: Reg, src: Operand, off: i16) -> Self {
        self.jmp(Width::W64, op, dst, src, off)
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
