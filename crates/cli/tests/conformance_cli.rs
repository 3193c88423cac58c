//! `bpfjet conformance` on the shared bpf_conformance vectors, and
//! `bpfjet conformance-plugin` driven the way bpf_conformance's external
//! runner drives a plugin: the program as hex on stdin, the memory as one
//! argument of "XX  " bytes, r0 printed in hex on stdout.

mod support;

use support::bpfjet;

/// Instruction slots as the runner sends them: 16 hex digits each.
fn program_hex(slots: &[[u8; 8]]) -> String {
    slots
        .iter()
        .flat_map(|s| s.iter().map(|b| format!("{b:02x}")))
        .collect()
}

/// The runner's memory argument: every byte as two digits and two spaces.
fn mem_arg(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}  ")).collect()
}

const EXIT: [u8; 8] = [0x95, 0, 0, 0, 0, 0, 0, 0];

#[test]
fn conformance_suite_passes_completely() {
    let dir = support::repo_root().join("../shared/conformance/tests");
    assert!(
        dir.is_dir(),
        "conformance vectors not found at {} (the Makefile's CONFORMANCE)",
        dir.display()
    );
    let vectors = std::fs::read_dir(&dir)
        .expect("listing the conformance vectors")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "data"))
        .count();
    let run = bpfjet(&["conformance", &dir.display().to_string()], b"");
    let summary = format!("{vectors} passed, 0 failed");
    assert!(
        run.stdout.lines().any(|l| l == summary),
        "expected {summary:?}; stdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.code, Some(0));
}

#[test]
fn conformance_rejects_unknown_engine_and_missing_dir() {
    let run = bpfjet(&["conformance", "--engine", "nope", "/nonexistent"], b"");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("unknown engine 'nope'"),
        "{}",
        run.stderr
    );
    let run = bpfjet(&["conformance", "/nonexistent/conformance"], b"");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("/nonexistent/conformance"),
        "{}",
        run.stderr
    );
}

#[test]
fn plugin_program_reads_memory() {
    // ldxw r0, [r1+0]; exit
    let prog = program_hex(&[[0x61, 0x10, 0, 0, 0, 0, 0, 0], EXIT]);
    let mem = mem_arg(&[0x01, 0x02, 0x03, 0x04, 0xff]);
    let run = bpfjet(&["conformance-plugin", &mem], prog.as_bytes());
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.trim(), "4030201");
}

#[test]
fn plugin_program_calls_helper_5() {
    // mov r1, 0x2a; call 5 (the suite's identity helper); exit
    let prog = program_hex(&[
        [0xb7, 0x01, 0, 0, 0x2a, 0, 0, 0],
        [0x85, 0, 0, 0, 5, 0, 0, 0],
        EXIT,
    ]);
    let run = bpfjet(&["conformance-plugin"], prog.as_bytes());
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.trim(), "2a");
}

#[test]
fn plugin_program_with_whitespace_between_slots() {
    // The runner may send one slot per line: mov r0, 7; exit
    let prog = format!(
        "{}\n{}\n",
        program_hex(&[[0xb7, 0, 0, 0, 7, 0, 0, 0]]),
        program_hex(&[EXIT])
    );
    let run = bpfjet(&["conformance-plugin", ""], prog.as_bytes());
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.trim(), "7");
}

#[test]
fn plugin_rejects_malformed_programs() {
    let cases: &[(&str, &[u8])] = &[
        ("truncated slot", b"b70000000100"),
        ("not hex", b"zz00000000000000"),
        // opcode 0xff is not an instruction
        ("bad opcode", b"ff000000000000009500000000000000"),
        ("empty program", b""),
    ];
    for (what, prog) in cases {
        let run = bpfjet(&["conformance-plugin"], prog);
        assert_ne!(run.code, Some(0), "{what}: accepted; stdout {}", run.stdout);
        let message = format!("{}{}", run.stdout, run.stderr);
        assert!(!message.trim().is_empty(), "{what}: no message");
        assert!(!message.contains("panicked"), "{what}: {message}");
    }
}

#[test]
fn plugin_rejects_malformed_memory() {
    let prog = program_hex(&[[0xb7, 0, 0, 0, 0, 0, 0, 0], EXIT]);
    let run = bpfjet(&["conformance-plugin", "01  zz  "], prog.as_bytes());
    assert_ne!(run.code, Some(0));
    assert!(run.stdout.contains("bad memory byte"), "{}", run.stdout);
}
