//! `bpf_timer` (helpers 169–172) against the kernel: verifier verdicts of
//! C programs (the timer's place, its map, the async callback's return,
//! direct and helper access, GPL, tracing program types, map types), and
//! runs where the same commands drive timers on the kernel (its test run;
//! callbacks fire in its softirqs) and on bpfjet's interpreter and JIT
//! (callbacks fire on the timer thread): every helper's return value,
//! every callback's effect on the maps, re-arming from the callback,
//! cancel (armed, idle, its own timer: -EDEADLK), timers of deleted and
//! updated elements that must never fire, a callback deleting its own
//! element, absolute expiries, clocks and flags.
//!
//! Without a usable kernel the kernel column is skipped with a message and
//! bpfjet is checked against the expected values.

mod support;

use bpfjet_maps::state::MapState;
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{Engine, OnEngine};

const PRELUDE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct elem {
	__u64 fired;
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct elem);
} arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct elem);
} other SEC(".maps");

struct plain {
	__u64 a, b, c;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct plain);
} plain SEC(".maps");

static int cb(void *map, __u32 *key, struct elem *e)
{
	e->fired++;
	return 0;
}

static int cb_one(void *map, __u32 *key, struct elem *e)
{
	return 1;
}
"#;

/// (name, section, function body, license, kernel accepts, words of
/// bpfjet's reason when refused).
const VERDICTS: &[(&str, &str, &str, &str, bool, &str)] = &[
    (
        "all_four",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         bpf_timer_init(&e->t, &arr, 1);
         bpf_timer_set_callback(&e->t, cb);
         bpf_timer_start(&e->t, 1000, 0);
         return bpf_timer_cancel(&e->t) ? XDP_DROP : XDP_PASS;",
        "GPL",
        true,
        "",
    ),
    (
        "not_null_checked",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&other, &k);
         bpf_timer_init(&e->t, &other, 1);
         return XDP_PASS;",
        "GPL",
        false,
        "map_value_or_null",
    ),
    (
        "wrong_offset",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         bpf_timer_init((struct bpf_timer *)&e->fired, &arr, 1);
         return XDP_PASS;",
        "GPL",
        false,
        "doesn't point to 'struct bpf_timer' that is at 8",
    ),
    (
        "other_map",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         bpf_timer_init(&e->t, &other, 1);
         return XDP_PASS;",
        "GPL",
        false,
        "doesn't match map pointer",
    ),
    (
        "no_timer_in_value",
        "xdp",
        "__u32 k = 0; struct plain *p = bpf_map_lookup_elem(&plain, &k);
         if (!p) return XDP_PASS;
         bpf_timer_init((struct bpf_timer *)p, &plain, 1);
         return XDP_PASS;",
        "GPL",
        false,
        "has no valid bpf_timer",
    ),
    (
        "callback_returns_one",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         bpf_timer_set_callback(&e->t, cb_one);
         return XDP_PASS;",
        "GPL",
        false,
        "At async callback",
    ),
    (
        "read_timer_bytes",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         return *(volatile __u64 *)&e->t ? XDP_DROP : XDP_PASS;",
        "GPL",
        false,
        "bpf_timer cannot be accessed directly by load/store",
    ),
    (
        "helper_reads_timer",
        "xdp",
        "__u32 k = 0, j = 1; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         bpf_map_update_elem(&arr, &j, e, 0);
         return XDP_PASS;",
        "GPL",
        false,
        "bpf_timer cannot be accessed directly by load/store",
    ),
    (
        "helper_reads_around_timer",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         return bpf_map_lookup_elem(&plain, &e->fired) ? XDP_DROP : XDP_PASS;",
        "GPL",
        true,
        "",
    ),
    (
        "not_gpl",
        "xdp",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         if (!e) return XDP_PASS;
         return bpf_timer_init(&e->t, &arr, 1) ? XDP_DROP : XDP_PASS;",
        "Proprietary",
        false,
        "GPL",
    ),
    (
        "kprobe_uses_timer_map",
        "kprobe/do_nanosleep",
        "__u32 k = 0; struct elem *e = bpf_map_lookup_elem(&arr, &k);
         return e ? 1 : 0;",
        "GPL",
        false,
        "tracing progs cannot use bpf_timer yet",
    ),
    (
        "kprobe_plain_map",
        "kprobe/do_nanosleep",
        "__u32 k = 0; return bpf_map_lookup_elem(&plain, &k) ? 1 : 0;",
        "GPL",
        true,
        "",
    ),
];

