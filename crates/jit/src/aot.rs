//! Ahead-of-time compilation: the native objects of an object's programs in
//! one file, run later (in another process) without LLVM.
//!
//! The generated code holds no addresses of this process: maps are reached
//! through symbols the loader resolves when the artifact is loaded
//! (`crate::bindings`). What the code does assume is recorded and checked
//! before any of it runs:
//!
//! - the BPF object it was compiled from (a hash of the ELF file): the maps,
//!   programs and `.rodata` come from that object, loaded as usual;
//! - the layouts of the object's maps (type, key/value size, max_entries,
//!   flags, array strides) and the bytes of frozen `.rodata` values the code
//!   constant-folded;
//! - the target triple, CPU and features: the host must have every feature;
//! - per program, the cache key of its object, which also covers the
//!   verified instructions, the options, bpfjet's code-generator revision and
//!   the LLVM version: a mismatch is refused, never recompiled.
//!
//! Verification still runs at load (the loaded object's programs must be the
//! verifier-accepted form the code was compiled from): it is cheap, and the
//! proof is what makes code without bounds checks safe.
//!
//! File format (little-endian; strings and byte strings are a u32 or u64
//! length and the bytes), see docs/CLI.md:
//!
//! ```text
//! magic "\x7fBPFJAOT"  u32 version
//! str bpfjet version   str LLVM version
//! str source path      u128 source hash
//! str triple  str cpu  str features
//! u8 opt level  u8 zero_stack  u8 inline_helpers
//! u32 maps    { str name, str type, u32 key_size, u32 value_size,
//!               u32 max_entries, u32 flags, u64 stride, u64 cpu_stride,
//!               u8 frozen, [u64-bytes frozen value] }
//! u32 programs { str name, u128 key, u64 ir_lifted, u64 ir_optimized,
//!               u32 n, i32 helper ids.., u32 n, str natives..,
//!               u32 n, {u64 slot, str symbol}.., u64-bytes ELF object }
//! u128 checksum of everything before it
//! ```

use crate::cache::{self, Cached, KeyHasher};
use crate::object::{Compiled, JitObject, ObjectError};
use crate::options::{CacheMode, CpuTarget, JitOptions, OptLevel};
use crate::pipeline::TargetSpec;
use crate::program::{JitProgram, Prebuilt};
use crate::{analysis, lift, trampoline};
use bpfjet_isa::{CallTarget, Insn};
use bpfjet_maps::Map;
use bpfjet_runtime::LoadedObject;
use object::{Object, ObjectSymbol};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"\x7fBPFJAOT";
/// Bump when the layout of the file changes.
pub const AOT_FORMAT_VERSION: u32 = 1;

/// Why an artifact cannot be written, read or used.
#[derive(Debug, thiserror::Error)]
pub enum AotError {
    /// Not an artifact, damaged, or of another format version.
    #[error("not a usable bpfjet AOT artifact: {0}")]
    Format(String),
    /// A valid artifact that does not fit this object or host.
    #[error("AOT artifact does not match: {0}")]
    Mismatch(String),
    #[error(transparent)]
    Object(#[from] ObjectError),
}

/// One map as the code was compiled against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AotMap {
    pub name: String,
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Array value stride and per-CPU stride (0 for other maps).
    pub stride: u64,
    pub cpu_stride: u64,
    /// The frozen value the code constant-folded (`.rodata`).
    pub frozen: Option<Vec<u8>>,
}

/// One program's native code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AotProgram {
    pub name: String,
    /// The JIT cache key the object was compiled under.
    pub key: u128,
    pub ir_lifted: u64,
    pub ir_optimized: u64,
    /// Helper ids the program calls.
    pub helpers: Vec<i32>,
    /// Undefined symbols of the object: natives, trampolines, map symbols.
    pub natives: Vec<String>,
    /// Entry symbol of each BPF function, by slot.
    pub entries: Vec<(u64, String)>,
    /// The relocatable x86-64 ELF object.
    pub object: Vec<u8>,
}

