//! Kernel-scale verification: every XDP program of the corpus
//! (build/examples/xdp), of examples/verifier, of Debian's libxdp1 objects
//! (/usr/lib/x86_64-linux-gnu/bpf), the big programs written for this
//! (examples/verifier/scale_*.c) and NF-library builds that stress the
//! pruning (`NF_SCALE`) is verified by the kernel and by bpfjet.
//! Both must accept, and bpfjet may process at most `MAX_RATIO` times the
//! instructions the kernel processes ("processed N insns" of its log).
//!
//! Verification times are printed next to each other; they are compared
//! in docs/VERIFIER.md from a release build, never asserted here (timings
//! in a test are not a benchmark).

mod common;

use bpfjet_verifier::{verify, ObjectProgramEnv, Policy};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// bpfjet's processed-instruction count may be at most this multiple of
/// the kernel's on every program both accept.
const MAX_RATIO: f64 = 2.0;

/// Below this many kernel-processed instructions the ratio is not
/// meaningful (a 20-instruction program may take 41 in bpfjet).
const SMALL: u64 = 200;

/// Where Debian's libxdp1 installs its BPF objects.
const LIBXDP_DIR: &str = "/usr/lib/x86_64-linux-gnu/bpf";

struct Row {
    object: String,
    program: String,
    slots: usize,
    ours: Result<(u64, Duration), String>,
    kernel: Option<Result<(u64, u64), String>>,
}

