//! The negative corpus (tests/corpus/*.s: one unsafe behaviour per case plus
//! its corrected twin) against the kernel verifier, with and without
//! CAP_PERFMON. Every verdict must equal the expected one and the kernel's.

mod common;

use bpfjet_verifier::{verify_raw, Policy, VerifyEnv};
use common::*;

fn ours(v: &Variant, policy: Policy) -> (bool, String) {
    let mut env = VerifyEnv::new(&v.maps).with_policy(policy);
    env.spin_locks = &v.locks;
    match verify_raw(&slots(&v.bytes), &env) {
        Ok(_) => (true, String::new()),
        Err(e) => (false, format!("{} ({})", e.rule, e.message)),
    }
}

fn mark(b: bool) -> &'static str {
    if b {
        "accept"
    } else {
        "reject"
    }
}

#[test]
fn negative_corpus_matches_kernel() {
    let corpus = load_corpus();
    let cases: std::collections::BTreeSet<&str> = corpus.iter().map(|v| v.case.as_str()).collect();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        bpfjet_testsupport::report_skip(format!(
            "kernel comparison ({why}); checking bpfjet against the expected verdicts only"
        ));
    }
    // Kernel verdicts without CAP_PERFMON, all loaded in one unprivileged thread.
    let unpriv_kernel: Option<Vec<(bool, String)>> = if kernel.is_ok() {
        type Prog = (Vec<u8>, Vec<bpfjet_maps::MapSpec>, Vec<Option<u32>>);
        let progs: Vec<Prog> = corpus
            .iter()
            .map(|v| (v.bytes.clone(), v.maps.clone(), v.locks.clone()))
            .collect();
        match unprivileged(move || {
            progs
                .iter()
                .map(|(b, m, l)| kernel_verdict(b, m, l))
                .collect::<Vec<_>>()
        }) {
            Ok(v) => Some(v),
            Err(e) => {
                bpfjet_testsupport::report_skip(format!("unprivileged kernel verdicts ({e})"));
                None
            }
        }
    } else {
        None
    };
    let mut failures = Vec::new();
    println!(
        "{:<34} {:<5} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
        "case", "var", "exp", "bpfjet", "kernel", "exp-u", "bj-u", "kern-u"
    );
    let mut agree = 0;
    let mut compared = 0;
    for (i, v) in corpus.iter().enumerate() {
        let (p, pwhy) = ours(v, Policy::Privileged);
        let (u, uwhy) = ours(v, Policy::Unprivileged);
        let k = kernel
            .is_ok()
            .then(|| kernel_verdict(&v.bytes, &v.maps, &v.locks));
        let ku = unpriv_kernel.as_ref().map(|list| list[i].clone());
        let show = |x: &Option<(bool, String)>| x.as_ref().map_or("-", |(b, _)| mark(*b));
        println!(
            "{:<34} {:<5} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
            v.case,
            v.name,
            mark(v.expect.0),
            mark(p),
            show(&k),
            mark(v.expect.1),
            mark(u),
            show(&ku)
        );
        let mut check = |what: &str, got: bool, want: bool, why: &str| {
            if got != want {
                failures.push(format!(
                    "{} {}: {what}: got {}, want {} {why}",
                    v.case,
                    v.name,
                    mark(got),
                    mark(want)
                ));
            }
        };
        check("bpfjet privileged vs expected", p, v.expect.0, &pwhy);
        check("bpfjet unprivileged vs expected", u, v.expect.1, &uwhy);
        if let Some((kv, kwhy)) = &k {
            compared += 1;
            agree += usize::from(*kv == p);
            check(
                "kernel vs bpfjet (privileged)",
                *kv,
                p,
                &format!("kernel: {kwhy} | bpfjet: {pwhy}"),
            );
        }
        if let Some((kv, kwhy)) = &ku {
            compared += 1;
            agree += usize::from(*kv == u);
            check(
                "kernel vs bpfjet (unprivileged)",
                *kv,
                u,
                &format!("kernel: {kwhy} | bpfjet: {uwhy}"),
            );
        }
    }
    println!(
        "{} cases, {} programs; verdicts compared with the kernel: {compared}, agreeing: {agree}",
        cases.len(),
        corpus.len()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
