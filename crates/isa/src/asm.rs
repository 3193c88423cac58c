//! Assembler for the text syntax of the bpf_conformance suite
//! (`mov32 %r0, 0`, `ldxh %r0, [%r1+2]`, `jne %r1, %r0, exit`, `lock fetch add
//! [%r10-8], %r1`, `call local fn`, labels `name:`, `#` comments).
//!
//! The output is exactly what [`decode_program`] would return for the encoded
//! bytes: the assembled program is encoded and run through the decoder before
//! it is returned, so the assembler never produces a program the rest of
//! bpfjet would refuse, and the decoder stays the single place that knows
//! which encodings are valid. Decoder complaints are mapped back to the source
//! line of the offending instruction.
//!
//! Beyond the suite's own mnemonics the assembler reads everything that
//! [`crate::disasm::format_insn_asm`] prints: `ja32`/`gotol` (32-bit offsets),
//! `may_goto +off` (or a label),
//! `ldabs*`/`ldind*`, `call kfunc N`, and the pseudo forms of `lddw`
//! (`lddw %r1, map_fd 3`, `lddw %r1, map_value 3, 16`, `lddw %r1, func +5`,
//! `btf_id`, `map_idx`, `map_idx_value`).
//!
//! Like the suite's own assembler, a jump to `exit` that names no label of
//! that name goes to the first `exit` instruction.

mod error;
mod operand;

pub use error::{AsmError, AsmErrorKind};

use crate::decode::decode_program;
use crate::encode::{encode_program, to_bytes};
use crate::insn::*;
use operand::{
    imm32, imm64, is_register, label_name, memory, register, split_operands, split_word, target,
    Target,
};
use std::collections::HashMap;

use AsmErrorKind as E;

/// Assemble source text into a typed program in slot form (an
/// [`Insn::LdDwTail`] after every `lddw`), validated like [`decode_program`].
///
/// ```
/// use bpfjet_isa::{assemble, disassemble};
/// let prog = assemble("lddw %r0, 0x123\njne %r1, 0, done\nmov32 %r0, 1\ndone:\nexit").unwrap();
/// assert_eq!(
///     disassemble(&prog),
///     "   0: r0 = 0x123 ll\n   2: if r1 != 0 goto +1 <LBB_4>\n   3: w0 = 1\n   4: exit\n"
/// );
/// let err = assemble("mov %r0, 0\nfoo %r1").unwrap_err();
/// assert_eq!(err.line, 2);
/// ```
pub fn assemble(text: &str) -> Result<Vec<Insn>, AsmError> {
    let mut asm = Assembler::new(text);
    for (idx, line) in text.lines().enumerate() {
        asm.line(idx + 1, line)
            .map_err(|kind| asm.error(idx + 1, kind))?;
    }
    asm.finish()
}

/// Assemble straight to the byte image (8 bytes per slot, little endian).
pub fn assemble_bytes(text: &str) -> Result<Vec<u8>, AsmError> {
    Ok(to_bytes(&encode_program(&assemble(text)?)))
}

/// How wide the offset field a target is patched into is.
#[derive(Clone, Copy, Debug)]
enum OffsetWidth {
    I16,
    I32,
}

impl OffsetWidth {
    fn check(self, value: i64) -> Result<i64, AsmErrorKind> {
        let ok = match self {
            OffsetWidth::I16 => i16::try_from(value).is_ok(),
            OffsetWidth::I32 => i32::try_from(value).is_ok(),
        };
        if ok {
            Ok(value)
        } else {
            Err(E::OffsetOutOfRange {
                value,
                bits: match self {
                    OffsetWidth::I16 => 16,
                    OffsetWidth::I32 => 32,
                },
            })
        }
    }
}

/// One parsed instruction, with its jump target still symbolic.
struct Parsed {
    insn: Insn,
    target: Option<(Target, OffsetWidth)>,
}

impl Parsed {
    fn plain(insn: Insn) -> Self {
        Parsed { insn, target: None }
    }

    fn jump(insn: Insn, target: Target, width: OffsetWidth) -> Self {
        Parsed {
            insn,
            target: Some((target, width)),
        }
    }
}

/// A target to patch once every label is known.
struct Fixup {
    pc: usize,
    line: usize,
    target: Target,
    width: OffsetWidth,
}

struct Assembler<'a> {
    source: Vec<&'a str>,
    /// The program in slot form.
    insns: Vec<Insn>,
    /// The source line of every slot.
    lines: Vec<usize>,
    fixups: Vec<Fixup>,
    /// Label → (slot, line of definition).
    labels: HashMap<String, (usize, usize)>,
    first_exit: Option<usize>,
}

