//! A `sys_enter_X`/`sys_exit_X` pair compiled into one native function
//! (pairwise fusion's `compile` rung, `bpfjet_jit::FusedPair`): the
//! optimized IR holds both programs inlined in `bpfjet_fused_pair`, no
//! call for the hand-off map's operations and one
//! `bpf_get_current_pid_tgid` for both halves; and runs of the fused pair
//! leave every map as the same programs run one by one
//! (`TracingObject::run_sys_enter/exit`) leave them, with a call nested
//! inside the traced call (a signal handler calling the same wrapper) and
//! with a call whose exit half must not run; and a pair whose object
//! observes its CPU (a per-CPU map: each half leases a CPU slot) gives
//! the slot and the thread's run state back across the traced call, so
//! runs inside the call are not missed.

use bpfjet_jit::{dump_fused_pair, load_tracing_fused, load_tracing_with, JitOptions, TracingJit};
use bpfjet_runtime::tracing::{
    ProbeSite, SysEnterCtx, SysExitCtx, ThreadMapSpec, TracingObject, TracingOptions,
};

const SRC: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);
         __type(key, __u64); __type(value, __u64); } starts SEC(".maps");
/* [0]: exits that found their entry, [1]: exits that did not,
   [2]: sum of the values found, [3]: sum of the results. */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4);
         __type(key, __u32); __type(value, __u64); } seen SEC(".maps");

struct enter_rec { __u64 common; long id; unsigned long args[6]; };
struct exit_rec { __u64 common; long id; long ret; };

static __always_inline void add(__u32 k, __u64 v)
{
    __u64 *p = bpf_map_lookup_elem(&seen, &k);
    if (p) __sync_fetch_and_add(p, v);
}

SEC("tracepoint/syscalls/sys_enter_read")
int on_enter(struct enter_rec *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u64 v = ctx->args[0] * 1000 + bpf_ktime_get_ns() % 7;
    bpf_map_update_elem(&starts, &id, &v, BPF_ANY);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_read")
int on_exit(struct exit_rec *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u64 *v = bpf_map_lookup_elem(&starts, &id);
    if (!v) { add(1, 1); return 0; }
    add(0, 1);
    add(2, *v / 1000);
    add(3, ctx->ret);
    bpf_map_delete_elem(&starts, &id);
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

fn object() -> bpfjet_obj::Object {
    object_of("fused_pair", SRC)
}

fn object_of(name: &str, src: &str) -> bpfjet_obj::Object {
    let path = bpfjet_testsupport::Compile::text(name, src).object();
    bpfjet_obj::load_file(&path).unwrap()
}

fn options(obj: &bpfjet_obj::Object) -> TracingOptions {
    let plan = bpfjet_fusion::plan(obj, &|_| None);
    let thread_maps: Vec<ThreadMapSpec> = plan
        .internal_maps
        .iter()
        .map(|m| ThreadMapSpec {
            map: m.name.clone(),
            sites: m.sites.iter().map(|(p, s, _)| (p.clone(), *s)).collect(),
        })
        .collect();
    assert_eq!(
        thread_maps
            .iter()
            .map(|m| m.map.as_str())
            .collect::<Vec<_>>(),
        ["starts"],
        "the analysis finds the hand-off map"
    );
    TracingOptions {
        thread_maps,
        ..TracingOptions::default()
    }
}

/// The `define` of `name` in `ir`, up to its closing brace.
fn function<'a>(ir: &'a str, name: &str) -> &'a str {
    let start = ir
        .find(&format!("@{name}("))
        .and_then(|at| ir[..at].rfind("define "))
        .unwrap_or_else(|| panic!("no function {name} in\n{ir}"));
    let end = ir[start..]
        .find("\n}\n")
        .map_or(ir.len(), |e| start + e + 3);
    &ir[start..end]
}

