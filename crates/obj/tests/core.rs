//! CO-RE relocations: the pure step (`core::relocate`) on hand-built BTF,
//! so each libbpf rule is checked on its own, and through `load` on a
//! compiled object. Malformed records must give errors naming program,
//! section, slot, kind and access string, never panics.

mod common;

use bpfjet_isa::opcode::{
    CLASS_ALU64, CLASS_JMP, CLASS_LDX, JMP_CALL, LDDW, MODE_MEM, SIZE_DW, SIZE_W,
};
use bpfjet_isa::RawInsn;
use bpfjet_obj::core::{self, CoreRelo, CoreTargets, Fixup, TargetBtf, POISON_HELPER};
use bpfjet_obj::{Btf, BtfType, Member, ObjError, ProgKind, Program};

const SIGNED: u32 = 1 << 24;

fn int(name: &str, size: u32, signed: bool) -> BtfType {
    BtfType::Int {
        name: name.into(),
        size,
        encoding: (size * 8) | if signed { SIGNED } else { 0 },
    }
}

fn member(name: &str, type_id: u32, bit_offset: u32, bitfield_size: u32) -> Member {
    Member {
        name: name.into(),
        type_id,
        bit_offset,
        bitfield_size,
    }
}

fn strukt(name: &str, size: u32, members: Vec<Member>) -> BtfType {
    BtfType::Struct {
        name: name.into(),
        size,
        members,
    }
}

fn enumeration(name: &str, values: &[(&str, i64)]) -> BtfType {
    BtfType::Enum {
        name: name.into(),
        size: 4,
        values: values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        signed: false,
    }
}

/// The program's view: ids 1 int, 2 unsigned, 3 u64, 4 struct foo___local,
/// 5 enum color, 6 struct bits___local, 7 anonymous struct, 8 struct gone.
fn local() -> Btf {
    Btf::from_types(vec![
        int("int", 4, true),
        int("unsigned int", 4, false),
        int("unsigned long long", 8, false),
        strukt(
            "foo___local",
            24,
            vec![
                member("a", 1, 0, 0),
                member("b", 2, 32, 0),
                member("wide", 3, 64, 0),
                member("sneg", 3, 128, 0),
                member("missing", 1, 192, 0),
            ],
        ),
        enumeration("color", &[("RED", 0), ("BLUE", 5)]),
        BtfType::Struct {
            name: "bits___local".into(),
            size: 4,
            members: vec![member("lo", 2, 0, 3), member("s", 1, 3, 7)],
        },
        strukt("", 4, vec![member("x", 1, 0, 0)]),
        strukt("gone", 4, vec![member("x", 1, 0, 0)]),
    ])
}

/// The "kernel": foo with another layout (b nested in an anonymous union,
/// wide narrowed to 4 bytes, sneg a signed int), color with other values.
fn target() -> TargetBtf {
    let btf = Btf::from_types(vec![
        int("int", 4, true),                 // 1
        int("unsigned int", 4, false),       // 2
        int("unsigned long long", 8, false), // 3
        BtfType::Union {
            name: String::new(),
            size: 4,
            members: vec![member("b", 2, 0, 0), member("alias", 1, 0, 0)],
        }, // 4
        strukt(
            "foo",
            32,
            vec![
                member("pad", 3, 0, 0),
                member("", 4, 64, 0),
                member("a", 1, 96, 0),
                member("wide", 2, 128, 0),
                member("sneg", 1, 160, 0),
            ],
        ), // 5
        enumeration("color", &[("RED", 0), ("GREEN", 3), ("BLUE", 9)]), // 6
        BtfType::Struct {
            name: "bits".into(),
            size: 8,
            members: vec![
                member("pad", 2, 0, 0),
                member("s", 1, 35, 7),
                member("lo", 2, 42, 3),
            ],
        }, // 7
    ]);
    TargetBtf::new(btf, "test target")
}

fn ldx(size: u8, off: i16) -> RawInsn {
    RawInsn {
        code: CLASS_LDX | MODE_MEM | size,
        dst: 0,
        src: 1,
        off,
        imm: 0,
    }
}

fn mov(imm: i32) -> RawInsn {
    RawInsn {
        code: CLASS_ALU64 | 0xb0,
        dst: 0,
        src: 0,
        off: 0,
        imm,
    }
}