impl<'a> Assembler<'a> {
    fn new(text: &'a str) -> Self {
        Assembler {
            source: text.lines().collect(),
            insns: Vec::new(),
            lines: Vec::new(),
            fixups: Vec::new(),
            labels: HashMap::new(),
            first_exit: None,
        }
    }

    fn error(&self, line: usize, kind: AsmErrorKind) -> AsmError {
        let text = line
            .checked_sub(1)
            .and_then(|i| self.source.get(i))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        AsmError { line, text, kind }
    }

    fn line(&mut self, line: usize, text: &str) -> Result<(), AsmErrorKind> {
        let mut code = text.split('#').next().unwrap_or("").trim();
        // Any number of `label:` prefixes, possibly followed by an instruction.
        loop {
            let (word, rest) = split_word(code);
            let Some(name) = word.strip_suffix(':') else {
                break;
            };
            let name = label_name(name)?;
            if let Some(&(_, first_line)) = self.labels.get(name) {
                return Err(E::DuplicateLabel {
                    name: name.to_string(),
                    first_line,
                });
            }
            self.labels
                .insert(name.to_string(), (self.insns.len(), line));
            code = rest;
        }
        if code.is_empty() {
            return Ok(());
        }
        let (mnemonic, rest) = split_word(code);
        let parsed = parse_insn(mnemonic, rest)?;
        let pc = self.insns.len();
        if parsed.insn == Insn::Exit && self.first_exit.is_none() {
            self.first_exit = Some(pc);
        }
        if let Some((target, width)) = parsed.target {
            self.fixups.push(Fixup {
                pc,
                line,
                target,
                width,
            });
        }
        self.insns.push(parsed.insn);
        self.lines.push(line);
        if parsed.insn.slots() == 2 {
            self.insns.push(Insn::LdDwTail);
            self.lines.push(line);
        }
        Ok(())
    }

    fn resolve(&self, fixup: &Fixup) -> Result<i64, AsmErrorKind> {
        let off = match &fixup.target {
            Target::Rel(off) => *off,
            Target::Label(name) => {
                let dest = match self.labels.get(name) {
                    Some(&(pc, _)) => pc,
                    None if name == "exit" => self
                        .first_exit
                        .ok_or_else(|| E::UndefinedLabel(name.clone()))?,
                    None => return Err(E::UndefinedLabel(name.clone())),
                };
                dest as i64 - fixup.pc as i64 - 1
            }
        };
        fixup.width.check(off)
    }

    fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        if self.insns.is_empty() {
            return Err(self.error(0, E::Empty));
        }
        for fixup in &self.fixups {
            let off = self
                .resolve(fixup)
                .map_err(|kind| self.error(fixup.line, kind))?;
            set_offset(&mut self.insns[fixup.pc], off);
        }
        decode_program(&encode_program(&self.insns)).map_err(|e| {
            let line = e
                .pc()
                .and_then(|pc| self.lines.get(pc))
                .copied()
                .unwrap_or(0);
            self.error(line, E::Invalid(e))
        })
    }
}

/// Patch a resolved (and range-checked) offset into the field that holds it.
fn set_offset(insn: &mut Insn, value: i64) {
    match insn {
        Insn::Ja { off } => *off = value as i32,
        Insn::Jmp { off, .. } | Insn::MayGoto { off } => *off = value as i16,
        Insn::Call(CallTarget::Local(off)) => *off = value as i32,
        Insn::LdDw {
            kind: LdDwKind::Func,
            imm,
            ..
        } => *imm = (*imm & !0xffff_ffff) | (value as i32 as u32 as u64),
        _ => {}
    }
}

fn expect_operands<'o>(
    mnemonic: &str,
    rest: &'o str,
    expected: usize,
) -> Result<Vec<&'o str>, AsmErrorKind> {
    let ops = split_operands(rest);
    if ops.len() != expected {
        return Err(E::OperandCount {
            mnemonic: mnemonic.to_string(),
            expected: ["0", "1", "2", "3"][expected.min(3)],
            found: ops.len(),
        });
    }
    Ok(ops)
}

/// `add`/`add32`-style names: the `32` suffix selects the 32-bit class.
fn split_width(mnemonic: &str) -> (&str, Width) {
    match mnemonic.strip_suffix("32") {
        Some(base) => (base, Width::W32),
        None => (mnemonic, Width::W64),
    }
}

