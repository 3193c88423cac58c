//! Malformed slots in dead code against the kernel verifier.
//!
//! The kernel checks most of an instruction's fields only when its walk
//! reaches it, and removes what the walk proved dead; a few checks run for
//! every slot before the walk (the opcode table, `LDX` reserved fields,
//! `lddw`'s second slot and pseudo source, jump ranges, jumps into an
//! `lddw`). Each case puts one malformed slot behind a branch the
//! analysis decides from a constant (`r0 = 2; if r0 == 2 goto end`), then
//! on the path actually taken (`if r0 == 3`), and compares bpfjet's verdict
//! with the kernel's, privileged and unprivileged (the unprivileged kernel
//! also walks the dead side speculatively, but an error there only makes
//! it fence the branch: it accepts the same programs).

mod common;

use bpfjet_isa::RawInsn;
use bpfjet_verifier::{verify_raw, Policy, VerifyEnv};
use common::*;

fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// One case: the slots placed on the decided branch, and whether the
/// kernel refuses them at load even there.
struct Case {
    name: &'static str,
    block: Vec<RawInsn>,
    load_time: bool,
    /// Not malformed for the kernel: accepted dead or walked.
    accepted: bool,
}

fn case(name: &'static str, block: Vec<RawInsn>, load_time: bool) -> Case {
    Case {
        name,
        block,
        load_time,
        accepted: false,
    }
}

/// Fields the kernel leaves unchecked: the slot loads dead or walked.
fn accepted(name: &'static str, block: Vec<RawInsn>) -> Case {
    Case {
        accepted: true,
        ..case(name, block, false)
    }
}

fn cases() -> Vec<Case> {
    let walk = false;
    let load = true;
    vec![
        case("mov_to_r11", vec![raw(0xb7, 11, 0, 0, 1)], walk),
        case("mov_to_r10", vec![raw(0xb7, 10, 0, 0, 1)], walk),
        case("alu_imm_with_src", vec![raw(0x07, 1, 3, 0, 1)], walk),
        case("mov_bad_offset", vec![raw(0xbc, 1, 2, 5, 0)], walk),
        case("load_into_r11", vec![raw(0x79, 11, 10, -8, 0)], walk),
        case("store_from_r12", vec![raw(0x7b, 10, 12, -8, 0)], walk),
        case("store_imm_with_src", vec![raw(0x7a, 10, 1, -8, 0)], walk),
        case("exit_with_dst", vec![raw(0x95, 1, 0, 0, 0)], walk),
        // "BPF_EXIT uses reserved fields" checks every field but the offset.
        accepted("exit_with_offset", vec![raw(0x95, 0, 0, 7, 0)]),
        case("jump_from_r11", vec![raw(0x1d, 0, 11, 0, 0)], walk),
        case("ja_with_src", vec![raw(0x05, 0, 1, 0, 0)], walk),
        case("call_with_dst", vec![raw(0x85, 1, 0, 0, 5)], walk),
        case("atomic_unknown_op", vec![raw(0xdb, 10, 1, -8, 0x22)], walk),
        case("atomic_byte", vec![raw(0xd3, 10, 1, -8, 0)], walk),
        case(
            "lddw_into_r11",
            vec![raw(0x18, 11, 0, 0, 1), raw(0, 0, 0, 0, 0)],
            walk,
        ),
        case(
            "lddw_with_offset",
            vec![raw(0x18, 1, 0, 3, 1), raw(0, 0, 0, 0, 0)],
            walk,
        ),
        case("bswap_width_8", vec![raw(0xd4, 1, 0, 0, 8)], walk),
        case("may_goto_with_imm", vec![raw(0xe5, 0, 0, 0, 1)], walk),
        case("may_goto_with_src", vec![raw(0xe5, 0, 1, 0, 0)], walk),
        case("may_goto_with_dst", vec![raw(0xe5, 2, 0, 0, 0)], walk),
        case("may_goto_jmp32", vec![raw(0xe6, 0, 0, 0, 0)], load),
        case("may_goto_register_form", vec![raw(0xed, 0, 0, 0, 0)], load),
        case("neg_with_imm", vec![raw(0x87, 1, 0, 0, 1)], walk),
        case("unknown_opcode", vec![raw(0xe7, 1, 0, 0, 0)], load),
        case("neg_register_form", vec![raw(0x8f, 1, 2, 0, 0)], load),
        case("exit_jmp32", vec![raw(0x96, 0, 0, 0, 0)], load),
        case("callx", vec![raw(0x8d, 1, 0, 0, 0)], load),
        case("load_with_imm", vec![raw(0x79, 1, 10, -8, 1)], load),
        case("load_bad_mode", vec![raw(0xb9, 1, 10, -8, 0)], load),
        case(
            "lddw_second_slot_dst",
            vec![raw(0x18, 1, 0, 0, 1), raw(0, 1, 0, 0, 0)],
            load,
        ),
        case(
            "lddw_unknown_pseudo",
            vec![raw(0x18, 1, 7, 0, 1), raw(0, 0, 0, 0, 0)],
            load,
        ),
        case("jump_out_of_range", vec![raw(0x05, 0, 0, 100, 0)], load),
        case(
            "jump_into_lddw",
            vec![
                raw(0x05, 0, 0, 1, 0),
                raw(0x18, 2, 0, 0, 1),
                raw(0, 0, 0, 0, 0),
            ],
            load,
        ),
    ]
}

