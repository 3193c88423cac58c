//! `bpfjet verify` on malformed encodings: a register above r10, a jump out
//! of the program, a jump into the second half of an `lddw` and a write to
//! r10 are rejections (exit 1, the decoder's reason naming the instruction),
//! as the kernel rejects them at load — not errors (exit 2), which stay for
//! files that cannot be read as a BPF object. The same slots behind a
//! branch decided by a constant are accepted, as the kernel accepts them
//! (it checks them only when its walk reaches them). The objects are compiled here
//! from C whose inline assembly plants the malformed instruction as raw data.

mod support;

use support::{bpfjet, Scratch};

/// One XDP program whose first instructions are `raw` (`.quad` lines).
fn source(raw: &str) -> String {
    format!(
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         SEC(\"xdp\")\nint prog(struct xdp_md *ctx)\n{{\n\
         \tasm volatile(\"{raw}\" ::: \"r0\", \"r1\");\n\
         \treturn XDP_PASS;\n}}\n\
         char LICENSE[] SEC(\"license\") = \"GPL\";\n"
    )
}

fn compile(dir: &Scratch, name: &str, raw: &str) -> String {
    let o = dir.path(&format!("{name}.o"));
    // clang's default CPU: the raw instructions are the test's own.
    bpfjet_testsupport::Compile::text(name, &source(raw))
        .mcpu(None)
        .object_at(&o);
    o
}

/// (name, raw instructions, what the rejection must say)
const CASES: &[(&str, &str, &str)] = &[
    // mov r11, 2
    ("reg11", ".quad 0x0000000200000bb7", "invalid register r11"),
    // ja +100
    ("jump_out", ".quad 0x0000000000640005", "out of range"),
    // ja +1 into the second slot of the lddw r1 that follows
    (
        "jump_into_lddw",
        ".quad 0x0000000000010005\\n.quad 0x0000000400000118\\n.quad 0x0000000000000000",
        "middle of the lddw",
    ),
    // mov r10, 0
    ("write_r10", ".quad 0x0000000000000ab7", "r10"),
];

#[test]
fn malformed_encodings_are_rejections() {
    let dir = Scratch::new("verify-malformed");
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("kernel verdicts on the malformed objects", why);
    }
    for (name, raw, reason) in CASES {
        let obj = compile(&dir, name, raw);
        let run = bpfjet(&["verify", &obj], b"");
        assert_eq!(
            run.code,
            Some(1),
            "{name}: want exit 1 (rejected)\nstdout: {}\nstderr: {}",
            run.stdout,
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert!(
            run.stderr.contains("rejected at insn 0") || run.stderr.contains("rejected at insn 1"),
            "{name}: the rejection must name the instruction: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains(reason),
            "{name}: {reason:?} not in: {}",
            run.stderr
        );
        let json = bpfjet(&["verify", &obj, "--json"], b"");
        assert_eq!(json.code, Some(1), "{name} --json: {}", json.stderr);
        let report: serde_json::Value =
            serde_json::from_str(&json.stdout).expect("verify --json prints JSON");
        assert_eq!(report[0]["verdict"], "rejected", "{name}: {report}");
        if kernel.is_ok() {
            let k = bpfjet_kernel::KernelObject::open(&obj);
            assert!(
                k.is_err(),
                "{name}: the kernel loads the malformed program, bpfjet rejects it"
            );
        }
    }
}

/// The same malformed slots behind a branch the analysis decides from a
/// constant: the kernel checks them only when its walk reaches them, so it
/// loads the program, and bpfjet accepts it too (exit 0).
#[test]
fn malformed_slots_in_dead_code_are_accepted() {
    let dir = Scratch::new("verify-dead-malformed");
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("kernel verdicts on the dead malformed slots", why);
    }
    // r0 = 2; if r0 == 2 goto +1; <mov r11, 2 | mov r10, 0>
    for (name, slot) in [
        ("dead_reg11", ".quad 0x0000000200000bb7"),
        ("dead_write_r10", ".quad 0x0000000000000ab7"),
    ] {
        let raw = format!(".quad 0x00000002000000b7\\n.quad 0x0000000200010015\\n{slot}");
        let obj = compile(&dir, name, &raw);
        let run = bpfjet(&["verify", &obj], b"");
        assert_eq!(
            run.code,
            Some(0),
            "{name}: want exit 0 (accepted)\nstdout: {}\nstderr: {}",
            run.stdout,
            run.stderr
        );
        if kernel.is_ok() {
            let k = bpfjet_kernel::KernelObject::open(&obj);
            assert!(k.is_ok(), "{name}: the kernel refuses: {:?}", k.err());
        }
    }
}

#[test]
fn unreadable_object_is_an_error() {
    let dir = Scratch::new("verify-unreadable");
    let junk = dir.file("junk.o", b"not an ELF file");
    let run = bpfjet(&["verify", &junk], b"");
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}
