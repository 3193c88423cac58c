//! Mutation test with the kernel verifier as the oracle: single-instruction
//! mutants of real XDP programs — the project's corpus (build/examples/xdp)
//! and Debian's libxdp1 objects (/usr/lib/x86_64-linux-gnu/bpf) — each
//! loaded into the running kernel (raw `BPF_PROG_LOAD`, the object's maps
//! created once per program) and verified by bpfjet under the privileged
//! policy, which is the kernel's as root.
//!
//! A mutant bpfjet accepts and the kernel rejects is a failure: bpfjet would
//! run a program the kernel considers unsafe (or at least unprovable). The
//! other direction (kernel-only) is counted and grouped by bpfjet's rule; the
//! classes are listed with their reasons in docs/VERIFIER.md. Rejections of
//! bpfjet's complexity budget are counted apart (kernel-scale pruning is
//! separate work).
//!
//! Mutants are generated from a fixed seed, so every run tests the same
//! programs. `BPFJET_KERNEL_MUTANTS=N` sets the number per program,
//! `BPFJET_KERNEL_MUTANTS_SEED=S` another seed (to look further).

mod common;
use common::Rng;

use bpfjet_isa::{decode_program, RawInsn};
use bpfjet_kernel::raw_load::{create_map, load_raw_with_fds, RawLoadOptions};
use bpfjet_obj::Object;
use bpfjet_verifier::{verify_raw, ObjectProgramEnv, Policy};
use std::collections::{BTreeMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Mutants per program (release build); a debug build does a tenth.
const PER_PROGRAM: usize = 120;
const SEED: u64 = 0x6b65_726e_656c_2d31;
const LIBXDP_DIR: &str = "/usr/lib/x86_64-linux-gnu/bpf";

/// A program to mutate: its slots and the object it came from (maps,
/// kfuncs, BTF facts for bpfjet's environment).
struct Source {
    name: String,
    object: std::rc::Rc<Object>,
    program: usize,
    slots: Vec<RawInsn>,
    frags: bool,
}

fn objects_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "o"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn sources() -> Vec<Source> {
    let mut files = common::nf_objects();
    let libxdp = objects_in(Path::new(LIBXDP_DIR));
    if libxdp.is_empty() {
        bpfjet_testsupport::report_skip(format!(
            "libxdp1 objects: none in {LIBXDP_DIR} (scripts/setup.sh installs libxdp1)"
        ));
    }
    files.extend(libxdp);
    let mut out = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let object = match bpfjet_obj::load_file(&path) {
            Ok(o) => std::rc::Rc::new(o),
            Err(e) => {
                bpfjet_testsupport::report_skip(format!(
                    "{file}: bpfjet cannot read the object: {e}"
                ));
                continue;
            }
        };
        for (i, p) in object.programs.iter().enumerate() {
            if !p.kind.is_supported() {
                continue;
            }
            out.push(Source {
                name: format!("{file}:{}", p.name),
                object: object.clone(),
                program: i,
                slots: p.insns.clone(),
                frags: p.kind == bpfjet_obj::ProgKind::XdpFrags,
            });
        }
    }
    out
}

fn delta(rng: &mut Rng) -> i64 {
    match rng.below(4) {
        0 => rng.pick(&[1, -1, 2, -2, 4, -4, 8, -8]),
        1 => rng.below(129) as i64 - 64,
        2 => rng.pick(&[16, -16, 32, -32, 64, -64, 256, -256]),
        _ => rng.below(9) as i64 - 4,
    }
}

fn reg(rng: &mut Rng) -> u8 {
    // Mostly valid registers; now and then an invalid one (the kernel
    // refuses those at load).
    if rng.below(20) == 0 {
        11 + rng.below(5) as u8
    } else {
        rng.below(11) as u8
    }
}

const INTERESTING_IMM: &[i32] = &[
    0,
    1,
    -1,
    2,
    7,
    8,
    14,
    31,
    32,
    33,
    63,
    64,
    65,
    255,
    0xffff,
    i32::MAX,
    i32::MIN,
];

