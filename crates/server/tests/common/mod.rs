//! What the server's backend tests share.

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