fn lddw(value: u64) -> [RawInsn; 2] {
    [
        RawInsn {
            code: LDDW,
            dst: 0,
            src: 0,
            off: 0,
            imm: value as u32 as i32,
        },
        RawInsn {
            code: 0,
            dst: 0,
            src: 0,
            off: 0,
            imm: (value >> 32) as u32 as i32,
        },
    ]
}

fn program(insns: Vec<RawInsn>, relos: Vec<(usize, u32, &str, u32)>) -> Program {
    Program {
        name: "prog".into(),
        section: "xdp".into(),
        kind: ProgKind::from_section("xdp"),
        insns,
        func_info: Vec::new(),
        line_info: Vec::new(),
        core_relos: relos
            .into_iter()
            .map(|(slot, type_id, access, kind)| CoreRelo {
                slot,
                type_id,
                access: access.into(),
                kind,
            })
            .collect(),
        unresolved_core: Vec::new(),
    }
}

fn relocate(prog: &Program) -> Result<Vec<Fixup>, ObjError> {
    let context = TargetBtf::context();
    let kernel = target();
    let targets = CoreTargets {
        context: &context,
        kernel: Ok(&kernel),
    };
    core::relocate(prog, &local(), &targets)
}

/// Relocates one instruction and returns what it became.
fn one(insns: Vec<RawInsn>, type_id: u32, access: &str, kind: u32) -> Vec<RawInsn> {
    let mut prog = program(insns, vec![(0, type_id, access, kind)]);
    let fixups = relocate(&prog).unwrap_or_else(|e| panic!("{e}"));
    core::apply(&mut prog, fixups);
    prog.insns
}

const FIELD_BYTE_OFFSET: u32 = 0;
const FIELD_BYTE_SIZE: u32 = 1;
const FIELD_EXISTS: u32 = 2;
const FIELD_SIGNED: u32 = 3;
const FIELD_LSHIFT_U64: u32 = 4;
const FIELD_RSHIFT_U64: u32 = 5;
const TYPE_ID_LOCAL: u32 = 6;
const TYPE_ID_TARGET: u32 = 7;
const TYPE_EXISTS: u32 = 8;
const TYPE_SIZE: u32 = 9;
const ENUMVAL_EXISTS: u32 = 10;
const ENUMVAL_VALUE: u32 = 11;
const TYPE_MATCHES: u32 = 12;

#[test]
fn field_offsets_follow_the_target_through_anonymous_members() {
    assert_eq!(
        one(vec![ldx(SIZE_W, 0)], 4, "0:0", FIELD_BYTE_OFFSET),
        vec![ldx(SIZE_W, 12)]
    );
    // b sits in the target's anonymous union at byte 8.
    assert_eq!(
        one(vec![ldx(SIZE_W, 4)], 4, "0:1", FIELD_BYTE_OFFSET),
        vec![ldx(SIZE_W, 8)]
    );
    // Element 2 of an array of foo: 2 * sizeof(target foo) + 12.
    assert_eq!(
        one(vec![mov(48)], 4, "2:0", FIELD_BYTE_OFFSET),
        vec![mov(76)]
    );
    assert_eq!(one(vec![mov(8)], 4, "0:2", FIELD_BYTE_SIZE), vec![mov(4)]);
    assert_eq!(one(vec![mov(1)], 4, "0:4", FIELD_EXISTS), vec![mov(0)]);
    assert_eq!(one(vec![mov(1)], 4, "0:0", FIELD_EXISTS), vec![mov(1)]);
    assert_eq!(one(vec![mov(0)], 4, "0:3", FIELD_SIGNED), vec![mov(1)]);
}

#[test]
fn loads_narrow_to_the_target_field_for_unsigned_integers_only() {
    // wide: u64 locally, u32 in the target: the load becomes 4 bytes.
    assert_eq!(
        one(vec![ldx(SIZE_DW, 8)], 4, "0:2", FIELD_BYTE_OFFSET),
        vec![ldx(SIZE_W, 16)]
    );
    // sneg: u64 locally, a signed int in the target: narrowing would change
    // the value, so the load is poisoned, as libbpf does.
    let mut prog = program(
        vec![ldx(SIZE_DW, 16)],
        vec![(0, 4, "0:3", FIELD_BYTE_OFFSET)],
    );
    let fixups = relocate(&prog).unwrap();
    core::apply(&mut prog, fixups);
    assert_eq!(prog.insns[0].imm, POISON_HELPER);
    let u = &prog.unresolved_core[0];
    assert!(u.reason.contains("unsigned integer or pointer"), "{u}");
}

