//! Programs linked with their subprograms: calls, callbacks, globals, kfuncs.

mod common;

use std::collections::{BTreeSet, HashMap};

use bpfjet_isa::opcode::{CALL_KFUNC, PSEUDO_MAP_IDX_VALUE};
use bpfjet_isa::{CallTarget, Insn, LdDwKind};
use bpfjet_obj::ProgKind;
use common::{call_graph, compile, decode, load};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

/// Symbol name → (section name, value, size), read independently with `object`.
fn symbols(bytes: &[u8]) -> HashMap<String, (String, u64, u64)> {
    let file = object::File::parse(bytes).expect("parse");
    file.symbols()
        .filter_map(|s| {
            let section = file.section_by_index(s.section_index()?).ok()?;
            Some((
                s.name().ok()?.to_string(),
                (section.name().ok()?.to_string(), s.address(), s.size()),
            ))
        })
        .collect()
}

fn edges(prog: &bpfjet_obj::Program) -> Vec<(String, String)> {
    call_graph(prog)
        .into_iter()
        .map(|(_, a, b)| (a, b))
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn subprograms_nested_calls_and_callbacks() {
    let bytes = compile("calls");
    let obj = bpfjet_obj::load(&bytes).unwrap();
    let syms = symbols(&bytes);
    let names: Vec<_> = obj
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.section.as_str(), p.kind.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("prog_frags", "xdp.frags", ProgKind::XdpFrags),
            // libbpf 1.x: `xdp/custom` is no XDP section name (see prog_kind.rs).
            (
                "prog_custom",
                "xdp/custom",
                ProgKind::Unsupported("unknown".into())
            ),
        ]
    );
    assert_eq!(obj.license, "Dual BSD/GPL");

    let frags = obj.program("prog_frags").unwrap();
    let funcs: Vec<_> = frags.func_info.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        funcs,
        ["prog_frags", "loop_cb", "shared_global", "middle", "leaf"]
    );
    assert_eq!(frags.func_info[0].slot, 0);
    // Self-contained: exactly the reached functions, each copied whole.
    let total: u64 = funcs.iter().map(|f| syms[*f].2 / 8).sum();
    assert_eq!(frags.insns.len() as u64, total);
    for f in &frags.func_info {
        assert!(f.btf_type_id.is_some(), "{} has no BTF func info", f.name);
    }
    assert_eq!(
        edges(frags),
        [
            pair("prog_frags", "loop_cb"),
            pair("prog_frags", "shared_global"),
            pair("shared_global", "middle"),
            pair("middle", "leaf"),
            pair("middle", "leaf"),
        ]
    );
    // The bpf_loop callback is a function pointer, not a call.
    let insns = decode(frags);
    assert!(insns.iter().any(|i| matches!(
        i,
        Insn::LdDw {
            kind: LdDwKind::Func,
            ..
        }
    )));
    // bpf_loop itself stays a helper call.
    assert!(insns.contains(&Insn::Call(CallTarget::Helper(181))));

    let custom = obj.program("prog_custom").unwrap();
    let funcs: Vec<_> = custom.func_info.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(funcs, ["prog_custom", "shared_global", "leaf", "middle"]);
    assert_eq!(
        edges(custom),
        [
            pair("prog_custom", "shared_global"),
            pair("prog_custom", "leaf"),
            pair("shared_global", "middle"),
            pair("middle", "leaf"),
            pair("middle", "leaf"),
        ]
    );
    // Both programs reference the shared subprogram's map by the same index.
    let counter = obj.map_index("counter").unwrap();
    for prog in &obj.programs {
        let refs: Vec<_> = decode(prog)
            .into_iter()
            .filter_map(|i| match i {
                Insn::LdDw {
                    kind: LdDwKind::MapIdx,
                    imm,
                    ..
                } => Some(imm as usize),
                _ => None,
            })
            .collect();
        assert_eq!(refs, [counter], "{}", prog.name);
    }
}

