//! Objects nobody here compiled: the test ELF files of cilium/ebpf as
//! Debian's `golang-github-cilium-ebpf-dev` installs them (built by that
//! project with clang 7, 9 and 14, little- and big-endian; legacy `maps`
//! sections, iproute2's map layout, BTF maps with static initialisers,
//! CO-RE relocations, subprograms, strings, freplace and raw-tracepoint
//! programs). For every one bpfjet's loader must either load it or refuse
//! it with a message, never panic; the expectations cilium/ebpf's own
//! tests hold for these files must hold:
//! - big-endian objects are refused as such;
//! - a `static` map definition is refused (`invalid_map_static`);
//! - a legacy definition with non-zero bytes past `struct bpf_map_def` is
//!   refused (`invalid_map`; cilium/ebpf refuses it at map creation), and
//!   so is iproute2's layout asking for pinning (`iproute2_map_compat`,
//!   which cilium/ebpf leaves to its caller to read);
//! - `subprog_reloc`'s XDP program (a subprogram through a function
//!   pointer relocation) loads and is verified.
//!
//! Where bpfjet follows libbpf 1.x rather than cilium/ebpf: `loader-*.elf`
//! put a `static` function in section `static`, which libbpf refuses (and
//! so does bpfjet); clang 7's `loader-clang-7` has no function symbols.
//!
//! Where libbpf 1.x with the kernel loads a little-endian object (libbpf 1.x
//! refuses every legacy `maps` section), bpfjet's loader must load it too.
//! Fails when the package is missing: scripts/setup.sh installs it.

mod support;

use std::path::{Path, PathBuf};

const ROOT: &str = "/usr/share/gocode/src/github.com/cilium/ebpf";

fn objects() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for dir in ["testdata", "btf/testdata"] {
        let dir = Path::new(ROOT).join(dir);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: install golang-github-cilium-ebpf-dev (scripts/setup.sh)",
                dir.display()
            )
        });
        for e in entries {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "elf") {
                all.push(p);
            }
        }
    }
    all.sort();
    all
}

/// bpfjet's whole load (ELF, BTF, maps, linking, CO-RE, verifier) of every
/// program: `Ok(names of the loaded programs)` or the error text; a panic
/// is caught and reported as one.
fn bpfjet_load(path: &Path) -> Result<Vec<String>, String> {
    let result = std::panic::catch_unwind(|| -> Result<Vec<String>, String> {
        let obj = bpfjet_obj::load_file(path).map_err(|e| e.to_string())?;
        let loaded = bpfjet_runtime::LoadedObject::load(&obj, &Default::default())
            .map_err(|e| e.to_string())?;
        Ok(loaded
            .program_names()
            .iter()
            .map(|s| s.to_string())
            .collect())
    });
    result.unwrap_or_else(|_| Err("PANIC".into()))
}

#[test]
fn every_cilium_test_object_loads_or_is_refused_clearly() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("cilium/ebpf corpus, kernel column", why);
    }
    let objects = objects();
    assert!(objects.len() >= 30, "{} objects", objects.len());
    let mut failures = Vec::new();
    for path in &objects {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let ours = bpfjet_load(path);
        eprintln!("{name}: {ours:?}");
        match &ours {
            Err(e) if e == "PANIC" => failures.push(format!("{name}: bpfjet panicked")),
            Err(e) if e.trim().is_empty() => failures.push(format!("{name}: empty error")),
            _ => {}
        }
        if name.ends_with("-eb.elf") {
            if !ours.as_ref().is_err_and(|e| e.contains("big-endian")) {
                failures.push(format!("{name}: not refused as big-endian: {ours:?}"));
            }
            continue;
        }
        if name.starts_with("invalid_map_static")
            && !ours.as_ref().is_err_and(|e| e.contains("static"))
        {
            failures.push(format!("{name}: a static map definition loads: {ours:?}"));
        }
        if name.starts_with("invalid_map-")
            && !ours.as_ref().is_err_and(|e| e.contains("non-zero options"))
        {
            failures.push(format!("{name}: non-zero map options load: {ours:?}"));
        }
        if name.starts_with("iproute2_map_compat")
            && !ours
                .as_ref()
                .is_err_and(|e| e.contains("iproute2's `pinning`"))
        {
            failures.push(format!("{name}: iproute2 pinning not named: {ours:?}"));
        }
        if name.starts_with("subprog_reloc") && ours.is_err() {
            failures.push(format!("{name}: its XDP program does not load: {ours:?}"));
        }
        if kernel.is_ok()
            && bpfjet_kernel::KernelObject::open_with(path, &bpfjet_kernel::LoadOptions::default())
                .is_ok()
            && ours.is_err()
        {
            failures.push(format!(
                "{name}: libbpf and the kernel load it, bpfjet refuses: {ours:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
