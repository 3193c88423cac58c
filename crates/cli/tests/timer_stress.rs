//! `bpf_timer` under concurrency: two threads run one object's program on
//! random commands (add a flow with its timer, arm it, cancel it, delete
//! the flow) while the timer thread fires callbacks that re-arm or delete
//! their own flows. Nothing may fault, every helper must answer one of the
//! kernel's values for the situation, and the callbacks counted must not
//! exceed the starts that could have armed them. The kernel cannot be
//! compared (the interleaving decides); its sequential semantics are
//! `timer_run.rs`'s.

mod support;

use bpfjet_runtime::worker::XdpRunnerFactory;
use bpfjet_runtime::{LoadedObject, MemoryMode, ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::time::Duration;

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct flow {
	__u64 fired;
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct flow);
} flows SEC(".maps");

/* [0] callbacks, [1] starts that armed, [2] cancels of an armed timer,
 * [3] answers the kernel never gives here. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static void bump(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static int cb(void *map, __u32 *key, struct flow *f)
{
	bump(0);
	f->fired++;
	if (f->fired & 1)
		bpf_map_delete_elem(map, key);
	else if (bpf_timer_start(&f->t, 20000, 0) == 0)
		bump(1);
	return 0;
}

SEC("xdp")
int churn(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 2) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u32 key = d[0] & 15;
	struct flow *f;
	long r;
	switch (d[1] & 3) {
	case 0: {
		struct flow fresh = {};
		if (bpf_map_update_elem(&flows, &key, &fresh, BPF_NOEXIST))
			return XDP_PASS;
		f = bpf_map_lookup_elem(&flows, &key);
		if (!f)
			return XDP_PASS;
		r = bpf_timer_init(&f->t, &flows, 1);
		/* Another CPU may have re-made the flow and its timer. */
		if (r && r != -16)
			bump(3);
		r = bpf_timer_set_callback(&f->t, cb);
		if (r && r != -22)
			bump(3);
		return XDP_PASS;
	}
	case 1:
		f = bpf_map_lookup_elem(&flows, &key);
		if (!f)
			return XDP_PASS;
		r = bpf_timer_start(&f->t, 10000 + d[0] * 1000, 0);
		if (r == 0)
			bump(1);
		else if (r != -22)
			bump(3);
		return XDP_PASS;
	case 2:
		f = bpf_map_lookup_elem(&flows, &key);
		if (!f)
			return XDP_PASS;
		r = bpf_timer_cancel(&f->t);
		if (r == 1)
			bump(2);
		else if (r != 0 && r != -22)
			bump(3);
		return XDP_PASS;
	default:
		bpf_map_delete_elem(&flows, &key);
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
"#;

fn stat(loaded: &LoadedObject, i: u32) -> u64 {
    let v = loaded
        .map("stats")
        .unwrap()
        .lookup_copy(&i.to_ne_bytes())
        .unwrap();
    u64::from_ne_bytes(v[..8].try_into().unwrap())
}

#[test]
fn timers_survive_concurrent_churn() {
    let path = Compile::text("timer_stress", SOURCE).object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let loaded = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    std::thread::scope(|s| {
        for cpu in 0..2usize {
            let loaded = &loaded;
            s.spawn(move || {
                let opts = TestRunOptions {
                    cpu,
                    ..TestRunOptions::default()
                };
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ cpu as u64;
                for i in 0..40_000u32 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut frame = vec![0u8; 64];
                    frame[0] = x as u8;
                    frame[1] = (x >> 8) as u8;
                    let r = loaded.test_run("churn", &frame, &opts).unwrap();
                    assert_eq!(r.retval, 2, "run {i} on cpu {cpu}");
                    assert!(r.notes.is_empty(), "run {i}: {:?}", r.notes);
                    // Pauses in which armed timers expire.
                    if i % 400 == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            });
        }
    });
    // Every armed timer has expired or was cancelled or died by now.
    std::thread::sleep(Duration::from_millis(200));
    let (callbacks, armed, cancelled, odd) = (
        stat(&loaded, 0),
        stat(&loaded, 1),
        stat(&loaded, 2),
        stat(&loaded, 3),
    );
    eprintln!(
        "callbacks {callbacks}, starts that armed {armed}, cancels of armed timers {cancelled}"
    );
    assert_eq!(odd, 0, "answers the kernel would not give");
    assert!(
        callbacks > 0 && armed > 0 && cancelled > 0,
        "{callbacks} {armed} {cancelled}"
    );
    assert!(
        callbacks + cancelled <= armed,
        "callbacks {callbacks} + cancels {cancelled} > starts {armed}"
    );
}