#[test]
fn timer_programs_get_the_kernels_verdict() {
    let cases = VERDICTS
        .iter()
        .map(|(name, section, body, license, accepts, words)| {
            let ctx = if section.starts_with("kprobe") {
                "void *ctx"
            } else {
                "struct xdp_md *ctx"
            };
            let text = format!(
                "{PRELUDE}\nSEC(\"{section}\")\nint prog({ctx})\n{{\n{body}\n}}\n\
                 char _license[] SEC(\"license\") = \"{license}\";\n"
            );
            (*name, text, *accepts, *words)
        });
    let failures = support::verdict_failures("bpf_timer verdicts", cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A timer in a per-CPU map's value: the kernel refuses the map's BTF
/// (EOPNOTSUPP) and libbpf creates it again without BTF, so a program that
/// only looks values up loads, and one that uses the timer does not.
#[test]
fn timer_in_a_percpu_map_is_plain_bytes() {
    let source = |body: &str| {
        format!(
            r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct elem {{ __u64 n; struct bpf_timer t; }};
struct {{
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct elem);
}} pcpu SEC(".maps");
SEC("xdp")
int prog(struct xdp_md *ctx)
{{
	__u32 k = 0;
	struct elem *e = bpf_map_lookup_elem(&pcpu, &k);
	if (!e) return XDP_PASS;
	{body}
	return XDP_DROP;
}}
char _license[] SEC("license") = "GPL";
"#
        )
    };
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("bpf_timer per-CPU map, kernel column", why);
    }
    for (name, body, accepts) in [
        ("timer_percpu_lookup", "e->n++;", true),
        (
            "timer_percpu_init",
            "bpf_timer_init(&e->t, &pcpu, 1);",
            false,
        ),
    ] {
        let path = Compile::text(name, &source(body)).object();
        if kernel.is_ok() {
            let k = bpfjet_kernel::KernelObject::open_with(
                &path,
                &bpfjet_kernel::LoadOptions::default(),
            );
            assert_eq!(
                k.is_ok(),
                accepts,
                "{name}: kernel {:?}",
                k.err().map(|e| e.to_string())
            );
        }
        let obj = bpfjet_obj::load_file(&path).unwrap();
        let ours = bpfjet_runtime::LoadedObject::load(&obj, &Default::default());
        match ours {
            Ok(_) => assert!(accepts, "{name}: bpfjet accepts it"),
            Err(e) => {
                assert!(!accepts, "{name}: bpfjet refuses it: {e}");
                assert!(
                    e.to_string().contains("has no valid bpf_timer"),
                    "{name}: {e}"
                );
            }
        }
    }
}

