//! Native tail calls (and the helpers the JIT calls directly) for programs of
//! a `JitObject`, exercised by `tests/progs/native_calls.c`: every run on the
//! JIT must produce the action, packet and maps the reference interpreter
//! produces, including after the control plane rewrites PROG_ARRAY slots,
//! and the tail calls must have left the helper trampoline.
//!
//! The C file is compiled with clang-19 at test time; without it the test
//! fails and says to run scripts/setup.sh.

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::PathBuf;

mod fixtures;

fn object() -> PathBuf {
    fixtures::test_prog("native_calls")
}

const XDP_PASS: u32 = 2;
const XDP_DROP: u32 = 1;
const XDP_TX: u32 = 3;

/// The reference interpreter and the JIT, each on its own copy of the
/// object's maps.
struct Pair {
    reference: LoadedObject,
    fast: JitObject,
}

impl Pair {
    fn new() -> Pair {
        let obj = bpfjet_obj::load_file(object()).unwrap();
        let opts = ObjectOptions::default();
        Pair {
            reference: LoadedObject::load(&obj, &opts).unwrap(),
            fast: JitObject::load(&obj, &opts, &JitOptions::uncached()).unwrap(),
        }
    }

    /// Run `prog` on a packet whose first byte is `slot` on both engines;
    /// both must agree on everything. Returns the action and the `trail`
    /// counters (programs entered, tail calls that fell through, last
    /// recorded value).
    fn run(&self, prog: &str, slot: u8) -> (u32, [u64; 3]) {
        self.run_on(prog, &[slot])
    }

    /// [`Pair::run`] on a 64-byte packet that begins with `head`.
    fn run_on(&self, prog: &str, head: &[u8]) -> (u32, [u64; 3]) {
        let mut packet = vec![0u8; 64];
        packet[..head.len()].copy_from_slice(head);
        let slot = head[0];
        let opts = TestRunOptions::default();
        let want = self.reference.test_run(prog, &packet, &opts).unwrap();
        let got = self
            .fast
            .test_run(prog, &packet, &opts, XdpEngine::Jit)
            .unwrap();
        let what = format!("{prog} on {head:?} (slot {slot})");
        assert_eq!(got.retval, want.retval, "{what}: action");
        assert_eq!(got.data_out, want.data_out, "{what}: packet");
        assert_eq!(
            self.fast.loaded().dump_state().unwrap(),
            self.reference.dump_state().unwrap(),
            "{what}: maps"
        );
        (got.retval, self.take_trail())
    }

    /// Read and clear the `trail` array on both sides.
    fn take_trail(&self) -> [u64; 3] {
        let mut out = [0u64; 3];
        for (i, v) in out.iter_mut().enumerate() {
            let key = (i as u32).to_ne_bytes();
            for loaded in [&self.reference, self.fast.loaded()] {
                let map = loaded.map("trail").unwrap();
                let bytes = map.lookup_copy(&key).unwrap();
                *v = u64::from_ne_bytes(bytes.try_into().unwrap());
                map.update(&key, &0u64.to_ne_bytes(), 0, 0).unwrap();
            }
        }
        out
    }

    /// Point PROG_ARRAY slot `slot` at `prog` (None: empty it) on both sides.
    fn set_slot(&self, slot: u32, prog: Option<&str>) {
        for loaded in [&self.reference, self.fast.loaded()] {
            let map = loaded.map("jmp").unwrap();
            let key = slot.to_ne_bytes();
            match prog {
                Some(name) => {
                    let id = loaded
                        .program_names()
                        .iter()
                        .position(|n| *n == name)
                        .unwrap() as u32;
                    map.update(&key, &id.to_ne_bytes(), 0, 0).unwrap();
                }
                None => map.delete(&key).unwrap(),
            }
        }
    }
}

#[test]
fn a_chain_stops_after_33_tail_calls() {
    let p = Pair::new();
    // chain enters itself: the entry run plus 33 tail calls, then the 34th
    // attempt falls through and the program returns XDP_TX.
    assert_eq!(p.run("chain", 0), (XDP_TX, [34, 1, 0]));
    // The limit is per run.
    assert_eq!(p.run("chain", 0), (XDP_TX, [34, 1, 0]));
    assert_eq!(p.run("dispatch", 0), (XDP_TX, [34, 1, 0]));
}

