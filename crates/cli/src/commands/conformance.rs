//! `bpfjet conformance DIR` and `bpfjet conformance-plugin [MEM]`.
//!
//! The environment the bpf_conformance suite expects: r1 points to a writable
//! copy of the test's memory (0 when it has none), r2 holds its length, r10 the
//! top of a 512-byte stack, and helper 5 returns its first argument.

use anyhow::{bail, Context, Result};
use bpfjet_isa::conformance::{self, ConformanceTest};
use bpfjet_isa::{asm::assemble, decode_bytes, Insn};
use bpfjet_runtime::{Helper, HelperRegistry, LoadOptions, Program, RunState};
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

/// Instruction budget per test: the suite has no infinite loops, so hitting it
/// means an engine bug, reported as a failure instead of a hang.
const INSN_BUDGET: u64 = 10_000_000;

fn conformance_helpers() -> HelperRegistry {
    HelperRegistry::new().with(Helper::new(5, "conformance_identity", |_ctx, args| {
        Ok(args[0])
    }))
}

/// The engines the suite can run on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The reference interpreter, bounds-checked.
    Interp,
    /// The LLVM JIT (native code, no bounds checks).
    Jit,
}

fn run_program(engine: Engine, insns: Vec<Insn>, mem: &[u8]) -> Result<u64> {
    let mut mem = mem.to_vec();
    let mut state = RunState::new();
    state.set_insn_budget(Some(INSN_BUDGET));
    match engine {
        Engine::Interp => {
            let opts = LoadOptions::bounds_checked().with_helpers(conformance_helpers());
            let program = Program::new(insns, opts).map_err(|e| anyhow::anyhow!("load: {e}"))?;
            program
                .run_on_memory(&mut state, &mut mem)
                .map_err(|e| anyhow::anyhow!("run: {e}"))
        }
        Engine::Jit => {
            // SAFETY: the conformance vectors are trusted ISA test programs that
            // touch only their own memory and stack. The suite hands r1 over as
            // raw memory, which no verifier can type, so the proof of safety is
            // the suite's own, not bpfjet's verifier.
            let proof = unsafe { bpfjet_runtime::VerifiedProof::assume_verified() };
            let opts = LoadOptions::verified(proof).with_helpers(conformance_helpers());
            let jit = bpfjet_jit::JitOptions::uncached();
            let program = bpfjet_jit::JitProgram::compile(&insns, &opts, &jit)
                .map_err(|e| anyhow::anyhow!("jit: {e}"))?;
            program
                .run_on_memory_with(&mut state, &mut mem)
                .map_err(|e| anyhow::anyhow!("run: {e}"))
        }
    }
}

pub fn parse_engine(engine: &str) -> Result<Engine> {
    match engine {
        "interp" => Ok(Engine::Interp),
        "jit" => Ok(Engine::Jit),
        other => bail!("unknown engine '{other}' (expected interp or jit)"),
    }
}

/// Outcome of one test: `Ok(())` passed, `Err(reason)` failed.
fn run_test(engine: Engine, test: &ConformanceTest) -> std::result::Result<(), String> {
    let insns = assemble(&test.asm).map_err(|e| format!("assemble: {e}"))?;
    let outcome = run_program(engine, insns, &test.mem);
    match (&test.result, &test.error, outcome) {
        (Some(want), _, Ok(got)) if *want == got => Ok(()),
        (Some(want), _, Ok(got)) => Err(format!("expected r0 = {want:#x}, got {got:#x}")),
        (Some(want), _, Err(e)) => Err(format!("expected r0 = {want:#x}, got error: {e:#}")),
        (None, Some(err), Ok(got)) => Err(format!("expected error '{err}', got r0 = {got:#x}")),
        (None, Some(_), Err(_)) => Ok(()),
        (None, None, _) => Err("test has no expectation".into()),
    }
}

pub fn run(dir: &Path, engine: &str, verbose: bool) -> Result<ExitCode> {
    let engine = parse_engine(engine)?;
    let files = conformance::data_files(dir).map_err(anyhow::Error::msg)?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let outcome = std::fs::read_to_string(path)
            .map_err(|e| format!("read: {e}"))
            .and_then(|text| conformance::parse(&name, &text).map_err(|e| format!("parse: {e}")))
            .and_then(|test| run_test(engine, &test));
        match outcome {
            Ok(()) => {
                passed += 1;
                if verbose {
                    println!("PASS {name}");
                }
            }
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Memory argument of the plugin protocol: two hex digits per byte, separated by whitespace.
fn parse_plugin_mem(mem: &str) -> Result<Vec<u8>> {
    mem.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).with_context(|| format!("bad memory byte {b:?}")))
        .collect()
}

/// Hex bytes: two digits per byte, whitespace anywhere between bytes.
fn parse_plugin_hex(text: &str) -> Result<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("program hex has an odd number of digits ({})", digits.len());
    }
    digits
        .chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).unwrap_or("??");
            u8::from_str_radix(s, 16).with_context(|| format!("bad program hex {s:?}"))
        })
        .collect()
}

/// How the program arrives on stdin.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PluginInput {
    /// Instruction bytes as hex (the runner's default).
    Bytecode,
    /// An ELF object as hex (the runner's `--elf true`).
    Elf,
}

/// One plugin call: program on stdin, r0 in hex on stdout and exit 0, or
/// the error on stdout and exit 1 (the runner compares it with a test's
/// `-- error` text).
pub fn plugin(mem: Option<&str>, engine: Engine, input: PluginInput) -> Result<ExitCode> {
    let outcome = (|| -> Result<u64> {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading program from stdin")?;
        let bytes = parse_plugin_hex(&text)?;
        let code = match input {
            PluginInput::Bytecode => bytes,
            PluginInput::Elf => super::conformance_elf::program_code(&bytes)?,
        };
        if code.len() % 8 != 0 {
            bail!(
                "program is {} bytes, not a multiple of 8 (8-byte instructions)",
                code.len()
            );
        }
        let insns = decode_bytes(&code).map_err(|e| anyhow::anyhow!("invalid program: {e}"))?;
        let mem = mem.map(parse_plugin_mem).transpose()?.unwrap_or_default();
        run_program(engine, insns, &mem)
    })();
    match outcome {
        Ok(r0) => {
            println!("{r0:x}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{e:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_inputs() {
        assert_eq!(
            parse_plugin_mem("00  ff  10  ").unwrap(),
            vec![0, 0xff, 0x10]
        );
        assert!(parse_plugin_mem("zz").is_err());
        assert_eq!(
            parse_plugin_hex("b7 00 00 00 01 00 00 00  \n9500000000000000\n")
                .unwrap()
                .len(),
            16
        );
        assert!(parse_plugin_hex("b700000").is_err());
        assert!(parse_plugin_hex("zz").is_err());
    }
}
