//! Typed instructions.

use std::fmt;

/// One 8-byte instruction slot as it is encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RawInsn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl RawInsn {
    pub const SIZE: usize = 8;

    pub fn from_bytes(b: &[u8; 8]) -> Self {
        RawInsn {
            code: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.dst & 0x0f) | (self.src << 4),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }
}

/// How many times the `may_goto` instructions of one frame (one invocation
/// of the program, a subprogram or a callback) fall through before they
/// jump: the kernel's `BPF_MAX_LOOPS` (8M), the budget of its count-based
/// `may_goto`. Every engine counts the same way: a frame's counter starts
/// here, each `may_goto` jumps when it is zero and otherwise decrements it.
/// (recent x86-64 kernels, 6.18 among them, use a timed budget instead: 250 ms per frame,
/// refilled by 0xffff; bpfjet keeps the deterministic count.)
pub const MAY_GOTO_BUDGET: u64 = 8 * 1024 * 1024;

/// A register number, 0..=10. r10 is the read-only frame pointer.
pub type Reg = u8;
pub const FRAME_POINTER: Reg = 10;

/// Operand width of ALU and jump instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W32,
    W64,
}

/// The second operand of ALU, jump and store instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(Reg),
    Imm(i32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    /// Unsigned division (offset 0).
    Div,
    /// Signed division (offset 1, cpu v4).
    SDiv,
    Or,
    And,
    Lsh,
    Rsh,
    Neg,
    /// Unsigned modulo (offset 0).
    Mod,
    /// Signed modulo (offset 1, cpu v4).
    SMod,
    Xor,
    Mov,
    /// Sign-extending move from 8, 16 or 32 bits (offset 8/16/32, cpu v4).
    MovSx(u8),
    Arsh,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `le16/le32/le64`: convert to little endian (truncation on a LE host).
    ToLe,
    /// `be16/be32/be64`: convert to big endian.
    ToBe,
    /// `bswap16/32/64`: unconditional swap (ALU64 class, cpu v4).
    Swap,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpOp {
    Jeq,
    Jgt,
    Jge,
    Jset,
    Jne,
    Jsgt,
    Jsge,
    Jlt,
    Jle,
    Jslt,
    Jsle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    pub fn bytes(self) -> usize {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Or,
    And,
    Xor,
    Xchg,
    CmpXchg,
}

/// What an `lddw` loads (its `src_reg` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LdDwKind {
    /// Plain 64-bit immediate.
    Imm,
    /// `imm` is a map fd; the result is the map pointer.
    MapFd,
    /// `imm` is a map fd, `next_imm` an offset into its value.
    MapValue,
    /// `imm` is a BTF id of a kernel variable.
    BtfId,
    /// `imm` is a relative slot offset of a subprogram (a function pointer).
    Func,
    /// `imm` is an index into the program's map table.
    MapIdx,
    /// `imm` indexes the map table, `next_imm` is an offset into the value.
    MapIdxValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallTarget {
    /// Helper function by its stable id.
    Helper(i32),
    /// bpf-to-bpf call; the slot offset relative to the next instruction.
    Local(i32),
    /// Kernel function by BTF id.
    Kfunc(i32),
}

/// One typed instruction. Jump offsets count slots relative to the next slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    Alu {
        width: Width,
        op: AluOp,
        dst: Reg,
        src: Operand,
    },
    Endian {
        order: ByteOrder,
        bits: u8,
        dst: Reg,
    },
    /// `lddw`: two slots. `imm` holds the low word in bits 0..32 and the
    /// second slot's imm in bits 32..64.
    LdDw {
        kind: LdDwKind,
        dst: Reg,
        imm: u64,
    },
    /// The second slot of an `lddw`; never executed.
    LdDwTail,
    /// Legacy packet loads (`ldabs*`/`ldind*`), kept for socket filters.
    LdPacket {
        size: Size,
        indirect: Option<Reg>,
        imm: i32,
    },
    Load {
        size: Size,
        sign_extend: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    Store {
        size: Size,
        dst: Reg,
        off: i16,
        src: Operand,
    },
    Atomic {
        width: Width,
        op: AtomicOp,
        fetch: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// `dst = load_acquire((size *)(src + off))` (`BPF_STX | BPF_ATOMIC`,
    /// imm `BPF_LOAD_ACQ` 0x100, kernel 6.15+): zero-extended like a plain
    /// load, and no later memory access of this thread moves before it.
    LoadAcquire {
        size: Size,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// `store_release((size *)(dst + off), src)` (imm `BPF_STORE_REL`
    /// 0x110): no earlier memory access of this thread moves after it.
    StoreRelease {
        size: Size,
        dst: Reg,
        off: i16,
        src: Reg,
    },
    /// Unconditional jump; `gotol` (JMP32 class) carries a 32-bit offset.
    Ja {
        off: i32,
    },
    Jmp {
        width: Width,
        op: JmpOp,
        dst: Reg,
        src: Operand,
        off: i16,
    },
    Call(CallTarget),
    /// `callx`: call through a register (cpu v4 extension emitted by LLVM).
    CallReg {
        reg: Reg,
    },
    /// `may_goto` (`BPF_JMP | BPF_JCOND`, src_reg `BPF_MAY_GOTO`, kernel
    /// 6.9+; what `can_loop` / `cond_break` expand to): falls through
    /// while the frame's loop budget lasts, jumps by `off` once it is spent.
    MayGoto {
        off: i16,
    },
    Exit,
}

impl Insn {
    /// The plain load or store an ordered access (`load_acquire`,
    /// `store_release`) performs, for analyses of the registers and memory
    /// an instruction touches rather than its ordering; every other
    /// instruction unchanged.
    pub fn unordered(self) -> Insn {
        match self {
            Insn::LoadAcquire {
                size,
                dst,
                src,
                off,
            } => Insn::Load {
                size,
                sign_extend: false,
                dst,
                src,
                off,
            },
            Insn::StoreRelease {
                size,
                dst,
                off,
                src,
            } => Insn::Store {
                size,
                dst,
                off,
                src: Operand::Reg(src),
            },
            other => other,
        }
    }

    /// Number of slots this instruction occupies.
    pub fn slots(&self) -> usize {
        match self {
            Insn::LdDw { .. } => 2,
            _ => 1,
        }
    }

    /// The absolute target slot of a jump at slot `pc`, if it jumps.
    pub fn jump_target(&self, pc: usize) -> Option<i64> {
        match *self {
            Insn::Ja { off } => Some(pc as i64 + 1 + off as i64),
            Insn::Jmp { off, .. } | Insn::MayGoto { off } => Some(pc as i64 + 1 + off as i64),
            _ => None,
        }
    }
}

impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::disasm::format_insn(self, None))
    }
}
