//! What the command's process leaves for the image its `exec` starts.
//!
//! The consumer of the ring and perf buffers is a thread of the command's
//! agent; an `exec` of the command's process ends it, and the next image's
//! agent starts another. A ring buffer's counts live in the ring, but a
//! perf buffer's consumed and lost samples are the consumer's own: they go
//! to the next image in a note, `/dev/shm/bpfjet.<instance>.carry.<pid>`
//! (the process id survives `exec`), one `perf NAME CONSUMED DROPPED`
//! line per perf buffer. It is written where the report is written at an
//! `exit_group`, and as that is.
//!
//! Which `exec` started the image is not needed: measured on the kernel
//! (6.18), a successful `execveat` returns through `sys_exit_execve`, with
//! 59 in the record, as `execve` does; only a failed one fires
//! `sys_exit_execveat`, in the image that made it.

use std::sync::OnceLock;

/// `/dev/shm/bpfjet.<instance>.carry.`
static CARRY_PREFIX: OnceLock<String> = OnceLock::new();

/// Notes go with instance `instance` (the traced tree's).
pub fn set_instance(instance: &str) {
    let _ = CARRY_PREFIX.set(format!("/dev/shm/bpfjet.{instance}.carry."));
}

fn carry_path() -> Option<String> {
    Some(format!("{}{}", CARRY_PREFIX.get()?, std::process::id()))
}

/// The command's process is about to `exec`: its consumer's counts, for
/// the next image's agent (one `perf NAME CONSUMED DROPPED` line per perf
/// buffer).
pub fn carry_counts(counts: &crate::events::Counts) {
    let Some(path) = carry_path() else { return };
    let text: String = counts
        .perfs
        .iter()
        .map(|(name, s)| format!("perf {name} {} {}\n", s.consumed, s.dropped))
        .collect();
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("bpfjet trace: {path}: {e}");
    }
}

/// The counts the image this `exec` replaced left (and the note removed).
pub fn take_counts() -> Option<crate::events::Counts> {
    let path = carry_path()?;
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let mut counts = crate::events::Counts::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if let ["perf", name, consumed, dropped] = f[..] {
            counts.perfs.push((
                name.to_string(),
                bpfjet_maps::PerfbufStats {
                    produced: 0,
                    consumed: consumed.parse().unwrap_or(0),
                    dropped: dropped.parse().unwrap_or(0),
                },
            ));
        }
    }
    Some(counts)
}
