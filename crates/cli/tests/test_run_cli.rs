//! `bpfjet test-run` from the outside: bad input fails with exit code 2 and
//! one clear line on stderr (never a panic), a completed run exits 0
//! whatever the action, and the JSON and text reports carry what DESIGN.md
//! promises. Runs through the kernel are skipped loudly without privileges.

mod support;

use bpfjet_maps::state::parse_hex;
use support::fixtures::read_hex_frame;
use support::{bpfjet, BpfjetRun, Scratch};

fn object(name: &str) -> String {
    support::corpus_build_dir()
        .join("xdp")
        .join(format!("{name}.o"))
        .display()
        .to_string()
}

fn fixture(program: &str, file: &str) -> String {
    support::repo_root()
        .join("examples/xdp/fixtures")
        .join(program)
        .join(file)
        .display()
        .to_string()
}

/// Exit code 2, one line on stderr containing every `needles`, no panic.
fn assert_usage_error(run: &BpfjetRun, needles: &[&str]) {
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(
        run.stderr.trim().lines().count(),
        1,
        "not one line: {}",
        run.stderr
    );
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "{needle:?} not in: {}",
            run.stderr
        );
    }
    assert!(run.stdout.is_empty(), "stdout on error: {}", run.stdout);
}

fn test_run(args: &[&str]) -> BpfjetRun {
    let mut all = vec!["test-run"];
    all.extend_from_slice(args);
    bpfjet(&all, b"")
}

fn kernel_or_skip(test: &str) -> bool {
    match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip(test, &why);
            false
        }
    }
}

#[test]
fn malformed_elf_object() {
    let dir = Scratch::new("malformed-elf");
    let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
    bytes.resize(40, 0);
    let obj = dir.file("broken.o", &bytes);
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let run = test_run(&[&obj, "--data", &pkt]);
    assert_usage_error(&run, &["object", "broken.o"]);

    let text = dir.file("text.o", "not an object\n");
    let run = test_run(&[&text, "--data", &pkt]);
    assert_usage_error(&run, &["text.o", "not an ELF"]);

    let missing = dir.path("missing.o");
    let run = test_run(&[&missing, "--data", &pkt]);
    assert_usage_error(&run, &["missing.o"]);
}

#[test]
fn truncated_or_bad_packet_files() {
    let dir = Scratch::new("bad-packet");
    let obj = object("icmp_echo");
    let cases = [
        (
            dir.file("odd.pkt.hex", "02 00 00 00 00 01\n02 00 0\n"),
            vec!["line 2", "odd number"],
        ),
        (
            dir.file("word.hex", "02 00 xy\n"),
            vec!["line 1", "not hex"],
        ),
        (
            dir.file("short.hex", "02 00 00 00 00 01 # too short\n"),
            vec!["6 bytes", "14-byte"],
        ),
        (
            dir.file("short.bin", [0u8; 10]),
            vec!["10 bytes", "14-byte"],
        ),
        (dir.file("empty.bin", []), vec!["0 bytes"]),
        (dir.path("absent.bin"), vec!["reading packet", "absent.bin"]),
    ];
    for (pkt, needles) in &cases {
        let run = test_run(&[&obj, "--data", pkt]);
        assert_usage_error(&run, needles);
    }
}

#[test]
fn unknown_or_ambiguous_program() {
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let run = test_run(&[&object("icmp_echo"), "--prog", "nope", "--data", &pkt]);
    assert_usage_error(&run, &["no program \"nope\"", "icmp_echo (xdp)"]);

    // Four programs and no --prog: name them all.
    let run = test_run(&[&object("router_tailcall"), "--data", &pkt]);
    assert_usage_error(
        &run,
        &[
            "--prog",
            "xdp_router",
            "handle_ipv4",
            "handle_ipv6",
            "handle_arp",
        ],
    );
}

