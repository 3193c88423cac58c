//! Every bpf_conformance vector through the JIT, compared with the expected
//! result and with the interpreter. The vectors live outside the repository
//! (`CONFORMANCE`, default ../shared/conformance/tests); without them the
//! test says so and skips.

mod common;

use bpfjet_runtime::*;
use common::*;
use std::path::PathBuf;

struct Vector {
    asm: String,
    mem: Vec<u8>,
    result: Option<u64>,
    error: bool,
}

fn parse(text: &str) -> Option<Vector> {
    let mut section = "";
    let mut v = Vector {
        asm: String::new(),
        mem: Vec::new(),
        result: None,
        error: false,
    };
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = name.trim();
            continue;
        }
        let line = line.split('#').next().unwrap_or("").trim();
        match section {
            "asm" => {
                v.asm.push_str(line);
                v.asm.push('\n');
            }
            "mem" => {
                for b in line.split_whitespace() {
                    v.mem.push(u8::from_str_radix(b, 16).ok()?);
                }
            }
            "result" if !line.is_empty() => {
                let hex = line.trim_start_matches("0x").trim_start_matches("0X");
                v.result = Some(u64::from_str_radix(hex, 16).ok()?);
            }
            "error" if !line.is_empty() => v.error = true,
            _ => {}
        }
    }
    Some(v)
}

fn vector_dir() -> PathBuf {
    std::env::var_os("CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
        })
}

#[test]
fn conformance_vectors_pass_on_the_jit_and_match_the_interpreter() {
    let dir = vector_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!(
            "SKIPPED: conformance vectors not found at {}",
            dir.display()
        );
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut passed = 0;
    let mut compile_ms = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(v) = std::fs::read_to_string(path).ok().and_then(|t| parse(&t)) else {
            failures.push(format!("{name}: unreadable vector"));
            continue;
        };
        let insns = match bpfjet_isa::assemble(&v.asm) {
            Ok(insns) => insns,
            Err(e) => {
                if v.error {
                    passed += 1;
                } else {
                    failures.push(format!("{name}: assembler: {e}"));
                }
                continue;
            }
        };
        let options = verified().with_helpers(conformance_helpers());
        let jit_outcome =
            bpfjet_jit::JitProgram::compile(&insns, &options, &bpfjet_jit::JitOptions::uncached())
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    compile_ms.push(p.compile_stats().total_ms);
                    let mut mem = v.mem.clone();
                    p.run_on_memory(&mut mem).map_err(|f| f.to_string())
                });
        let interp_outcome = Program::new(insns.clone(), options)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                let mut mem = v.mem.clone();
                p.run_on_memory(&mut RunState::new(), &mut mem)
                    .map_err(|f| f.to_string())
            });
        let ok = match (&jit_outcome, v.result) {
            (Ok(r0), Some(want)) => *r0 == want,
            (Err(_), None) => v.error,
            _ => false,
        };
        let agree = match (&jit_outcome, &interp_outcome) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if ok && agree {
            passed += 1;
        } else {
            failures.push(format!(
                "{name}: jit {jit_outcome:x?}, interpreter {interp_outcome:x?}, want {:x?}",
                v.result
            ));
        }
    }
    compile_ms.sort_by(f64::total_cmp);
    if let (Some(max), false) = (compile_ms.last(), compile_ms.is_empty()) {
        eprintln!(
            "compile ms: median {:.2}, max {:.2}",
            compile_ms[compile_ms.len() / 2],
            max
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    eprintln!(
        "{passed} of {} conformance vectors passed on the JIT",
        files.len()
    );
}
