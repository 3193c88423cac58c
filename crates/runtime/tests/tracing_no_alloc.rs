//! A tracing program's helpers allocate nothing on the heap once the
//! thread's run state exists. A program on a system-call tracepoint runs
//! in the SIGSYS handler of Syscall User Dispatch, which may have
//! interrupted the traced thread inside libc's allocator (a `malloc` that
//! calls `mmap`): an allocation there could wait forever on the arena lock
//! its own thread holds. `bpf_perf_event_output` (bpftrace's `printf`)
//! copied the record into a `Vec` and did exactly that; it also left
//! `free`'s return address on the handler's stack, where `bpfjet trace`'s
//! safe-point scan found it and refused to load later links.
//!
//! The test counts this thread's heap allocations (a counting global
//! allocator) over runs of a program using the helpers a tracer's
//! per-event path uses, after two warm-up runs. The program is C compiled
//! with clang-19 at test time (bpfjet-testsupport).

use bpfjet_runtime::tracing::{ProbeSite, PtRegs, RawSyscallArgs, TracingObject, TracingOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the thread's locals may be gone while it exits.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A syscount-and-printf program: the system call's number counted in a
/// hash map, an event of 64 bytes to a perf event array (bpftrace's
/// `printf`) and to a ring buffer, the thread's id and the time read, and
/// a 256-byte value stored with `bpf_map_update_elem`.
const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);
         __type(key, __u64); __type(value, __u64); } counts SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
         __uint(key_size, 4); __uint(value_size, 4); } events SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 1 << 16); } ring SEC(".maps");
struct event { __u64 nr, tid, ns, pad[5]; };
struct big { __u64 words[32]; };
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);
         __type(key, __u64); __type(value, struct big); } last SEC(".maps");
SEC("raw_tracepoint/sys_enter")
int on_enter(struct bpf_raw_tracepoint_args *ctx) {
    __u64 nr = ctx->args[1], one = 1;
    __u64 *n = bpf_map_lookup_elem(&counts, &nr);
    if (n)
        __sync_fetch_and_add(n, 1);
    else
        bpf_map_update_elem(&counts, &nr, &one, BPF_NOEXIST);
    struct event e = { .nr = nr, .tid = bpf_get_current_pid_tgid(), .ns = bpf_ktime_get_ns() };
    bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, &e, sizeof(e));
    bpf_ringbuf_output(&ring, &e, sizeof(e), 0);
    struct big b = {};
    b.words[0] = nr;
    b.words[31] = e.ns;
    bpf_map_update_elem(&last, &nr, &b, BPF_ANY);
    return 0;
}
struct { __uint(type, BPF_MAP_TYPE_STACK_TRACE); __uint(max_entries, 64);
         __uint(key_size, 4); __uint(value_size, 127 * 8); } stacks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2);
         __type(key, __u32); __type(value, __s64); } stack_results SEC(".maps");
SEC("uprobe")
int on_hit(struct pt_regs *ctx) {
    __u64 ips[8] = {};
    __u32 k0 = 0, k1 = 1;
    __s64 n = bpf_get_stack(ctx, ips, sizeof(ips), BPF_F_USER_STACK);
    __s64 id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
    bpf_map_update_elem(&stack_results, &k0, &n, 0);
    bpf_map_update_elem(&stack_results, &k1, &id, 0);
    return 0;
}
struct huge { __u64 words[128]; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, struct huge); } heap SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8);
         __type(key, __u64); __type(value, struct huge); } huges SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, char[48]); } formatted SEC(".maps");