#[test]
fn bad_state_files() {
    let dir = Scratch::new("bad-state");
    let obj = object("icmp_echo");
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let cases = [
        (
            dir.file("syntax.json", "{\"echo_stats\": [ {\"key\": }"),
            vec!["map state", "syntax.json"],
        ),
        (
            dir.file("shape.json", "[1, 2]"),
            vec!["map state", "shape.json"],
        ),
        (
            dir.file("unknown.json", r#"{"no_such_map": []}"#),
            vec!["no map named \"no_such_map\"", "echo_stats"],
        ),
        (
            dir.file(
                "hex.json",
                r#"{"echo_stats": [{"key": "0000000g", "value": "00"}]}"#,
            ),
            vec!["\"echo_stats\"", "entry 0", "hex"],
        ),
        (dir.path("absent.json"), vec!["map state", "absent.json"]),
    ];
    for engine in ["interp", "kernel"] {
        for (state, needles) in &cases {
            let run = test_run(&[&obj, "--data", &pkt, "--maps", state, "--engine", engine]);
            assert_usage_error(&run, needles);
        }
    }
}

#[test]
fn unavailable_engine_and_cpu() {
    let obj = object("icmp_echo");
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    // The JIT runs only verified programs.
    let run = test_run(&[&obj, "--data", &pkt, "--engine", "jit", "--unverified"]);
    assert_usage_error(&run, &["--engine jit", "verified"]);

    let run = test_run(&[&obj, "--data", &pkt, "--cpu", "4096"]);
    assert_usage_error(&run, &["--cpu 4096", "possible CPUs"]);

    // Argument errors come from clap, with its usage text, also exit 2.
    let run = test_run(&[&obj, "--data", &pkt, "--engine", "ebpf"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("interp"), "{}", run.stderr);
    let run = test_run(&[&obj]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("--data"), "{}", run.stderr);
}

/// Without privileges the kernel engine says why, instead of failing deep
/// inside libbpf. Needs root to drop them (setpriv to nobody).
#[test]
fn kernel_engine_without_privileges() {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the effective user of the process looking at it.
    if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        support::skip(
            "kernel_engine_without_privileges",
            "needs root to drop privileges",
        );
        return;
    }
    let obj = object("icmp_echo");
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_bpfjet"))
        .args(["test-run", &obj, "--data", &pkt, "--engine", "kernel"])
        .output();
    let Ok(out) = out else {
        support::skip("kernel_engine_without_privileges", "setpriv not found");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Permission denied") && stderr.contains("reading") {
        support::skip(
            "kernel_engine_without_privileges",
            "files not readable as nobody",
        );
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("engine 'kernel' cannot run here"),
        "{stderr}"
    );
    assert!(stderr.contains("root"), "{stderr}");
}

/// The report of a run as JSON.
fn json_run(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["test-run", "--json"];
    all.extend_from_slice(args);
    let run = bpfjet(&all, b"");
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

#[test]
fn kernel_json_report() {
    if !kernel_or_skip("kernel_json_report") {
        return;
    }
    let obj = object("icmp_echo");
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let report = json_run(&[&obj, "--data", &pkt, "--engine", "kernel"]);
    assert_eq!(report["retval"], 3);
    assert_eq!(report["action"], "TX");
    assert!(report["duration_ns"].is_u64());
    assert!(report.get("maps").is_none(), "maps without --dump-maps");
    let expected = read_hex_frame(fixture("icmp_echo", "echo_request.out.hex").as_ref());
    let data_out = parse_hex(report["data_out"].as_str().unwrap()).unwrap();
    assert_eq!(data_out, expected);

    let report = json_run(&[&obj, "--data", &pkt, "--engine", "kernel", "--dump-maps"]);
    let stats = &report["maps"]["echo_stats"];
    assert_eq!(stats[0]["key"], "00000000");
    assert!(stats[0]["values"].is_array(), "{stats}");
}

#[test]
fn kernel_text_report_and_non_pass_actions_exit_0() {
    if !kernel_or_skip("kernel_text_report_and_non_pass_actions_exit_0") {
        return;
    }
    let obj = object("firewall");
    let pkt = fixture("firewall", "blocked_v4.pkt.hex");
    let state = fixture("firewall", "state.json");
    let run = test_run(&[&obj, "--data", &pkt, "--maps", &state, "--engine", "kernel"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.starts_with("action:      DROP (retval 1)\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("(unchanged)"), "{}", run.stdout);
    assert!(run.stdout.contains("  0000: "), "{}", run.stdout);
}

#[test]
fn kernel_context_flags() {
    if !kernel_or_skip("kernel_context_flags") {
        return;
    }
    let obj = object("icmp_echo");
    let pkt = fixture("icmp_echo", "echo_request.pkt.hex");
    let base = [obj.as_str(), "--data", pkt.as_str(), "--engine", "kernel"];
    // Loopback queue 0 is the kernel's own default, so always valid.
    let mut args = base.to_vec();
    args.extend(["--ingress-ifindex", "1", "--rx-queue", "0"]);
    assert_eq!(json_run(&args)["action"], "TX");
    // A queue the device does not have: the kernel refuses, exit 2.
    let mut args = vec!["test-run"];
    args.extend(base);
    args.extend(["--ingress-ifindex", "1", "--rx-queue", "4000"]);
    let run = bpfjet(&args, b"");
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("test run"), "{}", run.stderr);
}

/// The same run on both engines through the CLI must print the same
/// report, maps included (`--dump-maps`), apart from the timing.
fn engines_agree(test: &str, program: &str, prog: Option<&str>, packet: &str, repeat: &str) {
    let obj = object(program);
    let pkt = fixture(program, packet);
    let state = fixture(program, "state.json");
    let mut args = vec![
        obj.as_str(),
        "--data",
        &pkt,
        "--maps",
        &state,
        "--dump-maps",
    ];
    args.extend(["--repeat", repeat]);
    if let Some(p) = prog {
        args.extend(["--prog", p]);
    }
    let report = |engine: &str| {
        let mut a = args.clone();
        a.extend(["--engine", engine]);
        let mut r = json_run(&a);
        let o = r.as_object_mut().unwrap();
        o.remove("duration_ns");
        o.remove("engine");
        r
    };
    let interp = report("interp");
    if !kernel_or_skip(test) {
        return;
    }
    assert_eq!(interp, report("kernel"));
}

#[test]
fn cli_engines_agree_on_icmp_echo() {
    engines_agree(
        "cli_engines_agree_on_icmp_echo",
        "icmp_echo",
        None,
        "echo_request.pkt.hex",
        "1",
    );
}

#[test]
fn cli_engines_agree_on_tail_calls_from_state() {
    engines_agree(
        "cli_engines_agree_on_tail_calls_from_state",
        "router_tailcall",
        Some("xdp_router"),
        "v4_routed.pkt.hex",
        "1",
    );
}

#[test]
fn cli_engines_agree_on_repeat() {
    engines_agree(
        "cli_engines_agree_on_repeat",
        "cms_sketch",
        None,
        "heavy_hitter.pkt.hex",
        "1100",
    );
}
