//! Everything that can be wrong with an object file, named precisely enough
//! that a user can find the offending section, symbol or map.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ObjError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not an ELF file (bad magic)")]
    NotElf,
    #[error("ELF file is for machine {machine}, not BPF (247)")]
    NotBpf { machine: u16 },
    #[error("unsupported ELF flavour: {0} (bpfjet reads 64-bit little-endian BPF objects)")]
    UnsupportedElf(&'static str),
    #[error("malformed ELF: {0}")]
    Malformed(String),
    #[error("malformed BTF in {section}: {reason}")]
    Btf {
        section: &'static str,
        reason: String,
    },
    #[error("section `{section}` offset {offset:#x}: unknown relocation type {r_type}")]
    UnknownRelocation {
        section: String,
        offset: u64,
        r_type: u32,
    },
    #[error("section `{section}` offset {offset:#x}: bad relocation: {reason}")]
    BadRelocation {
        section: String,
        offset: u64,
        reason: String,
    },
    #[error("program `{program}` calls undefined function `{function}`")]
    UndefinedFunction { program: String, function: String },
    #[error("extern `{name}` ({what}) is not supported")]
    UnsupportedExtern { name: String, what: &'static str },
    #[error("program `{program}` in section `{section}` has type {kind}, which bpfjet cannot run on packets{}",
        crate::prog_kind::unsupported_suffix(.kind, .section))]
    UnsupportedProgram {
        program: String,
        section: String,
        kind: String,
    },
    #[error(
        "program `{program}` (section `{section}`), instruction {slot}: \
         CO-RE relocation #{index} ({relocation}): {reason}"
    )]
    Core {
        program: String,
        section: String,
        slot: usize,
        index: usize,
        relocation: String,
        reason: String,
    },
    #[error("target BTF {path}: {reason}")]
    TargetBtf { path: String, reason: String },
    #[error("no program named `{0}` in the object")]
    NoSuchProgram(String),
    #[error("map `{map}` has type {type_id}, which bpfjet does not support")]
    UnsupportedMapType { map: String, type_id: u32 },
    #[error("map `{map}`: {reason}")]
    InvalidMap { map: String, reason: String },
    #[error(
        "program `{program}` in section `{section}` is static: libbpf loads only global \
         functions as programs (remove `static`)"
    )]
    StaticProgram { program: String, section: String },
    #[error("__kconfig extern `{name}`: {reason}")]
    Kconfig { name: String, reason: String },
    #[error("__kconfig externs: {path}: {reason}")]
    KconfigFile { path: String, reason: String },
}

pub(crate) fn malformed(msg: impl Into<String>) -> ObjError {
    ObjError::Malformed(msg.into())
}
