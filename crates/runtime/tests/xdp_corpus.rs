//! Every corpus program (`examples/xdp`, built by `make -C examples`) over
//! its fixture cases: the action must be `expected_action`, the output
//! `expected_out` where given, and where the kernel is available, action,
//! output and maps must equal the kernel's.

mod xdp_support;

use bpfjet_maps::state::{load_state, MapState};
use bpfjet_runtime::xdp::action;
use bpfjet_runtime::TestRunOptions;
use serde_json::Value;
use std::path::{Path, PathBuf};
use xdp_support::*;

fn read_hex(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    bpfjet_maps::state::parse_hex(&digits).unwrap()
}

fn state_path(fixtures: &Path, spec: &str) -> PathBuf {
    match spec.strip_prefix("build:") {
        Some(rest) => workspace().join("build/examples").join(rest),
        None => fixtures.join(spec),
    }
}

/// Maps holding timestamps for a case (`bpf_ktime_get_ns`): compared
/// between engines for every other case.
fn timestamped_maps(program: &str, case: &str) -> &'static [&'static str] {
    match program {
        // UDP flows record when they were last seen.
        "katran_lb" if case.contains("udp") => &["lru_mapping", "fallback_cache"],
        "rate_limiter" => &["buckets"],
        _ => &[],
    }
}

fn run_corpus(name: &str) {
    let object = corpus_object(name);
    let fixtures = workspace().join(format!("examples/xdp/fixtures/{name}"));
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("cases.json")).unwrap())
            .unwrap();
    let prog = cases["prog"].as_str().unwrap();
    for case in cases["cases"].as_array().unwrap() {
        let label = format!("{name}/{}", case["name"].as_str().unwrap());
        let state: MapState = match case["state"].as_str() {
            Some(s) => load_state(&state_path(&fixtures, s)).unwrap(),
            None => MapState::new(),
        };
        let pkt = read_hex(&fixtures.join(case["packet"].as_str().unwrap()));
        let repeat = case["repeat"].as_u64().unwrap_or(1) as u32;
        let ours = load_ours(&object, Some(&state));
        let case_name = case["name"].as_str().unwrap();
        // The kernel comparison runs the case itself (once per engine).
        let kernel = if repeat == 1 {
            load_kernel(&object, Some(&state), &label)
        } else {
            None
        };
        let result = match &kernel {
            Some(k) => {
                let ignore = timestamped_maps(name, case_name);
                run_both(&ours, Some(k), prog, &pkt, 0, ignore, &label).0
            }
            None => ours
                .test_run(
                    prog,
                    &pkt,
                    &TestRunOptions {
                        repeat,
                        ..TestRunOptions::default()
                    },
                )
                .unwrap_or_else(|e| panic!("{label}: {e}")),
        };
        let expected = case["expected_action"].as_str().unwrap();
        assert_eq!(
            action::name(result.retval),
            Some(expected),
            "{label}: action"
        );
        if let Some(out) = case["expected_out"].as_str() {
            assert_eq!(
                result.data_out,
                read_hex(&fixtures.join(out)),
                "{label}: output"
            );
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
