//! Access to the bpf_conformance test vectors (`*.data`), read at test time.

use std::path::PathBuf;

/// One `.data` file: its name, the `-- asm` section (with the 1-based line
/// number of the section's first line in the file) and the optional `-- raw`
/// section (expected encoding, one 64-bit slot per line).
pub struct DataFile {
    pub name: String,
    pub asm: String,
    pub raw: Option<Vec<u64>>,
}

/// The vector directory: `$BPFJET_CONFORMANCE_DIR`, or the shared checkout
/// next to the workspace. A missing directory panics: a conformance test that
/// silently finds no vectors would pass while testing nothing.
pub fn conformance_dir() -> PathBuf {
    let dir = std::env::var_os("BPFJET_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
        });
    assert!(
        dir.is_dir(),
        "conformance vectors not found at {} (set BPFJET_CONFORMANCE_DIR)",
        dir.display()
    );
    dir
}

/// Every `.data` file, sorted by name. Panics when there are none.
pub fn data_files() -> Vec<DataFile> {
    let dir = conformance_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no .data files in {}", dir.display());
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)
                .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            parse(p.file_name().unwrap().to_string_lossy().into_owned(), &text)
        })
        .collect()
}

fn parse(name: String, text: &str) -> DataFile {
    let mut asm = String::new();
    let mut raw: Option<Vec<u64>> = None;
    let mut section = "";
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("-- ") {
            section = s.trim();
            if section == "raw" {
                raw = Some(Vec::new());
            }
            continue;
        }
        match section {
            "asm" => {
                asm.push_str(line);
                asm.push('\n');
            }
            "raw" => {
                let t = line.split('#').next().unwrap_or("").trim();
                if !t.is_empty() {
                    let hex = t.trim_start_matches("0x");
                    let v = u64::from_str_radix(hex, 16)
                        .unwrap_or_else(|e| panic!("{name}: bad raw line {t:?}: {e}"));
                    raw.as_mut().unwrap().push(v);
                }
            }
            _ => {}
        }
    }
    DataFile { name, asm, raw }
}
