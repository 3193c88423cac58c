//! The bpf_conformance suite's `.data` test format, shared by the CLI runner
//! and every engine's own conformance test: `-- asm` (the program),
//! `-- mem` (initial memory as hex bytes), `-- result` (expected r0 in hex),
//! `-- error` (an expected failure), `-- raw` (the expected encoding, one
//! 64-bit slot per line); `#` starts a comment; other sections are
//! informational.

use std::path::{Path, PathBuf};

/// One test vector.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConformanceTest {
    /// File name, e.g. `add.data`.
    pub name: String,
    /// The program in the assembler syntax (comments kept; the assembler skips them).
    pub asm: String,
    pub mem: Vec<u8>,
    pub result: Option<u64>,
    pub error: Option<String>,
    pub raw: Option<Vec<u64>>,
}

fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or("")
}

fn hex_u64(text: &str) -> Result<u64, String> {
    let digits = text.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(digits, 16).map_err(|e| format!("bad hex number {text:?}: {e}"))
}

/// Parse one `.data` file's text.
pub fn parse(name: &str, text: &str) -> Result<ConformanceTest, String> {
    let mut test = ConformanceTest {
        name: name.to_string(),
        ..ConformanceTest::default()
    };
    let mut section = "";
    let mut error_text = String::new();
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("-- ") {
            section = s.trim();
            if section == "raw" {
                test.raw = Some(Vec::new());
            }
            continue;
        }
        let content = strip_comment(line).trim();
        match section {
            "asm" => {
                test.asm.push_str(line);
                test.asm.push('\n');
            }
            "mem" => {
                for byte in content.split_whitespace() {
                    test.mem.push(
                        u8::from_str_radix(byte, 16)
                            .map_err(|e| format!("bad mem byte {byte:?}: {e}"))?,
                    );
                }
            }
            "result" if !content.is_empty() => test.result = Some(hex_u64(content)?),
            "error" if !line.trim().is_empty() => error_text.push_str(line.trim()),
            "raw" if !content.is_empty() => {
                if let Some(raw) = test.raw.as_mut() {
                    raw.push(hex_u64(content)?);
                }
            }
            _ => {}
        }
    }
    if !error_text.is_empty() {
        test.error = Some(error_text);
    }
    if test.asm.trim().is_empty() {
        return Err("no -- asm section".into());
    }
    if test.result.is_none() && test.error.is_none() {
        return Err("neither -- result nor -- error section".into());
    }
    Ok(test)
}

/// Where the suite lives for the project's own tests: `$CONFORMANCE` (the
/// Makefile's variable), or the shared checkout next to the workspace.
pub fn default_dir() -> PathBuf {
    std::env::var_os("CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
        })
}

/// The `.data` files of `dir`, sorted by name. A missing or empty directory
/// is an error: a conformance run that finds no vectors must not pass.
pub fn data_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no .data tests in {}", dir.display()));
    }
    Ok(paths)
}

/// Every test of `dir`, parsed; the first unreadable or malformed file is an error.
pub fn load_dir(dir: &Path) -> Result<Vec<ConformanceTest>, String> {
    data_files(dir)?
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let text =
                std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
            parse(&name, &text).map_err(|e| format!("{name}: {e}"))
        })
        .collect()
}

/// The suite for a test: panics with the reason when it cannot be read.
pub fn load_default() -> Vec<ConformanceTest> {
    load_dir(&default_dir())
        .unwrap_or_else(|e| panic!("conformance vectors: {e} (set CONFORMANCE)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_and_comments() {
        let t = parse(
            "t.data",
            "# c\n-- asm\nmov %r0, 1 # one\nexit\n-- mem\n00 01\nff\n-- result\n0x1\n-- raw\n0xb7\n-- no register offset\nx\n",
        )
        .unwrap();
        assert_eq!(t.mem, vec![0, 1, 0xff]);
        assert_eq!(t.result, Some(1));
        assert_eq!(t.raw, Some(vec![0xb7]));
        assert!(t.asm.contains("exit"));
    }

    #[test]
    fn rejects_incomplete_tests() {
        assert!(parse("t", "-- asm\nexit\n").is_err());
        assert!(parse("t", "-- result\n0x1\n").is_err());
        assert!(parse("t", "-- asm\nexit\n-- mem\nzz\n-- result\n0\n").is_err());
    }

    #[test]
    fn missing_directory_is_an_error() {
        assert!(load_dir(Path::new("/nonexistent/conformance")).is_err());
    }
}
