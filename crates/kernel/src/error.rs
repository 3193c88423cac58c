//! Errors of the kernel side. Every variant names the thing that failed
//! (object path, program, map, entry) so a message is actionable on its own.

use std::io;

/// An errno from the `bpf()` syscall or a libbpf call, printed with its
/// strerror text and, for `EPERM`, what privileges are missing.
#[derive(Debug)]
pub struct Errno(pub io::Error);

impl Errno {
    /// From libbpf's convention: a negative return value is `-errno`.
    pub(crate) fn from_ret(ret: i32) -> Errno {
        Errno(io::Error::from_raw_os_error(ret.unsigned_abs() as i32))
    }

    pub fn raw(&self) -> i32 {
        self.0.raw_os_error().unwrap_or(0)
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        if self.raw() == libc::EPERM {
            f.write_str(" (run as root or grant CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errno {}

/// Which part of an entry did not fit the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryPart {
    Key,
    Value,
    /// `values`: the number of per-CPU values against the possible CPUs.
    CpuCount,
}

impl std::fmt::Display for EntryPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryPart::Key => "key size",
            EntryPart::Value => "value size",
            EntryPart::CpuCount => "number of per-CPU values (possible CPUs)",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("BPF is not usable here: {0}")]
    Unavailable(String),

    #[error("opening BPF object {path}: {why}{}", libbpf_suffix(.libbpf_log))]
    Open {
        path: String,
        why: String,
        libbpf_log: String,
    },

    /// The kernel refused the object. When a program was rejected by the
    /// verifier, `program` names it and `verifier_log` holds the kernel's log.
    #[error(
        "loading BPF object {path}{}: {errno}{}{}",
        .program.as_deref().map(|p| format!(", program {p}")).unwrap_or_default(),
        verifier_suffix(.verifier_log),
        libbpf_suffix(.libbpf_log)
    )]
    Load {
        path: String,
        program: Option<String>,
        errno: Errno,
        verifier_log: String,
        libbpf_log: String,
    },

    #[error("map {map:?} not found in the object (maps: {available})")]
    MapNotFound { map: String, available: String },

    #[error("program {program:?} not found in the object (programs: {available})")]
    ProgramNotFound { program: String, available: String },

    #[error("map {map:?} entry {entry}: {part} mismatch: expected {expected}, got {got}")]
    SizeMismatch {
        map: String,
        entry: usize,
        part: EntryPart,
        expected: usize,
        got: usize,
    },

    /// An entry that does not make sense for the map (e.g. `prog` in a hash
    /// map, `values` in a non-per-CPU map, bad hex, several kinds at once).
    #[error("map {map:?} entry {entry}: {why}")]
    BadEntry {
        map: String,
        entry: usize,
        why: String,
    },

    #[error("map {map:?} entry {entry}: update failed: {errno}")]
    Update {
        map: String,
        entry: usize,
        errno: Errno,
    },

    #[error("map {map:?}: {what} failed: {errno}")]
    MapAccess {
        map: String,
        what: &'static str,
        errno: Errno,
    },

    #[error("test run of program {program:?} failed: {errno}")]
    TestRun { program: String, errno: Errno },

    #[error("pinning the thread to CPU {cpu}: {why}")]
    Cpu { cpu: usize, why: String },
}

impl KernelError {
    /// The kernel verifier's log when loading failed in the verifier.
    pub fn verifier_log(&self) -> Option<&str> {
        match self {
            KernelError::Load { verifier_log, .. } if !verifier_log.is_empty() => {
                Some(verifier_log)
            }
            _ => None,
        }
    }

    /// The errno behind the error, if the kernel produced one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            KernelError::Load { errno, .. }
            | KernelError::Update { errno, .. }
            | KernelError::MapAccess { errno, .. }
            | KernelError::TestRun { errno, .. } => Some(errno.raw()),
            _ => None,
        }
    }
}

fn verifier_suffix(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!(
            "\n-- verifier log --\n{}\n-- end of verifier log --",
            log.trim_end()
        )
    }
}

fn libbpf_suffix(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("\n-- libbpf --\n{}", log.trim_end())
    }
}
