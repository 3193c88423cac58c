//! Hand-off detection on entry/exit pairs written as libbpf-tools write them:
//! the pairs that must fuse and each case that must not (the map read by a
//! third program, pinned, per-CPU, keyed by the process, not deleted by the
//! exit, given to another helper, keyed by a constant).

use bpfjet_fusion::{analyse_pair, summarise, PairReport, ThreadKey};
use std::path::PathBuf;
use std::process::Command;

const HEADER: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define HASH(name, mtype, key_t, extra) struct { __uint(type, mtype); __uint(max_entries, 1024); \
    __type(key, key_t); __type(value, __u64); extra } name SEC(".maps");
char LICENSE[] SEC("license") = "GPL";
"#;

fn compile(name: &str, body: &str) -> bpfjet_obj::Object {
    let obj = bpfjet_testsupport::Compile::text(name, &format!("{HEADER}\n{body}")).object();
    bpfjet_obj::load_file(&obj).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Analyses `entry` + `exit` of the object, every other program as a third
/// party, nothing exposed.
fn pair(obj: &bpfjet_obj::Object, entry: &str, exit: &str) -> PairReport {
    let sums: Vec<_> = obj
        .programs
        .iter()
        .map(|p| (p.name.as_str(), summarise(p, &obj.maps).unwrap()))
        .collect();
    let find = |n: &str| {
        sums.iter()
            .find(|(p, _)| *p == n)
            .map(|(p, s)| (*p, s))
            .unwrap()
    };
    let others: Vec<_> = sums
        .iter()
        .filter(|(p, _)| *p != entry && *p != exit)
        .map(|(p, s)| (*p, s))
        .collect();
    analyse_pair(&obj.maps, find(entry), find(exit), &others, &|_| None)
}

const FSDIST_LIKE: &str = r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
HASH(hist, BPF_MAP_TYPE_HASH, __u32, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = bpf_ktime_get_ns();
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY);
    return 0;
}
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), *t = bpf_map_lookup_elem(&starts, &id), one = 1;
    if (!t) return 0;
    __u32 slot = (bpf_ktime_get_ns() - *t) >> 10;
    __u64 *n = bpf_map_lookup_elem(&hist, &slot);
    if (n) __sync_fetch_and_add(n, 1); else bpf_map_update_elem(&hist, &slot, &one, BPF_NOEXIST);
    bpf_map_delete_elem(&starts, &id);
    return 0;
}
"#;

#[test]
fn timestamp_handoff_keyed_by_pid_tgid_is_internalised() {
    let obj = compile("fsdist_like", FSDIST_LIKE);
    let r = pair(&obj, "entry", "leave");
    assert_eq!(r.pair_refusal, None);
    assert_eq!(r.internalised.len(), 1, "{:?}", r.explain());
    assert_eq!(r.internalised[0].name, "starts");
    assert_eq!(r.internalised[0].key, ThreadKey::PidTgid);
    // The histogram is used by the exit only: not a map of the pair.
    assert!(r.refused.is_empty(), "{:?}", r.explain());
}

#[test]
fn thread_id_key_of_four_bytes_is_internalised() {
    let obj = compile(
        "tid_key",
        r#"
HASH(args, BPF_MAP_TYPE_HASH, __u32, )
HASH(total, BPF_MAP_TYPE_ARRAY, __u32, )
SEC("uprobe/libc.so.6:write") int entry(struct { unsigned long r[21]; } *ctx) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    __u64 count = ctx->r[12];
    bpf_map_update_elem(&args, &tid, &count, BPF_ANY);
    return 0;
}
SEC("uretprobe/libc.so.6:write") int leave(void *ctx) {
    __u32 tid = bpf_get_current_pid_tgid(), zero = 0;
    __u64 *c = bpf_map_lookup_elem(&args, &tid), *t;
    if (!c) return 0;
    t = bpf_map_lookup_elem(&total, &zero);
    if (t) *t += *c;
    bpf_map_delete_elem(&args, &tid);
    return 0;
}
"#,
    );
    let r = pair(&obj, "entry", "leave");
    assert_eq!(r.internalised.len(), 1, "{:?}", r.explain());
    assert_eq!(r.internalised[0].key, ThreadKey::Tid);
}

