//! Errors of loading and running a whole object ([`crate::LoadedObject`]):
//! each names the program, map, instruction or option it is about.

use crate::error::{Fault, LoadError};
use crate::xdp::frame::FrameError;
use crate::xdp::CtxError;
use bpfjet_maps::{ApplyError, MapError};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// bpfjet's verifier refused the program; `report` is the verifier's
    /// full message (instruction, disassembly, source line, rule, registers).
    #[error("program {program:?} rejected by the verifier (use --unverified to run it in the bounds-checked interpreter): {report}")]
    Rejected { program: String, report: String },
    #[error("map {map:?}: {source}")]
    Map {
        map: String,
        #[source]
        source: MapError,
    },
    #[error("program {program:?}: cannot decode: {source}")]
    Decode {
        program: String,
        #[source]
        source: bpfjet_isa::DecodeError,
    },
    #[error("program {program:?}: {source}")]
    Load {
        program: String,
        #[source]
        source: LoadError,
    },
    #[error(
        "program {program:?} (section {section}): insn {pc}: calls helper {id}{} which bpfjet does not support",
        name.map(|n| format!(" (bpf_{n})")).unwrap_or_else(|| " (not a kernel helper)".into())
    )]
    UnsupportedHelper {
        program: String,
        section: String,
        pc: usize,
        id: i32,
        name: Option<&'static str>,
    },
    /// A CO-RE relocation found no target and poisoned its instruction;
    /// without the verifier nothing proves that instruction unreachable.
    #[error("program {program:?} (section {section}): {detail}; without the verifier bpfjet cannot prove it unreachable (drop --unverified)")]
    UnresolvedCore {
        program: String,
        section: String,
        detail: String,
    },
    #[error("program {program:?}: insn {pc}: calls kfunc {name}, which bpfjet does not provide")]
    UnsupportedKfunc {
        program: String,
        pc: usize,
        name: String,
    },
    #[error("program {program:?}: insn {pc}: kfunc {name} is declared unlike bpfjet's: {reason}")]
    KfuncSignature {
        program: String,
        pc: usize,
        name: String,
        reason: String,
    },
    #[error(
        "program {program:?}: insn {pc}: kfunc {name} may not be called from {prog_type} programs"
    )]
    KfuncNotForProgramType {
        program: String,
        pc: usize,
        name: String,
        prog_type: String,
    },
    #[error("program {program:?}: xdp_md access: {source}")]
    Context {
        program: String,
        #[source]
        source: CtxError,
    },
    #[error("no program named {name:?} (the object has: {available})")]
    NoSuchProgram { name: String, available: String },
    #[error("program {program:?} (section {section}) was not loaded: a section starting with `?` is libbpf's autoload off; select the program (--prog) to load it")]
    NotAutoloaded { program: String, section: String },
    #[error("program {program:?} (section {section}) is of type {kind}; bpfjet runs XDP, kprobe, tracepoint and raw_tracepoint programs{}",
        unknown_type_hint(.kind, .section))]
    UnsupportedProgram {
        program: String,
        section: String,
        kind: String,
    },
    /// Objects that cannot form one deployment (pinned maps declared
    /// differently, tail calls between incompatible program types, ...).
    #[error("{0}")]
    Deployment(String),
    #[error("static initialiser of map {map:?} slot {slot}: {why}")]
    MapInit { map: String, slot: u32, why: String },
    #[error("map state: {0}")]
    State(#[from] ApplyError),
    #[error("map state: map {map:?} entry {index}: {why}")]
    BadState {
        map: String,
        index: usize,
        why: String,
    },
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("test run: {0}")]
    Options(String),
    #[error("program {program:?} aborted: {fault}")]
    Fault {
        program: String,
        #[source]
        fault: Fault,
    },
}

/// For a program of unknown type, how to force its type.
fn unknown_type_hint(kind: &str, section: &str) -> String {
    if kind == "unknown" {
        format!("; {}", bpfjet_obj::force_type_hint(section))
    } else {
        String::new()
    }
}