/// `r0 = 2; if r0 == <cmp> goto +len; <block>; exit`: with `cmp == 2`
/// the block is dead, with 3 it is walked.
fn program(block: &[RawInsn], cmp: i32) -> Vec<RawInsn> {
    let mut p = vec![
        raw(0xb7, 0, 0, 0, 2),
        raw(0x15, 0, 0, block.len() as i16, cmp),
    ];
    p.extend_from_slice(block);
    p.push(raw(0x95, 0, 0, 0, 0));
    p
}

fn bytes(p: &[RawInsn]) -> Vec<u8> {
    p.iter().flat_map(|i| i.to_bytes()).collect()
}

fn ours(p: &[RawInsn], policy: Policy) -> (bool, String) {
    let env = VerifyEnv::new(&[]).with_policy(policy);
    match verify_raw(p, &env) {
        Ok(_) => (true, String::new()),
        Err(e) => (false, format!("{} ({})", e.rule, e.message)),
    }
}

#[test]
fn dead_malformed_slots_match_kernel() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison ({why}); checking the expected verdicts only"
        ));
    }
    let mut failures = Vec::new();
    let mut compared = 0;
    for c in cases() {
        for (cmp, dead) in [(2, true), (3, false)] {
            let p = program(&c.block, cmp);
            let b = bytes(&p);
            // Privileged: a dead slot is refused only by the load-time checks.
            let want_priv = c.accepted || (dead && !c.load_time);
            let (got, why) = ours(&p, Policy::Privileged);
            if got != want_priv {
                failures.push(format!(
                    "{} (dead={dead}) privileged: bpfjet {got}, expected {want_priv}: {why}",
                    c.name
                ));
            }
            let (got_u, why_u) = ours(&p, Policy::Unprivileged);
            if got_u != want_priv {
                failures.push(format!(
                    "{} (dead={dead}) unprivileged: bpfjet {got_u}, expected {want_priv}: {why_u}",
                    c.name
                ));
            }
            if kernel.is_err() {
                continue;
            }
            let (k, kwhy) = kernel_verdict(&b, &[], &[]);
            compared += 1;
            if k != got {
                failures.push(format!(
                    "{} (dead={dead}) privileged: kernel {k} ({kwhy}), bpfjet {got} ({why})",
                    c.name
                ));
            }
            let (ku, kuwhy) = unprivileged(move || kernel_verdict(&b, &[], &[]))
                .unwrap_or_else(|e| (got_u, format!("SKIPPED: {e}")));
            if kuwhy.starts_with("SKIPPED") {
                println!("{}: unprivileged kernel verdict {kuwhy}", c.name);
            } else {
                compared += 1;
            }
            if ku != got_u {
                failures.push(format!(
                    "{} (dead={dead}) unprivileged: kernel {ku} ({kuwhy}), bpfjet {got_u} ({why_u})",
                    c.name
                ));
            }
        }
    }
    println!("{compared} verdicts compared with the kernel");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
