//! The assembler and both printers against every program of the
//! bpf_conformance suite.

mod common;

use bpfjet_isa::decode::decode_bytes;
use bpfjet_isa::disasm::{disassemble, disassemble_asm};
use bpfjet_isa::{assemble, assemble_bytes, Insn};

/// The suite as shipped has 313 files; fewer means the vectors are incomplete.
const SUITE_SIZE: usize = 313;

#[test]
fn every_conformance_program_assembles() {
    let files = common::data_files();
    assert!(
        files.len() >= SUITE_SIZE,
        "expected at least {SUITE_SIZE} conformance files, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        if let Err(e) = assemble(&f.asm) {
            failures.push(format!("{}: {e}", f.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} files failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn raw_sections_match_the_encoding() {
    let mut checked = 0;
    for f in common::data_files() {
        let Some(raw) = &f.raw else { continue };
        let bytes = assemble_bytes(&f.asm).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let want: Vec<u8> = raw.iter().flat_map(|slot| slot.to_le_bytes()).collect();
        assert_eq!(bytes, want, "{}", f.name);
        checked += 1;
    }
    assert!(checked > 0, "no conformance file has a -- raw section");
}

#[test]
fn assemble_agrees_with_decoding_its_bytes() {
    for f in common::data_files() {
        let insns = assemble(&f.asm).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let bytes = assemble_bytes(&f.asm).unwrap();
        assert_eq!(decode_bytes(&bytes).as_ref(), Ok(&insns), "{}", f.name);
        // Slot form: every lddw is followed by its tail marker.
        for (pc, insn) in insns.iter().enumerate() {
            if matches!(insn, Insn::LdDw { .. }) {
                assert_eq!(
                    insns.get(pc + 1),
                    Some(&Insn::LdDwTail),
                    "{} slot {pc}",
                    f.name
                );
            }
        }
    }
}

/// asm → bytes → decode → conformance printer → asm → identical bytes.
#[test]
fn round_trip_through_the_conformance_printer() {
    for f in common::data_files() {
        let bytes = assemble_bytes(&f.asm).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let insns = decode_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let text = disassemble_asm(&insns);
        let again = assemble_bytes(&text).unwrap_or_else(|e| {
            panic!("{}: reassembling the printed program: {e}\n{text}", f.name)
        });
        assert_eq!(again, bytes, "{}:\n{text}", f.name);
    }
}

#[test]
fn readable_listing_covers_every_instruction() {
    for f in common::data_files() {
        let insns = assemble(&f.asm).unwrap();
        let listing = disassemble(&insns);
        let tails = insns.iter().filter(|i| **i == Insn::LdDwTail).count();
        assert_eq!(listing.lines().count(), insns.len() - tails, "{}", f.name);
        assert!(
            listing.lines().all(|l| !l.contains("LdDwTail")),
            "{}",
            f.name
        );
    }
}
