//! Hand-off maps kept per thread (pairwise fusion's internalisation,
//! `bpfjet_runtime::tracing::thread_maps`) answer every map call as the map
//! does: the same pair of programs (compiled from C at test time) runs on
//! contexts the test builds, with the map kept per thread and with the
//! map, on the interpreter and the JIT, and every return code, every value
//! found and the final map contents must be the same. The sequence covers
//! recursion on one thread (overwrite, BPF_NOEXIST, BPF_EXIST), E2BIG with
//! more threads holding an entry than the map has entries, entries left by
//! calls that never return, and a call site that is not where the spec
//! says (the map then stays a map). The JIT runs both ways of reaching the
//! slot: the slot operations compiled as loads and stores (the default;
//! the optimized code of both programs must hold no call for them) and
//! direct calls to the runtime's natives.

use bpfjet_jit::{dump_tracing, load_tracing_with, DumpStage, JitOptions, TracingJit};
use bpfjet_runtime::tracing::{ProbeSite, PtRegs, ThreadMapSpec, TracingObject, TracingOptions};
use std::sync::{Arc, Barrier};

const SRC: &str = r#"
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 3);
         __type(key, __u64); __type(value, __u64); } held SEC(".maps");
/* runlog[i]: what the i-th run of this thread saw, written by the test's
   thread number (r8) and step (r9). */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 256);
         __type(key, __u32); __type(value, __s64); } runlog SEC(".maps");

static __always_inline void put(struct pt_regs *ctx, __s64 v)
{
    __u32 slot = (ctx->r8 * 32 + ctx->r9) & 255;
    __s64 *p = bpf_map_lookup_elem(&runlog, &slot);
    if (p) *p = v;
}

SEC("uprobe/libc.so.6:work")
int entry(struct pt_regs *ctx)
{
    __u64 id = bpf_get_current_pid_tgid(), v = PT_REGS_PARM1(ctx);
    put(ctx, bpf_map_update_elem(&held, &id, &v, PT_REGS_PARM2(ctx)));
    return 0;
}

SEC("uretprobe/libc.so.6:work")
int leave(struct pt_regs *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u64 *v = bpf_map_lookup_elem(&held, &id);
    long d = bpf_map_delete_elem(&held, &id);
    put(ctx, (v ? (__s64)*v * 1000 : -1000) + d);
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

const ANY: u64 = 0;
const NOEXIST: u64 = 1;
const EXIST: u64 = 2;

/// What a thread does: (entry with value and flags) or (exit).
#[derive(Clone, Copy)]
enum Step {
    Enter(u64, u64),
    Leave,
}

fn run(t: &TracingObject, thread: u64, steps: &[Step]) {
    let (entry, leave) = (
        t.program_id("entry").unwrap(),
        t.program_id("leave").unwrap(),
    );
    let site = ProbeSite::default();
    for (i, s) in steps.iter().enumerate() {
        let mut regs = match *s {
            Step::Enter(v, flags) => PtRegs::with_args(&[v, flags]),
            Step::Leave => PtRegs::default(),
        };
        regs.r8 = thread;
        regs.r9 = i as u64;
        let prog = if matches!(s, Step::Enter(..)) {
            entry
        } else {
            leave
        };
        t.run_regs(prog, &mut regs, &site);
    }
}

/// The log and the values left in `held` (sorted: thread ids differ
/// between runs).
fn outcome(t: &TracingObject) -> (Vec<i64>, Vec<u64>) {
    t.write_back_thread_maps().unwrap();
    let log = t.loaded().map("runlog").unwrap();
    let logged = (0..256u32)
        .map(|i| {
            let v = log.lookup_copy(&i.to_ne_bytes()).unwrap();
            i64::from_ne_bytes(v[..8].try_into().unwrap())
        })
        .collect();
    let mut left: Vec<u64> = t
        .loaded()
        .map("held")
        .unwrap()
        .entries()
        .unwrap()
        .iter()
        .map(|e| u64::from_ne_bytes(e.values[0][..8].try_into().unwrap()))
        .collect();
    left.sort_unstable();
    (logged, left)
}

fn scenario(t: &Arc<TracingObject>) -> (Vec<i64>, Vec<u64>) {
    use Step::*;
    // Thread 0: recursion. ANY overwrites; NOEXIST fails on the inner
    // entry; EXIST fails on an empty slot; the outer exits find nothing.
    run(
        t,
        0,
        &[
            Enter(1, ANY),
            Enter(2, ANY),
            Leave,
            Leave,
            Enter(3, NOEXIST),
            Enter(4, NOEXIST),
            Leave,
            Leave,
            Enter(5, EXIST),
            Leave,
            Enter(6, 7), // bad flags: EINVAL
            Leave,
        ],
    );
    // Threads 1..=4 enter at once and stay (max_entries 3: one E2BIG), then
    // threads 1 and 2 leave; 3 and 4 never return (their entries stay).
    let barrier = Arc::new(Barrier::new(4));
    let held: Vec<_> = (1..=4u64)
        .map(|n| {
            let (t, barrier) = (Arc::clone(t), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // One at a time, in order, so which one gets E2BIG is fixed.
                for turn in 1..=4 {
                    if turn == n {
                        run(&t, n, &[Enter(10 * n, ANY)]);
                    }
                    barrier.wait();
                }
                if n <= 2 {
                    let mut regs = PtRegs {
                        r8: n,
                        r9: 1,
                        ..PtRegs::default()
                    };
                    t.run_regs(
                        t.program_id("leave").unwrap(),
                        &mut regs,
                        &ProbeSite::default(),
                    );
                }
            })
        })
        .collect();
    for h in held {
        h.join().unwrap();
    }
    outcome(t)
}

