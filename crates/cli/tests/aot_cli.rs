//! `bpfjet compile` and `test-run --aot` / `--engine jit` through the binary:
//! the corpus compiled ahead of time must do on every fixture case what the
//! interpreter and the kernel (the oracle; root only, skipped loudly
//! otherwise) do: same action, output frame and maps. A damaged or
//! mismatched artifact is a clear error with exit status 2.
//!
//! katran_lb's map dump is 80 MB of JSON (its 2.1M-entry `ch_rings`), so its
//! maps are compared on its first case only; action and frame on all.

mod support;

use bpfjet_maps::state::MapState;
use serde_json::Value;
use support::fixtures::{self, Case, Fixture};
use support::{bpfjet, Scratch};

/// What one run printed with `--json`.
#[derive(Debug, PartialEq)]
struct Observed {
    retval: u64,
    data_out: String,
    maps: Option<MapState>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn run_case(
    fixture: &Fixture,
    case: &Case,
    scratch: &Scratch,
    engine: &[&str],
    dump: bool,
) -> Observed {
    let packet = scratch.file(&format!("{}.pkt.hex", case.name), hex(&case.packet));
    let object = fixture.object.display().to_string();
    let state = case.state.display().to_string();
    let repeat = case.repeat.to_string();
    let mut args = vec![
        "test-run",
        &object,
        "--prog",
        &fixture.prog,
        "--data",
        &packet,
        "--maps",
        &state,
        "--repeat",
        &repeat,
        "--json",
    ];
    if dump {
        args.push("--dump-maps");
    }
    args.extend_from_slice(engine);
    let run = bpfjet(&args, b"");
    assert_eq!(
        run.code,
        Some(0),
        "{}/{} {engine:?}: {}",
        fixture.program,
        case.name,
        run.stderr
    );
    let mut report: Value = serde_json::from_str(&run.stdout).expect("test-run --json output");
    let maps = report.get_mut("maps").map(|m| {
        let mut maps: MapState = serde_json::from_value(m.take()).expect("maps in STATE.json form");
        support::time_fields::mask(&fixture.program, &mut maps);
        maps
    });
    Observed {
        retval: report["retval"].as_u64().expect("retval"),
        data_out: report["data_out"].as_str().expect("data_out").to_string(),
        maps,
    }
}

fn fixture(name: &str) -> Fixture {
    fixtures::all(&support::corpus_build_dir())
        .into_iter()
        .find(|f| f.program == name)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

fn compile(fixture: &Fixture, scratch: &Scratch) -> String {
    let out = scratch.path(&format!("{}.aot", fixture.program));
    let object = fixture.object.display().to_string();
    let run = bpfjet(&["compile", &object, "-o", &out], b"");
    assert_eq!(run.code, Some(0), "compile {object}: {}", run.stderr);
    assert!(run.stdout.contains(&fixture.prog), "{}", run.stdout);
    out
}

fn kernel_usable() -> bool {
    match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip("AOT vs kernel comparison", &why);
            false
        }
    }
}

/// AOT code vs the interpreter and the kernel, case by case.
fn aot_matches(program: &str) {
    let fixture = fixture(program);
    let scratch = Scratch::new(&format!("aot-{program}"));
    let artifact = compile(&fixture, &scratch);
    let kernel = kernel_usable();
    for (i, case) in fixture.cases.iter().enumerate() {
        let dump = program != "katran_lb" || i == 0;
        let label = format!("{program}/{}", case.name);
        let interp = run_case(&fixture, case, &scratch, &["--engine", "interp"], dump);
        let aot = run_case(&fixture, case, &scratch, &["--aot", &artifact], dump);
        assert_eq!(aot, interp, "{label}: AOT vs interp");
        assert_eq!(
            report_action(aot.retval),
            case.expected_action,
            "{label}: the fixture's kernel-confirmed action"
        );
        if kernel {
            let k = run_case(&fixture, case, &scratch, &["--engine", "kernel"], dump);
            assert_eq!(aot, k, "{label}: AOT vs kernel");
        }
    }
}

