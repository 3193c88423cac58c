//! Shared by the kernel test suites: compiling the C programs under
//! tests/progs at test time, and skipping loudly when the kernel is unusable.

use std::path::{Path, PathBuf};

/// Compile tests/progs/`name`.c to an object file (once per test process),
/// with bpfjet-testsupport's clang and flags: clang's default CPU and
/// `-Wall`, as these programs were written for.
pub fn object(name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/progs")
        .join(format!("{name}.c"));
    bpfjet_testsupport::Compile::file(source)
        .mcpu(None)
        .arg("-Wall")
        .object()
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

/// `SKIPPED: test: why`, past the test harness's output capture and into
/// `make test`'s list of skips, so a skip is never silent.
pub fn skip(test: &str, why: &str) {
    bpfjet_testsupport::report_skip(format!("{test}: {why}"));
}

/// A 64-byte Ethernet + IPv4 + UDP packet with recognisable bytes.
pub fn packet() -> Vec<u8> {
    bpfjet_testsupport::packet::eth_ipv4_udp_64()
}
