//! A Katran-class program of more than 2000 instructions
//! (examples/verifier/katran_full.c) must be accepted by bpfjet and by the
//! kernel; prints both verification times next to each other.

mod common;

use bpfjet_verifier::{verify, VerifyEnv};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Build examples/verifier and return the object.
fn katran_full() -> PathBuf {
    common::verifier_example("katran_full")
}

/// Instructions of the XDP program as `llvm-objdump -d` lists them (an
/// `lddw` is one line), the count the issue asks for.
fn objdump_insns(path: &Path) -> Option<usize> {
    let out = ["llvm-objdump-19", "llvm-objdump"]
        .iter()
        .find_map(|tool| {
            std::process::Command::new(tool)
                .arg("-d")
                .arg(path)
                .output()
                .ok()
        })?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut in_xdp = false;
    let mut n = 0;
    for line in text.lines() {
        if let Some(sec) = line.strip_prefix("Disassembly of section ") {
            in_xdp = sec.trim_end_matches(':') == "xdp";
            continue;
        }
        let t = line.trim_start();
        let is_insn = t.split_once(':').is_some_and(|(pc, rest)| {
            !pc.is_empty() && pc.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
        });
        if in_xdp && is_insn {
            n += 1;
        }
    }
    Some(n)
}

/// "verification time N usec" from a kernel log with BPF_LOG_STATS.
fn kernel_verification_usec(log: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        l.strip_prefix("verification time ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    })
}

/// Verify program `name` of `path` with bpfjet and load the object into the
/// kernel; both must accept. Prints both verification times.
fn accept_both(path: &Path, name: &str) {
    let obj = bpfjet_obj::load_file(path).expect("load object");
    let prog = obj.program(name).expect("program");
    let insns = bpfjet_isa::decode_program(&prog.insns).expect("decode");
    let mut env = VerifyEnv::new(&obj.maps);
    env.kfuncs = &obj.kfuncs;
    env.spin_locks = &obj.spin_locks;
    let t = Instant::now();
    let facts = verify(&insns, &env).unwrap_or_else(|e| panic!("bpfjet rejects {name}:\n{e}"));
    let ours = t.elapsed();
    println!(
        "{name}: bpfjet accepts in {ours:.2?} ({} slots, processed {}, states {})",
        insns.len(),
        facts.insns_processed,
        facts.states_stored
    );

    if let Err(why) = bpfjet_kernel::kernel_available() {
        bpfjet_testsupport::report_skip(format!("kernel side of {name} ({why})"));
        return;
    }
    // Log level 4 (BPF_LOG_STATS): the kernel reports its own verification
    // time without the cost of writing a full log.
    let opts = bpfjet_kernel::LoadOptions {
        verifier_log_level: 4,
        ..Default::default()
    };
    let t = Instant::now();
    let kobj = bpfjet_kernel::KernelObject::open_with(path, &opts)
        .unwrap_or_else(|e| panic!("kernel rejects {name}: {e}"));
    let load = t.elapsed();
    let log = kobj.verifier_log(name).unwrap_or("");
    let processed = log
        .lines()
        .find(|l| l.starts_with("processed "))
        .unwrap_or("(no stats line)");
    match kernel_verification_usec(log) {
        Some(us) => println!(
            "{name}: kernel accepts, verification {us} us, whole object load (maps + BTF + prog) {load:.2?}; {processed}"
        ),
        None => println!("{name}: kernel accepts, whole object load {load:.2?} (log has no verification time)"),
    }
}

#[test]
fn katran_full_accepted_by_bpfjet_and_kernel() {
    let path = katran_full();
    let listed =
        objdump_insns(&path).expect("llvm-objdump -d (llvm 19) is needed to count instructions");
    println!("katran_full: llvm-objdump -d lists {listed} instructions in section xdp");
    assert!(listed >= 2000, "katran_full has only {listed} instructions");
    accept_both(&path, "katran_full");
    // The smaller corpus balancer, for comparison.
    let lb = path.parent().unwrap().join("../xdp/katran_lb.o");
    if lb.exists() {
        accept_both(&lb, "katran_lb");
    } else {
        println!("katran_lb.o not built (make -C examples objs): not compared");
    }
}