fn alu_op(name: &str) -> Option<AluOp> {
    Some(match name {
        "add" => AluOp::Add,
        "sub" => AluOp::Sub,
        "mul" => AluOp::Mul,
        "div" => AluOp::Div,
        "sdiv" => AluOp::SDiv,
        "mod" => AluOp::Mod,
        "smod" => AluOp::SMod,
        "or" => AluOp::Or,
        "and" => AluOp::And,
        "lsh" => AluOp::Lsh,
        "rsh" => AluOp::Rsh,
        "arsh" => AluOp::Arsh,
        "xor" => AluOp::Xor,
        "mov" => AluOp::Mov,
        _ => return None,
    })
}

fn jmp_op(name: &str) -> Option<JmpOp> {
    Some(match name {
        "jeq" => JmpOp::Jeq,
        "jne" => JmpOp::Jne,
        "jgt" => JmpOp::Jgt,
        "jge" => JmpOp::Jge,
        "jlt" => JmpOp::Jlt,
        "jle" => JmpOp::Jle,
        "jsgt" => JmpOp::Jsgt,
        "jsge" => JmpOp::Jsge,
        "jslt" => JmpOp::Jslt,
        "jsle" => JmpOp::Jsle,
        "jset" => JmpOp::Jset,
        _ => return None,
    })
}

fn endian(mnemonic: &str) -> Option<(ByteOrder, u8)> {
    let (order, bits) = if let Some(b) = mnemonic.strip_prefix("le") {
        (ByteOrder::ToLe, b)
    } else if let Some(b) = mnemonic.strip_prefix("be") {
        (ByteOrder::ToBe, b)
    } else if let Some(b) = mnemonic.strip_prefix("bswap") {
        (ByteOrder::Swap, b)
    } else {
        (ByteOrder::Swap, mnemonic.strip_prefix("swap")?)
    };
    match bits {
        "16" => Some((order, 16)),
        "32" => Some((order, 32)),
        "64" => Some((order, 64)),
        _ => None,
    }
}

fn movsx(mnemonic: &str) -> Option<(Width, u8)> {
    Some(match mnemonic {
        "movsx832" => (Width::W32, 8),
        "movsx1632" => (Width::W32, 16),
        "movsx864" => (Width::W64, 8),
        "movsx1664" => (Width::W64, 16),
        "movsx3264" => (Width::W64, 32),
        _ => return None,
    })
}

fn load(mnemonic: &str) -> Option<(Size, bool)> {
    Some(match mnemonic {
        "ldxb" => (Size::B, false),
        "ldxh" => (Size::H, false),
        "ldxw" => (Size::W, false),
        "ldxdw" => (Size::DW, false),
        "ldxsb" => (Size::B, true),
        "ldxsh" => (Size::H, true),
        "ldxsw" => (Size::W, true),
        _ => return None,
    })
}

/// `st*` (immediate source) and `stx*` (register source).
fn store(mnemonic: &str) -> Option<(Size, bool)> {
    Some(match mnemonic {
        "stb" => (Size::B, false),
        "sth" => (Size::H, false),
        "stw" => (Size::W, false),
        "stdw" => (Size::DW, false),
        "stxb" => (Size::B, true),
        "stxh" => (Size::H, true),
        "stxw" => (Size::W, true),
        "stxdw" => (Size::DW, true),
        _ => return None,
    })
}

/// `ldacq*` (load-acquire) and `strel*` (store-release): true for a load.
fn ordered(mnemonic: &str) -> Option<(Size, bool)> {
    let (load, size) = if let Some(s) = mnemonic.strip_prefix("ldacq") {
        (true, s)
    } else {
        (false, mnemonic.strip_prefix("strel")?)
    };
    let size = match size {
        "b" => Size::B,
        "h" => Size::H,
        "w" => Size::W,
        "dw" => Size::DW,
        _ => return None,
    };
    Some((size, load))
}

/// `ldabs*` / `ldind*`: legacy packet loads (no 64-bit form exists).
fn packet_load(mnemonic: &str) -> Option<(Size, bool)> {
    let (indirect, size) = if let Some(s) = mnemonic.strip_prefix("ldabs") {
        (false, s)
    } else {
        (true, mnemonic.strip_prefix("ldind")?)
    };
    let size = match size {
        "b" => Size::B,
        "h" => Size::H,
        "w" => Size::W,
        _ => return None,
    };
    Some((size, indirect))
}

fn operand(s: &str) -> Result<Operand, AsmErrorKind> {
    if is_register(s) {
        Ok(Operand::Reg(register(s)?))
    } else {
        Ok(Operand::Imm(imm32(s)?))
    }
}