/// One edit of one instruction slot. `None` when the edit changes nothing.
fn mutate(slots: &[RawInsn], rng: &mut Rng) -> Option<(usize, Vec<RawInsn>)> {
    // The second slot of an lddw is data; pick instruction starts only.
    let mut starts = Vec::with_capacity(slots.len());
    let mut i = 0;
    while i < slots.len() {
        starts.push(i);
        i += if slots[i].code == 0x18 { 2 } else { 1 };
    }
    let pc = starts[rng.below(starts.len() as u64) as usize];
    let mut m = slots.to_vec();
    let x = &mut m[pc];
    let class = x.code & 7;
    let off = |x: &mut RawInsn, rng: &mut Rng| x.off = (x.off as i64 + delta(rng)) as i16;
    let imm = |x: &mut RawInsn, rng: &mut Rng| {
        x.imm = if rng.below(2) == 0 {
            rng.pick(INTERESTING_IMM)
        } else {
            (x.imm as i64 + delta(rng)) as i32
        }
    };
    match class {
        // ALU, ALU64
        4 | 7 => match rng.below(6) {
            0 => x.code = (x.code & 0x0f) | ((rng.below(13) as u8) << 4),
            1 => imm(x, rng),
            2 => x.dst = reg(rng),
            3 => x.src = reg(rng),
            4 => x.code ^= 0x08, // register <-> immediate source
            _ => x.code ^= 0x03, // ALU <-> ALU64
        },
        // JMP, JMP32
        5 | 6 => {
            let op = x.code >> 4;
            if op == 0x8 {
                // call: another helper, or another local target
                if x.src == 1 {
                    off(x, rng);
                    x.imm = (x.imm as i64 + delta(rng)) as i32;
                } else {
                    x.imm = (x.imm as i64 + rng.pick(&[1, -1, 2, -2, 3])) as i32;
                }
            } else if op == 0x9 {
                // exit: drop it (fall through into what follows)
                *x = RawInsn {
                    code: 0x05,
                    dst: 0,
                    src: 0,
                    off: 0,
                    imm: 0,
                };
            } else {
                match rng.below(7) {
                    0 => {
                        let ops = [1u8, 2, 3, 4, 5, 6, 7, 0xa, 0xb, 0xc, 0xd];
                        if op != 0 {
                            x.code = (x.code & 0x0f) | (rng.pick(&ops) << 4);
                        } else {
                            off(x, rng);
                        }
                    }
                    1 => off(x, rng),
                    2 => imm(x, rng),
                    3 => x.dst = reg(rng),
                    4 => {
                        if op == 0 {
                            off(x, rng)
                        } else {
                            x.code ^= 0x08;
                            x.src = reg(rng);
                        }
                    }
                    // the check never happens / always jumps
                    5 => {
                        *x = RawInsn {
                            code: 0x05,
                            dst: 0,
                            src: 0,
                            off: 0,
                            imm: 0,
                        }
                    }
                    _ => {
                        *x = RawInsn {
                            code: 0x05,
                            dst: 0,
                            src: 0,
                            off: x.off,
                            imm: 0,
                        }
                    }
                }
            }
        }
        // LDX, ST, STX
        1..=3 => match rng.below(6) {
            0 | 1 => off(x, rng),
            2 => x.code = (x.code & !0x18) | ((rng.below(4) as u8) << 3),
            3 => x.dst = reg(rng),
            4 => {
                if class == 2 {
                    imm(x, rng)
                } else {
                    x.src = reg(rng)
                }
            }
            _ => {
                if class == 1 {
                    x.code ^= 0x80 ^ 0x60; // MEM <-> MEMSX
                } else if x.code & 0xe0 == 0xc0 {
                    x.imm = rng.pick(&[0x00, 0x40, 0x50, 0xa0, 0x01, 0x41, 0x51, 0xa1, 0xe1, 0xf1]);
                } else {
                    off(x, rng)
                }
            }
        },
        // LD: lddw (another map, another register) or legacy packet loads
        _ => match rng.below(3) {
            0 => x.dst = reg(rng),
            1 => x.imm = (x.imm as i64 + rng.pick(&[1, -1, 2])) as i32,
            // Not the file-descriptor forms (src 1, 2): whether the kernel
            // accepts those depends on which descriptors this process has open.
            _ => x.src = rng.pick(&[0, 4, 5, 6]),
        },
    }
    (m[pc] != slots[pc]).then_some((pc, m))
}

