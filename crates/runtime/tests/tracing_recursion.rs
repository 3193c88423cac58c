//! The recursion rule of tracing runs, through the per-thread run cache: a
//! run that starts while the same thread is already running a program (of
//! any object: a signal handler here, a probe inside a helper in a traced
//! process) is skipped and counted as missed, as the kernel counts
//! `recursion_misses`; every other run runs, exactly once. Two objects run
//! alternately on one thread keep their own state (the cache switches
//! between them), and so do many threads. The programs (C, compiled with
//! clang-19 at test time) count their runs in an array map; the counts are
//! checked against the runs made and missed.

use bpfjet_runtime::tracing::{ProbeSite, RawSyscallArgs, TracingObject, TracingOptions};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// `args[1]` iterations of a loop the compiler keeps: a run long enough for
/// a signal to land inside it.
const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, __u64); } runs SEC(".maps");
SEC("raw_tracepoint/sys_enter")
int count(struct bpf_raw_tracepoint_args *ctx) {
    __u32 k = 0;
    __u64 *n = bpf_map_lookup_elem(&runs, &k);
    if (n)
        __sync_fetch_and_add(n, 1);
    unsigned long spin = ctx->args[1];
    for (int i = 0; i < 20000; i++) {
        if (i >= spin)
            break;
        asm volatile("" ::: "memory");
    }
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

fn compile() -> &'static bpfjet_obj::Object {
    static OBJ: OnceLock<bpfjet_obj::Object> = OnceLock::new();
    OBJ.get_or_init(|| build("prog", SOURCE))
}

fn build(name: &str, source: &str) -> bpfjet_obj::Object {
    {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tracing_recursion");
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join(format!("{name}.c"));
        let obj = dir.join(format!("{name}.o"));
        std::fs::write(&src, source).unwrap();
        let arch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
        let out = Command::new("clang-19")
            .args(["-O2", "-g", "-target", "bpf", "-I", &arch, "-c"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .output()
            .expect("clang-19 (scripts/setup.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        bpfjet_obj::load_file(&obj).unwrap()
    }
}

fn load() -> TracingObject {
    TracingObject::load(compile(), &TracingOptions::default()).unwrap()
}

fn run(t: &TracingObject, spin: u64) {
    let id = t.program_id("count").unwrap();
    let mut args = RawSyscallArgs { args: [0, spin] };
    t.run_raw_syscall(id, &mut args, &ProbeSite::default());
}

fn count(t: &TracingObject) -> u64 {
    let v = t
        .loaded()
        .map("runs")
        .unwrap()
        .lookup_copy(&0u32.to_le_bytes())
        .unwrap();
    u64::from_le_bytes(v[..8].try_into().unwrap())
}

/// The object the signal handler runs, and how often it tried.
static NESTED: OnceLock<TracingObject> = OnceLock::new();
static HANDLER_RUNS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    if let Some(t) = NESTED.get() {
        HANDLER_RUNS.fetch_add(1, Ordering::Relaxed);
        run(t, 1);
    }
}

/// A signal handler runs object B while the interrupted thread runs object
/// A (nested: missed, counted on B) or between A's runs (runs). A's runs
/// all run; B's runs plus B's misses are the handler's attempts, and some
/// attempts land inside A's runs.
#[test]
fn a_run_inside_a_run_of_the_thread_is_missed_and_counted() {
    let outer = load();
    let nested = NESTED.get_or_init(load);
    // SAFETY: installs a handler for SIGUSR1, which nothing else here uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    // Both objects' state exists on this thread before any signal (the
    // handler then allocates nothing).
    run(&outer, 1);
    run(nested, 1);
    let (outer_before, nested_before) = (count(&outer), count(nested));
    HANDLER_RUNS.store(0, Ordering::Relaxed);

    // SAFETY: the calling thread's id.
    let me = unsafe { libc::pthread_self() };
    let done = AtomicBool::new(false);
    // At least this many runs, and on until the handler ran this often (a
    // loaded machine may not schedule the signalling thread for a while).
    const RUNS: u64 = 400;
    const ATTEMPTS: u64 = 50;
    let mut runs = 0;
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                // SAFETY: signals this test's thread, which is alive
                // until `done` is set.
                unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        while runs < RUNS || HANDLER_RUNS.load(Ordering::Relaxed) < ATTEMPTS {
            run(&outer, 20_000);
            runs += 1;
            if start.elapsed() > std::time::Duration::from_secs(120) {
                break;
            }
        }
        done.store(true, Ordering::Relaxed);
    });
    let attempts = HANDLER_RUNS.load(Ordering::Relaxed);
    let nested_ran = count(nested) - nested_before;
    assert!(
        attempts >= ATTEMPTS,
        "the signalling thread got to send {attempts} signals in 120 s"
    );
    assert_eq!(count(&outer) - outer_before, runs, "every outer run ran");
    assert_eq!(outer.missed_runs(), 0);
    assert_eq!(
        nested_ran + nested.missed_runs(),
        attempts,
        "every handler attempt ran or was missed"
    );
    assert!(
        nested.missed_runs() > 0,
        "no signal landed inside a run ({attempts} attempts)"
    );
    assert_eq!(outer.faults().0 + nested.faults().0, 0);
}

/// Objects run alternately on one thread, on many threads, and an object
/// dropped and a new one loaded: each keeps its own count, nothing missed.
#[test]
fn objects_alternating_on_threads_keep_their_own_state() {
    let a = load();
    let b = load();
    const THREADS: u64 = 4;
    const RUNS: u64 = 500;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for i in 0..RUNS {
                    run(&a, 1);
                    if i % 2 == 0 {
                        run(&b, 1);
                    }
                }
            });
        }
    });
    assert_eq!(count(&a), THREADS * RUNS);
    assert_eq!(count(&b), THREADS * RUNS / 2);
    assert_eq!(a.missed_runs() + b.missed_runs(), 0);
    // An object dropped on this thread after running here: a new object
    // (a new state) runs from zero.
    run(&a, 1);
    drop(a);
    let c = load();
    run(&c, 1);
    run(&b, 1);
    run(&c, 1);
    assert_eq!(count(&c), 2);
    assert_eq!(count(&b), THREADS * RUNS / 2 + 1);
}

/// Programs that cannot observe their CPU run without a CPU-slot lease;
/// a program reading its CPU, or with per-CPU maps, leases one.
#[test]
fn cpu_slots_are_leased_only_when_observable() {
    assert!(!load().leases_cpu_slots(), "an array counter");
    const HEAD: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";
    const TAIL: &str = "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
    let cpu_id = r#"
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4);
         __type(key, __u32); __type(value, __u64); } seen SEC(".maps");
SEC("raw_tracepoint/sys_enter")
int which(void *ctx) {
    __u32 cpu = bpf_get_smp_processor_id();
    __u64 one = 1;
    bpf_map_update_elem(&seen, &cpu, &one, BPF_ANY);
    return 0;
}
"#;
    let per_cpu = r#"
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, __u64); } hits SEC(".maps");
SEC("raw_tracepoint/sys_enter")
int hit(void *ctx) {
    __u32 k = 0;
    __u64 *n = bpf_map_lookup_elem(&hits, &k);
    if (n)
        *n += 1;
    return 0;
}
"#;
    for (name, body) in [("cpu_id", cpu_id), ("per_cpu", per_cpu)] {
        let obj = build(name, &format!("{HEAD}{body}{TAIL}"));
        let t = TracingObject::load(&obj, &TracingOptions::default()).unwrap();
        assert!(t.leases_cpu_slots(), "{name}");
    }
}
