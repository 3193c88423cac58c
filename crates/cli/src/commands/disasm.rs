//! `bpfjet disasm OBJ|RAW`.

use anyhow::{Context, Result};
use bpfjet_isa::{decode::parse_slots, decode_program, disasm};
use std::path::Path;
use std::process::ExitCode;

const ELF_MAGIC: &[u8] = b"\x7fELF";

pub fn run(file: &Path, asm_syntax: bool) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    if bytes.starts_with(ELF_MAGIC) {
        let obj =
            bpfjet_obj::load(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        for (i, prog) in obj.programs.iter().enumerate() {
            if i > 0 {
                println!();
            }
            println!("{} (section {}):", prog.name, prog.section);
            print_program(&prog.insns, asm_syntax)?;
        }
    } else {
        let slots = parse_slots(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        print_program(&slots, asm_syntax)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_program(slots: &[bpfjet_isa::RawInsn], asm_syntax: bool) -> Result<()> {
    let insns = decode_program(slots)?;
    if asm_syntax {
        for (pc, insn) in insns.iter().enumerate() {
            if *insn != bpfjet_isa::Insn::LdDwTail {
                println!("{}", disasm::format_insn_asm(insn, pc));
            }
        }
    } else {
        print!("{}", disasm::disassemble(&insns));
    }
    Ok(())
}