/// A timer callback shares its CPU slot's per-CPU values with the programs
/// run on that slot, as in the kernel, where both run on one CPU and never
/// at once. Here a callback re-arms itself with no delay, so the timer
/// thread runs it continuously, while this thread runs the program on the
/// same slot; both add 1 to the slot's per-CPU counter with a plain load
/// and store and some work between them. Exclusion holds if the counter
/// ends exactly at runs + callbacks (each also counted atomically).
const SLOT_SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct tick {
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tick);
} ticks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} shared SEC(".maps");

/* [0] callbacks, [1] runs, [2] 1 = stop re-arming */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __u64 *stat(__u32 i)
{
	return bpf_map_lookup_elem(&stats, &i);
}

/* Not atomic: a load, some helper calls, a store. */
static void add_one(void)
{
	__u32 z = 0;
	__u64 *v = bpf_map_lookup_elem(&shared, &z);
	if (!v)
		return;
	__u64 seen = *(volatile __u64 *)v;
	__u64 spin = bpf_ktime_get_ns();
	spin ^= bpf_ktime_get_ns();
	spin ^= bpf_ktime_get_ns();
	*(volatile __u64 *)v = seen + 1 + (spin & 0);
}

static int cb(void *map, __u32 *key, struct tick *t)
{
	__u64 *c = stat(0), *stop = stat(2);
	add_one();
	if (c)
		__sync_fetch_and_add(c, 1);
	if (stop && !*stop)
		bpf_timer_start(&t->t, 0, 0);
	return 0;
}

SEC("xdp")
int slot(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u32 z = 0;
	struct tick *t = bpf_map_lookup_elem(&ticks, &z);
	if (!t)
		return XDP_ABORTED;
	if (d[0] == 1) {
		bpf_timer_init(&t->t, &ticks, 1);
		bpf_timer_set_callback(&t->t, cb);
		bpf_timer_start(&t->t, 0, 0);
	}
	add_one();
	__u64 *r = stat(1);
	if (r)
		__sync_fetch_and_add(r, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

/// How the program is run on CPU slot 0.
#[derive(Clone, Copy, Debug)]
enum Runner {
    /// `BPF_PROG_TEST_RUN` on the interpreter.
    TestRun,
    /// `BPF_PROG_TEST_RUN` on the JIT.
    JitTestRun,
    /// A data-plane worker's runner, 32 frames a batch.
    Worker,
}

fn slot_race(runner: Runner) {
    let path = Compile::text("timer_slot", SLOT_SOURCE).object();
    let on = support::OnEngine::load(
        &path,
        match runner {
            Runner::JitTestRun => support::Engine::Jit,
            _ => support::Engine::Interp,
        },
    );
    let loaded = on.loaded();
    let mut frame = vec![0u8; 64];
    frame[0] = 1;
    on.run("slot", &frame);
    frame[0] = 0;
    let mut worker = matches!(runner, Runner::Worker).then(|| {
        let factory = XdpRunnerFactory::new(loaded, "slot", MemoryMode::BoundsChecked).unwrap();
        factory.runner(0, 1, 0, None, None).unwrap()
    });
    // Until the callback has run often enough to have raced many times.
    let started = std::time::Instant::now();
    while stat(loaded, 0) < 20_000 && started.elapsed() < Duration::from_secs(20) {
        match worker.as_mut() {
            Some(w) => {
                for _ in 0..32 {
                    w.begin_batch();
                    for _ in 0..32 {
                        let mut buf = frame.clone();
                        let len = buf.len();
                        w.run(&mut buf, 0, len).unwrap();
                    }
                    w.end_batch();
                }
            }
            None => {
                for _ in 0..1000 {
                    on.run("slot", &frame);
                }
            }
        }
    }
    loaded
        .map("stats")
        .unwrap()
        .update(&2u32.to_ne_bytes(), &1u64.to_ne_bytes(), 0, 0)
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let (callbacks, runs) = (stat(loaded, 0), stat(loaded, 1));
    let per_cpu = loaded
        .map("shared")
        .unwrap()
        .lookup_percpu(&0u32.to_ne_bytes())
        .unwrap();
    let slot0 = u64::from_ne_bytes(per_cpu[0][..8].try_into().unwrap());
    eprintln!("{runner:?}: runs {runs}, callbacks {callbacks}, slot 0's counter {slot0}");
    assert!(
        callbacks > 1000,
        "{runner:?}: the callback ran {callbacks} times"
    );
    assert_eq!(
        slot0,
        runs + callbacks,
        "{runner:?}: updates lost on CPU slot 0: a callback ran beside a run"
    );
}

#[test]
fn callbacks_never_run_beside_a_test_run_on_their_cpu_slot() {
    slot_race(Runner::TestRun);
}

#[test]
fn callbacks_never_run_beside_a_jit_test_run_on_their_cpu_slot() {
    slot_race(Runner::JitTestRun);
}

#[test]
fn callbacks_never_run_beside_a_workers_batch_on_their_cpu_slot() {
    slot_race(Runner::Worker);
}