#[test]
fn bitfields_give_the_loads_and_shifts_of_the_target_layout() {
    // Target `s`: 7 bits at bit 35 of an int-typed field: an 8-byte load
    // at 0 is the smallest aligned load covering bits 35..42.
    assert_eq!(one(vec![mov(0)], 6, "0:1", FIELD_BYTE_OFFSET), vec![mov(4)]);
    assert_eq!(one(vec![mov(4)], 6, "0:1", FIELD_BYTE_SIZE), vec![mov(4)]);
    assert_eq!(
        one(vec![mov(0)], 6, "0:1", FIELD_LSHIFT_U64),
        vec![mov(64 - (35 + 7 - 32))]
    );
    assert_eq!(
        one(vec![mov(57)], 6, "0:1", FIELD_RSHIFT_U64),
        vec![mov(57)]
    );
    assert_eq!(one(vec![mov(1)], 6, "0:1", FIELD_SIGNED), vec![mov(1)]);
    // `lo`: 3 bits at bit 42, an unsigned int: load 4 bytes at 4.
    assert_eq!(one(vec![mov(0)], 6, "0:0", FIELD_BYTE_OFFSET), vec![mov(4)]);
    assert_eq!(
        one(vec![mov(0)], 6, "0:0", FIELD_LSHIFT_U64),
        vec![mov(64 - (42 + 3 - 32))]
    );
    assert_eq!(
        one(vec![mov(61)], 6, "0:0", FIELD_RSHIFT_U64),
        vec![mov(61)]
    );
}

#[test]
fn type_and_enum_relocations() {
    assert_eq!(one(vec![mov(1)], 4, "0", TYPE_EXISTS), vec![mov(1)]);
    assert_eq!(one(vec![mov(24)], 4, "0", TYPE_SIZE), vec![mov(32)]);
    assert_eq!(one(vec![mov(1)], 8, "0", TYPE_EXISTS), vec![mov(0)]);
    assert_eq!(one(vec![mov(4)], 8, "0", TYPE_SIZE), vec![mov(0)]);
    assert_eq!(
        one(vec![mov(1)], 4, "0", TYPE_MATCHES),
        vec![mov(0)],
        "foo___local has `missing`"
    );
    assert_eq!(
        one(lddw(4).to_vec(), 4, "0", TYPE_ID_TARGET),
        lddw(5).to_vec()
    );
    assert_eq!(
        one(lddw(4).to_vec(), 4, "0", TYPE_ID_LOCAL),
        lddw(4).to_vec()
    );
    assert_eq!(
        one(lddw(5).to_vec(), 5, "1", ENUMVAL_VALUE),
        lddw(9).to_vec()
    );
    assert_eq!(one(vec![mov(1)], 5, "1", ENUMVAL_EXISTS), vec![mov(1)]);
}

#[test]
fn unresolvable_relocations_are_poisoned_and_named() {
    let insns = [vec![mov(0), ldx(SIZE_W, 16)], lddw(5).to_vec()].concat();
    let mut prog = program(
        insns,
        vec![
            (1, 4, "0:4", FIELD_BYTE_OFFSET),
            (2, 8, "0:0", FIELD_BYTE_OFFSET),
        ],
    );
    let fixups = relocate(&prog).unwrap();
    core::apply(&mut prog, fixups);
    let poison = RawInsn {
        code: CLASS_JMP | JMP_CALL,
        dst: 0,
        src: 0,
        off: 0,
        imm: POISON_HELPER,
    };
    assert_eq!(prog.insns[1..], [poison, poison, poison]);
    let first = prog.unresolved_core_at(1).expect("slot 1 poisoned");
    assert_eq!(
        first.to_string(),
        "instruction 1: unresolved CO-RE relocation #0 (field byte offset of struct foo___local::missing): no matching target in test target"
    );
    // Both halves of a poisoned lddw explain themselves.
    assert_eq!(prog.unresolved_core_at(3).map(|u| u.index), Some(1));
    assert!(prog.unresolved_core_at(0).is_none());
}