/// The run program: byte 0 of the frame is a command, byte 1 a key,
/// bytes 2..4 a little-endian parameter, byte 4 flags.
const RUN_SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct elem {
	__u64 fired;     /* callbacks run on this element */
	__u64 rearm;     /* the callback starts its timer again while fired < rearm */
	__u64 last_key;  /* the key the callback got */
	__s64 self_cancel; /* bpf_timer_cancel of its own timer in the callback */
	__s64 rets[6];   /* init, set_callback, start, cancel, start (abs), misc */
	struct bpf_timer t;
	__u64 tail;
	struct bpf_spin_lock lock; /* for BPF_F_LOCK updates (op 8) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, struct elem);
} arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct elem);
} hmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[4]);
} calls SEC(".maps");

static void count(int i)
{
	__u32 z = 0;
	__u64 *c = bpf_map_lookup_elem(&calls, &z);
	if (c && i >= 0 && i < 4)
		__sync_fetch_and_add(&c[i], 1);
}

static int arr_cb(void *map, __u32 *key, struct elem *e)
{
	e->fired++;
	e->last_key = *key;
	e->self_cancel = bpf_timer_cancel(&e->t);
	if (e->fired < e->rearm)
		bpf_timer_start(&e->t, 2000000, 0);
	count(0);
	return 0;
}

static int hash_cb(void *map, __u32 *key, struct elem *e)
{
	e->fired++;
	e->last_key = *key;
	count(1);
	if (e->rearm == 99)
		bpf_map_delete_elem(map, key);
	return 0;
}

static __always_inline struct elem *pick(__u8 which, __u32 k)
{
	if (which)
		return bpf_map_lookup_elem(&hmap, &k);
	return bpf_map_lookup_elem(&arr, &k);
}

SEC("xdp")
int timers(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 8) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 op = d[0], which = d[5];
	__u32 k = d[1];
	__u64 param = d[2] | (d[3] << 8);
	__u64 flags = d[4];
	if (op == 20) {
		struct elem fresh = {};
		fresh.rearm = param;
		return bpf_map_update_elem(&hmap, &k, &fresh, 0) ? XDP_ABORTED : XDP_PASS;
	}
	if (op == 21)
		return bpf_map_delete_elem(&hmap, &k) ? XDP_ABORTED : XDP_PASS;
	struct elem *e = pick(which, k);
	if (!e)
		return XDP_DROP;
	switch (op) {
	case 1:
		if (which)
			e->rets[0] = bpf_timer_init(&e->t, &hmap, flags);
		else
			e->rets[0] = bpf_timer_init(&e->t, &arr, flags);
		break;
	case 2:
		if (which)
			e->rets[1] = bpf_timer_set_callback(&e->t, hash_cb);
		else
			e->rets[1] = bpf_timer_set_callback(&e->t, arr_cb);
		break;
	case 3:
		e->rets[2] = bpf_timer_start(&e->t, param * 1000000, flags);
		break;
	case 4:
		e->rets[3] = bpf_timer_cancel(&e->t);
		break;
	case 5:
		/* Absolute: param ms from now on the monotonic clock. */
		e->rets[4] = bpf_timer_start(&e->t, bpf_ktime_get_ns() + param * 1000000, 1 | flags);
		break;
	case 6:
		e->rearm = param;
		break;
	case 7:
		/* Program-side update of the element: frees its timer. */
		{
			struct elem fresh = {};
			fresh.rearm = e->rearm;
			fresh.fired = e->fired;
			if (which)
				e->rets[5] = bpf_map_update_elem(&hmap, &k, &fresh, 0);
			else
				e->rets[5] = bpf_map_update_elem(&arr, &k, &fresh, 0);
		}
		break;
	case 8:
		/* BPF_F_LOCK update: a hash element is written in place around
		 * its timer, which lives on; an array element's timer is freed. */
		{
			struct elem fresh = {};
			fresh.rearm = e->rearm;
			fresh.fired = e->fired;
			fresh.rets[0] = e->rets[0];
			fresh.rets[2] = e->rets[2];
			if (which)
				e->rets[5] = bpf_map_update_elem(&hmap, &k, &fresh, BPF_F_LOCK);
			else
				e->rets[5] = bpf_map_update_elem(&arr, &k, &fresh, BPF_F_LOCK);
		}
		break;
	default:
		return XDP_ABORTED;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

fn run_object() -> PathBuf {
    Compile::text("timer_run", RUN_SOURCE).object()
}

/// One step: a command frame, or a pause for timers to fire.
#[derive(Clone, Debug)]
enum Step {
    Cmd {
        op: u8,
        key: u8,
        param: u16,
        flags: u8,
        hash: bool,
    },
    Sleep(u64),
}

fn cmd(op: u8, key: u8, param: u16, flags: u8, hash: bool) -> Step {
    Step::Cmd {
        op,
        key,
        param,
        flags,
        hash,
    }
}

fn steps() -> Vec<Step> {
    use Step::Sleep;
    let a = false;
    let h = true;
    vec![
        // Array 0: errors before init, then init (MONOTONIC), a bad clock
        // and a second init (EBUSY), start before a callback (EINVAL).
        cmd(2, 0, 0, 0, a),
        cmd(3, 0, 1, 0, a),
        cmd(4, 0, 0, 0, a),
        cmd(1, 0, 0, 5, a),
        cmd(1, 0, 0, 1, a),
        cmd(3, 0, 1, 0, a),
        cmd(1, 0, 0, 1, a),
        // Callback, bad start flags, then fire once after 1 ms; re-armed
        // by the callback while fired < 3.
        cmd(2, 0, 0, 0, a),
        cmd(3, 0, 1, 4, a),
        cmd(6, 0, 3, 0, a),
        cmd(3, 0, 1, 0, a),
        // Array 1: REALTIME clock, armed for 10 s, then cancelled twice
        // (1, then 0): never fires.
        cmd(1, 1, 0, 0, a),
        cmd(2, 1, 0, 0, a),
        cmd(3, 1, 10000, 0, a),
        cmd(4, 1, 0, 0, a),
        cmd(4, 1, 0, 0, a),
        // Array 2: BOOTTIME, absolute start 2 ms from now, CPU pin.
        cmd(1, 2, 0, 7, a),
        cmd(2, 2, 0, 0, a),
        cmd(5, 2, 2, 2, a),
        // Array 3: armed for 1 s, then updated by the program: the
        // update frees the timer, it never fires; init works again.
        cmd(1, 3, 0, 1, a),
        cmd(2, 3, 0, 0, a),
        cmd(3, 3, 1000, 0, a),
        cmd(7, 3, 0, 0, a),
        cmd(4, 3, 0, 0, a),
        cmd(1, 3, 0, 1, a),
        // Hash 5: armed for 1 s, then deleted and added again: the old
        // timer never fires on the new element (the test ends before the
        // second would have passed: the kernel would not run it either).
        cmd(20, 5, 0, 0, h),
        cmd(1, 5, 0, 1, h),
        cmd(2, 5, 0, 0, h),
        cmd(3, 5, 1000, 0, h),
        cmd(21, 5, 0, 0, h),
        cmd(20, 5, 0, 0, h),
        // Hash 6: fires once and its callback deletes its element.
        cmd(20, 6, 99, 0, h),
        cmd(1, 6, 0, 1, h),
        cmd(2, 6, 0, 0, h),
        cmd(3, 6, 1, 0, h),
        // Hash 7: fires once, element stays.
        cmd(20, 7, 0, 0, h),
        cmd(1, 7, 0, 1, h),
        cmd(2, 7, 0, 0, h),
        cmd(3, 7, 2, 0, h),
        // Hash 4: armed for 20 ms, then a BPF_F_LOCK update: it still fires.
        cmd(20, 4, 0, 0, h),
        cmd(1, 4, 0, 1, h),
        cmd(2, 4, 0, 0, h),
        cmd(3, 4, 20, 0, h),
        cmd(8, 4, 0, 0, h),
        // Array 4: the same, but an array's BPF_F_LOCK update frees the
        // timer (the kernel's array_map_update_elem): it never fires, and
        // a cancel after it finds no timer.
        cmd(1, 4, 0, 1, a),
        cmd(2, 4, 0, 0, a),
        cmd(3, 4, 20, 0, a),
        cmd(8, 4, 0, 0, a),
        cmd(4, 4, 0, 0, a),
        // Long enough for every armed timer (the 2 ms re-arms included).
        Sleep(300),
        // After firing: start again (array 0 fires a 4th time, rearm is
        // done), cancel an expired timer (0).
        cmd(4, 7, 0, 0, h),
        cmd(3, 0, 1, 0, a),
        Sleep(200),
    ]
}

fn frame(op: u8, key: u8, param: u16, flags: u8, hash: bool) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0] = op;
    f[1] = key;
    f[2..4].copy_from_slice(&param.to_le_bytes());
    f[4] = flags;
    f[5] = u8::from(hash);
    f
}