/// "processed N insns" and "verification time N usec" of a log_level 4 log.
fn kernel_stats(log: &str) -> Option<(u64, u64)> {
    let processed = log.lines().find_map(|l| {
        l.strip_prefix("processed ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    })?;
    let usec = log.lines().find_map(|l| {
        l.strip_prefix("verification time ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    })?;
    Some((processed, usec))
}

/// XDP programs of an object (libxdp ships tracing programs too).
fn is_xdp(section: &str) -> bool {
    section == "xdp" || section.starts_with("xdp/") || section.starts_with("xdp.")
}

fn measure(path: &Path, kernel: bool) -> Vec<Row> {
    let object = path.file_name().unwrap().to_string_lossy().into_owned();
    let obj = match bpfjet_obj::load_file(path) {
        Ok(o) => o,
        Err(e) => panic!("{}: bpfjet cannot load the object: {e}", path.display()),
    };
    let progs: Vec<_> = obj.programs.iter().filter(|p| is_xdp(&p.section)).collect();
    if progs.is_empty() {
        return Vec::new();
    }
    let kobj = kernel.then(|| {
        let opts = bpfjet_kernel::LoadOptions {
            verifier_log_level: 4,
            ..Default::default()
        };
        bpfjet_kernel::KernelObject::open_with(path, &opts).map_err(|e| e.to_string())
    });
    let mut rows = Vec::new();
    for prog in progs {
        let insns = bpfjet_isa::decode_program(&prog.insns).expect("decode");
        let penv = ObjectProgramEnv::new(&obj, prog);
        let env = penv.env(&obj, Policy::Privileged);
        let t = Instant::now();
        let ours = match verify(&insns, &env) {
            Ok(f) => Ok((f.insns_processed, t.elapsed())),
            Err(e) => Err(format!("{} at {:?}: {}", e.rule, e.pc, e.message)),
        };
        let kernel = kobj.as_ref().map(|k| match k {
            Ok(k) => k
                .verifier_log(&prog.name)
                .and_then(kernel_stats)
                .ok_or_else(|| "no statistics in the kernel's log".to_string()),
            Err(e) => Err(e.clone()),
        });
        rows.push(Row {
            object: object.clone(),
            program: prog.name.clone(),
            slots: insns.len(),
            ours,
            kernel,
        });
    }
    rows
}

/// NF-library builds (examples/nf) that are verification workloads of
/// their own: the EDF load balancer's plain build over 32 backends, whose
/// loop forks on every backend and keeps the index of the minimum as a
/// precise constant (the kernel needs about 250,000 instructions; its
/// 64-backend build exceeds the kernel's budget and is not listed); the
/// rbtree key-value store (a lookup loop under a lock whose `less`
/// callback and `bpf_loop` prefill are verified as callback iterations,
/// pruned against states still being explored: the exact comparisons that
/// implies must end with the callback's exploration, or the loop's paths
/// never prune; plain and with a 1024-node prefill).
const NF_SCALE: &[&str] = &[
    "edflb_b32_plain",
    "skiplist_rbtree",
    "skiplist_rbtree_k1024",
];

fn nf_scale_objects() -> Vec<PathBuf> {
    NF_SCALE
        .iter()
        .map(|name| {
            common::make_examples(&format!("../build/examples/nf/{name}.o"))
                .join(format!("build/examples/nf/{name}.o"))
        })
        .collect()
}

fn objects_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "o"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn kernel_scale_verification() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        bpfjet_testsupport::report_skip(format!(
            "kernel side of the scale test ({why}); bpfjet must still accept every program"
        ));
    }
    let mut objects = common::nf_objects();
    let verifier_dir = common::verifier_example("katran_full")
        .parent()
        .unwrap()
        .to_path_buf();
    objects.extend(objects_in(&verifier_dir));
    objects.extend(nf_scale_objects());
    let libxdp = objects_in(Path::new(LIBXDP_DIR));
    if libxdp.is_empty() {
        bpfjet_testsupport::report_skip(format!(
            "no libxdp1 objects in {LIBXDP_DIR} (apt-get install libxdp1)"
        ));
    }
    objects.extend(libxdp);

    // SCALE_ONLY=<part of a file name> measures a subset (while tuning).
    if let Ok(only) = std::env::var("SCALE_ONLY") {
        objects.retain(|p| p.to_string_lossy().contains(&only));
    }
    let mut rows = Vec::new();
    for path in &objects {
        rows.extend(measure(path, kernel.is_ok()));
    }
    println!(
        "{:<24} {:<22} {:>6} | {:>9} {:>9} {:>6} | {:>10} {:>10}",
        "object", "program", "slots", "kernel", "bpfjet", "ratio", "kernel us", "bpfjet us"
    );
    let mut failures = Vec::new();
    for r in &rows {
        let (kp, kt) = match &r.kernel {
            Some(Ok((p, t))) => (p.to_string(), t.to_string()),
            Some(Err(_)) => ("reject".into(), "-".into()),
            None => ("-".into(), "-".into()),
        };
        let (bp, bt) = match &r.ours {
            Ok((p, t)) => (p.to_string(), t.as_micros().to_string()),
            Err(_) => ("reject".into(), "-".into()),
        };
        // Programs both refuse (examples/verifier holds a few on purpose)
        // are not part of the comparison; one-sided verdicts are failures.
        match (&r.kernel, &r.ours) {
            (Some(Err(k)), Ok(_)) => failures.push(format!(
                "{} {}: only the kernel rejects: {k}",
                r.object, r.program
            )),
            (Some(Ok(_)) | None, Err(e)) => {
                failures.push(format!("{} {}: bpfjet rejects: {e}", r.object, r.program))
            }
            _ => {}
        }
        let ratio = match (&r.kernel, &r.ours) {
            (Some(Ok((k, _))), Ok((b, _))) => {
                let ratio = *b as f64 / *k as f64;
                if *k >= SMALL && ratio > MAX_RATIO {
                    failures.push(format!(
                        "{} {}: bpfjet processed {b} instructions, {ratio:.2}x the kernel's {k}",
                        r.object, r.program
                    ));
                }
                format!("{ratio:.2}")
            }
            _ => "-".into(),
        };
        println!(
            "{:<24} {:<22} {:>6} | {:>9} {:>9} {:>6} | {:>10} {:>10}",
            r.object, r.program, r.slots, kp, bp, ratio, kt, bt
        );
    }
    for r in &rows {
        if let (Some(Err(k)), Err(b)) = (&r.kernel, &r.ours) {
            let last = k.lines().rev().find(|l| {
                !l.trim().is_empty()
                    && !l.starts_with("processed")
                    && !l.starts_with("verification time")
                    && !l.starts_with("stack depth")
                    && !l.starts_with("libbpf")
                    && !l.starts_with("--")
            });
            println!(
                "{} {}: both reject; kernel: {}; bpfjet: {b}",
                r.object,
                r.program,
                last.unwrap_or("")
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
