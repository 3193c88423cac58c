//! Shared by the CLI's integration tests: where the repository and the built
//! corpus are, reading the fixtures of examples/xdp/fixtures, running the
//! `bpfjet` binary, and skipping loudly.

#![allow(dead_code)] // each test binary uses its own part of this module

pub mod fixtures;
pub mod stats_runs;
pub mod time_fields;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The workspace root (crates/cli/../..).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// build/examples, after `make -C examples` made sure every object and the
/// generated katran state are there and up to date. Make does nothing when
/// they are, and rebuilds a stale object, which "only if missing" would not.
/// Panics with make's output when the corpus cannot be built: a differential
/// test without its corpus must fail, not pass.
pub fn corpus_build_dir() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = repo_root();
            let output = Command::new("make")
                .args(["-s", "-C", "examples"])
                .current_dir(&root)
                .output()
                .map_err(|e| format!("running make -C examples: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "make -C examples failed ({}):\n{}{}\n(scripts/setup.sh installs clang-19 and libbpf-dev)",
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            Ok(root.join("build/examples"))
        })
        .clone()
        .unwrap_or_else(|why| panic!("{why}"))
}

/// Print past the test harness's capture (which swallows `eprintln!` of
/// passing tests), so skips and summaries are always seen.
pub fn announce(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
}

/// `SKIPPED: <what>: <why>`, never a silent pass.
pub fn skip(what: &str, why: &str) {
    bpfjet_testsupport::report_skip(format!("{what}: {why}"));
}