/// Actions of the commands, then the maps.
type Outcome = (Vec<u32>, MapState);

fn drive(mut run: impl FnMut(&[u8]) -> u32) -> Vec<u32> {
    let mut actions = Vec::new();
    for s in steps() {
        match s {
            Step::Cmd {
                op,
                key,
                param,
                flags,
                hash,
            } => actions.push(run(&frame(op, key, param, flags, hash))),
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
        }
    }
    actions
}

fn on_bpfjet(path: &Path, engine: Engine) -> Outcome {
    let on = OnEngine::load(path, engine);
    let actions = drive(|f| on.run("timers", f).0);
    (actions, on.loaded().dump_state().unwrap())
}

fn on_kernel(path: &Path) -> Option<Outcome> {
    let k = support::kernel_object(path, "bpf_timer runs, kernel column")?;
    let actions = drive(|f| k.test_run("timers", f, 1, Some(0)).unwrap().retval);
    Some((actions, k.dump_maps().unwrap()))
}

/// Element `key` of `map` as u64 words.
fn words(state: &MapState, map: &str, key: u32) -> Option<Vec<u64>> {
    let want: String = key
        .to_le_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let e = state[map].iter().find(|e| e.key.replace(' ', "") == want)?;
    let v = e.value.as_deref()?.replace(' ', "");
    Some(
        (0..v.len() / 16)
            .map(|i| {
                u64::from_str_radix(&v[i * 16..i * 16 + 16], 16)
                    .unwrap()
                    .swap_bytes()
            })
            .collect(),
    )
}

