//! The trace agent's thread-local storage must let `bpfjet trace --pid`
//! load it with `dlopen` into a running process. Its hot per-thread state
//! is initial-exec TLS (no `__tls_get_addr` per probe hit), which marks the
//! library `STATIC_TLS`: glibc then places its whole TLS segment in the
//! static TLS block, which for a library loaded after start-up comes from
//! a small surplus (`glibc.rtld.optional_static_tls`, 512 bytes by
//! default, is what glibc sets aside for such libraries). The segment must
//! fit it: checked on the built `libbpfjet_trace.so`, read as ELF here
//! (`trace_pid.rs` loads it into a live process).

use std::path::PathBuf;

const PT_DYNAMIC: u32 = 2;
const PT_TLS: u32 = 7;
const DT_NULL: i64 = 0;
const DT_FLAGS: i64 = 30;
const DF_STATIC_TLS: u64 = 0x10;
/// glibc's default `glibc.rtld.optional_static_tls`.
const DLOPEN_STATIC_TLS_BUDGET: u64 = 512;

fn agent() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_bpfjet")).with_file_name("libbpfjet_trace.so");
    assert!(
        p.exists(),
        "{} missing: build it with `cargo build -p bpfjet-trace-agent` (same profile)",
        p.display()
    );
    p
}

fn u16_at(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes(b[at..at + 2].try_into().unwrap()))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// (TLS segment size in memory, `DF_STATIC_TLS` set) of an ELF64 shared
/// object.
fn tls_of(elf: &[u8]) -> (u64, bool) {
    assert_eq!(&elf[..5], b"\x7fELF\x02", "an ELF64 file");
    let (phoff, phentsize, phnum) = (
        u64_at(elf, 0x20) as usize,
        u16_at(elf, 0x36) as usize,
        u16_at(elf, 0x38) as usize,
    );
    let mut tls = 0;
    let mut static_tls = false;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        match u32_at(elf, ph) {
            PT_TLS => tls = u64_at(elf, ph + 40),
            PT_DYNAMIC => {
                let (off, size) = (u64_at(elf, ph + 8) as usize, u64_at(elf, ph + 32) as usize);
                for d in (off..off + size).step_by(16) {
                    let tag = u64_at(elf, d) as i64;
                    if tag == DT_NULL {
                        break;
                    }
                    if tag == DT_FLAGS {
                        static_tls = u64_at(elf, d + 8) & DF_STATIC_TLS != 0;
                    }
                }
            }
            _ => {}
        }
    }
    (tls, static_tls)
}

#[test]
fn agent_tls_fits_dlopen() {
    let path = agent();
    let elf = std::fs::read(&path).unwrap();
    let (size, static_tls) = tls_of(&elf);
    println!(
        "{}: TLS segment {size} bytes, STATIC_TLS {static_tls}",
        path.display()
    );
    if static_tls {
        assert!(
            size <= DLOPEN_STATIC_TLS_BUDGET,
            "the agent uses initial-exec TLS and its TLS segment is {size} bytes, over the \
             {DLOPEN_STATIC_TLS_BUDGET} glibc keeps for libraries loaded with dlopen: \
             bpfjet trace --pid could not load it"
        );
    }
}