/// A finished run of the `bpfjet` binary.
pub struct BpfjetRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl BpfjetRun {
    fn from(output: Output) -> BpfjetRun {
        BpfjetRun {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Run `bpfjet ARGS`, with `stdin` fed to it.
pub fn bpfjet(args: &[&str], stdin: &[u8]) -> BpfjetRun {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpfjet");
    let mut input = child.stdin.take().expect("piped stdin");
    // A program that exits before reading closes the pipe: not an error here.
    let _ = input.write_all(stdin);
    drop(input);
    BpfjetRun::from(child.wait_with_output().expect("waiting for bpfjet"))
}

/// A scratch directory for one test, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bpfjet-cli-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Scratch(dir)
    }

    /// Write `contents` to `name` inside the directory; returns its path as text.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("writing a scratch file");
        path.display().to_string()
    }

    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Scratch {
    /// Compile the C `source` to `<name>.o` in the directory with clang-19
    /// (`-O2 -g -target bpf -mcpu=v3`, as `make -C examples`; see
    /// bpfjet-testsupport); returns the object's path.
    /// (bpfjet-testsupport's flags: compiled once per test process, copied
    /// here so the file stem is `name`.)
    pub fn compile_c(&self, name: &str, source: &str) -> String {
        self.file(&format!("{name}.c"), source);
        let obj = self.path(&format!("{name}.o"));
        bpfjet_testsupport::Compile::text(name, source).object_at(&obj);
        obj
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A negative-corpus case: the program at `path` is refused by the kernel
/// (when `kernel_refused` says what its load gave: `Some(true)` refused,
/// `Some(false)` accepted, `None` not asked) and must be refused by
/// bpfjet's loader too, for the reason `words` names, with the instruction.
pub fn assert_refused_like_the_kernel(
    name: &str,
    path: &Path,
    kernel_refused: Option<bool>,
    words: &str,
) {
    if let Some(refused) = kernel_refused {
        assert!(refused, "{name}: the kernel accepts it (corpus is wrong)");
    }
    let obj = bpfjet_obj::load_file(path).unwrap();
    let options = bpfjet_runtime::ObjectOptions::default();
    let err = match bpfjet_runtime::LoadedObject::load(&obj, &options) {
        Ok(_) => panic!("{name}: bpfjet accepts a program the kernel refuses"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(words),
        "{name}: refused, but not for the reason: {err}"
    );
    assert!(
        err.contains("insn") || err.contains(" at "),
        "{name}: no instruction named: {err}"
    );
}

/// Load each C program (name, source, whether the kernel accepts it, words
/// of bpfjet's reason when refused) in the kernel (when usable: else that
/// column is skipped, naming `what`) and in bpfjet's verified loader, and
/// say where they disagree: the kernel against the expectation, bpfjet
/// against the kernel, or a refusal without the instruction or the words.
#[allow(dead_code)]
pub fn verdict_failures<'a>(
    what: &str,
    cases: impl IntoIterator<Item = (&'a str, String, bool, &'a str)>,
) -> Vec<String> {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        skip(&format!("{what}, kernel column"), why);
    }
    let mut failures = Vec::new();
    for (name, text, accepts, words) in cases {
        let path = bpfjet_testsupport::Compile::text(&format!("verdict_{name}"), &text).object();
        if kernel.is_ok() {
            let k = bpfjet_kernel::KernelObject::open_with(
                &path,
                &bpfjet_kernel::LoadOptions::default(),
            );
            if k.is_ok() != accepts {
                failures.push(format!(
                    "{name}: the kernel {} it (the expectation is wrong): {:?}",
                    if k.is_ok() { "accepts" } else { "refuses" },
                    k.err().map(|e| e.to_string())
                ));
                continue;
            }
        }
        let obj = bpfjet_obj::load_file(&path).unwrap();
        let ours = bpfjet_runtime::LoadedObject::load(&obj, &Default::default());
        match (&ours, accepts) {
            (Ok(_), true) => {}
            (Err(e), true) => failures.push(format!("{name}: bpfjet refuses it: {e}")),
            (Ok(_), false) => failures.push(format!("{name}: bpfjet accepts it")),
            (Err(e), false) => {
                let e = e.to_string();
                if !e.contains(words) || !(e.contains("insn") || e.contains(" at ")) {
                    failures.push(format!(
                        "{name}: refused, but without the instruction or `{words}`: {e}"
                    ));
                }
            }
        }
    }
    failures
}

/// One of bpfjet's engines for an object compared with the kernel.
#[allow(dead_code)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    /// The interpreter on a verified program.
    Interp,
    /// The interpreter in bounds-checked mode (`--unverified`): every
    /// address a helper follows is checked against the run's regions.
    Checked,
    /// The JIT (uncached).
    Jit,
}

/// An object loaded on one engine: test runs and its maps.
#[allow(dead_code)]
pub enum OnEngine {
    Interp(bpfjet_runtime::LoadedObject),
    Jit(bpfjet_jit::JitObject),
}

#[allow(dead_code)]
impl OnEngine {
    pub fn load(path: &Path, engine: Engine) -> OnEngine {
        let obj = bpfjet_obj::load_file(path).unwrap();
        let options = bpfjet_runtime::ObjectOptions {
            unverified: engine == Engine::Checked,
            ..bpfjet_runtime::ObjectOptions::default()
        };
        let fail = |e: String| -> ! { panic!("{engine:?}: {}: {e}", path.display()) };
        match engine {
            Engine::Jit => OnEngine::Jit(
                bpfjet_jit::JitObject::load(&obj, &options, &bpfjet_jit::JitOptions::uncached())
                    .unwrap_or_else(|e| fail(e.to_string())),
            ),
            _ => OnEngine::Interp(
                bpfjet_runtime::LoadedObject::load(&obj, &options)
                    .unwrap_or_else(|e| fail(e.to_string())),
            ),
        }
    }

    /// One test run of `prog` on `frame`: the action and the frame out.
    pub fn run(&self, prog: &str, frame: &[u8]) -> (u32, Vec<u8>) {
        let opts = bpfjet_runtime::TestRunOptions::default();
        let r = match self {
            OnEngine::Interp(o) => o.test_run(prog, frame, &opts).map_err(|e| e.to_string()),
            OnEngine::Jit(j) => j
                .test_run(prog, frame, &opts, bpfjet_jit::XdpEngine::Jit)
                .map_err(|e| e.to_string()),
        }
        .unwrap_or_else(|e| panic!("test run of {prog}: {e}"));
        (r.retval, r.data_out)
    }

    /// The loaded object (its maps).
    pub fn loaded(&self) -> &bpfjet_runtime::LoadedObject {
        match self {
            OnEngine::Interp(o) => o,
            OnEngine::Jit(j) => j.loaded(),
        }
    }
}

/// The object loaded into the running kernel, the oracle of a differential
/// test; None (with a SKIPPED line naming `what`) when no kernel is usable.
#[allow(dead_code)]
pub fn kernel_object(path: &Path, what: &str) -> Option<bpfjet_kernel::KernelObject> {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        skip(what, &why);
        return None;
    }
    Some(
        bpfjet_kernel::KernelObject::open_with(path, &bpfjet_kernel::LoadOptions::default())
            .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display())),
    )
}