#[test]
fn empty_and_out_of_range_slots_fall_through() {
    let p = Pair::new();
    assert_eq!(p.run("dispatch", 1), (XDP_PASS, [1, 1, 0]));
    assert_eq!(p.run("dispatch", 4), (XDP_PASS, [1, 1, 0]));
    assert_eq!(p.run("dispatch", 255), (XDP_PASS, [1, 1, 0]));
}

#[test]
fn the_target_replaces_the_caller() {
    let p = Pair::new();
    assert_eq!(p.run("dispatch", 2), (XDP_DROP, [2, 0, 64]));
    // From a subprogram: the leaf's XDP_DROP (1) becomes the subprogram's
    // result and the entry function continues.
    assert_eq!(p.run("from_subprog", 0), (XDP_PASS, [101, 0, 1001]));
}

#[test]
fn slots_are_read_on_every_call() {
    let p = Pair::new();
    assert_eq!(p.run("dispatch", 3).0, XDP_PASS);
    p.set_slot(3, Some("leaf"));
    assert_eq!(p.run("dispatch", 3), (XDP_DROP, [2, 0, 64]));
    p.set_slot(3, Some("chain"));
    assert_eq!(p.run("dispatch", 3), (XDP_TX, [34, 1, 0]));
    p.set_slot(3, None);
    assert_eq!(p.run("dispatch", 3), (XDP_PASS, [1, 1, 0]));
}

const XDP_ABORTED: u32 = 0;
const XDP_REDIRECT: u32 = 4;
const BPF_F_BROADCAST: u8 = 1 << 3;

#[test]
fn redirect_map_matches_the_helper() {
    let p = Pair::new();
    for loaded in [&p.reference, p.fast.loaded()] {
        let devs = loaded.map("devs").unwrap();
        devs.update(&1u32.to_ne_bytes(), &1u32.to_ne_bytes(), 0, 0)
            .unwrap();
    }
    let cases: &[([u8; 4], u32)] = &[
        ([0, 1, 0, 0], XDP_REDIRECT),
        ([0, 2, XDP_PASS as u8, 0], XDP_PASS),
        ([0, 2, 0, 0], XDP_ABORTED),
        ([0, 2, BPF_F_BROADCAST, 0], XDP_REDIRECT),
        ([0, 1, 0, 1], XDP_ABORTED),
        ([0, 9, XDP_DROP as u8, 0], XDP_DROP),
    ];
    for (head, action) in cases {
        let (got, trail) = p.run_on("redirect_dev", head);
        assert_eq!((got, trail[2]), (*action, u64::from(*action)), "{head:?}");
    }
    assert_eq!(p.run_on("redirect_plain", &[0, 5, 0]).0, XDP_REDIRECT);
    assert_eq!(p.run_on("redirect_plain", &[0, 5, 1]).0, XDP_ABORTED);
}

#[test]
fn inner_maps_of_a_map_in_map() {
    let p = Pair::new();
    const ENOENT: u64 = 2u64.wrapping_neg();
    // Insert, count up, in two inner maps, delete, delete again.
    assert_eq!(p.run_on("inner_maps", &[0, 7, 0]), (XDP_PASS, [0, 0, 500]));
    assert_eq!(p.run_on("inner_maps", &[0, 7, 0]), (XDP_PASS, [0, 0, 2]));
    assert_eq!(p.run_on("inner_maps", &[1, 7, 0]), (XDP_PASS, [0, 0, 500]));
    assert_eq!(p.run_on("inner_maps", &[0, 7, 0]), (XDP_PASS, [0, 0, 3]));
    assert_eq!(p.run_on("inner_maps", &[0, 7, 1]), (XDP_TX, [0, 0, 0]));
    assert_eq!(p.run_on("inner_maps", &[0, 7, 1]), (XDP_TX, [0, 0, ENOENT]));
    // An empty outer slot.
    assert_eq!(p.run_on("inner_maps", &[2, 7, 0]).0, XDP_DROP);
}

