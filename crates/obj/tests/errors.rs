//! Objects that cannot be loaded, and the errors that say why.

mod common;

use bpfjet_obj::ObjError;
use common::{compile, compile_with};

#[test]
fn not_an_elf() {
    assert!(matches!(
        bpfjet_obj::load(b"hello world, not ELF"),
        Err(ObjError::NotElf)
    ));
    assert!(matches!(bpfjet_obj::load(b""), Err(ObjError::NotElf)));
}

#[test]
fn not_a_bpf_object() {
    let bytes = compile_with(
        "no_license",
        &["-target", "x86_64-linux-gnu", "-D__x86_64__"],
    );
    match bpfjet_obj::load(&bytes) {
        Err(ObjError::NotBpf { machine }) => assert_eq!(machine, 62),
        other => panic!("expected NotBpf, got {other:?}"),
    }
}

#[test]
fn missing_license_is_the_empty_license() {
    // libbpf loads such objects with license "" (no GPL-only helpers).
    let obj = bpfjet_obj::load(&compile("no_license")).expect("loads like libbpf");
    assert_eq!(obj.license, "");
    assert!(!bpfjet_obj::license_is_gpl_compatible(&obj.license));
    assert!(bpfjet_obj::license_is_gpl_compatible("Dual BSD/GPL"));
}

#[test]
fn call_to_undefined_function() {
    match bpfjet_obj::load(&compile("undefined_call")) {
        Err(ObjError::UndefinedFunction { program, function }) => {
            assert_eq!(
                (program.as_str(), function.as_str()),
                ("caller", "not_here")
            );
        }
        other => panic!("expected UndefinedFunction, got {other:?}"),
    }
}

#[test]
fn load_file_reports_the_path() {
    let err = bpfjet_obj::load_file("/nonexistent/x.o").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/x.o"));
}

#[test]
fn map_reference_with_an_upper_half_is_refused_as_the_kernel_refuses_it() {
    // libbpf leaves a map reference's second slot as compiled and the
    // kernel refuses one that is not 0 ("unrecognized bpf_ld_imm64
    // insn"): set it in the first map reference of a program.
    let mut bytes = compile("maps_btf");
    let at = first_lddw_against(&bytes, ".maps");
    assert_eq!(bytes[at], 0x18, "an lddw");
    bytes[at + 12..at + 16].copy_from_slice(&7u32.to_le_bytes());
    let err = bpfjet_obj::load(&bytes).unwrap_err().to_string();
    assert!(
        err.contains("second slot's imm") && err.contains("unrecognized bpf_ld_imm64"),
        "{err}"
    );
}

/// File offset of the first relocated instruction of a program whose
/// relocation's symbol is in section `target`.
fn first_lddw_against(bytes: &[u8], target: &str) -> usize {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let elf = object::File::parse(bytes).unwrap();
    let target = elf.section_by_name(target).unwrap().index();
    elf.sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .find_map(|s| {
            let file_off = s.file_range()?.0;
            s.relocations().find_map(|(off, r)| match r.target() {
                object::RelocationTarget::Symbol(i) => {
                    let sym = elf.symbol_by_index(i).ok()?;
                    (sym.section_index() == Some(target)).then_some(file_off + off)
                }
                _ => None,
            })
        })
        .expect("a relocation against the section") as usize
}

#[test]
fn function_pointer_lddw_against_data_is_refused_as_libbpf_refuses_it() {
    // An `lddw` compiled with src = BPF_PSEUDO_FUNC whose relocation is
    // against data: libbpf fails it ("unexpected relo for insn").
    let mut bytes = compile("globals");
    let at = first_lddw_against(&bytes, ".data");
    assert_eq!(bytes[at], 0x18, "an lddw");
    bytes[at + 1] = (bytes[at + 1] & 0x0f) | (4 << 4);
    let err = bpfjet_obj::load(&bytes).unwrap_err().to_string();
    assert!(
        err.contains("function pointer") && err.contains("which is not code"),
        "{err}"
    );
}
