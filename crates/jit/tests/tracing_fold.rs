//! Attach-site folding (pairwise fusion's context-aware step,
//! `TracingJit::ctx_constants`): a `tracepoint/syscalls/sys_enter_X`
//! program's record always carries X's number in `id`, so the JIT may fold
//! the load. The program (compiled from C at test time) copies `ctx->id`,
//! read whole and as its low half, into a map. On a real record the folded
//! and unfolded code agree with the interpreter; fed a record with another
//! number (which the attach layer never does), the folded code still
//! reports the constant — the load is gone — and the unfolded one the
//! record's. A constant for another offset or width changes nothing.

use bpfjet_jit::{load_tracing_with, CtxConstant, JitOptions, TracingJit};
use bpfjet_runtime::tracing::{ProbeSite, SysEnterCtx, TracingObject, TracingOptions};
use std::collections::BTreeMap;

const SRC: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sys_enter_rec { __u64 common; long id; unsigned long args[6]; };

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2);
         __type(key, __u32); __type(value, __s64); } seen SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_read")
int on_read(struct sys_enter_rec *ctx)
{
    __u32 whole = 0, half = 1;
    __s64 v = ctx->id;
    bpf_map_update_elem(&seen, &whole, &v, BPF_ANY);
    v = *(volatile int *)&ctx->id;
    bpf_map_update_elem(&seen, &half, &v, BPF_ANY);
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// read(2) on x86-64.
const NR_READ: u64 = 0;

fn seen(t: &TracingObject) -> [i64; 2] {
    let m = t.loaded().map("seen").unwrap();
    [0u32, 1].map(|k| {
        let v = m.lookup_copy(&k.to_ne_bytes()).unwrap();
        i64::from_ne_bytes(v[..8].try_into().unwrap())
    })
}

fn run(t: &TracingObject, id: i64) -> [i64; 2] {
    let mut rec = SysEnterCtx::new(id, [3, 0, 16, 0, 0, 0]);
    t.run_sys_enter(
        t.program_id("on_read").unwrap(),
        &mut rec,
        &ProbeSite::default(),
    );
    assert_eq!(t.faults().0, 0, "{:?}", t.faults().1);
    seen(t)
}

fn jit(obj: &bpfjet_obj::Object, constants: Vec<CtxConstant>) -> TracingObject {
    let steps = TracingJit {
        ctx_constants: BTreeMap::from([("on_read".to_string(), constants)]),
        ..TracingJit::default()
    };
    load_tracing_with(
        obj,
        &TracingOptions::default(),
        &JitOptions::uncached(),
        &steps,
    )
    .unwrap()
}

fn id_constants(value: u64) -> Vec<CtxConstant> {
    vec![
        CtxConstant {
            offset: 8,
            size: 8,
            value,
        },
        CtxConstant {
            offset: 8,
            size: 4,
            value,
        },
    ]
}

#[test]
fn the_record_number_folds_to_the_attach_points() {
    let path = bpfjet_testsupport::Compile::text("tracing_fold", SRC).object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let interp = TracingObject::load(&obj, &TracingOptions::default()).unwrap();
    let unfolded = jit(&obj, Vec::new());
    let folded = jit(&obj, id_constants(NR_READ));
    // A record the attach point really delivers: all agree.
    let want = run(&interp, NR_READ as i64);
    assert_eq!(want, [NR_READ as i64; 2]);
    assert_eq!(run(&unfolded, NR_READ as i64), want);
    assert_eq!(run(&folded, NR_READ as i64), want);
    // Another number in the record: only the folded code ignores it.
    assert_eq!(run(&interp, 77), [77, 77]);
    assert_eq!(run(&unfolded, 77), [77, 77]);
    assert_eq!(
        run(&folded, 77),
        [NR_READ as i64; 2],
        "the load was not folded"
    );
    // Constants at another offset or width fold nothing.
    let elsewhere = jit(
        &obj,
        vec![
            CtxConstant {
                offset: 16,
                size: 8,
                value: 5,
            },
            CtxConstant {
                offset: 8,
                size: 2,
                value: 5,
            },
        ],
    );
    assert_eq!(run(&elsewhere, 77), [77, 77]);
}
