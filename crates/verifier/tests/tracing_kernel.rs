//! Tracing program types against the kernel verifier: the programs of
//! tests/data/tracing.bpf.c (uprobe, uretprobe, syscalls tracepoints, raw
//! tracepoints, built with clang-19 at test time) and mutants of them —
//! every context load moved to other offsets and sizes, turned into a store,
//! every helper call turned into helpers the type may not call — are loaded
//! into the running kernel (raw `BPF_PROG_LOAD` with the program's kprobe /
//! tracepoint / raw tracepoint type, or tracing with the `btf_trace_NAME` of
//! a tp_btf program's XDP tracepoint) and verified by bpfjet; the verdicts
//! must be the same, with one known exception: the kernel accepts
//! negative tracepoint context offsets (a signed/unsigned comparison in
//! `tp_prog_is_valid_access` lets a read before the record through), which
//! bpfjet refuses as unsafe; those are counted apart.

use bpfjet_isa::RawInsn;
use bpfjet_kernel::raw_load::{create_map, load_raw_with_fds, RawLoadOptions};
use bpfjet_obj::{Object, Program};
use bpfjet_verifier::{verify_raw, MemBase, ObjectProgramEnv, Policy};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

fn build() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tracing.bpf.c");
    let dir = std::env::temp_dir().join(format!("bpfjet-tracing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("tracing.bpf.o");
    let status = std::process::Command::new("clang-19")
        .args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86"])
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::consts::ARCH
        ))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("running clang-19");
    assert!(status.success(), "clang-19 failed on {}", src.display());
    out
}

/// bpfjet's verdict.
fn bpfjet(
    object: &Object,
    p: &Program,
    slots: &[RawInsn],
) -> Result<bpfjet_verifier::Facts, String> {
    let inputs = ObjectProgramEnv::new(object, p);
    let env = inputs.env(object, Policy::Privileged);
    verify_raw(slots, &env).map_err(|e| format!("{}: {}", e.rule, e.message))
}

/// The kernel's verdict, with the end of its log on a rejection.
fn kernel(object: &Object, p: &Program, maps: &[OwnedFd], slots: &[RawInsn]) -> Result<(), String> {
    let load = p.kind.kernel_load_type().expect("a type bpfjet runs");
    // A tp_btf program names its tracepoint's btf_trace_NAME.
    let attach_btf_id = match &p.kind {
        bpfjet_obj::ProgKind::TpBtf { name } => {
            let kernel = bpfjet_obj::TargetBtf::running_kernel().expect("the kernel's BTF");
            bpfjet_obj::tp_btf::btf_trace_id(kernel.btf(), name).expect("btf_trace_NAME")
        }
        _ => 0,
    };
    let opts = RawLoadOptions {
        prog_type: load.prog_type,
        expected_attach_type: load.expected_attach_type,
        prog_flags: load.prog_flags,
        license: object.license.clone(),
        attach_btf_id,
        ..RawLoadOptions::default()
    };
    let image: Vec<u8> = slots.iter().flat_map(|s| s.to_bytes()).collect();
    let fds = maps.iter().map(|f| f.try_clone().unwrap()).collect();
    load_raw_with_fds(&image, fds, &opts)
        .map(|_| ())
        .map_err(|e| {
            let tail: Vec<&str> = e
                .verifier_log
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with("processed"))
                .collect();
            format!(
                "{}: {}",
                e.errno,
                tail[tail.len().saturating_sub(2)..].join(" | ")
            )
        })
}

/// `BPF_LDX | BPF_MEM | size`, by size in bytes.
fn ldx_code(size: u8) -> u8 {
    0x61 | match size {
        1 => 0x10,
        2 => 0x08,
        4 => 0x00,
        _ => 0x18,
    }
}

