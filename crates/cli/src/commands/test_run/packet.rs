//! The `--data` packet file: raw frame bytes, or hex text when the file name
//! ends in `.hex` (the corpus fixtures' `*.pkt.hex` format: two hex digits
//! per byte, any whitespace between bytes, `#` starts a comment to the end
//! of the line).

use anyhow::{bail, Context, Result};
use std::path::Path;

/// The kernel's `BPF_PROG_TEST_RUN` rejects XDP frames shorter than an
/// Ethernet header (EINVAL); both engines get the same check up front so a
/// short file fails the same way whichever engine runs it.
pub const MIN_FRAME_LEN: usize = 14;

/// Read the packet at `path` (see the module docs for the formats).
pub fn read_packet(path: &Path) -> Result<Vec<u8>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading packet {}", path.display()))?;
    let is_hex = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".hex"));
    let frame = if is_hex {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| anyhow::anyhow!("packet {}: a .hex file must be text", path.display()))?;
        parse_hex_frame(text).with_context(|| format!("packet {}", path.display()))?
    } else {
        bytes
    };
    if frame.len() < MIN_FRAME_LEN {
        bail!(
            "packet {} is {} bytes; an XDP test run needs at least a {MIN_FRAME_LEN}-byte \
             Ethernet header (the kernel rejects shorter frames)",
            path.display(),
            frame.len()
        );
    }
    Ok(frame)
}

/// Hex text to bytes. A byte is two adjacent digits; whitespace may separate
/// bytes but not split one, so a dropped digit is reported where it happened
/// instead of shifting every later byte by a nibble.
pub fn parse_hex_frame(text: &str) -> Result<Vec<u8>> {
    let mut frame = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for word in line.split_whitespace() {
            if word.len() % 2 != 0 {
                bail!(
                    "line {}: {word:?} has an odd number of hex digits (truncated byte?)",
                    line_no + 1
                );
            }
            for pair in word.as_bytes().chunks(2) {
                let digits = std::str::from_utf8(pair).unwrap_or("??");
                let byte = u8::from_str_radix(digits, 16).map_err(|_| {
                    anyhow::anyhow!("line {}: {word:?} is not hex bytes", line_no + 1)
                })?;
                frame.push(byte);
            }
        }
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_comments_and_runs() {
        let text = "# eth\n02 00 0000 ff # dst\n\n0a\tBB\n";
        assert_eq!(
            parse_hex_frame(text).unwrap(),
            vec![0x02, 0, 0, 0, 0xff, 0x0a, 0xbb]
        );
    }

    #[test]
    fn hex_errors_name_the_line() {
        let e = parse_hex_frame("00 11\n22 3\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("odd"), "{e}");
        let e = parse_hex_frame("0g").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("not hex"), "{e}");
    }
}
