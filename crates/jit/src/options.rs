//! What the JIT is asked to do.

use std::path::PathBuf;

/// Which CPU the native code may assume.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum CpuTarget {
    /// The machine compiling the program: its CPU name and every feature it
    /// has (the default; code must then run where it was compiled).
    #[default]
    Host,
    /// A baseline CPU of the host architecture (`x86-64`, `generic` on
    /// others): code that any machine of the architecture runs.
    Portable,
    /// An explicit LLVM CPU name and feature string (`"+avx2,-avx512f"`).
    Named { cpu: String, features: String },
}

/// LLVM optimization level of the IR pipeline and of code generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OptLevel {
    /// No IR optimization beyond promoting registers and stack to SSA.
    O0,
    O1,
    O2,
    /// `default<O3>` (the default).
    #[default]
    O3,
}

/// Where compiled objects are cached, keyed by a hash of the program, its
/// bindings and these options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CacheMode {
    /// Always compile.
    Off,
    /// A process-wide in-memory cache only.
    Memory,
    /// The in-memory cache backed by object files in this directory.
    Disk(PathBuf),
}

impl Default for CacheMode {
    /// `$XDG_CACHE_HOME/bpfjet`, else `~/.cache/bpfjet`, else memory only.
    fn default() -> Self {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            });
        match base {
            Some(dir) => CacheMode::Disk(dir.join("bpfjet")),
            None => CacheMode::Memory,
        }
    }
}

/// JIT options. Everything here takes part in the cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JitOptions {
    pub cpu: CpuTarget,
    pub opt_level: OptLevel,
    pub cache: CacheMode,
    /// Zero each frame's 512-byte stack on entry. Verified programs never
    /// read stack bytes they did not write, so this is off by default; it
    /// makes runs of unverified programs deterministic.
    pub zero_stack: bool,
    /// Compile helpers and map lookups in where the program's
    /// [`crate::Bindings`] allow it (on by default; off keeps every helper
    /// call on the trampoline, for comparison).
    pub inline_helpers: bool,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            cpu: CpuTarget::default(),
            opt_level: OptLevel::default(),
            cache: CacheMode::default(),
            zero_stack: false,
            inline_helpers: true,
        }
    }
}

impl JitOptions {
    /// Options with caching turned off (tests, one-shot runs).
    pub fn uncached() -> Self {
        JitOptions {
            cache: CacheMode::Off,
            ..JitOptions::default()
        }
    }
}
