//! The machine code the JIT caches on disk depends on the lifter (this
//! crate), the natives it calls and their contract (kfuncs, runtime): a
//! digest of those sources goes into every cache key, so an object compiled
//! by another build of bpfjet is never reused (a hand-kept revision number
//! was forgotten more than once).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = ["jit/src", "kfuncs/src", "runtime/src"].map(|d| crates.join(d));
    let mut files = Vec::new();
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
        sources(d, &mut files);
    }
    files.sort();
    // FNV-1a, 64 bits: a build identity, not a security boundary.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        let name = f
            .strip_prefix(&crates)
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        let body = std::fs::read(f).unwrap_or_default();
        for b in name.bytes().chain([0]).chain(body).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=BPFJET_CODEGEN_SOURCES={h:016x}");
}
