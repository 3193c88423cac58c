//! `bpfjet conformance-plugin` driven exactly as the bpf_conformance runner
//! drives its plugin (Alan-Jowett/bpf_conformance, `bpf_conformance_run` and
//! its Boost.Process executor), on every vector of the suite:
//!
//! - argv: `PLUGIN [MEM] PLUGIN_OPTIONS... [--elf]`: MEM only when the test
//!   has memory, each byte as two hex digits and two spaces; the options
//!   string split at single spaces (here `--plugin_path bpfjet
//!   --plugin_options "conformance-plugin --engine E"`);
//! - stdin: the program in the same hex format and a newline, either the
//!   instructions or (`--elf true`) a relocatable BPF ELF object whose
//!   section `.text` holds one global function `main`, laid out as the
//!   runner's writer lays it out (symbols named in the section-name table);
//! - stdout: r0 in hex, read with `stoull(.., 16)`; a non-zero exit is an
//!   error whose text (stdout, else stderr) must equal the test's `-- error`.
//!
//! Prints the runner's own summary line per engine and mode (the JIT runs
//! the bytecode mode: reading the ELF is the same code for both engines).

mod support;

use bpfjet_isa::conformance::{self, ConformanceTest};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The runner's `_base_16_encode`: every byte as two hex digits, two spaces.
fn base16(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}  ")).collect()
}

/// The runner's program bytes: the `-- raw` words if the test has them,
/// else the assembled `-- asm`.
fn bytecode(test: &ConformanceTest) -> Result<Vec<u8>, String> {
    match &test.raw {
        Some(words) => Ok(words.iter().flat_map(|w| w.to_le_bytes()).collect()),
        None => bpfjet_isa::asm::assemble_bytes(&test.asm).map_err(|e| e.to_string()),
    }
}