#[test]
fn global_data_maps_and_value_offsets() {
    let bytes = compile("globals");
    let obj = bpfjet_obj::load(&bytes).unwrap();
    let syms = symbols(&bytes);
    let m = |n: &str| &obj.maps[obj.map_index(n).unwrap_or_else(|| panic!("no map {n}"))];

    let rodata = m(".rodata");
    assert_eq!(
        (rodata.map_type, rodata.key_size, rodata.max_entries),
        (bpfjet_maps::MapType::Array, 4, 1)
    );
    assert!(rodata.frozen);
    assert_ne!(rodata.flags & bpfjet_maps::spec::flags::RDONLY_PROG, 0);
    let image = rodata.initial_data.as_ref().unwrap();
    assert_eq!(image.len(), rodata.value_size as usize);
    let off = syms["ro_limit"].1 as usize;
    assert_eq!(
        u32::from_le_bytes(image[off..off + 4].try_into().unwrap()),
        1500
    );
    let off = syms["ro_table"].1 as usize + 8 * 3;
    assert_eq!(
        u64::from_le_bytes(image[off..off + 8].try_into().unwrap()),
        40
    );

    let data = m(".data");
    assert!(!data.frozen);
    assert_eq!(data.flags & bpfjet_maps::spec::flags::RDONLY_PROG, 0);
    let image = data.initial_data.as_ref().unwrap();
    let off = syms["data_counter"].1 as usize;
    assert_eq!(
        u64::from_le_bytes(image[off..off + 8].try_into().unwrap()),
        7
    );

    let bss = m(".bss");
    assert_eq!(
        bss.initial_data.as_deref(),
        Some(&vec![0; bss.value_size as usize][..])
    );
    assert!(bss.value_size >= 8 + 12);

    let custom = m(".data.custom");
    assert_eq!(custom.value_size, 8);
    assert_eq!(
        custom.initial_data.as_deref(),
        Some(&0x1122334455667788u64.to_le_bytes()[..])
    );

    // Every global reference names the right section map and the variable's offset.
    let mut seen = BTreeSet::new();
    for prog in &obj.programs {
        for (pc, slot) in prog.insns.iter().enumerate() {
            if slot.code == bpfjet_isa::opcode::LDDW && slot.src == PSEUDO_MAP_IDX_VALUE {
                let map = &obj.maps[slot.imm as usize];
                seen.insert((map.name.clone(), prog.insns[pc + 1].imm as u64));
            }
        }
        decode(prog);
    }
    let expect: BTreeSet<_> = [
        "ro_limit",
        "ro_table",
        "data_counter",
        "data_second",
        "bss_drops",
        "bss_pad",
        "custom_hits",
        "hidden_seq",
    ]
    .iter()
    .map(|v| (syms[*v].0.clone(), syms[*v].1))
    .collect();
    assert_eq!(seen, expect);
    // The static variable is addressed through the section symbol plus an
    // offset in the instruction; make sure that offset is not at zero.
    assert_ne!(syms["hidden_seq"].1, 0);

    let prog = obj.program("globals").unwrap();
    let funcs: Vec<_> = prog.func_info.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(funcs, ["globals", "bump"]);
}

#[test]
fn line_info_maps_slots_to_source() {
    let obj = load("globals");
    let prog = obj.program("globals").unwrap();
    assert!(!prog.line_info.is_empty());
    assert!(prog.line_info.windows(2).all(|w| w[0].slot <= w[1].slot));
    assert!(prog
        .line_info
        .iter()
        .all(|l| l.file.ends_with("globals.c") && l.slot < prog.insns.len()));
    let hits = prog
        .line_info
        .iter()
        .find(|l| l.source.contains("custom_hits++"))
        .expect("line of custom_hits++");
    assert!(hits.line > 0);
    // The record points at the instructions of that statement: the lddw of
    // the `.data.custom` map follows it closely.
    let custom = obj.map_index(".data.custom").unwrap() as i32;
    let lddw = prog
        .insns
        .iter()
        .position(|s| s.src == PSEUDO_MAP_IDX_VALUE && s.imm == custom);
    assert!(
        lddw.is_some_and(|p| p >= hits.slot && p < hits.slot + 4),
        "{hits:?} {lddw:?}"
    );
    // Lines of the subprogram are placed after the program's own code.
    let bump = prog.func_info.iter().find(|f| f.name == "bump").unwrap();
    let in_bump = prog.line_at(bump.slot).unwrap();
    assert!(
        in_bump.source.contains("bump") || in_bump.source.contains("bss_pad"),
        "{in_bump:?}"
    );
}

#[test]
fn kfunc_externs_become_kfunc_calls() {
    let obj = load("kfunc");
    assert_eq!(obj.kfuncs, ["bpf_foo", "bpf_bar"]);
    let prog = obj.program("kfuncs").unwrap();
    let kfunc_calls: Vec<_> = decode(prog)
        .into_iter()
        .filter_map(|i| match i {
            Insn::Call(CallTarget::Kfunc(k)) => Some(obj.kfuncs[k as usize].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(kfunc_calls, ["bpf_foo", "bpf_foo", "bpf_bar"]);
    assert!(prog
        .insns
        .iter()
        .filter(|s| s.src == CALL_KFUNC && s.code == 0x85)
        .all(|s| s.off == 0));
    assert_eq!(edges(prog), [pair("kfuncs", "helper_user")]);
}

#[test]
fn unsupported_program_types_are_named() {
    let obj = load("unsupported");
    let kinds: Vec<_> = obj
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("pass", ProgKind::Xdp),
            ("classify", ProgKind::Unsupported("sched_cls".into()))
        ]
    );
    assert_eq!(obj.runnable_program(None).unwrap().name, "pass");
    let err = obj.runnable_program(Some("classify")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("classify") && msg.contains("tc") && msg.contains("sched_cls"),
        "{msg}"
    );
    assert!(matches!(
        obj.runnable_program(Some("nope")),
        Err(bpfjet_obj::ObjError::NoSuchProgram(_))
    ));
}