const char name[] = "comm-like";
SEC("raw_tracepoint/sys_exit")
int on_print(struct bpf_raw_tracepoint_args *ctx) {
    __u32 zero = 0;
    __u64 nr = ctx->args[1];
    __u32 addr = 0x0100007f;
    bpf_printk("nr %d name %s ip %pI4", (int)nr, name, &addr);
    bpf_printk("%-6u|%06x|%llX|%c|%s", 42, 0xbeef, 0xabcdef0123ULL, 'q', name);
    char *out = bpf_map_lookup_elem(&formatted, &zero);
    __u64 args[3] = { nr, (__u64)name, 7 };
    if (out)
        bpf_snprintf(out, 48, "%u-%s-%03d", args, sizeof(args));
    struct huge *h = bpf_map_lookup_elem(&heap, &zero);
    if (h) {
        h->words[0] = nr;
        h->words[127] = nr * 2;
        bpf_map_update_elem(&huges, &nr, h, BPF_ANY);
    }
    return 0;
}
struct walk { __u64 sum, n; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, struct walk); } walks SEC(".maps");
static long add_count(void *map, __u64 *key, __u64 *val, struct walk *w) {
    w->sum += *key * 1000 + *val;
    w->n++;
    return 0;
}
static long add_slot(void *map, __u32 *key, __s64 *val, struct walk *w) {
    w->sum += *key;
    w->n++;
    return 0;
}
SEC("raw_tracepoint/sys_exit")
int on_walk(struct bpf_raw_tracepoint_args *ctx) {
    __u32 zero = 0;
    struct walk w = {};
    bpf_for_each_map_elem(&counts, add_count, &w, 0);
    bpf_for_each_map_elem(&stack_results, add_slot, &w, 0);
    bpf_map_update_elem(&walks, &zero, &w, BPF_ANY);
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

fn object() -> &'static bpfjet_obj::Object {
    static OBJ: std::sync::OnceLock<bpfjet_obj::Object> = std::sync::OnceLock::new();
    OBJ.get_or_init(|| {
        bpfjet_obj::load_file(bpfjet_testsupport::clang::compile_c(
            "tracing_no_alloc",
            SOURCE,
        ))
        .unwrap()
    })
}

/// This thread's heap allocations while `f` runs.
fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(|n| n.get());
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(|n| n.get()) - before
}

/// The value at `key` of `t`'s map `map`.
fn value(t: &TracingObject, map: &str, key: &[u8]) -> Vec<u8> {
    t.loaded().map(map).unwrap().lookup_copy(key).unwrap()
}

#[test]
fn per_event_helpers_allocate_nothing() {
    let t = TracingObject::load(object(), &TracingOptions::default()).unwrap();
    let id = t.program_id("on_enter").unwrap();
    let run = |nr: u64| {
        let mut args = RawSyscallArgs { args: [0, nr] };
        t.run_raw_syscall(id, &mut args, &ProbeSite::default());
    };
    // The thread's run state, and the hash map's element for 39, exist
    // after these.
    run(39);
    run(39);
    let allocations = allocations_in(|| (0..100).for_each(|_| run(39)));
    assert_eq!(allocations, 0, "heap allocations in 100 runs");
    // The runs did what they say: 102 counted.
    let v = value(&t, "counts", &39u64.to_ne_bytes());
    assert_eq!(u64::from_ne_bytes(v[..8].try_into().unwrap()), 102);
    let big = value(&t, "last", &39u64.to_ne_bytes());
    assert_eq!(big.len(), 256);
    assert_eq!(u64::from_ne_bytes(big[..8].try_into().unwrap()), 39);
    assert!(big[8..248].iter().all(|&b| b == 0));
}

