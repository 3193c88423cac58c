//! Whether this process can load and test-run XDP programs at all. Test
//! suites that need the kernel call [`kernel_available`] and, on `Err`, print
//! a visible `SKIPPED: <reason>` instead of passing silently.

use crate::test_run::{test_run_fd, TestRunOptions};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// `Ok` if an XDP program can be loaded and run with `BPF_PROG_TEST_RUN`;
/// otherwise why not. Probed once per process.
pub fn kernel_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    // r0 = XDP_PASS; exit. Encoded by hand: this crate does not depend on an assembler.
    let insns: [u64; 2] = [0x0000_0002_0000_00b7, 0x0000_0000_0000_0095];
    let name = c"bpfjet_probe";
    let license = c"GPL";
    // SAFETY: `insns` holds two 8-byte instructions laid out like bpf_insn;
    // the strings are NUL-terminated; NULL opts means defaults.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_XDP,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            insns.len() as _,
            std::ptr::null_mut(),
        )
    };
    if fd < 0 {
        let errno = -fd;
        return Err(match errno {
            libc::EPERM | libc::EACCES => format!(
                "loading an XDP program is not permitted ({}); run as root or with \
                 CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN",
                std::io::Error::from_raw_os_error(errno)
            ),
            libc::ENOSYS => "the bpf() syscall is not available in this kernel".to_string(),
            _ => format!(
                "loading a trivial XDP program failed: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
        });
    }
    // SAFETY: a fresh descriptor that nobody else owns.
    let prog = unsafe { OwnedFd::from_raw_fd(fd) };
    let packet = [0u8; 64];
    match test_run_fd(prog.as_raw_fd(), &packet, &TestRunOptions::default()) {
        Ok(r) if r.retval == 2 => Ok(()),
        Ok(r) => Err(format!(
            "BPF_PROG_TEST_RUN of an XDP_PASS program returned {}",
            r.retval
        )),
        Err(e) => Err(format!("BPF_PROG_TEST_RUN does not work here: {e}")),
    }
}
