//! Facts the loader and the JIT specialise instructions on hold on every
//! path that reaches the instruction (the kernel's verdicts on the same
//! programs are compared in the negative corpus, `mem_insn_mixed_ptr`).

use bpfjet_maps::{MapSpec, MapType};
use bpfjet_verifier::{verify, MemBase, VerifyEnv};

fn asm(text: &str) -> Vec<bpfjet_isa::Insn> {
    bpfjet_isa::assemble(text).expect("assembles")
}

/// r6 = ctx or packet (or stack), then one load through r6 at slot 10.
fn mixed(other: &str) -> String {
    format!(
        "ldxw %r2, [%r1+0]\n ldxw %r3, [%r1+4]\n mov %r4, %r2\n add %r4, 32\n\
         jgt %r4, %r3, out\n ldxb %r5, [%r2+0]\n mov %r6, {other}\n stdw [%r10-8], 0\n\
         jeq %r5, 0, use\n mov %r6, %r2\n use:\n ldxw %r0, [%r6+4]\n out:\n mov %r0, 2\n exit"
    )
}

#[test]
fn context_and_packet_through_one_load_is_refused() {
    let e = verify(&asm(&mixed("%r1")), &VerifyEnv::new(&[])).unwrap_err();
    assert_eq!((e.pc, e.rule), (Some(10), "ptr_type_mismatch"), "{e}");
    assert!(e
        .message
        .contains("same insn cannot be used with different pointers"));
}

#[test]
fn packet_and_stack_through_one_load_is_mixed() {
    // r6 = fp - 8 on one path, the packet on the other.
    let text = mixed("%r10").replace("stdw [%r10-8], 0\n", "stdw [%r10-8], 0\n add %r6, -8\n");
    let facts = verify(&asm(&text), &VerifyEnv::new(&[])).unwrap();
    assert_eq!(facts.mem_bases.get(&11), Some(&MemBase::Mixed));
    assert_eq!(facts.mem_bases.get(&0), Some(&MemBase::Ctx));
    assert!(!facts.ctx_accesses.contains_key(&11));
}

#[test]
fn constant_key_of_two_maps_is_not_constant() {
    let maps = [
        MapSpec::new("a", MapType::Array, 4, 8, 4),
        MapSpec::new("b", MapType::Array, 4, 8, 4),
    ];
    // The same key 0, but map a on one path and map b on the other.
    let text = "ldxw %r6, [%r1+12]\n stw [%r10-4], 0\n lddw %r1, map_idx 0\n\
                jeq %r6, 0, go\n lddw %r1, map_idx 1\n go:\n mov %r2, %r10\n add %r2, -4\n\
                call 1\n mov %r0, 2\n exit";
    let facts = verify(&asm(text), &VerifyEnv::new(&maps)).unwrap();
    let lookup = facts.const_key_lookups.values().next().expect("one lookup");
    assert_eq!(lookup.key, None);
    // One map only: the key is a constant.
    let one = text.replace("lddw %r1, map_idx 1", "lddw %r1, map_idx 0");
    let facts = verify(&asm(&one), &VerifyEnv::new(&maps)).unwrap();
    let lookup = facts.const_key_lookups.values().next().expect("one lookup");
    assert_eq!(lookup.key, Some(0));
}