/// `bpf_get_stack` and `bpf_get_stackid` walk the frame-pointer chain
/// into buffers on the stack: a chain of two frames built here, so the
/// stack is the probed address and the two return addresses.
#[test]
fn stack_helpers_allocate_nothing() {
    let t = TracingObject::load(object(), &TracingOptions::default()).unwrap();
    let id = t.program_id("on_hit").unwrap();
    // Two frames of [caller's frame pointer, return address], the
    // caller's above, as on a stack that grows down.
    let mut chain = [0u64, 0x1000, 0, 0x2000];
    chain[0] = &chain[2] as *const u64 as u64;
    let mut regs = PtRegs {
        ip: 0x500,
        bp: chain.as_ptr() as u64,
        ..PtRegs::default()
    };
    let site = ProbeSite::default();
    t.run_regs(id, &mut regs, &site);
    t.run_regs(id, &mut regs, &site);
    let allocations = allocations_in(|| {
        for _ in 0..100 {
            t.run_regs(id, &mut regs, &site);
        }
    });
    assert_eq!(allocations, 0, "heap allocations in 100 runs");
    let result = |k: u32| {
        let v = value(&t, "stack_results", &k.to_ne_bytes());
        i64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    // Three frames of 8 bytes; a stack id, the same every run.
    assert_eq!(result(0), 24);
    let stack_id = result(1);
    assert!(stack_id >= 0, "bpf_get_stackid: {stack_id}");
    let frames = value(&t, "stacks", &(stack_id as u32).to_ne_bytes());
    let ips: Vec<u64> = frames
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .take_while(|&ip| ip != 0)
        .collect();
    assert_eq!(ips, [0x500, 0x1000, 0x2000]);
}

/// `bpf_printk` (with three arguments and with more: `bpf_trace_vprintk`),
/// `bpf_snprintf` and a 1 KiB value copied from a per-CPU "heap" into a
/// hash map, as libbpf-tools build their events: formatting writes into
/// buffers on the stack, the lines into the object's ring allocated at
/// load, and the large value is read in place.
#[test]
fn printk_snprintf_and_large_values_allocate_nothing() {
    let t = TracingObject::load(object(), &TracingOptions::default()).unwrap();
    let id = t.program_id("on_print").unwrap();
    let run = |nr: u64| {
        let mut args = RawSyscallArgs { args: [0, nr] };
        t.run_raw_syscall(id, &mut args, &ProbeSite::default());
    };
    run(3);
    run(3);
    let allocations = allocations_in(|| (0..100).for_each(|_| run(3)));
    assert_eq!(allocations, 0, "heap allocations in 100 runs");
    let (lines, lost) = t.take_trace_lines();
    assert_eq!(lost.total(), 0, "{lost:?}");
    assert_eq!(lines.len(), 204, "two lines a run");
    assert_eq!(lines[0], "nr 3 name comm-like ip 127.0.0.1");
    assert_eq!(lines[1], "42    |00beef|ABCDEF0123|q|comm-like");
    assert_eq!(lines[202..], lines[..2]);
    let text = value(&t, "formatted", &0u32.to_ne_bytes());
    assert_eq!(
        &text[..text.iter().position(|&b| b == 0).unwrap()],
        b"3-comm-like-007"
    );
    let huge = value(&t, "huges", &3u64.to_ne_bytes());
    assert_eq!(huge.len(), 1024);
    assert_eq!(u64::from_ne_bytes(huge[..8].try_into().unwrap()), 3);
    assert_eq!(u64::from_ne_bytes(huge[1016..].try_into().unwrap()), 6);
}

/// Lines pushed out of a full ring before the report reads them are
/// counted (the report's `"trace_lines_lost"`), and the count starts
/// again after each read.
#[test]
fn lines_pushed_out_of_the_ring_are_counted() {
    let opts = TracingOptions {
        trace_lines: 150,
        ..TracingOptions::default()
    };
    let t = TracingObject::load(object(), &opts).unwrap();
    let id = t.program_id("on_print").unwrap();
    for _ in 0..100 {
        let mut args = RawSyscallArgs { args: [0, 3] };
        t.run_raw_syscall(id, &mut args, &ProbeSite::default());
    }
    let (lines, lost) = t.take_trace_lines();
    assert_eq!(lines.len(), 150, "the last 150 of 200 lines");
    assert_eq!((lost.pushed_out, lost.busy), (50, 0));
    assert_eq!(lines[149], "42    |00beef|ABCDEF0123|q|comm-like");
    let (lines, lost) = t.take_trace_lines();
    assert!(lines.is_empty() && lost.total() == 0, "{lines:?} {lost:?}");
}

/// `bpf_for_each_map_elem` over a hash map and an array: the callbacks get
/// each element's key and value in place (a hash map's in its element, an
/// array's index on the helper's frame), nothing is copied to the heap.
#[test]
fn for_each_map_elem_allocates_nothing() {
    let t = TracingObject::load(object(), &TracingOptions::default()).unwrap();
    let enter = t.program_id("on_enter").unwrap();
    for nr in [5u64, 9, 9] {
        let mut args = RawSyscallArgs { args: [0, nr] };
        t.run_raw_syscall(enter, &mut args, &ProbeSite::default());
    }
    let id = t.program_id("on_walk").unwrap();
    let run = || {
        let mut args = RawSyscallArgs { args: [0, 0] };
        t.run_raw_syscall(id, &mut args, &ProbeSite::default());
    };
    run();
    run();
    let allocations = allocations_in(|| (0..100).for_each(|_| run()));
    assert_eq!(allocations, 0, "heap allocations in 100 runs");
    // counts: 5 -> 1, 9 -> 2; stack_results: keys 0 and 1.
    let w = value(&t, "walks", &0u32.to_ne_bytes());
    let word = |i: usize| u64::from_ne_bytes(w[i * 8..i * 8 + 8].try_into().unwrap());
    assert_eq!((word(0), word(1)), (5_001 + 9_002 + 1, 4));
}