fn spec(obj: &bpfjet_obj::Object) -> Vec<ThreadMapSpec> {
    let plan = bpfjet_fusion::plan(obj, &|_| None);
    plan.internal_maps
        .iter()
        .map(|m| ThreadMapSpec {
            map: m.name.clone(),
            sites: m.sites.iter().map(|(p, s, _)| (p.clone(), *s)).collect(),
        })
        .collect()
}

/// How the programs run: the interpreter, or the JIT with the slot
/// operations inlined or as native calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Interp,
    JitInline,
    JitCalls,
}

fn steps(engine: Engine) -> TracingJit {
    TracingJit {
        inline_thread_maps: engine == Engine::JitInline,
        ..TracingJit::default()
    }
}

fn load(
    obj: &bpfjet_obj::Object,
    engine: Engine,
    thread_maps: Vec<ThreadMapSpec>,
) -> Arc<TracingObject> {
    let opts = TracingOptions {
        thread_maps,
        ..TracingOptions::default()
    };
    Arc::new(match engine {
        Engine::Interp => TracingObject::load(obj, &opts).unwrap(),
        jit => load_tracing_with(obj, &opts, &JitOptions::uncached(), &steps(jit)).unwrap(),
    })
}

const ENGINES: [Engine; 3] = [Engine::Interp, Engine::JitInline, Engine::JitCalls];