/// A relocatable ELF64 (little endian, EM_BPF) with the code in `section`
/// and one `STB_GLOBAL STT_FUNC` symbol `main` covering it; `.symtab`
/// names come from `.shstrtab`, as the runner's ELFIO writer does.
fn elf_object(section: &str, code: &[u8]) -> Vec<u8> {
    const EHDR: usize = 64;
    const SHDR: usize = 64;
    const SYM: usize = 24;
    let mut strings = vec![0u8];
    let mut name = |s: &str| {
        let at = strings.len() as u32;
        strings.extend_from_slice(s.as_bytes());
        strings.push(0);
        at
    };
    let (n_symtab, n_code, n_shstrtab, n_main) = (
        name(".symtab"),
        name(section),
        name(".shstrtab"),
        name("main"),
    );
    let align8 = |n: usize| n.div_ceil(8) * 8;
    let code_off = EHDR;
    let symtab_off = align8(code_off + code.len());
    let strtab_off = symtab_off + 2 * SYM;
    let shdr_off = align8(strtab_off + strings.len());

    let mut out = Vec::new();
    // e_ident: ELF, 64-bit, little endian, version 1, System V.
    out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    out.extend_from_slice(&247u16.to_le_bytes()); // EM_BPF
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // e_entry
    out.extend_from_slice(&0u64.to_le_bytes()); // e_phoff
    out.extend_from_slice(&(shdr_off as u64).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    out.extend_from_slice(&(EHDR as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phentsize
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    out.extend_from_slice(&(SHDR as u16).to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes()); // e_shnum
    out.extend_from_slice(&3u16.to_le_bytes()); // e_shstrndx
    out.extend_from_slice(code);
    out.resize(symtab_off, 0);
    out.extend_from_slice(&[0u8; SYM]);
    out.extend_from_slice(&n_main.to_le_bytes());
    out.push(0x12); // STB_GLOBAL << 4 | STT_FUNC
    out.push(0);
    out.extend_from_slice(&2u16.to_le_bytes()); // in the code section
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(code.len() as u64).to_le_bytes());
    out.extend_from_slice(&strings);
    out.resize(shdr_off, 0);
    let mut shdr = |name: u32,
                    ty: u32,
                    flags: u64,
                    off: usize,
                    size: usize,
                    link: u32,
                    info: u32,
                    align: u64,
                    entsize: u64| {
        out.extend_from_slice(&name.to_le_bytes());
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes()); // sh_addr
        out.extend_from_slice(&(off as u64).to_le_bytes());
        out.extend_from_slice(&(size as u64).to_le_bytes());
        out.extend_from_slice(&link.to_le_bytes());
        out.extend_from_slice(&info.to_le_bytes());
        out.extend_from_slice(&align.to_le_bytes());
        out.extend_from_slice(&entsize.to_le_bytes());
    };
    shdr(0, 0, 0, 0, 0, 0, 0, 0, 0);
    shdr(n_symtab, 2, 0, symtab_off, 2 * SYM, 3, 1, 4, SYM as u64); // SHT_SYMTAB
    shdr(n_code, 1, 0x6, code_off, code.len(), 0, 0, 4, 0); // PROGBITS, ALLOC|EXECINSTR
    shdr(n_shstrtab, 3, 0, strtab_off, strings.len(), 0, 0, 1, 0); // SHT_STRTAB
    out
}

enum Outcome {
    Pass,
    Fail(String),
}

/// One test through the plugin, judged as the runner judges it.
fn run_one(test: &ConformanceTest, options: &str, elf: bool) -> Outcome {
    let code = match bytecode(test) {
        Ok(code) => code,
        Err(e) => return Outcome::Fail(format!("cannot build the program: {e}")),
    };
    let mut args: Vec<String> = Vec::new();
    if !test.mem.is_empty() {
        args.push(base16(&test.mem));
    }
    args.extend(options.split(' ').map(str::to_string));
    if elf {
        args.push("--elf".into());
    }
    let input = if elf {
        base16(&elf_object(".text", &code))
    } else {
        base16(&code)
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the plugin");
    let mut stdin = child.stdin.take().expect("piped");
    let _ = writeln!(stdin, "{input}");
    drop(stdin);
    let out = child.wait_with_output().expect("plugin output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut text = stdout.strip_suffix('\n').unwrap_or(&stdout).to_string();
    if !out.status.success() {
        if text.is_empty() {
            text = stderr.strip_suffix('\n').unwrap_or(&stderr).to_string();
        }
        return match &test.error {
            Some(want) if want.trim_end() == text.trim_end() => Outcome::Pass,
            Some(want) => Outcome::Fail(format!("error {text:?}, expected {want:?}")),
            None => Outcome::Fail(format!(
                "plugin returned error code {:?} and output {text}",
                out.status.code()
            )),
        };
    }
    match (u64::from_str_radix(text.trim(), 16), test.result) {
        (Ok(got), Some(want)) if got == want => Outcome::Pass,
        (Ok(got), Some(want)) => Outcome::Fail(format!("returned {got:#x}, expected {want:#x}")),
        (Ok(got), None) => Outcome::Fail(format!("returned {got:#x}, expected an error")),
        (Err(_), _) => Outcome::Fail(format!("return value {text:?} is no hex number")),
    }
}

fn run_suite(dir: &Path, engine: &str, elf: bool) -> Vec<String> {
    let files = conformance::data_files(dir).expect("conformance vectors");
    let options = format!("conformance-plugin --engine {engine}");
    let (mut passed, mut failures) = (0, Vec::new());
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path).expect("reading a vector");
        let test = conformance::parse(&name, &text).expect("parsing a vector");
        match run_one(&test, &options, elf) {
            Outcome::Pass => passed += 1,
            Outcome::Fail(why) => failures.push(format!("FAIL: {name} {why}")),
        }
    }
    support::announce(&format!(
        "conformance runner protocol, engine {engine}, {}: Passed {passed} out of {} tests.",
        if elf { "--elf true" } else { "bytecode" },
        files.len()
    ));
    failures
}

#[test]
fn the_runner_protocol_passes_the_suite() {
    let dir = conformance::default_dir();
    if !dir.is_dir() {
        support::skip(
            "conformance runner protocol",
            &format!("no vectors at {} (set CONFORMANCE)", dir.display()),
        );
        return;
    }
    // Both engines in both modes, except the JIT in ELF mode: reading the
    // ELF does not depend on the engine. The suites run side by side (each
    // test is a process of its own).
    let suites = [("interp", false), ("interp", true), ("jit", false)];
    let failures: Vec<String> = std::thread::scope(|scope| {
        let running: Vec<_> = suites
            .iter()
            .map(|&(engine, elf)| {
                let dir = &dir;
                scope.spawn(move || run_suite(dir, engine, elf))
            })
            .collect();
        running
            .into_iter()
            .flat_map(|t| t.join().expect("a suite thread"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn elf_mode_errors_are_clear() {
    // The runner's --xdp_prolog puts the program in `xdp` and reads an xdp_md.
    let code = bpfjet_isa::asm::assemble_bytes("mov %r0, 1\nexit\n").expect("assembles");
    let run = support::bpfjet(
        &["conformance-plugin", "--elf"],
        base16(&elf_object("xdp", &code)).as_bytes(),
    );
    assert_eq!(run.code, Some(1));
    assert!(run.stdout.contains("--xdp_prolog"), "{}", run.stdout);
    let run = support::bpfjet(&["conformance-plugin", "--elf"], b"00  11  22  ");
    assert_eq!(run.code, Some(1));
    assert!(run.stdout.contains("ELF"), "{}", run.stdout);
    // Memory first, as the runner passes it, without --elf.
    let run = support::bpfjet(
        &["01  02  ", "conformance-plugin"],
        base16(&bpfjet_isa::asm::assemble_bytes("ldxb %r0, [%r1+1]\nexit\n").expect("assembles"))
            .as_bytes(),
    );
    assert_eq!(
        (run.code, run.stdout.trim()),
        (Some(0), "2"),
        "{}",
        run.stderr
    );
}