/// Mutants of one program: (what, slots).
fn mutants(slots: &[RawInsn], facts: &bpfjet_verifier::Facts) -> Vec<(String, Vec<RawInsn>)> {
    let mut out = Vec::new();
    let ctx_loads: Vec<usize> = facts
        .mem_bases
        .iter()
        .filter(|(_, b)| **b == MemBase::Ctx)
        .map(|(pc, _)| *pc)
        .collect();
    for &pc in &ctx_loads {
        let insn = slots[pc];
        for delta in [-16i16, -8, -4, -1, 1, 2, 4, 8, 96, 160, 168, 8192] {
            let mut m = slots.to_vec();
            m[pc].off = insn.off.wrapping_add(delta);
            out.push((format!("ctx load @{pc} off {:+}", delta), m));
        }
        for size in [1u8, 2, 4, 8] {
            let mut m = slots.to_vec();
            m[pc].code = ldx_code(size);
            out.push((format!("ctx load @{pc} size {size}"), m));
        }
        // The load as a store of its destination register into the context.
        let mut m = slots.to_vec();
        m[pc].code = (insn.code & !0x07) | 0x03;
        m[pc].dst = insn.src;
        m[pc].src = insn.dst;
        out.push((format!("ctx store @{pc}"), m));
        let mut m = slots.to_vec();
        m[pc].code = (insn.code & !0x07) | 0x02;
        m[pc].dst = insn.src;
        m[pc].src = 0;
        m[pc].imm = 7;
        out.push((format!("ctx store imm @{pc}"), m));
    }
    for (pc, insn) in slots.iter().enumerate() {
        if insn.code != 0x85 || insn.src != 0 {
            continue;
        }
        // XDP helpers, the spin lock, helpers some tracing types lack.
        for id in [23, 28, 44, 51, 93, 173, 174, 16, 14, 5] {
            if id == insn.imm {
                continue;
            }
            let mut m = slots.to_vec();
            m[pc].imm = id;
            out.push((format!("call @{pc} helper {} -> {id}", insn.imm), m));
        }
    }
    out
}

#[test]
fn tracing_verdicts_match_the_kernel() {
    let path = build();
    let object = bpfjet_obj::load_file(&path).expect("loading the tracing object");
    let kernel_ok = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel_ok {
        bpfjet_testsupport::report_skip(format!(
            "kernel side ({why}); checking bpfjet's verdicts on the programs only"
        ));
    }
    let maps: Vec<OwnedFd> = if kernel_ok.is_ok() {
        object
            .maps
            .iter()
            .map(|s| create_map(s).unwrap_or_else(|e| panic!("creating map {}: {e}", s.name)))
            .collect()
    } else {
        Vec::new()
    };
    let mut compared = 0;
    let mut known = 0;
    let mut rejected = 0;
    let mut mismatches = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    for p in &object.programs {
        assert!(p.kind.is_tracing(), "{}: {}", p.name, p.kind);
        types.insert(p.kind.to_string());
        let facts = bpfjet(&object, p, &p.insns)
            .unwrap_or_else(|e| panic!("bpfjet rejects {} ({}): {e}", p.name, p.section));
        assert!(facts.max_ctx_end > 0, "{} reads its context", p.name);
        if kernel_ok.is_err() {
            continue;
        }
        if let Err(e) = kernel(&object, p, &maps, &p.insns) {
            panic!("the kernel rejects {} ({}): {e}", p.name, p.section);
        }
        for (what, m) in mutants(&p.insns, &facts) {
            let ours = bpfjet(&object, p, &m);
            let theirs = kernel(&object, p, &maps, &m);
            compared += 1;
            rejected += usize::from(theirs.is_err());
            let kernel_quirk = theirs.is_ok()
                && ours
                    .as_ref()
                    .is_err_and(|e| e.contains("a read before the tracepoint record"));
            if kernel_quirk {
                known += 1;
            } else if ours.is_ok() != theirs.is_ok() {
                mismatches.push(format!(
                    "{} ({}) {what}: bpfjet {:?}, kernel {:?}",
                    p.name,
                    p.kind,
                    ours.map(|_| ()),
                    theirs
                ));
            }
        }
    }
    assert_eq!(
        types.into_iter().collect::<Vec<_>>(),
        ["kprobe", "raw_tracepoint", "tp_btf", "tracepoint"]
    );
    if kernel_ok.is_ok() {
        println!(
            "{compared} mutants compared with the kernel verifier, {rejected} rejected by it \
             ({known} negative tracepoint context offsets the kernel accepts and bpfjet refuses)"
        );
        assert!(
            rejected > 50 && rejected < compared,
            "{rejected} of {compared} rejected"
        );
        assert!(compared > 100, "only {compared} mutants");
    }
    assert!(
        mismatches.is_empty(),
        "{} verdicts differ from the kernel's:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