#[test]
fn both_programs_are_one_function_without_hand_off_calls() {
    let obj = object();
    let opts = options(&obj);
    let ir = dump_fused_pair(
        &obj,
        &opts,
        &JitOptions::uncached(),
        &TracingJit::default(),
        "on_enter",
        "on_exit",
    )
    .unwrap();
    let fused = function(&ir, "bpfjet_fused_pair");
    let calls: Vec<&str> = fused
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("call ") && !l.contains("@llvm."))
        .collect();
    // Both halves inlined: no call of the halves or of lifted functions.
    assert!(
        calls.iter().all(|c| !c.contains("pair_entry_half")
            && !c.contains("pair_exit_half")
            && !c.contains("@bpf_fn_")
            && !c.contains("@bpfjet_pair_")),
        "halves not inlined:\n{}",
        calls.join("\n")
    );
    // The hand-off map's update, lookup and delete are loads and stores on
    // the thread's slot (the cold abort of a run without slots aside).
    let handoff: Vec<&&str> = calls
        .iter()
        .filter(|c| c.contains("thread_map") && !c.contains("thread_map_no_slots"))
        .collect();
    assert!(handoff.is_empty(), "hand-off map calls left: {handoff:?}");
    // One bpf_get_current_pid_tgid for both halves.
    let pid_tgid = calls
        .iter()
        .filter(|c| c.contains("@bpfjet_jit_pid_tgid"))
        .count();
    assert_eq!(pid_tgid, 1, "pid_tgid calls:\n{}", calls.join("\n"));
    // The traced call happens once, between the halves (the indirect call
    // of `middle`).
    let middle = calls.iter().filter(|c| c.contains("call i64 %")).count();
    assert_eq!(middle, 1, "calls:\n{}", calls.join("\n"));
}

/// The `seen` array and the `starts` map as dumped after the runs.
fn state(t: &TracingObject) -> (Vec<u64>, usize) {
    t.write_back_thread_maps().unwrap();
    let seen = t.loaded().map("seen").unwrap();
    let values = (0u32..4)
        .map(|k| {
            let v = seen.lookup_copy(&k.to_ne_bytes()).unwrap();
            u64::from_ne_bytes(v[..8].try_into().unwrap())
        })
        .collect();
    let starts = t.loaded().map("starts").unwrap();
    (values, starts.entries().unwrap().len())
}

const NR_READ: i64 = 0;

#[test]
fn fused_runs_leave_the_maps_as_separate_runs_do() {
    let obj = object();
    let opts = options(&obj);
    let jit = JitOptions::uncached();
    let steps = TracingJit::default();
    let pair = vec![("on_enter".to_string(), "on_exit".to_string())];
    let (fused_obj, pairs) = load_tracing_fused(&obj, &opts, &jit, &steps, &pair).unwrap();
    let fused = pairs.into_iter().next().unwrap().unwrap();
    let separate = load_tracing_with(&obj, &opts, &jit, &steps).unwrap();
    let (e, x) = (
        separate.program_id("on_enter").unwrap(),
        separate.program_id("on_exit").unwrap(),
    );
    let site = ProbeSite::default();
    let enter_rec = |fd: u64| SysEnterCtx::new(NR_READ, [fd, 0, 64, 0, 0, 0]);

    // 1. Plain calls; 2. a call inside the traced call (a handler's read:
    // it overwrites and deletes the thread's entry, so the outer exit
    // finds none); 3. a call whose exit half must not run (its entry stays).
    for fd in [3u64, 4, 5] {
        fused.run(
            &fused_obj,
            NR_READ,
            &mut enter_rec(fd),
            &site,
            true,
            &mut || Some(fd as i64 * 10),
        );
        separate.run_sys_enter(e, &mut enter_rec(fd), &site);
        separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, fd as i64 * 10), &site);
    }
    fused.run(
        &fused_obj,
        NR_READ,
        &mut enter_rec(8),
        &site,
        true,
        &mut || {
            fused.run(
                &fused_obj,
                NR_READ,
                &mut enter_rec(9),
                &site,
                true,
                &mut || Some(90),
            );
            Some(80)
        },
    );
    separate.run_sys_enter(e, &mut enter_rec(8), &site);
    separate.run_sys_enter(e, &mut enter_rec(9), &site);
    separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, 90), &site);
    separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, 80), &site);
    let (seen, _) = state(&fused_obj);
    assert_eq!(seen, [4, 1, 3 + 4 + 5 + 9, 30 + 40 + 50 + 90]);

    fused.run(
        &fused_obj,
        NR_READ,
        &mut enter_rec(11),
        &site,
        true,
        &mut || None,
    );
    separate.run_sys_enter(e, &mut enter_rec(11), &site);
    // An entry half not run (the agent not armed): the exit finds nothing.
    fused.run(
        &fused_obj,
        NR_READ,
        &mut enter_rec(12),
        &site,
        false,
        &mut || Some(1),
    );
    separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, 1), &site);

    assert_eq!(state(&fused_obj), state(&separate));
    // The entry of fd 11 stayed; the exit without an entry half found it.
    assert_eq!(state(&fused_obj), (vec![5, 1, 32, 211], 0));
    assert_eq!(fused_obj.faults().0, 0);
    assert_eq!(fused_obj.missed_runs(), separate.missed_runs());
}