fn parse_insn(mnemonic: &str, rest: &str) -> Result<Parsed, AsmErrorKind> {
    match mnemonic {
        "exit" => {
            expect_operands(mnemonic, rest, 0)?;
            return Ok(Parsed::plain(Insn::Exit));
        }
        "ja" | "ja32" | "gotol" => {
            let ops = expect_operands(mnemonic, rest, 1)?;
            let width = if mnemonic == "ja" {
                OffsetWidth::I16
            } else {
                OffsetWidth::I32
            };
            return Ok(Parsed::jump(Insn::Ja { off: 0 }, target(ops[0])?, width));
        }
        "may_goto" => {
            let ops = expect_operands(mnemonic, rest, 1)?;
            return Ok(Parsed::jump(
                Insn::MayGoto { off: 0 },
                target(ops[0])?,
                OffsetWidth::I16,
            ));
        }
        "call" => return call(rest),
        "callx" => {
            let ops = expect_operands(mnemonic, rest, 1)?;
            return Ok(Parsed::plain(Insn::CallReg {
                reg: register(ops[0])?,
            }));
        }
        "lock" => return atomic(rest),
        "lddw" => return lddw(rest),
        "neg" | "neg32" => {
            let ops = expect_operands(mnemonic, rest, 1)?;
            return Ok(Parsed::plain(Insn::Alu {
                width: split_width(mnemonic).1,
                op: AluOp::Neg,
                dst: register(ops[0])?,
                src: Operand::Imm(0),
            }));
        }
        _ => {}
    }
    if let Some((order, bits)) = endian(mnemonic) {
        let ops = expect_operands(mnemonic, rest, 1)?;
        let dst = register(ops[0])?;
        return Ok(Parsed::plain(Insn::Endian { order, bits, dst }));
    }
    if let Some((width, bits)) = movsx(mnemonic) {
        let ops = expect_operands(mnemonic, rest, 2)?;
        return Ok(Parsed::plain(Insn::Alu {
            width,
            op: AluOp::MovSx(bits),
            dst: register(ops[0])?,
            src: Operand::Reg(register(ops[1])?),
        }));
    }
    if let Some((size, sign_extend)) = load(mnemonic) {
        let ops = expect_operands(mnemonic, rest, 2)?;
        let dst = register(ops[0])?;
        let (src, off) = memory(ops[1])?;
        return Ok(Parsed::plain(Insn::Load {
            size,
            sign_extend,
            dst,
            src,
            off,
        }));
    }
    if let Some((size, load)) = ordered(mnemonic) {
        let ops = expect_operands(mnemonic, rest, 2)?;
        return Ok(Parsed::plain(if load {
            let dst = register(ops[0])?;
            let (src, off) = memory(ops[1])?;
            Insn::LoadAcquire {
                size,
                dst,
                src,
                off,
            }
        } else {
            let (dst, off) = memory(ops[0])?;
            Insn::StoreRelease {
                size,
                dst,
                off,
                src: register(ops[1])?,
            }
        }));
    }
    if let Some((size, from_reg)) = store(mnemonic) {
        let ops = expect_operands(mnemonic, rest, 2)?;
        let (dst, off) = memory(ops[0])?;
        let src = if from_reg {
            Operand::Reg(register(ops[1])?)
        } else {
            Operand::Imm(imm32(ops[1])?)
        };
        return Ok(Parsed::plain(Insn::Store {
            size,
            dst,
            off,
            src,
        }));
    }
    if let Some((size, indirect)) = packet_load(mnemonic) {
        let (indirect, imm) = if indirect {
            let ops = expect_operands(mnemonic, rest, 2)?;
            (Some(register(ops[0])?), imm32(ops[1])?)
        } else {
            let ops = expect_operands(mnemonic, rest, 1)?;
            (None, imm32(ops[0])?)
        };
        return Ok(Parsed::plain(Insn::LdPacket {
            size,
            indirect,
            imm,
        }));
    }
    let (base, width) = split_width(mnemonic);
    if let Some(op) = alu_op(base) {
        let ops = expect_operands(mnemonic, rest, 2)?;
        return Ok(Parsed::plain(Insn::Alu {
            width,
            op,
            dst: register(ops[0])?,
            src: operand(ops[1])?,
        }));
    }
    if let Some(op) = jmp_op(base) {
        let ops = expect_operands(mnemonic, rest, 3)?;
        let insn = Insn::Jmp {
            width,
            op,
            dst: register(ops[0])?,
            src: operand(ops[1])?,
            off: 0,
        };
        return Ok(Parsed::jump(insn, target(ops[2])?, OffsetWidth::I16));
    }
    Err(E::UnknownMnemonic(mnemonic.to_string()))
}

