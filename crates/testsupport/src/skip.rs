//! Loud skips. A test that cannot check something here (no kernel facility,
//! not root, a package missing) says so and still passes; the harness must
//! not hide that. `cargo test` captures `print!`/`eprint!` of passing tests,
//! so a skip written with them was invisible in CI. [`report_skip`] writes
//! past the capture, and also appends the line to `$BPFJET_SKIP_LOG` when
//! it is set: `make test` sets it and prints every skip of the run at the
//! end (`scripts/report-skips.sh`), so a skip is seen where the verdict is.

use std::io::Write;

/// Print `SKIPPED: <what>` on the process's real stderr and record it in
/// `$BPFJET_SKIP_LOG`.
pub fn report_skip(what: impl AsRef<str>) {
    let log = std::env::var_os("BPFJET_SKIP_LOG");
    // Straight to the file descriptor: `std::io::stderr()` used directly is
    // not captured by the test harness (only the print macros are).
    record(
        what.as_ref(),
        &mut std::io::stderr().lock(),
        log.as_deref().map(std::path::Path::new),
    );
}

/// Write the skip line to `out` and append it, with the test's name, to
/// `log`.
fn record(what: &str, out: &mut dyn Write, log: Option<&std::path::Path>) {
    let line = format!("SKIPPED: {}\n", what.trim_end());
    let _ = out.write_all(line.as_bytes());
    if let Some(path) = log {
        // One `write` of a short line with O_APPEND: lines from test
        // threads and processes running at once do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let test = std::thread::current()
                .name()
                .map(|n| format!("[{n}] "))
                .unwrap_or_default();
            let _ = f.write_all(format!("{test}{line}").as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_printed_and_appended_to_the_log() {
        let dir = std::env::temp_dir().join(format!("bpfjet-skiplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips.log");
        // A buffer, not stderr: this test's lines are not skips of the run.
        let mut out = Vec::new();
        record("no facility: reason one", &mut out, Some(&log));
        record("no facility: reason two\n", &mut out, Some(&log));
        record("not logged", &mut out, None);
        let printed = String::from_utf8(out).unwrap();
        assert_eq!(
            printed,
            "SKIPPED: no facility: reason one\nSKIPPED: no facility: reason two\nSKIPPED: not logged\n"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with("SKIPPED: no facility: reason one"),
            "{text}"
        );
        assert!(
            lines[1].ends_with("SKIPPED: no facility: reason two"),
            "{text}"
        );
        assert!(
            lines[0].contains("a_skip_is_printed_and_appended_to_the_log"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