fn report_action(retval: u64) -> &'static str {
    match retval {
        0 => "ABORTED",
        1 => "DROP",
        2 => "PASS",
        3 => "TX",
        4 => "REDIRECT",
        _ => "UNKNOWN",
    }
}

#[test]
fn aot_katran_lb_matches_interp_and_kernel() {
    aot_matches("katran_lb");
}

#[test]
fn aot_firewall_matches_interp_and_kernel() {
    aot_matches("firewall");
}

/// `--engine jit` on every fixture of the corpus equals the interpreter.
#[test]
fn jit_engine_matches_interp_on_every_fixture() {
    let scratch = Scratch::new("jit-engine");
    for fixture in fixtures::all(&support::corpus_build_dir()) {
        for (i, case) in fixture.cases.iter().enumerate() {
            let dump = fixture.program != "katran_lb" || i == 0;
            let interp = run_case(&fixture, case, &scratch, &["--engine", "interp"], dump);
            let jit = run_case(&fixture, case, &scratch, &["--engine", "jit"], dump);
            assert_eq!(
                jit, interp,
                "{}/{}: --engine jit vs interp",
                fixture.program, case.name
            );
        }
    }
}

/// Damaged, foreign and misused artifacts: exit 2 and a message saying why.
#[test]
fn bad_artifacts_are_refused() {
    let firewall = fixture("firewall");
    let katran = fixture("katran_lb");
    let scratch = Scratch::new("aot-errors");
    let artifact = compile(&firewall, &scratch);
    let case = &firewall.cases[0];
    let packet = scratch.file("p.pkt.hex", hex(&case.packet));
    let fw = firewall.object.display().to_string();
    let lb = katran.object.display().to_string();
    let expect_error = |args: &[&str], what: &str| {
        let run = bpfjet(args, b"");
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(what),
            "{args:?}: expected {what:?} in: {}",
            run.stderr
        );
    };

    let bytes = std::fs::read(&artifact).unwrap();
    let mut damaged = bytes.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x10;
    let damaged = scratch.file("damaged.aot", damaged);
    expect_error(
        &["test-run", &fw, "--data", &packet, "--aot", &damaged],
        "damaged file",
    );
    let truncated = scratch.file("truncated.aot", &bytes[..bytes.len() / 3]);
    expect_error(
        &["test-run", &fw, "--data", &packet, "--aot", &truncated],
        "not a usable bpfjet AOT artifact",
    );
    let not_aot = scratch.file("elf.aot", std::fs::read(&firewall.object).unwrap());
    expect_error(
        &["test-run", &fw, "--data", &packet, "--aot", &not_aot],
        "bad magic",
    );
    expect_error(
        &[
            "test-run",
            &lb,
            "--prog",
            &katran.prog,
            "--data",
            &packet,
            "--aot",
            &artifact,
        ],
        "different BPF object",
    );
    expect_error(
        &[
            "test-run", &fw, "--data", &packet, "--aot", &artifact, "--engine", "interp",
        ],
        "--aot runs native code",
    );
    let missing = scratch.path("missing.aot");
    expect_error(
        &["test-run", &fw, "--data", &packet, "--aot", &missing],
        "reading AOT artifact",
    );
    expect_error(
        &[
            "compile",
            &fw,
            "-o",
            &scratch.path("x.aot"),
            "--prog",
            "nope",
        ],
        "no program \"nope\"",
    );
}

/// `bpfjet run --aot` on generated traffic: the artifact's code, reported
/// as the JIT, with the interpreter's verdicts.
#[test]
fn run_with_aot_matches_interp() {
    let scratch = Scratch::new("run-aot");
    for name in ["firewall", "router_tailcall"] {
        let fixture = fixture(name);
        let artifact = compile(&fixture, &scratch);
        let object = fixture.object.display().to_string();
        let run = |engine: &[&str]| -> Value {
            let instance = format!("aot-cli-{name}-{}-{}", engine.len(), std::process::id());
            let mut args = vec![
                "run",
                &object,
                "--gen",
                "proto=udp,flows=64,count=20000",
                "--json",
                "--name",
                &instance,
            ];
            args.extend_from_slice(engine);
            let out = bpfjet(&args, b"");
            assert_eq!(out.code, Some(0), "run {engine:?}: {}", out.stderr);
            serde_json::from_str(&out.stdout).expect("run --json output")
        };
        let aot = run(&["--aot", &artifact]);
        let interp = run(&["--engine", "interp"]);
        assert_eq!(aot["engine"], "jit", "{name}: {aot}");
        assert_eq!(aot["packets"], 20000, "{name}: {aot}");
        assert_eq!(aot["actions"], interp["actions"], "{name}");
    }
}