/// Each case that must stay a map, with the reason the report gives.
#[test]
fn maps_that_must_not_be_internalised() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "third_program",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
SEC("uprobe/libc.so.6:close") int spy(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    return bpf_map_lookup_elem(&starts, &id) != 0; }
"#,
            "program spy also uses it",
        ),
        (
            "pinned",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, __uint(pinning, LIBBPF_PIN_BY_NAME);)
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
"#,
            "pinned by name",
        ),
        (
            "percpu",
            r#"
HASH(starts, BPF_MAP_TYPE_PERCPU_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
"#,
            "per-CPU",
        ),
        (
            "process_key",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u32, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u32 pid = bpf_get_current_pid_tgid() >> 32; __u64 ts = 1;
    bpf_map_update_elem(&starts, &pid, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u32 pid = bpf_get_current_pid_tgid() >> 32;
    if (bpf_map_lookup_elem(&starts, &pid)) bpf_map_delete_elem(&starts, &pid); return 0; }
"#,
            "process id",
        ),
        (
            "no_delete",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), *t = bpf_map_lookup_elem(&starts, &id);
    return t ? (int)*t : 0; }
"#,
            "does not delete",
        ),
        (
            "constant_key",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 key = 0, ts = 1;
    bpf_map_update_elem(&starts, &key, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 key = 0;
    if (bpf_map_lookup_elem(&starts, &key)) bpf_map_delete_elem(&starts, &key); return 0; }
"#,
            "not derived from the thread",
        ),
        (
            "other_helper",
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
static long visit(void *map, __u64 *k, __u64 *v, void *ctx) { return 0; }
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    bpf_for_each_map_elem(&starts, visit, 0, 0);
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
"#,
            "passed to helper 164",
        ),
    ];
    for (name, body, why) in cases {
        let obj = compile(name, body);
        let r = pair(&obj, "entry", "leave");
        assert!(r.internalised.is_empty(), "{name}: {:?}", r.explain());
        assert_eq!(r.refused.len(), 1, "{name}: {:?}", r.explain());
        assert!(
            r.refused[0].why.contains(why),
            "{name}: expected '{why}' in: {}",
            r.refused[0].why
        );
    }
}

#[test]
fn a_tail_call_refuses_the_whole_pair() {
    let obj = compile(
        "tail_call",
        r#"
struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); } jmp SEC(".maps");
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); bpf_tail_call(ctx, &jmp, 0); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
"#,
    );
    let r = pair(&obj, "entry", "leave");
    assert!(
        r.pair_refusal
            .as_deref()
            .unwrap_or("")
            .contains("tail-calls"),
        "{:?}",
        r.explain()
    );
}

/// The real tools of examples/trace/ (CO-RE, built by `make -C examples
/// trace`): fsdist, funclatency and bytes_per_call hand one value per
/// thread from entry to exit; rw_tracer hands its saved arguments over.
#[test]
fn example_tools_pairs() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        bpfjet_testsupport::report_skip(
            "example_tools_pairs: no /sys/kernel/btf/vmlinux to build the CO-RE tools",
        );
        return;
    }
    let made = Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("examples"))
        .arg("trace")
        .status()
        .expect("make");
    assert!(made.success(), "make -C examples trace failed");
    let cases = [
        ("fsdist", "fsdist_enter_read", "fsdist_exit_read", "starts"),
        (
            "funclatency",
            "funclatency_entry",
            "funclatency_exit",
            "starts",
        ),
        ("bytes_per_call", "bytes_entry", "bytes_exit", "asked"),
        ("rw_tracer", "rw_enter_read", "rw_exit_read", "inflight"),
    ];
    for (tool, entry, exit, map) in cases {
        let path = root.join(format!("build/examples/trace/{tool}.o"));
        let obj = bpfjet_obj::load_file(&path).unwrap_or_else(|e| panic!("{tool}: {e}"));
        // Only the pair itself: fsdist's and rw_tracer's write-side
        // programs use the same map, which (correctly) refuses fusion when
        // they count as third parties; pairs are per attach point.
        let sums: Vec<_> = obj
            .programs
            .iter()
            .map(|p| (p.name.as_str(), summarise(p, &obj.maps).unwrap()))
            .collect();
        let find = |n: &str| {
            sums.iter()
                .find(|(p, _)| *p == n)
                .map(|(p, s)| (*p, s))
                .unwrap()
        };
        let r = analyse_pair(&obj.maps, find(entry), find(exit), &[], &|_| None);
        let names: Vec<_> = r.internalised.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, [map], "{tool}: {:?}", r.explain());
    }
}