/// Which bpfjet made an artifact: the version and the digest of the code
/// generator's sources (build.rs), as the JIT cache key has it. Native code
/// binds to the runtime's symbols and data layout, which can change
/// without a version bump: an artifact of another code generator is
/// refused, not loaded.
const MAKER: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+codegen.",
    env!("BPFJET_CODEGEN_SOURCES")
);

/// An AOT artifact: see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AotArtifact {
    pub bpfjet_version: String,
    pub llvm_version: String,
    pub source_path: String,
    pub source_hash: u128,
    pub triple: String,
    pub cpu: String,
    pub features: String,
    pub opt_level: OptLevel,
    pub zero_stack: bool,
    pub inline_helpers: bool,
    pub maps: Vec<AotMap>,
    pub programs: Vec<AotProgram>,
}

/// The hash of a BPF object file an artifact is tied to.
pub fn source_hash(bytes: &[u8]) -> u128 {
    KeyHasher::new()
        .bytes(b"bpfjet AOT source")
        .bytes(bytes)
        .finish()
}

fn llvm_version() -> String {
    let (major, minor, patch) = inkwell::support::get_llvm_version();
    format!("{major}.{minor}.{patch}")
}

fn aot_map(map: &Arc<Map>) -> AotMap {
    let layout = map.array_layout();
    let frozen = crate::bindings::frozen_bytes(map);
    AotMap {
        name: map.name().to_string(),
        map_type: format!("{:?}", map.map_type()),
        key_size: map.key_size(),
        value_size: map.value_size(),
        max_entries: map.max_entries(),
        flags: map.spec().flags,
        stride: layout.map_or(0, |l| l.stride as u64),
        cpu_stride: layout.map_or(0, |l| l.cpu_stride as u64),
        frozen,
    }
}

fn opt_code(level: OptLevel) -> u8 {
    match level {
        OptLevel::O0 => 0,
        OptLevel::O1 => 1,
        OptLevel::O2 => 2,
        OptLevel::O3 => 3,
    }
}

