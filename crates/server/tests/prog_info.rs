//! `bpf_prog_info.verified_insns` through both backends: the instructions
//! the verifier processed (what veristat and libbpf users read), not the
//! program's length. A loop makes the two differ: both verifiers walk its
//! iterations.

mod common;
use common::{insn, run, JetNs};

use bpfjet_sys::{Backend, Command, GetInfo, ProgInfo, ProgLoad};
use std::cell::Cell;

const XDP: u32 = 6;

/// `r0 = 0; r1 = 0; do { r0 += r1; r1 += 1 } while (r1 < 10); r0 &= 1;
/// r0 += 1; exit` (XDP_DROP or XDP_PASS).
fn counted_loop() -> Vec<u64> {
    vec![
        insn(0xb7, 0, 0, 0, 0),   // r0 = 0
        insn(0xb7, 1, 0, 0, 0),   // r1 = 0
        insn(0x0f, 0, 1, 0, 0),   // r0 += r1
        insn(0x07, 1, 0, 0, 1),   // r1 += 1
        insn(0xa5, 1, 0, -3, 10), // if r1 < 10 goto -3
        insn(0x57, 0, 0, 0, 1),   // r0 &= 1
        insn(0x07, 0, 0, 0, 1),   // r0 += 1
        insn(0x95, 0, 0, 0, 0),   // exit
    ]
}

/// The program's `verified_insns` as `backend` reports it.
fn verified_insns(backend: &dyn Backend, insns: &[u64]) -> u32 {
    let license = c"GPL";
    let fd = run(
        backend,
        Command::ProgLoad(ProgLoad {
            prog_type: XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            name: "loop10".into(),
            ..ProgLoad::default()
        }),
    )
    .expect("the program loads");
    let mut info = vec![0u8; ProgInfo::SIZE];
    run(
        backend,
        Command::ObjGetInfoByFd(GetInfo {
            bpf_fd: fd as u32,
            info_len: Cell::new(info.len() as u32),
            info: info.as_mut_ptr() as u64,
        }),
    )
    .expect("info of a loaded program");
    // SAFETY: closing the fd this load returned.
    unsafe { libc::close(fd as i32) };
    u32::from_ne_bytes(info[216..220].try_into().unwrap())
}

#[test]
fn verified_insns_count_what_the_verifier_processed() {
    let insns = counted_loop();
    let jet = JetNs::open("proginfo");
    let ours = verified_insns(&jet.backend, &insns);
    // bpfjet's verifier on the same instructions, asked directly.
    let bytes: Vec<u8> = insns.iter().flat_map(|w| w.to_le_bytes()).collect();
    let decoded = bpfjet_isa::decode_bytes(&bytes).expect("decodes");
    let facts = bpfjet_verifier::verify(&decoded, &bpfjet_verifier::VerifyEnv::new(&[]))
        .expect("bpfjet's verifier accepts it");
    assert_eq!(u64::from(ours), facts.insns_processed);
    assert!(
        ours as usize > insns.len(),
        "a 10-iteration loop is walked more than once: {ours}"
    );
    if common::kernel_backend_usable() {
        let kernel = verified_insns(&bpfjet_sys::KernelBackend, &insns);
        eprintln!("verified_insns: kernel {kernel}, bpfjet {ours}");
        assert!(
            kernel as usize > insns.len(),
            "the kernel's count: {kernel}"
        );
    }
}