/// `plan` pairs by attach point (uprobe/uretprobe on one PATH:SYMBOL,
/// sys_enter_X/sys_exit_X), analyses each pair against every other program
/// of the object, and says why the rest were not paired: the lines
/// `bpfjet trace --explain` prints.
#[test]
fn plan_pairs_by_attach_point_and_explains_the_rest() {
    let obj = compile(
        "plan",
        r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
HASH(args, BPF_MAP_TYPE_HASH, __u64, )
HASH(counts, BPF_MAP_TYPE_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int read_entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = bpf_ktime_get_ns();
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int read_exit(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), *t = bpf_map_lookup_elem(&starts, &id);
    if (!t) return 0;
    bpf_map_delete_elem(&starts, &id); return 0; }
SEC("tracepoint/syscalls/sys_enter_write") int write_entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), v = 1;
    bpf_map_update_elem(&args, &id, &v, BPF_ANY); return 0; }
SEC("tracepoint/syscalls/sys_exit_write") int write_exit(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), *v = bpf_map_lookup_elem(&args, &id);
    if (!v) return 0;
    bpf_map_delete_elem(&args, &id); return 0; }
SEC("tracepoint/syscalls/sys_exit_close") int close_spy(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    return bpf_map_lookup_elem(&args, &id) != 0; }
SEC("uprobe/libc.so.6:read+4") int inside(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), one = 1;
    bpf_map_update_elem(&counts, &id, &one, BPF_ANY); return 0; }
"#,
    );
    let plan = bpfjet_fusion::plan(&obj, &|_| None);
    let pairs: Vec<(&str, &str)> = plan
        .pairs
        .iter()
        .map(|p| (p.entry.as_str(), p.exit.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("read_entry", "read_exit"), ("write_entry", "write_exit")]
    );
    let read = &plan.pairs[0];
    assert_eq!(read.internalised.len(), 1, "{:?}", read.explain());
    assert_eq!(read.internalised[0].name, "starts");
    // args is read by close_spy, a program of no pair: it stays a map.
    let write = &plan.pairs[1];
    assert!(write.internalised.is_empty(), "{:?}", write.explain());
    assert_eq!(write.refused.len(), 1);
    assert!(write.refused[0]
        .why
        .contains("program close_spy also uses it"));
    let text = plan.explain().join("\n");
    assert!(
        text.contains("close_spy: not paired: no entry program on syscall close"),
        "{text}"
    );
    assert!(
        text.contains("inside: not paired: attached inside read (+4)"),
        "{text}"
    );
    assert!(
        text.contains("read_entry + read_exit: map starts is a hand-off"),
        "{text}"
    );
}

