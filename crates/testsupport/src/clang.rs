//! Compiling the tests' C programs for BPF.
//!
//! One lookup: `$BPFJET_CLANG` (or the older `$CLANG`), else `clang-19` on
//! the `PATH`, else `/usr/bin/clang-19` (scripts/setup.sh installs it); a
//! missing compiler is a test failure that says how to install it, never a
//! silent pass. One flag set: `-O2 -g -target bpf -mcpu=v3`, the host's
//! multiarch include directory (BPF has none of its own and
//! `<linux/bpf.h>` needs `<asm/types.h>`) and the repository's `include/`
//! (`bpfjet_kfuncs.h`), as `make -C examples` builds the corpus. A test
//! adds what it is about (`-D`, `-Wall -Werror`) or asks for clang's
//! default CPU instead of v3 where the instruction set version matters.
//!
//! Compile-once: objects are cached per test process by compiler, source
//! text and flags, so tests sharing a program (or running it per engine)
//! compile it once.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

/// The compiler tests use (see the module documentation), or why there is none.
pub fn clang() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            for var in ["BPFJET_CLANG", "CLANG"] {
                if let Some(path) = std::env::var_os(var) {
                    return Ok(PathBuf::from(path));
                }
            }
            let path = std::env::var_os("PATH").unwrap_or_default();
            for dir in std::env::split_paths(&path) {
                let candidate = dir.join("clang-19");
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
            let fallback = PathBuf::from("/usr/bin/clang-19");
            if fallback.is_file() {
                return Ok(fallback);
            }
            Err(
                "clang-19 not found (not on PATH, not /usr/bin/clang-19, BPFJET_CLANG unset): \
                 run scripts/setup.sh, which installs clang-19 and libbpf-dev"
                    .to_string(),
            )
        })
        .clone()
}

/// The workspace root (this crate is crates/testsupport).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The host's multiarch include directory, where `<asm/types.h>` lives.
fn multiarch_include() -> Option<PathBuf> {
    let dir = PathBuf::from(format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH));
    dir.join("asm/types.h").exists().then_some(dir)
}

/// One object's compilation, done by the first test that needs it.
type Compiled = OnceLock<Result<PathBuf, String>>;

enum Source {
    File(PathBuf),
    Text { name: String, text: String },
}

/// One BPF object to compile: a C file or text, the standard flags and the
/// test's own.
pub struct Compile {
    source: Source,
    mcpu: Option<String>,
    args: Vec<String>,
}

impl Compile {
    /// The C file at `path`.
    pub fn file(path: impl AsRef<Path>) -> Compile {
        Compile {
            source: Source::File(path.as_ref().to_path_buf()),
            mcpu: Some("v3".into()),
            args: Vec::new(),
        }
    }

    /// C `text`; `name` names the object (`<name>.o`) and messages.
    pub fn text(name: &str, text: &str) -> Compile {
        Compile {
            source: Source::Text {
                name: name.to_string(),
                text: text.to_string(),
            },
            mcpu: Some("v3".into()),
            args: Vec::new(),
        }
    }

    /// `-mcpu=CPU` instead of v3; `None`: clang's default CPU (v1 for
    /// clang-19), for tests whose programs depend on it.
    pub fn mcpu(mut self, cpu: Option<&str>) -> Compile {
        self.mcpu = cpu.map(str::to_string);
        self
    }