#[test]
fn ambiguous_candidates_are_an_error() {
    let mut btf = target().btf().types()[1..].to_vec();
    btf.push(strukt("foo___v2", 8, vec![member("a", 1, 32, 0)]));
    let kernel = TargetBtf::new(Btf::from_types(btf), "two foos");
    let context = TargetBtf::context();
    let prog = program(vec![ldx(SIZE_W, 0)], vec![(0, 4, "0:0", FIELD_BYTE_OFFSET)]);
    let err = core::relocate(
        &prog,
        &local(),
        &CoreTargets {
            context: &context,
            kernel: Ok(&kernel),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ambiguity"), "{err}");
}

#[test]
fn malformed_records_are_errors_naming_the_relocation() {
    let deep = "0:".repeat(70);
    let cases: Vec<(Vec<RawInsn>, u32, &str, u32, &str)> = vec![
        (vec![mov(0)], 4, "0:0", 99, "unknown relocation kind"),
        (vec![mov(0)], 4, "0:9", FIELD_BYTE_OFFSET, "member 9"),
        (
            vec![mov(0)],
            4,
            "zero",
            FIELD_BYTE_OFFSET,
            "not a list of indices",
        ),
        (
            vec![mov(0)],
            4,
            "",
            FIELD_BYTE_OFFSET,
            "empty access string",
        ),
        (
            vec![mov(0)],
            999,
            "0:0",
            FIELD_BYTE_OFFSET,
            "does not exist",
        ),
        (vec![mov(0)], 0, "0", TYPE_EXISTS, "void"),
        (vec![mov(0)], 4, "0:1", TYPE_EXISTS, "not `0`"),
        (vec![mov(0)], 5, "7", ENUMVAL_VALUE, "names no enumerator"),
        (vec![mov(0)], 5, "0:1", ENUMVAL_VALUE, "names no enumerator"),
        (vec![mov(0)], 4, "0", ENUMVAL_VALUE, "non-enum"),
        (vec![mov(0)], 7, "0:0", FIELD_BYTE_OFFSET, "anonymous"),
        (vec![mov(7)], 4, "0:0", FIELD_BYTE_OFFSET, "expected 0"),
        (
            vec![ldx(SIZE_W, 3)],
            4,
            "0:0",
            FIELD_BYTE_OFFSET,
            "expected 0",
        ),
        (
            vec![ldx(SIZE_W, 8)],
            4,
            "0:2",
            FIELD_BYTE_OFFSET,
            "accesses 4 bytes",
        ),
        (
            vec![RawInsn {
                code: CLASS_JMP,
                dst: 0,
                src: 0,
                off: 0,
                imm: 0,
            }],
            4,
            "0:0",
            FIELD_BYTE_OFFSET,
            "cannot carry",
        ),
        (
            vec![RawInsn {
                code: CLASS_ALU64 | 0xb8,
                dst: 0,
                src: 1,
                off: 0,
                imm: 0,
            }],
            4,
            "0:0",
            FIELD_BYTE_OFFSET,
            "register operand",
        ),
        (
            vec![mov(0)],
            4,
            &deep[..139],
            FIELD_BYTE_OFFSET,
            "more than 64",
        ),
    ];
    for (insns, type_id, access, kind, needle) in cases {
        let prog = program(insns, vec![(0, type_id, access, kind)]);
        let err = relocate(&prog).expect_err(needle).to_string();
        assert!(err.contains(needle), "{access} kind {kind}: {err}");
        assert!(
            err.contains("program `prog` (section `xdp`), instruction 0: CO-RE relocation #0"),
            "{err}"
        );
    }
    // A relocation past the last instruction.
    let prog = program(vec![mov(0)], vec![(5, 4, "0:0", FIELD_BYTE_OFFSET)]);
    assert!(relocate(&prog)
        .unwrap_err()
        .to_string()
        .contains("past the end"));
}

#[test]
fn no_kernel_btf_is_reported_only_when_needed() {
    let context = TargetBtf::context();
    let targets = CoreTargets {
        context: &context,
        kernel: Err("no kernel BTF here"),
    };
    // xdp_md is one of bpfjet's own context types: no kernel needed.
    let ctx_local = Btf::from_types(vec![
        int("unsigned long long", 8, false),
        strukt(
            "xdp_md___mine",
            16,
            vec![member("data", 1, 0, 0), member("data_end", 1, 64, 0)],
        ),
    ]);
    let mut prog = program(
        vec![ldx(SIZE_DW, 8)],
        vec![(0, 2, "0:1", FIELD_BYTE_OFFSET)],
    );
    let fixups = core::relocate(&prog, &ctx_local, &targets).unwrap();
    core::apply(&mut prog, fixups);
    assert_eq!(prog.insns, vec![ldx(SIZE_W, 4)], "uapi offset, 4-byte load");
    let prog = program(vec![mov(0)], vec![(0, 4, "0:0", FIELD_BYTE_OFFSET)]);
    let err = core::relocate(&prog, &local(), &targets)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no kernel BTF here"), "{err}");
}

#[test]
fn compiled_object_relocates_its_xdp_md_view_against_the_context() {
    let obj = common::load("core");
    let prog = obj.program("core_prog").unwrap();
    assert!(prog.core_relos.len() >= 8, "{:?}", prog.core_relos);
    assert!(
        prog.unresolved_core.is_empty(),
        "{:?}",
        prog.unresolved_core
    );
    // Every context load is now a 4-byte load at a uapi offset.
    let insns = common::decode(prog);
    for r in &prog.core_relos {
        let raw = prog.insns[r.slot];
        if raw.code & 0x07 == CLASS_LDX && r.kind == FIELD_BYTE_OFFSET {
            assert_eq!(
                raw.code & 0x18,
                SIZE_W,
                "slot {}: {:?}",
                r.slot,
                insns[r.slot]
            );
            assert!(
                [0, 4, 8, 12].contains(&raw.off),
                "slot {}: {:?}",
                r.slot,
                insns[r.slot]
            );
        }
    }
}

#[test]
fn subprogram_relocations_apply_to_every_caller() {
    let obj = common::load("core");
    for name in ["core_prog", "core_prog2"] {
        let prog = obj.program(name).unwrap();
        let callee = prog
            .func_info
            .iter()
            .find(|f| f.name == "queue_of")
            .unwrap_or_else(|| panic!("{name} calls queue_of"))
            .slot;
        let in_callee: Vec<_> = prog
            .core_relos
            .iter()
            .filter(|r| r.slot >= callee)
            .collect();
        assert_eq!(in_callee.len(), 2, "{name}: {:?}", prog.core_relos);
        // ingress_ifindex: local offset 20 (after two u64 and a u32), uapi 12.
        for r in in_callee {
            let insn = prog.insns[r.slot];
            let value = if insn.code & 0x07 == CLASS_LDX {
                insn.off as i64
            } else {
                insn.imm as i64
            };
            assert_eq!(value, 12, "{name} slot {}", r.slot);
        }
    }
}

#[test]
fn target_btf_files_are_read_raw_or_from_elf() {
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("core.o");
    std::fs::write(&elf, common::compile("core")).unwrap();
    let from_elf = TargetBtf::from_file(&elf).unwrap();
    assert!(from_elf
        .btf()
        .types()
        .iter()
        .any(|t| t.name() == "xdp_md___mine"));
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"\x7fELF junk").unwrap();
    let err = TargetBtf::from_file(&junk).unwrap_err().to_string();
    assert!(err.contains("junk"), "{err}");
}

#[test]
fn huge_types_overflow_into_errors_not_panics() {
    let huge = Btf::from_types(vec![
        int("unsigned long long", 8, false),
        BtfType::Array {
            elem: 1,
            index: 1,
            nelems: u32::MAX,
        },
        BtfType::Array {
            elem: 2,
            index: 1,
            nelems: 0x1000_0000,
        },
        strukt("giant", 0, vec![member("arr", 3, 0, 0)]),
    ]);
    let context = TargetBtf::context();
    let kernel = TargetBtf::new(huge.clone(), "huge");
    let targets = CoreTargets {
        context: &context,
        kernel: Ok(&kernel),
    };
    for access in ["1:0", "0:0:7", "0:0:268435455:5"] {
        let prog = program(vec![mov(0)], vec![(0, 4, access, FIELD_BYTE_OFFSET)]);
        // Any outcome but a panic; these sizes cannot be relocated sensibly.
        let _ = core::relocate(&prog, &huge, &targets);
    }
}