fn helper_ids(insns: &[Insn]) -> Vec<i32> {
    let mut ids: Vec<i32> = insns
        .iter()
        .filter_map(|i| match i {
            Insn::Call(CallTarget::Helper(id)) => Some(*id),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn undefined_symbols(elf: &[u8]) -> Result<Vec<String>, AotError> {
    let file = object::File::parse(elf).map_err(|e| AotError::Format(e.to_string()))?;
    let mut names: Vec<String> = file
        .symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

impl AotArtifact {
    /// Compile `programs` (all XDP programs of `loaded` when empty) for the
    /// CPU `jit` names. `source` is the BPF object file `loaded` came from.
    pub fn compile(
        loaded: &LoadedObject,
        source: &[u8],
        source_path: &str,
        programs: &[String],
        jit: &JitOptions,
    ) -> Result<AotArtifact, AotError> {
        let names: Vec<String> = if programs.is_empty() {
            loaded
                .program_names()
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            programs.to_vec()
        };
        // The object is taken from the cache after compiling: compile with
        // at least the in-memory cache.
        let jit = match jit.cache {
            CacheMode::Off => JitOptions {
                cache: CacheMode::Memory,
                ..jit.clone()
            },
            _ => jit.clone(),
        };
        let mut spec: Option<TargetSpec> = None;
        let mut out = Vec::with_capacity(names.len());
        for name in &names {
            let compile_err = |source| ObjectError::Compile {
                program: name.clone(),
                source,
            };
            let inputs = JitObject::compile_inputs(loaded, name)?;
            let (key, target) =
                JitProgram::key_and_target(&inputs.insns, &inputs.opts, &jit, &inputs.bindings)
                    .map_err(compile_err)?;
            let program =
                JitProgram::compile_bound(&inputs.insns, &inputs.opts, &jit, &inputs.bindings)
                    .map_err(compile_err)?;
            let cached = cache::lookup(&CacheMode::Memory, key).ok_or_else(|| {
                AotError::Format(format!(
                    "program {name}: the compiled object left the in-memory cache"
                ))
            })?;
            let functions = analysis::functions(&inputs.insns).map_err(compile_err)?;
            let stats = program.compile_stats();
            out.push(AotProgram {
                name: name.clone(),
                key,
                ir_lifted: stats.ir_insns_lifted,
                ir_optimized: stats.ir_insns_optimized,
                helpers: helper_ids(&inputs.insns),
                natives: undefined_symbols(&cached.object)?,
                entries: functions
                    .iter()
                    .map(|f| (f.entry as u64, lift::entry_name(f.entry)))
                    .collect(),
                object: cached.object.to_vec(),
            });
            spec = Some(target);
        }
        let spec = match spec {
            Some(s) => s,
            None => return Err(AotError::Mismatch("no programs to compile".into())),
        };
        Ok(AotArtifact {
            bpfjet_version: MAKER.to_string(),
            llvm_version: llvm_version(),
            source_path: source_path.to_string(),
            source_hash: source_hash(source),
            triple: spec.triple,
            cpu: spec.cpu,
            features: spec.features,
            opt_level: jit.opt_level,
            zero_stack: jit.zero_stack,
            inline_helpers: jit.inline_helpers,
            maps: loaded.object_maps().maps().iter().map(aot_map).collect(),
            programs: out,
        })
    }

    /// Check that `source` is the BPF object file the artifact was compiled from.
    pub fn check_source(&self, source: &[u8]) -> Result<(), AotError> {
        if source_hash(source) != self.source_hash {
            return Err(AotError::Mismatch(format!(
                "it was compiled from a different BPF object (compiled from {}; \
                 recompile with `bpfjet compile`)",
                self.source_path
            )));
        }
        Ok(())
    }

    /// Check that this host runs the code: same triple, every CPU feature
    /// the code may use.
    pub fn check_host(&self) -> Result<(), AotError> {
        let triple = inkwell::targets::TargetMachine::get_default_triple()
            .as_str()
            .to_string_lossy()
            .into_owned();
        let arch = |t: &str| t.split('-').next().unwrap_or("").to_string();
        if arch(&triple) != arch(&self.triple) {
            return Err(AotError::Mismatch(format!(
                "compiled for {}, this host is {triple}",
                self.triple
            )));
        }
        let host_cpu = inkwell::targets::TargetMachine::get_host_cpu_name().to_string();
        let host_features = inkwell::targets::TargetMachine::get_host_cpu_features().to_string();
        let host: std::collections::HashSet<&str> = host_features
            .split(',')
            .filter(|f| f.starts_with('+'))
            .collect();
        let missing: Vec<&str> = self
            .features
            .split(',')
            .filter(|f| f.starts_with('+') && !host.contains(f))
            .map(|f| &f[1..])
            .collect();
        if !missing.is_empty() {
            return Err(AotError::Mismatch(format!(
                "compiled for CPU {} with features this host ({host_cpu}) lacks: {} \
                 (compile with --cpu portable for code that runs anywhere)",
                self.cpu,
                missing.join(", ")
            )));
        }
        // A named CPU implies features not spelled out in the feature string.
        let baseline = matches!(self.cpu.as_str(), "x86-64" | "generic");
        if !baseline && self.features.is_empty() && self.cpu != host_cpu {
            return Err(AotError::Mismatch(format!(
                "compiled for CPU {}, this host is {host_cpu}",
                self.cpu
            )));
        }
        Ok(())
    }

    /// Check that `loaded` has the maps the code was compiled against.
    pub fn check_maps(&self, loaded: &LoadedObject) -> Result<(), AotError> {
        let maps: Vec<AotMap> = loaded.object_maps().maps().iter().map(aot_map).collect();
        if maps.len() != self.maps.len() {
            return Err(AotError::Mismatch(format!(
                "the object has {} maps, the code was compiled against {}",
                maps.len(),
                self.maps.len()
            )));
        }
        for (now, then) in maps.iter().zip(&self.maps) {
            if now.frozen != then.frozen && now.frozen.is_some() && then.frozen.is_some() {
                return Err(AotError::Mismatch(format!(
                    "the frozen contents of map {} differ from those compiled in",
                    now.name
                )));
            }
            if now != then {
                return Err(AotError::Mismatch(format!(
                    "map {} is {now:?} now, the code was compiled against {then:?}",
                    now.name
                )));
            }
        }
        Ok(())
    }

    fn jit_options(&self) -> JitOptions {
        JitOptions {
            cpu: CpuTarget::Named {
                cpu: self.cpu.clone(),
                features: self.features.clone(),
            },
            opt_level: self.opt_level,
            cache: CacheMode::Off,
            zero_stack: self.zero_stack,
            inline_helpers: self.inline_helpers,
        }
    }

    /// Check that the artifact's code runs with `loaded` on this host: CPU
    /// features, map layouts and frozen contents, programs, natives.
    pub fn check(&self, loaded: &LoadedObject) -> Result<(), AotError> {
        self.check_host()?;
        self.check_maps(loaded)?;
        for p in &self.programs {
            if let Err(e) = loaded.program(&p.name) {
                return Err(AotError::Mismatch(format!("program {}: {e}", p.name)));
            }
            let unknown: Vec<&str> = p
                .natives
                .iter()
                .map(String::as_str)
                .filter(|n| !n.starts_with("bpfjet_map_"))
                .filter(|n| trampoline::resolve_symbol(n).is_none())
                .collect();
            if !unknown.is_empty() {
                return Err(AotError::Mismatch(format!(
                    "program {} needs natives this bpfjet lacks: {}",
                    p.name,
                    unknown.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Program `name` of `loaded` with the artifact's native code for it.
    fn prebuilt(&self, loaded: &LoadedObject, name: &str) -> Result<Compiled, ObjectError> {
        let p = self
            .programs
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ObjectError::Run {
                program: name.to_string(),
                reason: "not in the AOT artifact (compiled with --prog)".into(),
            })?;
        let inputs = JitObject::compile_inputs(loaded, name)?;
        let prebuilt = Prebuilt {
            cached: Cached {
                object: Arc::new(p.object.clone()),
                ir_before: p.ir_lifted,
                ir_after: p.ir_optimized,
            },
            spec: TargetSpec {
                triple: self.triple.clone(),
                cpu: self.cpu.clone(),
                features: self.features.clone(),
            },
            key: p.key,
        };
        let jit = self.jit_options();
        let program = JitProgram::from_prebuilt(
            &inputs.insns,
            &inputs.opts,
            &jit,
            &inputs.bindings,
            prebuilt,
        )
        .map_err(|e| ObjectError::Run {
            program: name.to_string(),
            reason: format!("{e} (recompile it with `bpfjet compile`)"),
        })?;
        Ok(Compiled {
            jit: program,
            insns: inputs.insns,
            opts: inputs.opts,
            bindings: inputs.bindings,
            options: jit,
        })
    }

    /// The JIT object of `loaded` with the artifact's native code, after
    /// [`AotArtifact::check`]; LLVM is not used. Programs not in the artifact
    /// have no native code (using them says so).
    pub fn load(&self, loaded: LoadedObject) -> Result<JitObject, AotError> {
        self.check(&loaded)?;
        let object = JitObject::build(loaded, |loaded, name| self.prebuilt(loaded, name));
        // A program of the artifact that cannot be used is an error now,
        // not at its first run.
        for p in &self.programs {
            object.program(&p.name).map_err(AotError::Object)?;
        }
        Ok(object)
    }

    /// One program of `loaded` with the artifact's native code (after
    /// [`AotArtifact::check`]), for runners that keep the loaded object
    /// themselves. Its tail calls go through the run state's program table.
    pub fn load_program(&self, loaded: &LoadedObject, name: &str) -> Result<JitProgram, AotError> {
        self.check(loaded)?;
        Ok(self.prebuilt(loaded, name)?.jit)
    }

    /// Whether the artifact has native code for program `name`.
    pub fn has_program(&self, name: &str) -> bool {
        self.programs.iter().any(|p| p.name == name)
    }

    /// The file contents.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.0.extend_from_slice(MAGIC);
        w.u32(AOT_FORMAT_VERSION);
        w.str(&self.bpfjet_version);
        w.str(&self.llvm_version);
        w.str(&self.source_path);
        w.u128(self.source_hash);
        w.str(&self.triple);
        w.str(&self.cpu);
        w.str(&self.features);
        w.u8(opt_code(self.opt_level));
        w.u8(u8::from(self.zero_stack));
        w.u8(u8::from(self.inline_helpers));
        w.u32(self.maps.len() as u32);
        for m in &self.maps {
            w.str(&m.name);
            w.str(&m.map_type);
            w.u32(m.key_size);
            w.u32(m.value_size);
            w.u32(m.max_entries);
            w.u32(m.flags);
            w.u64(m.stride);
            w.u64(m.cpu_stride);
            match &m.frozen {
                Some(bytes) => {
                    w.u8(1);
                    w.blob(bytes);
                }
                None => w.u8(0),
            }
        }
        w.u32(self.programs.len() as u32);
        for p in &self.programs {
            w.str(&p.name);
            w.u128(p.key);
            w.u64(p.ir_lifted);
            w.u64(p.ir_optimized);
            w.u32(p.helpers.len() as u32);
            for id in &p.helpers {
                w.u32(*id as u32);
            }
            w.u32(p.natives.len() as u32);
            for n in &p.natives {
                w.str(n);
            }
            w.u32(p.entries.len() as u32);
            for (slot, sym) in &p.entries {
                w.u64(*slot);
                w.str(sym);
            }
            w.blob(&p.object);
        }
        let sum = KeyHasher::new().bytes(&w.0).finish();
        w.u128(sum);
        w.0
    }

    /// Parse an artifact; damage and other versions are errors.
    pub fn from_bytes(bytes: &[u8]) -> Result<AotArtifact, AotError> {
        let body = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| AotError::Format("bad magic (not made by `bpfjet compile`)".into()))?;
        let mut r = Reader { data: body, pos: 0 };
        let version = r.u32()?;
        if version != AOT_FORMAT_VERSION {
            return Err(AotError::Format(format!(
                "format version {version}, this bpfjet reads version {AOT_FORMAT_VERSION}"
            )));
        }
        if bytes.len() < MAGIC.len() + 16 {
            return Err(AotError::Format("truncated".into()));
        }
        let (content, sum) = bytes.split_at(bytes.len() - 16);
        let sum = u128::from_le_bytes(sum.try_into().expect("16 bytes"));
        if KeyHasher::new().bytes(content).finish() != sum {
            return Err(AotError::Format("checksum mismatch (damaged file)".into()));
        }
        let mut r = Reader {
            data: &content[MAGIC.len()..],
            pos: 4,
        };
        let bpfjet_version = r.str()?;
        let llvm_version = r.str()?;
        let source_path = r.str()?;
        let source_hash = r.u128()?;
        let triple = r.str()?;
        let cpu = r.str()?;
        let features = r.str()?;
        let opt_level = match r.u8()? {
            0 => OptLevel::O0,
            1 => OptLevel::O1,
            2 => OptLevel::O2,
            3 => OptLevel::O3,
            other => return Err(AotError::Format(format!("optimization level {other}"))),
        };
        let zero_stack = r.bool()?;
        let inline_helpers = r.bool()?;
        let mut maps = Vec::new();
        for _ in 0..r.u32()? {
            maps.push(AotMap {
                name: r.str()?,
                map_type: r.str()?,
                key_size: r.u32()?,
                value_size: r.u32()?,
                max_entries: r.u32()?,
                flags: r.u32()?,
                stride: r.u64()?,
                cpu_stride: r.u64()?,
                frozen: if r.bool()? { Some(r.blob()?) } else { None },
            });
        }
        let mut programs = Vec::new();
        for _ in 0..r.u32()? {
            let name = r.str()?;
            let key = r.u128()?;
            let ir_lifted = r.u64()?;
            let ir_optimized = r.u64()?;
            let mut helpers = Vec::new();
            for _ in 0..r.u32()? {
                helpers.push(r.u32()? as i32);
            }
            let mut natives = Vec::new();
            for _ in 0..r.u32()? {
                natives.push(r.str()?);
            }
            let mut entries = Vec::new();
            for _ in 0..r.u32()? {
                entries.push((r.u64()?, r.str()?));
            }
            let object = r.blob()?;
            programs.push(AotProgram {
                name,
                key,
                ir_lifted,
                ir_optimized,
                helpers,
                natives,
                entries,
                object,
            });
        }
        if r.pos != r.data.len() {
            return Err(AotError::Format("trailing bytes".into()));
        }
        if bpfjet_version != MAKER || llvm_version != self::llvm_version() {
            return Err(AotError::Mismatch(format!(
                "made by bpfjet {bpfjet_version} with LLVM {llvm_version}; this is bpfjet {} \
                 with LLVM {} (recompile with `bpfjet compile`)",
                MAKER,
                self::llvm_version()
            )));
        }
        Ok(AotArtifact {
            bpfjet_version,
            llvm_version,
            source_path,
            source_hash,
            triple,
            cpu,
            features,
            opt_level,
            zero_stack,
            inline_helpers,
            maps,
            programs,
        })
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u128(&mut self, v: u128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn blob(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], AotError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| AotError::Format("truncated".into()))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, AotError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool, AotError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(AotError::Format(format!("flag byte {other}"))),
        }
    }
    fn u32(&mut self) -> Result<u32, AotError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, AotError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn u128(&mut self) -> Result<u128, AotError> {
        Ok(u128::from_le_bytes(self.take(16)?.try_into().expect("16")))
    }
    fn str(&mut self) -> Result<String, AotError> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| AotError::Format("string is not UTF-8".into()))
    }
    fn blob(&mut self) -> Result<Vec<u8>, AotError> {
        let n = usize::try_from(self.u64()?).map_err(|_| AotError::Format("length".into()))?;
        Ok(self.take(n)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AotArtifact {
        AotArtifact {
            bpfjet_version: MAKER.into(),
            llvm_version: llvm_version(),
            source_path: "x.o".into(),
            source_hash: 42,
            triple: "x86_64-pc-linux-gnu".into(),
            cpu: "x86-64".into(),
            features: String::new(),
            opt_level: OptLevel::O3,
            zero_stack: false,
            inline_helpers: true,
            maps: vec![AotMap {
                name: ".rodata".into(),
                map_type: "Array".into(),
                key_size: 4,
                value_size: 8,
                max_entries: 1,
                flags: 0x80,
                stride: 8,
                cpu_stride: 0,
                frozen: Some(vec![1, 2, 3, 4, 5, 6, 7, 8]),
            }],
            programs: vec![AotProgram {
                name: "prog".into(),
                key: 7,
                ir_lifted: 10,
                ir_optimized: 5,
                helpers: vec![1, 2],
                natives: vec!["bpfjet_map_0".into()],
                entries: vec![(0, "bpfjet_entry_0".into())],
                object: vec![0x7f, b'E', b'L', b'F'],
            }],
        }
    }

    #[test]
    fn artifacts_round_trip() {
        let a = sample();
        assert_eq!(AotArtifact::from_bytes(&a.to_bytes()).unwrap(), a);
    }

    #[test]
    fn damage_is_detected() {
        let bytes = sample().to_bytes();
        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        assert!(matches!(
            AotArtifact::from_bytes(&flipped),
            Err(AotError::Format(m)) if m.contains("checksum")
        ));
        assert!(matches!(
            AotArtifact::from_bytes(&bytes[..bytes.len() - 3]),
            Err(AotError::Format(_))
        ));
        assert!(matches!(
            AotArtifact::from_bytes(b"\x7fELF...."),
            Err(AotError::Format(m)) if m.contains("magic")
        ));
        let mut other_version = bytes.clone();
        other_version[8] = 99;
        assert!(matches!(
            AotArtifact::from_bytes(&other_version),
            Err(AotError::Format(m)) if m.contains("version 99")
        ));
    }
}