/// The JIT's disk cache holds no addresses of the process that filled it: a
/// second `test-run --engine jit` process loads every object from it
/// (nothing new is written, nothing rewritten).
#[test]
fn jit_cache_is_shared_across_processes() {
    let fixture = fixture("firewall");
    let scratch = Scratch::new("jit-cache");
    let cache_home = scratch.path("xdg-cache");
    let case = &fixture.cases[0];
    let packet = scratch.file("p.pkt.hex", hex(&case.packet));
    let object = fixture.object.display().to_string();
    let state = case.state.display().to_string();
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bpfjet"))
            .args([
                "test-run", &object, "--data", &packet, "--maps", &state, "--engine", "jit",
            ])
            .env("XDG_CACHE_HOME", &cache_home)
            .output()
            .expect("running bpfjet");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let objects = || -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
        let dir = std::path::Path::new(&cache_home).join("bpfjet");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok())
            .map(|e| (e.path(), e.metadata().unwrap().modified().unwrap()))
            .collect();
        files.sort();
        files
    };
    run();
    let first = objects();
    assert!(!first.is_empty(), "the first run cached nothing");
    run();
    assert_eq!(objects(), first, "the second process compiled again");
}

/// `compile --emit`: the assembly and IR the JIT makes of each program,
/// where an inlined helper leaves no call behind.
#[test]
fn emit_prints_the_code_the_jit_makes() {
    let dir = Scratch::new("emit");
    let obj = dir.compile_c(
        "emit",
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); \
         __type(key, __u32); __type(value, __u64); } counts SEC(\".maps\");\n\
         SEC(\"xdp\") int counted(struct xdp_md *c) { __u32 k = 2; \
         __u64 *v = bpf_map_lookup_elem(&counts, &k); if (v) *v += 1; return XDP_PASS; }\n\
         SEC(\"xdp\") int passed(struct xdp_md *c) { return XDP_PASS; }\n\
         char _license[] SEC(\"license\") = \"GPL\";\n",
    );
    let asm = bpfjet(&["compile", &obj, "--emit", "asm"], b"");
    assert_eq!(asm.code, Some(0), "{}", asm.stderr);
    for name in ["counted", "passed"] {
        assert!(
            asm.stdout.contains(&format!("; program {name}\n")),
            "{}",
            asm.stdout
        );
    }
    // The array lookup is compiled in: no call in either program.
    let calls: Vec<&str> = asm
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("call"))
        .collect();
    assert!(calls.is_empty(), "calls left: {calls:?}");
    let out = dir.path("counted.ll");
    let ir = bpfjet(
        &[
            "compile", &obj, "--emit", "ir", "--prog", "counted", "-o", &out,
        ],
        b"",
    );
    assert_eq!(ir.code, Some(0), "{}", ir.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.starts_with("; program counted\n") && text.contains("define "),
        "{text}"
    );
    assert!(!text.contains("; program passed"), "{text}");
    let lifted = bpfjet(
        &["compile", &obj, "--emit", "lifted-ir", "--prog", "passed"],
        b"",
    );
    assert_eq!(lifted.code, Some(0), "{}", lifted.stderr);
    assert!(lifted.stdout.contains("define "), "{}", lifted.stdout);
    let unknown = bpfjet(&["compile", &obj, "--emit", "asm", "--prog", "nope"], b"");
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no program \"nope\""),
        "{}",
        unknown.stderr
    );
}