/// `call N`, `call helper N`, `call local TARGET`, `call kfunc N` (the suite's
/// older spelling `call runtime N` too) and `call %rN` (callx).
fn call(rest: &str) -> Result<Parsed, AsmErrorKind> {
    let ops = expect_operands("call", rest, 1)?;
    let (word, arg) = split_word(ops[0]);
    let insn = match word {
        "local" => {
            return Ok(Parsed::jump(
                Insn::Call(CallTarget::Local(0)),
                target(arg)?,
                OffsetWidth::I32,
            ))
        }
        "helper" => Insn::Call(CallTarget::Helper(imm32(arg)?)),
        "kfunc" | "runtime" => Insn::Call(CallTarget::Kfunc(imm32(arg)?)),
        _ if is_register(ops[0]) => Insn::CallReg {
            reg: register(ops[0])?,
        },
        _ => Insn::Call(CallTarget::Helper(imm32(ops[0])?)),
    };
    Ok(Parsed::plain(insn))
}

/// `lock [fetch] OP[32] [%rD+off], %rS` with OP one of add, or, and, xor,
/// xchg, cmpxchg (the last two always fetch).
fn atomic(rest: &str) -> Result<Parsed, AsmErrorKind> {
    let (first, after) = split_word(rest);
    let (fetch, name, rest) = if first == "fetch" {
        let (name, rest) = split_word(after);
        (true, name, rest)
    } else {
        (false, first, after)
    };
    let (base, width) = split_width(name);
    let (op, fetch) = match base {
        "add" => (AtomicOp::Add, fetch),
        "or" => (AtomicOp::Or, fetch),
        "and" => (AtomicOp::And, fetch),
        "xor" => (AtomicOp::Xor, fetch),
        "xchg" => (AtomicOp::Xchg, true),
        "cmpxchg" => (AtomicOp::CmpXchg, true),
        _ => {
            let shown = if fetch { "lock fetch" } else { "lock" };
            return Err(E::UnknownMnemonic(
                format!("{shown} {name}").trim_end().to_string(),
            ));
        }
    };
    let mnemonic = format!("lock {name}");
    let ops = expect_operands(&mnemonic, rest, 2)?;
    let (dst, off) = memory(ops[0])?;
    let src = register(ops[1])?;
    Ok(Parsed::plain(Insn::Atomic {
        width,
        op,
        fetch,
        dst,
        src,
        off,
    }))
}

/// `lddw %rD, IMM64`, or a pseudo form `lddw %rD, KIND LOW[, HIGH]` where LOW
/// is the first slot's imm (a relative target for `func`) and HIGH the second
/// slot's (the value offset for `map_value`/`map_idx_value`).
fn lddw(rest: &str) -> Result<Parsed, AsmErrorKind> {
    let ops = split_operands(rest);
    let kind_word = ops.get(1).map(|s| split_word(s));
    let kind = match kind_word.map(|(w, _)| w) {
        Some("map_fd") => LdDwKind::MapFd,
        Some("map_value") => LdDwKind::MapValue,
        Some("btf_id") => LdDwKind::BtfId,
        Some("func") => LdDwKind::Func,
        Some("map_idx") => LdDwKind::MapIdx,
        Some("map_idx_value") => LdDwKind::MapIdxValue,
        _ => LdDwKind::Imm,
    };
    if kind == LdDwKind::Imm {
        let ops = expect_operands("lddw", rest, 2)?;
        return Ok(Parsed::plain(Insn::LdDw {
            kind,
            dst: register(ops[0])?,
            imm: imm64(ops[1])?,
        }));
    }
    if !(2..=3).contains(&ops.len()) {
        return Err(E::OperandCount {
            mnemonic: "lddw".to_string(),
            expected: "2 or 3",
            found: ops.len(),
        });
    }
    let dst = register(ops[0])?;
    let high = match ops.get(2) {
        Some(s) => imm32(s)? as u32 as u64,
        None => 0,
    };
    let low_text = kind_word.map(|(_, a)| a).unwrap_or("");
    if kind == LdDwKind::Func {
        let insn = Insn::LdDw {
            kind,
            dst,
            imm: high << 32,
        };
        return Ok(Parsed::jump(insn, target(low_text)?, OffsetWidth::I32));
    }
    let low = imm32(low_text)? as u32 as u64;
    Ok(Parsed::plain(Insn::LdDw {
        kind,
        dst,
        imm: (high << 32) | low,
    }))
}