#[test]
fn timers_fire_like_the_kernels() {
    let path = run_object();
    let kernel = on_kernel(&path);
    let interp = on_bpfjet(&path, Engine::Interp);
    let checked = on_bpfjet(&path, Engine::Checked);
    let jit = on_bpfjet(&path, Engine::Jit);
    if let Some(k) = &kernel {
        assert_eq!(k.0, interp.0, "actions: kernel vs interpreter");
        assert_eq!(k.1, interp.1, "maps: kernel vs interpreter");
    }
    assert_eq!(interp, checked, "interpreter vs bounds-checked");
    assert_eq!(interp, jit, "interpreter vs JIT");

    // What the kernel gives, written down (so that a run without a kernel
    // checks something, and a kernel change is noticed).
    let s = &interp.1;
    let e = |errno: i64| (-errno) as u64;
    let a0 = words(s, "arr", 0).unwrap();
    // fired 4 (3 by the re-arm chain, 1 more after), rearm 3, key 0,
    // the callback's cancel of its own timer: -EDEADLK.
    assert_eq!(&a0[..4], &[4, 3, 0, e(35)], "array 0: {a0:?}");
    // rets: init 0 (the last, EBUSY before it is overwritten), set_callback
    // 0, start 0 (the last), cancel -EINVAL (before init).
    assert_eq!(&a0[4..8], &[e(16), 0, 0, e(22)], "array 0 rets: {a0:?}");
    assert_eq!(&a0[10..12], &[0, 0], "array 0: the timer reads as zeros");
    let a1 = words(s, "arr", 1).unwrap();
    assert_eq!(a1[0], 0, "array 1 never fires: {a1:?}");
    assert_eq!(a1[7], 0, "array 1: the second cancel finds it idle");
    let a2 = words(s, "arr", 2).unwrap();
    assert_eq!(
        (a2[0], a2[2], a2[8]),
        (1, 2, 0),
        "array 2 (absolute): {a2:?}"
    );
    let a3 = words(s, "arr", 3).unwrap();
    assert_eq!(a3[0], 0, "array 3 updated before expiry: {a3:?}");
    assert_eq!(a3[7], e(22), "array 3: cancel after the update: -EINVAL");
    assert_eq!(a3[4], 0, "array 3: init again after the update");
    let h5 = words(s, "hmap", 5).unwrap();
    assert_eq!(h5[0], 0, "hash 5 re-added: the old timer is gone: {h5:?}");
    assert!(
        words(s, "hmap", 6).is_none(),
        "hash 6 deleted by its callback"
    );
    let h7 = words(s, "hmap", 7).unwrap();
    assert_eq!((h7[0], h7[2], h7[7]), (1, 7, 0), "hash 7: {h7:?}");
    let h4 = words(s, "hmap", 4).unwrap();
    assert_eq!(
        (h4[0], h4[2], h4[9]),
        (1, 4, 0),
        "hash 4 fires after its BPF_F_LOCK update: {h4:?}"
    );
    let a4 = words(s, "arr", 4).unwrap();
    assert_eq!(
        (a4[0], a4[7], a4[9]),
        (0, e(22), 0),
        "array 4: its BPF_F_LOCK update freed the timer: {a4:?}"
    );
    let c = words(s, "calls", 0).unwrap();
    assert_eq!(&c[..2], &[5, 3], "callbacks run: array, hash");
}

