//! The bpf_conformance `.data` test format: `-- asm`, `-- mem`, `-- result`,
//! `-- error` sections; `#` comments. Other sections are informational.

use anyhow::{bail, Context, Result};

#[derive(Debug, Default, Clone)]
pub struct ConformanceTest {
    pub asm: String,
    pub mem: Vec<u8>,
    pub result: Option<u64>,
    pub error: Option<String>,
}

/// Parse one `.data` file's text.
pub fn parse(text: &str) -> Result<ConformanceTest> {
    let mut test = ConformanceTest::default();
    let mut section = String::new();
    let mut mem_text = String::new();
    let mut result_text = String::new();
    let mut error_text = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = name.trim().to_string();
            continue;
        }
        match section.as_str() {
            "asm" => {
                test.asm.push_str(line);
                test.asm.push('\n');
            }
            "mem" => {
                mem_text.push_str(strip_comment(line));
                mem_text.push(' ');
            }
            "result" => result_text.push_str(strip_comment(line).trim()),
            "error" => {
                error_text.push_str(line.trim());
            }
            _ => {}
        }
    }
    for byte in mem_text.split_whitespace() {
        test.mem
            .push(u8::from_str_radix(byte, 16).with_context(|| format!("bad mem byte {byte:?}"))?);
    }
    if !result_text.is_empty() {
        let digits = result_text.trim_start_matches("0x");
        test.result = Some(
            u64::from_str_radix(digits, 16)
                .with_context(|| format!("bad result {result_text:?}"))?,
        );
    }
    if !error_text.is_empty() {
        test.error = Some(error_text);
    }
    if test.asm.trim().is_empty() {
        bail!("no -- asm section");
    }
    if test.result.is_none() && test.error.is_none() {
        bail!("neither -- result nor -- error section");
    }
    Ok(test)
}

fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_and_comments() {
        let t = parse(
            "# c\n-- asm\nmov %r0, 1 # one\nexit\n-- mem\n00 01\nff\n-- result\n0x1\n-- no register offset\nx\n",
        )
        .unwrap();
        assert_eq!(t.mem, vec![0, 1, 0xff]);
        assert_eq!(t.result, Some(1));
        assert!(t.asm.contains("exit"));
    }

    #[test]
    fn rejects_missing_result() {
        assert!(parse("-- asm\nexit\n").is_err());
    }
}