    /// One more clang argument (`-Wall`, `-DNAME=VALUE`, `-I DIR`, ...).
    pub fn arg(mut self, arg: impl Into<String>) -> Compile {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: AsRef<str>>(mut self, args: &[S]) -> Compile {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// `-DNAME=VALUE`.
    pub fn define(self, name: &str, value: &str) -> Compile {
        self.arg(format!("-D{name}={value}"))
    }

    fn name(&self) -> String {
        match &self.source {
            Source::File(path) => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "prog".into()),
            Source::Text { name, .. } => name.clone(),
        }
    }

    fn flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = ["-O2", "-g", "-target", "bpf"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(cpu) = &self.mcpu {
            flags.push(format!("-mcpu={cpu}"));
        }
        if let Some(dir) = multiarch_include() {
            flags.push("-I".into());
            flags.push(dir.display().to_string());
        }
        flags.push("-I".into());
        flags.push(workspace().join("include").display().to_string());
        flags.extend(self.args.iter().cloned());
        flags
    }

    /// The compiled object (compiled once per process for the same
    /// compiler, source and flags), or clang's complaint.
    pub fn try_object(&self) -> Result<PathBuf, String> {
        let clang = clang()?;
        let flags = self.flags();
        let text = match &self.source {
            Source::File(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?,
            Source::Text { text, .. } => text.clone(),
        };
        let mut hasher = DefaultHasher::new();
        (&clang, &flags, &text).hash(&mut hasher);
        if let Source::File(path) = &self.source {
            // `#include "..."` resolves next to the file.
            path.hash(&mut hasher);
        }
        let key = hasher.finish();
        let slot = {
            static CACHE: OnceLock<Mutex<HashMap<u64, Arc<Compiled>>>> = OnceLock::new();
            let mut cache = CACHE
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            Arc::clone(cache.entry(key).or_default())
        };
        slot.get_or_init(|| self.run_clang(&clang, &flags, key))
            .clone()
    }

    /// [`Compile::try_object`], failing the test with clang's message.
    pub fn object(&self) -> PathBuf {
        self.try_object().unwrap_or_else(|why| panic!("{why}"))
    }

    /// The compiled object copied to `path` (for tests that need the file
    /// at a place or under a name of their own: a file stem names a
    /// program's object on the command line).
    pub fn object_at(&self, path: impl AsRef<Path>) -> PathBuf {
        let path = path.as_ref();
        std::fs::copy(self.object(), path)
            .unwrap_or_else(|e| panic!("copying the object to {}: {e}", path.display()));
        path.to_path_buf()
    }

    fn run_clang(&self, clang: &Path, flags: &[String], key: u64) -> Result<PathBuf, String> {
        let dir = std::env::temp_dir().join(format!("bpfjet-testsupport-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let name = self.name();
        let out = dir.join(format!("{name}-{key:016x}.o"));
        let src = match &self.source {
            Source::File(path) => path.clone(),
            Source::Text { text, .. } => {
                let src = dir.join(format!("{name}-{key:016x}.c"));
                std::fs::write(&src, text)
                    .map_err(|e| format!("writing {}: {e}", src.display()))?;
                src
            }
        };
        let output = Command::new(clang)
            .args(flags)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .map_err(|e| {
                format!(
                    "running {} ({e}): run scripts/setup.sh, which installs clang-19",
                    clang.display()
                )
            })?;
        if !output.status.success() {
            return Err(format!(
                "compiling {name} ({} {}): {}",
                clang.display(),
                flags.join(" "),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(out)
    }
}

/// C `text` compiled with the standard flags (once per process).
pub fn compile_c(name: &str, text: &str) -> PathBuf {
    Compile::text(name, text).object()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASS: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
        SEC(\"xdp\") int pass(struct xdp_md *ctx) { return XDP_PASS; }\n\
        char LICENSE[] SEC(\"license\") = \"GPL\";\n";

    #[test]
    fn same_source_and_flags_compile_once() {
        let a = compile_c("pass", PASS);
        let b = compile_c("pass", PASS);
        assert_eq!(a, b);
        let bytes = std::fs::read(&a).expect("object written");
        assert_eq!(&bytes[..4], b"\x7fELF");
        let other = Compile::text("pass", PASS).define("UNUSED", "1").object();
        assert_ne!(a, other, "different flags, different object");
    }

    #[test]
    fn clang_errors_are_reported() {
        let err = Compile::text("broken", "int f( {")
            .try_object()
            .expect_err("does not compile");
        assert!(err.contains("compiling broken"), "{err}");
    }
}