#[test]
fn ring_buffer_samples_match_the_helpers() {
    let p = Pair::new();
    // Each record: 8-byte header + 16 bytes; discarded ones are consumed
    // space too until the consumer skips them (the query counts bytes
    // between consumer and producer).
    let (action, first) = p.run_on("ring", &[0, 1, 2]);
    assert_eq!((action, first[2]), (XDP_PASS, 24));
    assert_eq!(p.run_on("ring", &[1, 3, 4]).1[2], 48);
    assert_eq!(p.run_on("ring", &[2, 5]).1[2], 64);
    // Too large for the ring: NULL, nothing reserved.
    assert_eq!(p.run_on("ring", &[3]), (XDP_PASS, [0, 0, 64]));
}

#[test]
fn tail_calls_and_xdp_helpers_leave_the_trampoline() {
    let p = Pair::new();
    for prog in [
        "chain",
        "dispatch",
        "from_subprog",
        "redirect_dev",
        "redirect_plain",
        "inner_maps",
    ] {
        let ir = p.fast.dump(prog, DumpStage::OptimizedIr, true).unwrap();
        assert_eq!(
            ir.matches("@bpfjet_jit_helper(").count(),
            0,
            "{prog} still calls the trampoline: {ir}"
        );
    }
    // Only bpf_ringbuf_query, which has no direct form, is left.
    let ir = p.fast.dump("ring", DumpStage::OptimizedIr, true).unwrap();
    let calls = ir
        .lines()
        .filter(|l| l.contains("call ") && l.contains("@bpfjet_jit_helper("))
        .count();
    assert_eq!(calls, 1, "ring: {ir}");
}

/// The data plane learns where a redirect goes from what the redirect
/// helpers record in the run's environment; code compiled with those
/// helpers built in must record the same targets as the interpreter.
#[test]
fn data_plane_runner_sees_the_redirect_target() {
    use bpfjet_runtime::worker::{RedirectTo, XdpRunnerFactory};
    use bpfjet_runtime::MemoryMode;
    let obj = bpfjet_obj::load_file(object()).unwrap();
    let loaded = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    loaded
        .map("devs")
        .unwrap()
        .update(&1u32.to_ne_bytes(), &7u32.to_ne_bytes(), 0, 0)
        .unwrap();
    let compiled = bpfjet_jit::CompiledPrograms::compile(&loaded, &JitOptions::uncached());
    // (head, expected action, expected target)
    let cases: &[(&str, [u8; 4], u32, Option<RedirectTo>)] = &[
        (
            "redirect_dev",
            [0, 1, 0, 0],
            XDP_REDIRECT,
            Some(RedirectTo::Ifindex(7)),
        ),
        ("redirect_dev", [0, 2, XDP_PASS as u8, 0], XDP_PASS, None),
        (
            "redirect_dev",
            [0, 2, BPF_F_BROADCAST, 0],
            XDP_REDIRECT,
            Some(RedirectTo::Broadcast {
                exclude_ingress: false,
            }),
        ),
        (
            "redirect_plain",
            [0, 5, 0, 0],
            XDP_REDIRECT,
            Some(RedirectTo::Ifindex(5)),
        ),
        ("redirect_plain", [0, 5, 1, 0], XDP_ABORTED, None),
    ];
    for (prog, head, action, target) in cases {
        let proof = loaded.verified(prog).unwrap().unwrap().proof;
        let factory = XdpRunnerFactory::new(&loaded, prog, MemoryMode::Verified(proof)).unwrap();
        let jit = compiled.program(prog).unwrap().clone();
        let engine: bpfjet_runtime::worker::EngineEntry =
            Box::new(move |state, env, md| jit.run(state, env, &[md]));
        let mut engines = vec![
            ("interp", factory.runner(0, 1, 0, None, None).unwrap()),
            (
                "jit",
                factory
                    .runner(0, 1, 0, Some(engine), Some(compiled.program_table()))
                    .unwrap(),
            ),
        ];
        for (name, runner) in &mut engines {
            let mut buf = vec![0u8; 256 + 64];
            buf[256..260].copy_from_slice(head);
            let verdict = runner.run(&mut buf, 256, 256 + 64).unwrap();
            assert_eq!(
                (verdict.action, verdict.redirect),
                (*action, *target),
                "{name}: {prog} on {head:?}"
            );
        }
    }
}