/// A timer in the value of an inner map, reached through an
/// ARRAY_OF_MAPS and a HASH_OF_MAPS (the verifier knows the inner
/// template's timer from its BTF): init, callback and start from a
/// program, the callback firing, as in the kernel.
#[test]
fn timers_in_inner_maps_fire_like_the_kernels() {
    let path = Compile::text(
        "timer_inner",
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct elem { __u64 fired; struct bpf_timer t; __u64 rets; };
struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct elem);
} in0 SEC(".maps"), in1 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner);
} by_index SEC(".maps") = { .values = { &in0 } };
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner);
} by_key SEC(".maps") = { .values = { &in1 } };
static int cb(void *map, __u32 *key, struct elem *e)
{
	e->fired++;
	return 0;
}
static __always_inline __u64 arm(void *outer, __u32 slot)
{
	__u32 k = slot, i = 1;
	void *m = bpf_map_lookup_elem(outer, &k);
	if (!m)
		return 1000;
	struct elem *e = bpf_map_lookup_elem(m, &i);
	if (!e)
		return 2000;
	long a = bpf_timer_init(&e->t, m, 1);
	long b = bpf_timer_set_callback(&e->t, cb);
	long c = bpf_timer_start(&e->t, 1000000, 0);
	e->rets = (__u64)(a & 0xff) | (__u64)(b & 0xff) << 8 | (__u64)(c & 0xff) << 16;
	return 0;
}
SEC("xdp") int timers(struct xdp_md *ctx)
{
	return arm(&by_index, 0) + arm(&by_key, 0) == 0 ? XDP_TX : XDP_ABORTED;
}
char _license[] SEC("license") = "GPL";
"#,
    )
    .object();
    let run = |f: &mut dyn FnMut() -> u32| {
        let first = f();
        let again = f(); // init again: -EBUSY
        std::thread::sleep(Duration::from_millis(100));
        (first, again)
    };
    let mut results = Vec::new();
    for engine in [Engine::Interp, Engine::Jit] {
        let on = OnEngine::load(&path, engine);
        let actions = run(&mut || on.run("timers", &[0u8; 64]).0);
        results.push((
            format!("{engine:?}"),
            actions,
            on.loaded().dump_state().unwrap(),
        ));
    }
    if let Some(k) = support::kernel_object(&path, "timers in inner maps, kernel column") {
        let actions = run(&mut || k.test_run("timers", &[0u8; 64], 1, Some(0)).unwrap().retval);
        results.push(("kernel".into(), actions, k.dump_maps().unwrap()));
    }
    for (who, actions, maps) in &results {
        assert_eq!(*actions, (3, 3), "{who}: verdicts");
        for map in ["in0", "in1"] {
            let w = words(maps, map, 1).unwrap();
            // Fired once (the second start re-armed the same timer); the
            // second run's init -EBUSY (0xf0), set_callback and start 0.
            assert_eq!((w[0], w[3]), (1, 0xf0), "{who}: {map}: {w:?}");
        }
    }
    let (first, rest) = results.split_first().unwrap();
    for r in rest {
        assert_eq!(first.2, r.2, "maps: {} vs {}", first.0, r.0);
    }
}
