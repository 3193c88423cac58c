//! A malformed slot on a path the verifier proves dead (the kernel accepts
//! such a program and removes the slot) must never reach an engine: the
//! loader replaces it with the kernel's dead-code filler `ja -1`, and both
//! engines run the program. The same slot on the path taken is refused at
//! load, and so is the dead one without a verifier (`--unverified`), where
//! nothing proves it dead.
//!
//! `tests/progs/dead_malformed.c` is compiled with clang-19 at test time;
//! the test then corrupts the marked slot of each program (destination
//! register r11).

use bpfjet_isa::Insn;
use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};

mod fixtures;

const DEAD_MARK: i32 = 0x5eadbee;
const XDP_PASS: u32 = 2;

/// The object with the marked slot of every program given r11 as its
/// destination; returns the object and the corrupted slot.
fn corrupted() -> (bpfjet_obj::Object, usize) {
    let mut obj = bpfjet_obj::load_file(fixtures::test_prog("dead_malformed")).unwrap();
    let mut slot = None;
    for p in &mut obj.programs {
        let pc = p
            .insns
            .iter()
            .position(|i| i.imm == DEAD_MARK)
            .unwrap_or_else(|| panic!("{}: no slot with the marker", p.name));
        assert_eq!(p.insns[pc].code, 0xb7, "{}: marker is not a mov", p.name);
        p.insns[pc].dst = 11;
        assert!(slot.is_none_or(|s| s == pc), "programs differ in layout");
        slot = Some(pc);
    }
    (obj, slot.expect("programs"))
}

#[test]
fn dead_malformed_slot_is_trapped_and_never_run() {
    let (mut obj, pc) = corrupted();
    // Only the program whose block is dead loads.
    obj.programs.retain(|p| p.name == "dead_block");
    let opts = ObjectOptions::default();
    let loaded = LoadedObject::load(&obj, &opts).unwrap();
    let form = loaded
        .verified("dead_block")
        .unwrap()
        .expect("verified form");
    assert_eq!(form.insns[pc], Insn::Ja { off: -1 }, "slot {pc}");
    let packet = [0u8; 64];
    let run = TestRunOptions::default();
    let want = loaded.test_run("dead_block", &packet, &run).unwrap();
    assert_eq!(want.retval, XDP_PASS);
    let fast = JitObject::load(&obj, &opts, &JitOptions::uncached()).unwrap();
    for engine in [XdpEngine::Jit, XdpEngine::Interp] {
        let got = fast.test_run("dead_block", &packet, &run, engine).unwrap();
        assert_eq!(got.retval, XDP_PASS, "{engine:?}");
    }
}

#[test]
fn reachable_malformed_slot_is_refused() {
    let (mut obj, pc) = corrupted();
    obj.programs.retain(|p| p.name == "live_block");
    let e = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("invalid register r11") && text.contains(&pc.to_string()),
        "{text}"
    );
}

#[test]
fn unverified_load_refuses_any_malformed_slot() {
    let (mut obj, _) = corrupted();
    obj.programs.retain(|p| p.name == "dead_block");
    let opts = ObjectOptions {
        unverified: true,
        ..ObjectOptions::default()
    };
    let e = LoadedObject::load(&obj, &opts).unwrap_err();
    assert!(e.to_string().contains("invalid register r11"), "{e}");
}