/// The pair's exit counts its runs in a per-CPU array too: the object
/// leases a CPU slot per run.
fn cpu_bound_src() -> String {
    SRC.replace(
        "char LICENSE",
        "struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1);\n\
         __type(key, __u32); __type(value, __u64); } per_cpu SEC(\".maps\");\n\
         SEC(\"tracepoint/syscalls/sys_exit_write\")\n\
         int on_exit_write(void *ctx)\n\
         {\n\
             __u32 z = 0;\n\
             __u64 *c = bpf_map_lookup_elem(&per_cpu, &z);\n\
             if (c) *c += 1;\n\
             return 0;\n\
         }\n\
         char LICENSE",
    )
}

/// Sum over CPUs of the per-CPU array's one value.
fn per_cpu_sum(t: &TracingObject) -> u64 {
    let m = t.loaded().map("per_cpu").unwrap();
    m.lookup_copy(&0u32.to_ne_bytes())
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .sum()
}

#[test]
fn a_cpu_bound_pair_holds_nothing_across_the_call() {
    let obj = object_of("fused_pair_cpu", &cpu_bound_src());
    let opts = options(&obj);
    let jit = JitOptions::uncached();
    let steps = TracingJit::default();
    let pair = vec![("on_enter".to_string(), "on_exit".to_string())];
    let (fused_obj, pairs) = load_tracing_fused(&obj, &opts, &jit, &steps, &pair).unwrap();
    let fused = pairs.into_iter().next().unwrap().unwrap();
    let separate = load_tracing_with(&obj, &opts, &jit, &steps).unwrap();
    assert!(
        fused_obj.leases_cpu_slots(),
        "a per-CPU map: runs lease a CPU slot"
    );
    let (e, x, w) = (
        separate.program_id("on_enter").unwrap(),
        separate.program_id("on_exit").unwrap(),
        separate.program_id("on_exit_write").unwrap(),
    );
    let site = ProbeSite::default();
    let enter_rec = |fd: u64| SysEnterCtx::new(NR_READ, [fd, 0, 64, 0, 0, 0]);
    // Inside the traced call (a signal handler's calls while it blocks):
    // another program of the object and a whole fused pair run, none
    // missed (the halves hold neither the thread's run nor a CPU slot
    // across the call), and the maps end as the programs run one by one
    // leave them.
    for round in 0..64u64 {
        fused.run(
            &fused_obj,
            NR_READ,
            &mut enter_rec(round),
            &site,
            true,
            &mut || {
                fused_obj.run_sys_exit(w, &mut SysExitCtx::new(1, 0), &site);
                fused.run(
                    &fused_obj,
                    NR_READ,
                    &mut enter_rec(100 + round),
                    &site,
                    true,
                    &mut || Some(7),
                );
                Some(round as i64)
            },
        );
        separate.run_sys_enter(e, &mut enter_rec(round), &site);
        separate.run_sys_exit(w, &mut SysExitCtx::new(1, 0), &site);
        separate.run_sys_enter(e, &mut enter_rec(100 + round), &site);
        separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, 7), &site);
        separate.run_sys_exit(x, &mut SysExitCtx::new(NR_READ, round as i64), &site);
    }
    assert_eq!(
        fused_obj.missed_runs(),
        0,
        "no run inside the call was missed"
    );
    assert_eq!(fused_obj.faults().0, 0);
    assert_eq!(state(&fused_obj), state(&separate));
    assert_eq!(per_cpu_sum(&fused_obj), 64);
    assert_eq!(per_cpu_sum(&fused_obj), per_cpu_sum(&separate));
}