#[test]
fn kept_per_thread_answers_as_the_map() {
    let path = bpfjet_testsupport::Compile::text("thread_maps", SRC)
        .arg("-D__TARGET_ARCH_x86")
        .object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let kept = spec(&obj);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].map, "held");
    let mut reference = None;
    for jit in ENGINES {
        let unfused = load(&obj, jit, Vec::new());
        let fused = load(&obj, jit, kept.clone());
        assert_eq!(
            fused.thread_maps().len(),
            1,
            "{:?}",
            fused.thread_map_refusals()
        );
        let want = scenario(&unfused);
        let got = scenario(&fused);
        assert_eq!(want, got, "{jit:?}: kept per thread vs map");
        assert_eq!(fused.faults().0, 0, "{:?}", fused.faults().1);
        // The interpreter and the JIT agree too.
        match &reference {
            None => reference = Some(want),
            Some(r) => assert_eq!(r, &want, "interpreter vs {jit:?}"),
        }
    }
    // Spot checks against the map semantics themselves.
    let (log, left) = reference.unwrap();
    let e = |errno: i64| -errno;
    // Thread 0: ANY, ANY, inner exit finds 2 and deletes, outer finds nothing.
    assert_eq!(&log[0..4], &[0, 0, 2000, -1000 + e(2)]);
    // NOEXIST: inner entry EEXIST, inner exit finds the outer's 3.
    assert_eq!(&log[4..8], &[0, e(17), 3000, -1000 + e(2)]);
    // EXIST on an empty slot; bad flags.
    assert_eq!(&log[8..12], &[e(2), -1000 + e(2), e(22), -1000 + e(2)]);
    // Threads 1..=4: three entries fit, the fourth gets E2BIG.
    assert_eq!([log[32], log[64], log[96], log[128]], [0, 0, 0, e(7)]);
    assert_eq!([log[33], log[65]], [10_000, 20_000]);
    assert_eq!(left, [30], "the entry of the thread that never returned");
}

#[test]
fn a_call_site_that_is_not_a_map_call_keeps_the_map() {
    let path = bpfjet_testsupport::Compile::text("thread_maps_bad", SRC)
        .arg("-D__TARGET_ARCH_x86")
        .object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let mut bad = spec(&obj);
    bad[0].sites.push(("entry".into(), 0));
    for jit in ENGINES {
        let t = load(&obj, jit, bad.clone());
        assert!(t.thread_maps().is_empty());
        let why = t.thread_map_refusals().join("\n");
        assert!(why.contains("not a map helper call"), "{why}");
        // Every call still goes to the map.
        let (_, left) = scenario(&t);
        assert_eq!(left, [30]);
    }
}

/// With the slot operations inlined, the optimized code of the entry and
/// the exit calls nothing for the map kept per thread: no helper
/// trampoline, no thread-map native, no map native (the run log's array
/// lookup is address arithmetic). With them as native calls, the natives
/// are there: the check can see a call.
#[test]
fn slot_operations_compile_to_loads_and_stores() {
    let path = bpfjet_testsupport::Compile::text("thread_maps_ir", SRC)
        .arg("-D__TARGET_ARCH_x86")
        .object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let opts = TracingOptions {
        thread_maps: spec(&obj),
        ..TracingOptions::default()
    };
    let ir = |engine: Engine, program: &str| {
        dump_tracing(
            &obj,
            &opts,
            &JitOptions::uncached(),
            &steps(engine),
            program,
            DumpStage::OptimizedIr,
        )
        .unwrap()
    };
    let calls = |ir: &str| -> Vec<String> {
        ir.lines()
            .filter(|l| l.contains("call ") && !l.contains("@llvm."))
            .map(|l| l.trim().to_string())
            .collect()
    };
    for program in ["entry", "leave"] {
        let inlined = ir(Engine::JitInline, program);
        let left: Vec<String> = calls(&inlined)
            .into_iter()
            // The cold abort of a run without slots is not an operation.
            .filter(|c| !c.contains("thread_map_no_slots"))
            .filter(|c| {
                c.contains("thread_map") || c.contains("bpfjet_jit_helper") || c.contains("map_")
            })
            .collect();
        // bpf_get_current_pid_tgid is a tracing helper (trampoline); only
        // it may remain.
        assert!(
            left.iter().all(|c| c.contains("bpfjet_jit_helper")),
            "{program}: map calls left:\n{}",
            left.join("\n")
        );
        assert!(
            inlined.contains("atomicrmw") || program == "leave",
            "{program}: the update's count is not in the code:\n{inlined}"
        );
        let called = ir(Engine::JitCalls, program);
        assert!(
            calls(&called)
                .iter()
                .any(|c| c.contains("bpfjet_jit_thread_map_")),
            "{program}: the native-call variant shows no thread-map call:\n{called}"
        );
    }
}
