//! Why an attach failed, naming the target so the user can fix the section.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProbeError {
    #[error("attach target {spec:?}: expected PATH:SYMBOL[+OFFSET]")]
    BadTarget { spec: String },
    #[error("{path}: cannot read ELF file: {reason}")]
    Elf { path: String, reason: String },
    #[error("{path}: symbol {symbol:?} not found in .symtab or .dynsym{hint}")]
    SymbolNotFound {
        path: String,
        symbol: String,
        hint: &'static str,
    },
    #[error("{path}: symbol {symbol:?} is not a function")]
    NotAFunction { path: String, symbol: String },
    #[error(
        "library {name:?} not found (not loaded in the process and not in the ld.so directories)"
    )]
    LibraryNotFound { name: String },
    #[error("{path} is not loaded in the traced process (bpfjet attaches when the agent starts; probes on a library opened later with dlopen wait for it)")]
    NotLoaded { path: String },
    #[error("{path} is statically linked: the bpfjet agent is an LD_PRELOAD library and needs a dynamically linked program")]
    StaticBinary { path: String },
    #[error("cannot patch {symbol}+{offset:#x} at {address:#x}: {reason}")]
    Unpatchable {
        symbol: String,
        offset: u64,
        address: u64,
        reason: String,
    },
    #[error("{what}: {err}")]
    Os { what: String, err: std::io::Error },
}

impl ProbeError {
    pub(crate) fn os(what: impl Into<String>) -> Self {
        ProbeError::Os {
            what: what.into(),
            err: std::io::Error::last_os_error(),
        }
    }
}
