//! Every corpus program (`examples/xdp`) over every fixture case: the JIT
//! (helpers and maps inlined) and the interpreter's verified fast path must
//! produce what the reference interpreter (bounds-checked) produces — the
//! action, the output frame and the maps afterwards (maps holding
//! timestamps excepted for the cases that write them).
//!
//! The objects come from `make -C examples`; when they cannot be built the
//! test fails and says to run scripts/setup.sh.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::LoadedObject;

mod fixtures;
use fixtures::*;

fn run_corpus(name: &str) {
    let path = corpus_object(name);
    let object = bpfjet_obj::load_file(&path).unwrap();
    let (prog, cases) = corpus_cases(name);
    let prog = prog.as_str();
    let jit_opts = JitOptions::default();
    for Case {
        label,
        state,
        packet: pkt,
        run_opts,
        ignore,
    } in cases
    {
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
