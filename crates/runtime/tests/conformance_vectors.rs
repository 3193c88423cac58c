//! Every bpf_conformance vector through this interpreter, in both memory
//! modes. This is the interpreter's own regression check; the user-facing
//! runner is `bpfjet conformance`. The vectors live outside the repository
//! (`CONFORMANCE` as in the Makefile, default ../shared/conformance/tests);
//! without them the test says so and skips.

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

fn parse(text: &str) -> Vector {
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
            "mem" => v.mem.extend(
                line.split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).expect("hex byte")),
            ),
            "result" if !line.is_empty() => {
                let hex = line.trim_start_matches("0x").trim_start_matches("0X");
                v.result = Some(u64::from_str_radix(hex, 16).expect("hex result"));
            }
            "error" if !line.is_empty() => v.error = true,
            _ => {}
        }
    }
    v
}

#[test]
fn conformance_vectors_pass_in_both_modes() {
    let dir = std::env::var_os("CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
        });
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
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let v = parse(&std::fs::read_to_string(path).unwrap());
        let insns = match bpfjet_isa::assemble(&v.asm) {
            Ok(insns) => insns,
            Err(e) => {
                if !v.error {
                    failures.push(format!("{name}: assembler: {e}"));
                }
                continue;
            }
        };
        for (mode, options) in [
            ("checked", LoadOptions::bounds_checked()),
            ("verified", verified()),
        ] {
            let outcome = Program::new(insns.clone(), options.with_helpers(conformance_helpers()))
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    let mut mem = v.mem.clone();
                    p.run_on_memory(&mut RunState::new(), &mut mem)
                        .map_err(|f| f.to_string())
                });
            match (outcome, v.result) {
                (Ok(r0), Some(want)) if r0 == want => {}
                (Err(_), None) if v.error => {}
                (got, want) => {
                    failures.push(format!("{name} ({mode}): got {got:x?}, want {want:x?}"))
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    eprintln!("{} conformance vectors passed in both modes", files.len());
}