fn bytes(slots: &[RawInsn]) -> Vec<u8> {
    slots.iter().flat_map(|s| s.to_bytes()).collect()
}

/// Kernel maps of one object, created once and handed to every load.
struct KernelMaps(Vec<OwnedFd>);

impl KernelMaps {
    fn new(object: &Object) -> Result<KernelMaps, String> {
        let mut fds = Vec::new();
        for (i, spec) in object.maps.iter().enumerate() {
            if object.spin_locks.get(i).copied().flatten().is_some() {
                return Err(format!(
                    "map {} holds a bpf_spin_lock (needs BTF; not built here)",
                    spec.name
                ));
            }
            fds.push(create_map(spec).map_err(|e| format!("creating map {}: {e}", spec.name))?);
        }
        Ok(KernelMaps(fds))
    }

    fn dup(&self) -> Vec<OwnedFd> {
        self.0
            .iter()
            .map(|f| f.try_clone().expect("dup map fd"))
            .collect()
    }
}

/// The kernel's verdict; with `why`, the end of its log for a rejection.
fn kernel(src: &Source, maps: &KernelMaps, prog: &[u8], why: bool) -> (bool, String) {
    let opts = RawLoadOptions {
        xdp_frags: src.frags,
        log_level: u32::from(why),
        license: src.object.license.clone(),
        ..RawLoadOptions::default()
    };
    match load_raw_with_fds(prog, maps.dup(), &opts) {
        Ok(_) => (true, String::new()),
        Err(e) => {
            let tail: Vec<&str> = e
                .verifier_log
                .lines()
                .rev()
                .filter(|l| !l.trim().is_empty() && !l.starts_with("processed"))
                .take(3)
                .collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            (false, format!("{}: {}", e.errno, tail.join(" | ")))
        }
    }
}

/// bpfjet's verdict: `Ok(())` or `Err((rule, message))`.
fn bpfjet(src: &Source, slots: &[RawInsn]) -> Result<(), (&'static str, String)> {
    let p = &src.object.programs[src.program];
    let inputs = ObjectProgramEnv::new(&src.object, p);
    let env = inputs.env(&src.object, Policy::Privileged);
    verify_raw(slots, &env)
        .map(|_| ())
        .map_err(|e| (e.rule, e.message))
}

fn show_insn(slots: &[RawInsn], pc: usize) -> String {
    match decode_program(slots) {
        Ok(insns) => bpfjet_isa::format_insn(&insns[pc], Some(pc)),
        Err(_) => format!("{:?}", slots[pc]),
    }
}

#[derive(Default)]
struct Counts {
    both_accept: usize,
    both_reject: usize,
    kernel_only: usize,
    kernel_only_complexity: usize,
    bpfjet_only: usize,
}

