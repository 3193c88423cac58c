//! Builds the C sources in `tests/progs` into BPF objects at test time.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bpfjet_isa::{decode_program, CallTarget, Insn, LdDwKind};
use bpfjet_obj::{Object, Program};

fn progs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs")
}

/// Compiles `tests/progs/<name>.c` with extra `args` and returns the object bytes.
pub fn compile_with(name: &str, args: &[&str]) -> Vec<u8> {
    // clang's default CPU, warnings as errors; a `-target` in `args`
    // overrides the standard BPF one (clang takes the last).
    let src = progs_dir().join(format!("{name}.c"));
    let out = bpfjet_testsupport::Compile::file(src)
        .mcpu(None)
        .args(&["-Wall", "-Werror"])
        .args(args)
        .object();
    std::fs::read(&out).expect("read object")
}

/// Compiles `tests/progs/<name>.c` for BPF.
pub fn compile(name: &str) -> Vec<u8> {
    compile_with(name, &["-target", "bpf"])
}

pub fn load(name: &str) -> Object {
    let bytes = compile(name);
    bpfjet_obj::load(&bytes).unwrap_or_else(|e| panic!("loading {name}.o: {e}"))
}

/// Decodes a program; fails the test unless the ISA decoder validates it
/// (opcodes, jumps and local calls in range).
pub fn decode(prog: &Program) -> Vec<Insn> {
    decode_program(&prog.insns)
        .unwrap_or_else(|e| panic!("program `{}` does not decode: {e}", prog.name))
}

/// Absolute slot a local call or function-pointer lddw at `pc` refers to.
pub fn local_target(insn: &Insn, pc: usize) -> Option<usize> {
    match *insn {
        Insn::Call(CallTarget::Local(off)) => Some((pc as i64 + 1 + off as i64) as usize),
        Insn::LdDw {
            kind: LdDwKind::Func,
            imm,
            ..
        } => Some((pc as i64 + 1 + imm as i32 as i64) as usize),
        _ => None,
    }
}

/// Names of the functions called (or pointed to) from program slots, in slot order;
/// every target must be the start of a function listed in `func_info`.
pub fn call_graph(prog: &Program) -> Vec<(usize, String, String)> {
    let insns = decode(prog);
    let mut edges = Vec::new();
    for (pc, insn) in insns.iter().enumerate() {
        if let Some(t) = local_target(insn, pc) {
            let callee = prog
                .func_info
                .iter()
                .find(|f| f.slot == t)
                .unwrap_or_else(|| {
                    panic!(
                        "`{}` slot {pc} targets {t}, not a function start",
                        prog.name
                    )
                });
            let caller = prog.func_at(pc).expect("caller").name.clone();
            edges.push((pc, caller, callee.name.clone()));
        }
    }
    edges
}
