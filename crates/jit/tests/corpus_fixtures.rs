//! Every corpus program (`examples/xdp`) over every fixture case: the JIT
//! (helpers and maps inlined) and the interpreter's verified fast path must
//! produce what the reference interpreter (bounds-checked) produces — the
//! action, the output frame and the maps afterwards (maps holding
//! timestamps excepted for the cases that write them).
//!
//! The objects come from `make -C examples`; when they cannot be built the
//! test says so on stderr and passes without checking anything.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::{load_state, parse_hex, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The built corpus object, or None (with a loud message) when it cannot be built.
fn corpus_object(name: &str) -> PathBuf {
    let path = workspace().join(format!("build/examples/xdp/{name}.o"));
    let fixture_state = workspace().join("build/examples/xdp/fixtures/katran_lb/state.json");
    if !path.exists() || !fixture_state.exists() {
        let built = Command::new("make")
            .arg("-C")
            .arg(workspace().join("examples"))
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            built,
            "{name}: `make -C examples` failed (run scripts/setup.sh for clang-19)"
        );
    }
    assert!(
        path.exists(),
        "{name}: {} missing after make",
        path.display()
    );
    path
}

fn read_hex(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    parse_hex(&digits).unwrap()
}

fn state_path(fixtures: &Path, spec: &str) -> PathBuf {
    match spec.strip_prefix("build:") {
        Some(rest) => workspace().join("build/examples").join(rest),
        None => fixtures.join(spec),
    }
}

/// Maps that record `bpf_ktime_get_ns` for some cases.
fn timestamped_maps(program: &str, case: &str) -> &'static [&'static str] {
    match program {
        "katran_lb" if case.contains("udp") => &["lru_mapping", "fallback_cache"],
        "rate_limiter" => &["buckets"],
        _ => &[],
    }
}

fn without(mut state: MapState, ignore: &[&str]) -> MapState {
    for name in ignore {
        state.remove(*name);
    }
    state
}

fn options(state: &MapState) -> ObjectOptions {
    ObjectOptions {
        state: Some(state.clone()),
        ..ObjectOptions::default()
    }
}

fn run_corpus(name: &str) {
    let path = corpus_object(name);
    let object = bpfjet_obj::load_file(&path).unwrap();
    let fixtures = workspace().join(format!("examples/xdp/fixtures/{name}"));
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("cases.json")).unwrap())
            .unwrap();
    let prog = cases["prog"].as_str().unwrap();
    let jit_opts = JitOptions::default();
    for case in cases["cases"].as_array().unwrap() {
        let case_name = case["name"].as_str().unwrap();
        let label = format!("{name}/{case_name}");
        let state: MapState = match case["state"].as_str() {
            Some(s) => load_state(&state_path(&fixtures, s)).unwrap(),
            None => MapState::new(),
        };
        let pkt = read_hex(&fixtures.join(case["packet"].as_str().unwrap()));
        let run_opts = TestRunOptions {
            repeat: case["repeat"].as_u64().unwrap_or(1) as u32,
            ..TestRunOptions::default()
        };
        let ignore = timestamped_maps(name, case_name);

        let reference = LoadedObject::load(&object, &options(&state)).unwrap();
        let want = reference
            .test_run(prog, &pkt, &run_opts)
            .unwrap_or_else(|e| panic!("{label}: interpreter: {e}"));
        let want_maps = without(reference.dump_state().unwrap(), ignore);

        for engine in [XdpEngine::Jit, XdpEngine::Interp] {
            let fast = JitObject::load(&object, &options(&state), &jit_opts).unwrap();
            let got = fast
                .test_run(prog, &pkt, &run_opts, engine)
                .unwrap_or_else(|e| panic!("{label} ({engine:?}): {e}"));
            assert_eq!(got.retval, want.retval, "{label} ({engine:?}): action");
            assert_eq!(
                got.data_out, want.data_out,
                "{label} ({engine:?}): data_out"
            );
            let got_maps = without(fast.loaded().dump_state().unwrap(), ignore);
            assert_eq!(got_maps, want_maps, "{label} ({engine:?}): maps");
        }
    }
}

#[test]
fn cms_sketch() {
    run_corpus("cms_sketch");
}

#[test]
fn firewall() {
    run_corpus("firewall");
}

#[test]
fn icmp_echo() {
    run_corpus("icmp_echo");
}

#[test]
fn katran_lb() {
    run_corpus("katran_lb");
}

#[test]
fn rate_limiter() {
    run_corpus("rate_limiter");
}

#[test]
fn ringbuf_sampler() {
    run_corpus("ringbuf_sampler");
}

#[test]
fn router_tailcall() {
    run_corpus("router_tailcall");
}

#[test]
fn xdp_redirect() {
    run_corpus("xdp_redirect");
}
