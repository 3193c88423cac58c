//! What the server's backend tests share.

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{decode, encode, Backend, Command, Errno};

/// One instruction as `bpf()` takes it (a little-endian u64).
#[allow(dead_code)]
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = dst | (src << 4);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

/// Runs `cmd` on `backend` as a `bpf()` caller's bytes would reach it:
/// encoded, then decoded.
pub fn run(backend: &dyn Backend, cmd: Command) -> Result<i64, Errno> {
    let raw = encode(&cmd);
    let cmd = decode(cmd.cmd() as u32, &raw).expect("a command decodes from its encoding");
    backend.execute(&cmd)
}

/// Whether the kernel's `bpf()` can be the oracle here (root); else a
/// SKIPPED line.
#[allow(dead_code)]
pub fn kernel_backend_usable() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        bpfjet_testsupport::report_skip("the kernel backend needs root");
    }
    root
}

/// bpfjet's backend on a namespace of its own, removed (its directory,
/// maps and shared memory) when dropped.
#[allow(dead_code)]
pub struct JetNs {
    pub backend: BpfjetBackend,
    run: std::path::PathBuf,
    name: String,
}

impl JetNs {
    #[allow(dead_code)]
    pub fn open(tag: &str) -> JetNs {
        let run = std::env::temp_dir().join(format!("bpfjet-backends-{tag}{}", std::process::id()));
        let name = format!("backends{tag}{}", std::process::id());
        let ns = Namespace::open(&name, &run).expect("namespace");
        JetNs {
            backend: BpfjetBackend::new(ns),
            run,
            name,
        }
    }
}

impl Drop for JetNs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.run);
        for id in self.backend.namespace().instance().list() {
            let _ = self.backend.namespace().instance().remove_map(id.id);
        }
        let _ = bpfjet_maps::Instance::remove_stale(&self.name);
    }
}