/// fsdist's shape: the read and the write pairs share one hand-off map.
/// Every program uses it only in its pair's role with the thread key, so
/// both pairs internalise it and the plan lists every call on it; when one
/// pair does not delete, the map stays a map for both pairs.
#[test]
fn a_map_shared_by_two_pairs_is_internalised_by_both_or_neither() {
    let shared = |exit_write_deletes: bool| {
        format!(
            r#"
HASH(starts, BPF_MAP_TYPE_HASH, __u64, )
static __always_inline int enter(void) {{
    __u64 id = bpf_get_current_pid_tgid(), ts = bpf_ktime_get_ns();
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }}
SEC("tracepoint/syscalls/sys_enter_read") int enter_read(void *ctx) {{ return enter(); }}
SEC("tracepoint/syscalls/sys_enter_write") int enter_write(void *ctx) {{ return enter(); }}
SEC("tracepoint/syscalls/sys_exit_read") int exit_read(void *ctx) {{
    __u64 id = bpf_get_current_pid_tgid(), *t = bpf_map_lookup_elem(&starts, &id);
    if (!t) return 0;
    bpf_map_delete_elem(&starts, &id); return 0; }}
SEC("tracepoint/syscalls/sys_exit_write") int exit_write(void *ctx) {{
    __u64 id = bpf_get_current_pid_tgid(), *t = bpf_map_lookup_elem(&starts, &id);
    if (!t) return 0;
    {} return 0; }}
"#,
            if exit_write_deletes {
                "bpf_map_delete_elem(&starts, &id);"
            } else {
                ""
            }
        )
    };
    let obj = compile("shared_ok", &shared(true));
    let plan = bpfjet_fusion::plan(&obj, &|_| None);
    assert_eq!(plan.pairs.len(), 2);
    for p in &plan.pairs {
        let names: Vec<_> = p.internalised.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["starts"], "{:?}", p.explain());
    }
    assert_eq!(plan.internal_maps.len(), 1);
    let m = &plan.internal_maps[0];
    assert_eq!((m.name.as_str(), m.key), ("starts", ThreadKey::PidTgid));
    // Two updates, two lookups, two deletes, in the four programs.
    let mut programs: Vec<&str> = m.sites.iter().map(|(p, _, _)| p.as_str()).collect();
    programs.sort_unstable();
    assert_eq!(
        programs,
        [
            "enter_read",
            "enter_write",
            "exit_read",
            "exit_read",
            "exit_write",
            "exit_write"
        ]
    );

    let obj = compile("shared_keep", &shared(false));
    let plan = bpfjet_fusion::plan(&obj, &|_| None);
    assert!(plan.internal_maps.is_empty(), "{:?}", plan.explain());
    for p in &plan.pairs {
        assert!(p.internalised.is_empty(), "{:?}", p.explain());
        assert_eq!(p.refused.len(), 1, "{:?}", p.explain());
    }
    let text = plan.explain().join("\n");
    assert!(text.contains("does not delete it"), "{text}");
    assert!(
        text.contains("enter_read + exit_read: map starts stays a map: program"),
        "{text}"
    );
}

/// An LRU hash evicts another thread's entry when full: not internalised.
#[test]
fn an_lru_hand_off_stays_a_map() {
    let obj = compile(
        "lru",
        r#"
HASH(starts, BPF_MAP_TYPE_LRU_HASH, __u64, )
SEC("uprobe/libc.so.6:read") int entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), ts = 1;
    bpf_map_update_elem(&starts, &id, &ts, BPF_ANY); return 0; }
SEC("uretprobe/libc.so.6:read") int leave(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid();
    if (bpf_map_lookup_elem(&starts, &id)) bpf_map_delete_elem(&starts, &id); return 0; }
"#,
    );
    let r = pair(&obj, "entry", "leave");
    assert!(r.internalised.is_empty(), "{:?}", r.explain());
    assert!(r.refused[0].why.contains("LRU"), "{:?}", r.explain());
}

/// An exec's entry/exit pair hands its value from the image that makes
/// the call to the image it starts (execsnoop's pattern): the value must
/// stay in the map, so the pair is refused, saying why.
#[test]
fn an_exec_pair_is_not_internalised() {
    let obj = compile(
        "exec_pair",
        r#"
HASH(execs, BPF_MAP_TYPE_HASH, __u64, )
SEC("tracepoint/syscalls/sys_enter_execve") int exec_entry(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), v = 1;
    bpf_map_update_elem(&execs, &id, &v, BPF_ANY); return 0; }
SEC("tracepoint/syscalls/sys_exit_execve") int exec_exit(void *ctx) {
    __u64 id = bpf_get_current_pid_tgid(), *v = bpf_map_lookup_elem(&execs, &id);
    if (!v) return 0;
    bpf_map_delete_elem(&execs, &id); return 0; }
"#,
    );
    // The same shape on another call is a hand-off.
    assert_eq!(pair(&obj, "exec_entry", "exec_exit").internalised.len(), 1);
    let plan = bpfjet_fusion::plan(&obj, &|_| None);
    assert!(plan.internal_maps.is_empty());
    let p = &plan.pairs[0];
    let why = p.pair_refusal.as_deref().unwrap_or_default();
    assert!(why.contains("runs in the new process image"), "{why}");
}