#[test]
fn mutants_agree_with_the_kernel_verifier() {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        bpfjet_testsupport::report_skip(format!(
            "mutation test against the kernel verifier: {why}"
        ));
        return;
    }
    let per_program: usize = std::env::var("BPFJET_KERNEL_MUTANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            PER_PROGRAM / 10
        } else {
            PER_PROGRAM
        });
    let start = Instant::now();
    let mut counts = Counts::default();
    // bpfjet rule -> (count, one example)
    let mut kernel_only: BTreeMap<&'static str, (usize, String)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut tested_programs = 0;
    let seed = std::env::var("BPFJET_KERNEL_MUTANTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    let mut rng = Rng(seed | 1);
    for src in sources() {
        let maps = match KernelMaps::new(&src.object) {
            Ok(m) => m,
            Err(e) => {
                bpfjet_testsupport::report_skip(format!("{}: {e}", src.name));
                continue;
            }
        };
        let original = bytes(&src.slots);
        let (k, kwhy) = kernel(&src, &maps, &original, true);
        if !k {
            bpfjet_testsupport::report_skip(format!(
                "{}: the kernel refuses the unmutated program as a raw load: {kwhy}",
                src.name
            ));
            continue;
        }
        if let Err((rule, msg)) = bpfjet(&src, &src.slots) {
            if rule == "too_complex" {
                println!(
                    "NOT MUTATED: {}: bpfjet refuses the unmutated program as too complex \
                     (kernel-scale pruning is separate work): {msg}",
                    src.name
                );
                continue;
            }
            failures.push(format!(
                "{}: the kernel accepts the unmutated program, bpfjet rejects it: {rule}: {msg}",
                src.name
            ));
            continue;
        }
        tested_programs += 1;
        let t = Instant::now();
        let mut seen = HashSet::new();
        let mut made = 0;
        let mut attempts = 0;
        let before = (
            counts.both_accept,
            counts.both_reject,
            counts.kernel_only + counts.kernel_only_complexity,
            counts.bpfjet_only,
        );
        while made < per_program && attempts < per_program * 4 {
            attempts += 1;
            let Some((pc, mutant)) = mutate(&src.slots, &mut rng) else {
                continue;
            };
            let image = bytes(&mutant);
            if !seen.insert(image.clone()) {
                continue;
            }
            made += 1;
            let (k, _) = kernel(&src, &maps, &image, false);
            let ours = bpfjet(&src, &mutant);
            match (k, ours) {
                (true, Ok(())) => counts.both_accept += 1,
                (false, Err(_)) => counts.both_reject += 1,
                (true, Err((rule, msg))) => {
                    if rule == "too_complex" {
                        counts.kernel_only_complexity += 1;
                    } else {
                        counts.kernel_only += 1;
                    }
                    let e = kernel_only.entry(rule).or_insert((0, String::new()));
                    e.0 += 1;
                    if e.1.is_empty() {
                        e.1 = format!(
                            "{} insn {pc}: {} -> {}: {msg}",
                            src.name,
                            show_insn(&src.slots, pc),
                            show_insn(&mutant, pc)
                        );
                    }
                }
                (false, Ok(())) => {
                    counts.bpfjet_only += 1;
                    let (_, why) = kernel(&src, &maps, &image, true);
                    let listing = decode_program(&mutant)
                        .map(|i| bpfjet_isa::disassemble(&i))
                        .unwrap_or_default();
                    let listing = if failures.len() < 3 {
                        listing
                    } else {
                        String::from("(listing left out after the first three)\n")
                    };
                    failures.push(format!(
                        "{} insn {pc}: {} -> {}: bpfjet accepts, the kernel rejects: {why}\n{listing}",
                        src.name,
                        show_insn(&src.slots, pc),
                        show_insn(&mutant, pc),
                    ));
                }
            }
        }
        println!(
            "{:<40} {:>5} slots {:>4} mutants in {:>6.2?}: both accept {:>4}, both reject {:>4}, kernel-only {:>3}, bpfjet-only {:>3}",
            src.name,
            src.slots.len(),
            made,
            t.elapsed(),
            counts.both_accept - before.0,
            counts.both_reject - before.1,
            counts.kernel_only + counts.kernel_only_complexity - before.2,
            counts.bpfjet_only - before.3,
        );
    }
    println!("kernel-only classes (bpfjet's rule: count, first example):");
    for (rule, (n, example)) in &kernel_only {
        println!("  {rule}: {n}\n    {example}");
    }
    let total = counts.both_accept
        + counts.both_reject
        + counts.kernel_only
        + counts.kernel_only_complexity
        + counts.bpfjet_only;
    println!(
        "{tested_programs} programs, {total} mutants in {:.1?}: both accept {}, both reject {}, \
         kernel-only {} (+{} too complex for bpfjet's budget), bpfjet-only {}",
        start.elapsed(),
        counts.both_accept,
        counts.both_reject,
        counts.kernel_only,
        counts.kernel_only_complexity,
        counts.bpfjet_only
    );
    assert!(tested_programs > 0, "no program could be mutated");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
