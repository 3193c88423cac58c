//! Shared by the kernel test suites: compiling the C programs under
//! tests/progs at test time, and skipping loudly when the kernel is unusable.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The clang the project installs (scripts/setup.sh); `BPFJET_CLANG` overrides.
fn clang() -> PathBuf {
    std::env::var_os("BPFJET_CLANG")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/clang-19"))
}

/// Compile tests/progs/`name`.c to an object file (once per test process).
pub fn object(name: &str) -> PathBuf {
    static COMPILE: Mutex<()> = Mutex::new(());
    let _serialized = COMPILE.lock().unwrap_or_else(|p| p.into_inner());

    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/progs")
        .join(format!("{name}.c"));
    let out_dir = std::env::temp_dir().join(format!("bpfjet-kernel-tests-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("creating the temp dir for BPF objects");
    let object = out_dir.join(format!("{name}.o"));
    if object.exists() {
        return object;
    }
    let clang = clang();
    assert!(
        clang.exists(),
        "{} not found: run scripts/setup.sh (it installs clang-19 and libbpf-dev)",
        clang.display()
    );
    // BPF has no multiarch include directory of its own; <linux/bpf.h> pulls
    // in <asm/types.h> from the host's.
    let multiarch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let output = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall"])
        .arg(format!("-I{multiarch}"))
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .output()
        .expect("running clang");
    assert!(
        output.status.success(),
        "compiling {}: {}\n(run scripts/setup.sh if headers are missing)",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    object
}

/// Return from the test with a visible SKIPPED line when BPF is unusable.
#[macro_export]
macro_rules! require_kernel {
    ($test:expr) => {
        if let Err(why) = bpfjet_kernel::kernel_available() {
            $crate::common::skip($test, &why);
            return;
        }
    };
}

/// Print `SKIPPED: test: why` past the test harness's output capture
/// (which swallows `eprintln!` of passing tests), so a skip is never silent.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
}

/// A 64-byte Ethernet + IPv4 + UDP packet with recognisable bytes.
pub fn packet() -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // destination MAC
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // source MAC
    p[12..14].copy_from_slice(&[0x08, 0x00]); // IPv4
    p[14] = 0x45;
    p[23] = 17; // UDP
    for (i, b) in p.iter_mut().enumerate().skip(34) {
        *b = i as u8;
    }
    p
}
