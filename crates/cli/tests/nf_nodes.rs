//! Node memory (bpfjet_node_* kfuncs) and the skip-list key-value store
//! built on it (examples/nf/skiplist.c, compiled here at test time).
//!
//! The store has no plain-eBPF build (plain eBPF cannot link nodes), so
//! its reference is a model: a Rust `BTreeMap` replaying the same requests
//! with the same capacity. Every reply packet of bpfjet's interpreter
//! (verified and bounds-checked) and JIT must be the model's, and a control
//! plane reading the store's map afterwards — walking the skip list in the
//! dumped bytes with the library's own layout (`bpfjet_kfuncs::nodes`) —
//! must find the model's keys in order, on every level.
//!
//! Bad input: a node reference leaked, used after release or released
//! twice, a data size that is not a constant, a pool larger than the
//! memory passed, an unknown kfunc, a node kfunc from a tracing program —
//! each refused with the kfunc named (and the argument, where one is at
//! fault); what only the run can tell (a size larger than the pool's
//! nodes, a released node, an exhausted pool) is answered with null /
//! -EINVAL at run time.

mod support;

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_kfuncs::nodes;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Keys the test store holds (`-DNODES`): small, so the sequence fills it.
const NODES: usize = 192;
const MAX_LEVEL: usize = 16;
const PORT: u16 = 9000;
const PUT: u8 = 1;
const GET: u8 = 2;
const DEL: u8 = 3;
const SUCC: u8 = 4;
const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

fn skiplist_object() -> PathBuf {
    Compile::file(bpfjet_testsupport::clang::workspace().join("examples/nf/skiplist.c"))
        .define("NODES", &NODES.to_string())
        .object()
}

/// The same store on the kernel's red-black tree kfuncs.
fn rbtree_object() -> PathBuf {
    Compile::file(bpfjet_testsupport::clang::workspace().join("examples/nf/skiplist_rbtree.c"))
        .define("NODES", &NODES.to_string())
        .object()
}

const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// A UDP frame to `port` carrying one request.
fn request(port: u16, op: u8, key: u64, value: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(66);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 52, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&4321u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&32u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[op, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&key.to_le_bytes());
    f.extend_from_slice(&value.to_le_bytes());
    f
}

/// The reply the store must send to `frame`: MACs swapped, status, key
/// and value written.
fn reply(frame: &[u8], status: u8, key: u64, value: u64) -> Vec<u8> {
    let mut r = frame.to_vec();
    r[0..6].copy_from_slice(&SRC_MAC);
    r[6..12].copy_from_slice(&DST_MAC);
    r[43] = status;
    r[50..58].copy_from_slice(&key.to_le_bytes());
    r[58..66].copy_from_slice(&value.to_le_bytes());
    r
}

/// The requests: puts, gets, deletes and successor queries over a key
/// range wider than the capacity (the store fills up, then drains and
/// fills again), with other traffic and malformed requests mixed in.
fn frames(count: usize) -> Vec<Vec<u8>> {
    let mut x: u32 = 0x9e37_79b9;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let key = u64::from(x % 320) * 3;
        let value = u64::from(x.rotate_left(7)) << 8 | i as u64 & 0xff;
        // Phases: mostly puts, then mostly deletes, then mixed.
        let phase = i * 3 / count;
        let op = match (phase, x >> 28) {
            (_, 15) => SUCC,
            (_, 14) => GET,
            (0, _) => PUT,
            (1, 0..=9) => DEL,
            (1, _) => GET,
            (_, 0..=4) => PUT,
            (_, 5..=8) => DEL,
            _ => GET,
        };
        out.push(match i % 97 {
            13 => request(53, GET, key, 0), // another UDP port: passes
            41 => request(PORT, 9, key, 0), // unknown op: dropped
            77 => request(PORT, PUT, key, value)[..60].to_vec(), // short
            _ => request(PORT, op, key, value),
        });
    }
    out
}

/// The model's verdict and output frame for each request.
/// An XDP verdict and the frame it leaves.
type Answer = (u32, Vec<u8>);

fn model(frames: &[Vec<u8>]) -> (Vec<Answer>, BTreeMap<u64, u64>) {
    let mut store = BTreeMap::new();
    let mut out = Vec::new();
    for f in frames {
        if f.len() < 42 || u16::from_be_bytes([f[36], f[37]]) != PORT {
            out.push((XDP_PASS, f.clone()));
            continue;
        }
        if f.len() < 66 || !(PUT..=SUCC).contains(&f[42]) {
            out.push((XDP_DROP, f.clone()));
            continue;
        }
        let key = u64::from_le_bytes(f[50..58].try_into().unwrap());
        let value = u64::from_le_bytes(f[58..66].try_into().unwrap());
        let r = match f[42] {
            PUT if store.contains_key(&key) || store.len() < NODES => {
                store.insert(key, value);
                reply(f, 1, key, value)
            }
            PUT => reply(f, 2, key, value),
            GET => match store.get(&key) {
                Some(&v) => reply(f, 1, key, v),
                None => reply(f, 0, key, value),
            },
            DEL => reply(f, u8::from(store.remove(&key).is_some()), key, value),
            _ => match store.range(key..).next() {
                Some((&k, &v)) => reply(f, 1, k, v),
                None => reply(f, 0, key, value),
            },
        };
        out.push((XDP_TX, r));
    }
    (out, store)
}

/// Every frame's (verdict, output) on one engine and the store map's value.
fn on_bpfjet(engine: &str, frames: &[Vec<u8>]) -> (Vec<Answer>, Vec<u8>) {
    let path = skiplist_object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let mut opts = ObjectOptions::default();
    let store_of = |loaded: &LoadedObject| {
        let state = loaded.dump_state().unwrap();
        let hex = state["store"][0].value.clone().unwrap();
        bpfjet_maps::state::parse_hex(&hex).unwrap()
    };
    if engine == "interp-checked" {
        opts.unverified = true;
        let loaded = LoadedObject::load(&obj, &opts).unwrap_or_else(|e| panic!("{e}"));
        let out = frames
            .iter()
            .map(|f| {
                let r = loaded
                    .test_run("skiplist", f, &TestRunOptions::default())
                    .unwrap();
                (r.retval, r.data_out)
            })
            .collect();
        return (out, store_of(&loaded));
    }
    let e = if engine == "jit" {
        XdpEngine::Jit
    } else {
        XdpEngine::Interp
    };
    let jit =
        JitObject::load(&obj, &opts, &JitOptions::uncached()).unwrap_or_else(|e| panic!("{e}"));
    let out = frames
        .iter()
        .map(|f| {
            let r = jit
                .test_run("skiplist", f, &TestRunOptions::default(), e)
                .unwrap();
            (r.retval, r.data_out)
        })
        .collect();
    (out, store_of(jit.loaded()))
}

/// Offset of `pool` in `struct store` (head, count, level, update[16]).
const POOL_AT: usize = 16 + 8 * MAX_LEVEL;

fn u64_at(m: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(m[at..at + 8].try_into().unwrap())
}

/// What a control plane reads from the store map: each level's (key,
/// value, height) list, walked from the head with the library's layout.
fn levels(store: &[u8]) -> Vec<Vec<(u64, u64, u64)>> {
    let head = u64_at(store, 0);
    let pool = &store[POOL_AT..];
    (0..MAX_LEVEL as u64)
        .map(|level| {
            let mut out = Vec::new();
            let mut n = nodes::next(pool, head, level);
            while n != 0 {
                let at = nodes::data(pool, n, 24).expect("a live node has data");
                out.push((
                    u64_at(pool, at),
                    u64_at(pool, at + 8),
                    u64::from(pool[at + 16]),
                ));
                assert!(out.len() <= NODES, "level {level} loops");
                n = nodes::next(pool, n, level);
            }
            out
        })
        .collect()
}

#[test]
fn skiplist_store_answers_as_an_ordered_map_on_every_engine() {
    let frames = frames(3000);
    let (expected, model_store) = model(&frames);
    let full = expected
        .iter()
        .filter(|(_, r)| r.len() > 43 && r[43] == 2)
        .count();
    assert!(full > 0, "the sequence never fills the store");
    let mut stores = Vec::new();
    for engine in ["interp", "interp-checked", "jit"] {
        let (got, store) = on_bpfjet(engine, &frames);
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.0, e.0, "{engine}: frame {i}: verdict");
            assert_eq!(
                g.1,
                e.1,
                "{engine}: frame {i} (op {}): reply differs from the model",
                frames[i].get(42).copied().unwrap_or(0)
            );
        }
        // The control plane's view: level 0 is the model, in order; every
        // higher level is an ordered subsequence of the nodes that tall.
        let lv = levels(&store);
        let level0: Vec<(u64, u64)> = lv[0].iter().map(|&(k, v, _)| (k, v)).collect();
        let model_items: Vec<(u64, u64)> = model_store.iter().map(|(&k, &v)| (k, v)).collect();
        assert_eq!(level0, model_items, "{engine}: store contents");
        let count = u32::from_le_bytes(store[8..12].try_into().unwrap());
        assert_eq!(count as usize, model_store.len(), "{engine}: count");
        assert_eq!(
            nodes::live(&store[POOL_AT..]),
            Some(model_store.len() as u32 + 1),
            "{engine}: live nodes (keys and the head)"
        );
        for (l, level) in lv.iter().enumerate() {
            let tall: Vec<u64> = lv[0]
                .iter()
                .filter(|&&(_, _, h)| h as usize > l)
                .map(|&(k, _, _)| k)
                .collect();
            let keys: Vec<u64> = level.iter().map(|&(k, _, _)| k).collect();
            assert_eq!(keys, tall, "{engine}: level {l}");
        }
        stores.push(store);
    }
    // Same requests, same heights: the same bytes on every engine.
    assert!(
        stores.windows(2).all(|w| w[0] == w[1]),
        "store bytes differ between engines"
    );
    on_kernel_rbtree(&frames, &expected, &model_store);
    for engine in [XdpEngine::Interp, XdpEngine::Jit] {
        on_bpfjet_rbtree(engine, &frames, &expected, &model_store);
    }
    // eNetSTL's node-pointer build: same heights, so the same levels as
    // bpfjet's own node memory; one search step per bpf_loop call, and 64
    // as eNetSTL's lookups take them.
    let own = levels(&stores[0]);
    for unroll in [1, 64] {
        for engine in [XdpEngine::Interp, XdpEngine::Jit] {
            let level0 = on_bpfjet_enetstl(engine, unroll, &frames, &expected, &model_store);
            assert_eq!(
                level0, own[0],
                "{engine:?}: eNetSTL build ({unroll} steps a call): heights"
            );
        }
    }
}

/// The rbtree build in bpfjet (the kernel's graph kfuncs, its ownership
/// rules in bpfjet's verifier): the model's replies, and the model's keys
/// in order when a control plane walks the tree with SUCC requests.
fn on_bpfjet_rbtree(
    engine: XdpEngine,
    frames: &[Vec<u8>],
    expected: &[Answer],
    model_store: &BTreeMap<u64, u64>,
) {
    let path = rbtree_object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let run = |f: &[u8]| {
        jit.test_run("skiplist", f, &TestRunOptions::default(), engine)
            .unwrap()
    };
    for (i, (f, e)) in frames.iter().zip(expected).enumerate() {
        let r = run(f);
        assert_eq!(
            (r.retval, &r.data_out),
            (e.0, &e.1),
            "bpfjet {engine:?} rbtree: frame {i}"
        );
    }
    let mut scanned = Vec::new();
    let mut from = 0u64;
    loop {
        let r = run(&request(PORT, SUCC, from, 0));
        if r.data_out[43] != 1 {
            break;
        }
        let key = u64_at(&r.data_out, 50);
        scanned.push((key, u64_at(&r.data_out, 58)));
        from = key + 1;
        assert!(scanned.len() <= NODES, "SUCC scan does not end");
    }
    let model_items: Vec<(u64, u64)> = model_store.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(
        scanned, model_items,
        "bpfjet {engine:?} rbtree: store contents"
    );
}

/// The same store on eNetSTL's node-pointer kfuncs (its container in the
/// map value's `__kptr`), compiled at test time; `unroll` search steps per
/// `bpf_loop` call (64: eNetSTL's own lookups' shape, a node reference
/// carried through 64 unrolled steps, which bpfjet's verifier must
/// accept within the kernel's budget).
fn enetstl_object(unroll: u32) -> PathBuf {
    Compile::file(bpfjet_testsupport::clang::workspace().join("examples/nf/skiplist_enetstl.c"))
        .define("NODES", &NODES.to_string())
        .define("WALK_UNROLL", &unroll.to_string())
        .object()
}

/// The eNetSTL build on one engine: the model's replies; and a control
/// plane reading the map value's kptr (the container) and walking the
/// list from the head (tmp 0) with the library's accessors finds the
/// model's keys in order on level 0 and, on every level, the nodes that
/// tall. Returns the (key, value, height) of level 0.
fn on_bpfjet_enetstl(
    engine: XdpEngine,
    unroll: u32,
    frames: &[Vec<u8>],
    expected: &[Answer],
    model_store: &BTreeMap<u64, u64>,
) -> Vec<(u64, u64, u64)> {
    use bpfjet_kfuncs::enetstl_ptr as ptr;
    let path = enetstl_object(unroll);
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (i, (f, e)) in frames.iter().zip(expected).enumerate() {
        let r = jit
            .test_run("skiplist", f, &TestRunOptions::default(), engine)
            .unwrap();
        assert_eq!(
            (r.retval, &r.data_out),
            (e.0, &e.1),
            "bpfjet {engine:?} eNetSTL build ({unroll} steps a call): frame {i} (op {})",
            f.get(42).copied().unwrap_or(0)
        );
    }
    let state = jit.loaded().dump_state_with_special_fields().unwrap();
    let value = bpfjet_maps::state::parse_hex(&state["store"][0].value.clone().unwrap()).unwrap();
    let container = u64_at(&value, 0);
    let count = u32::from_le_bytes(value[8..12].try_into().unwrap());
    assert_eq!(count as usize, model_store.len(), "{engine:?}: count");
    let head = ptr::peek_tmp(container, 0);
    assert_ne!(head, 0, "{engine:?}: the container has no head");
    let node = |n: u64| {
        let (d1, d2) = ptr::node_data(n).expect("a linked node is live");
        let height = u32::from_ne_bytes(d1[0..4].try_into().unwrap());
        (u64_at(&d1, 4), u64_at(&d2, 0), u64::from(height))
    };
    let walk = |level: u64| {
        let mut out = Vec::new();
        let mut n = ptr::peek_out(head, level);
        while n != 0 {
            out.push(node(n));
            assert!(out.len() <= NODES, "level {level} loops");
            n = ptr::peek_out(n, level);
        }
        out
    };
    let level0 = walk(0);
    let items: Vec<(u64, u64)> = level0.iter().map(|&(k, v, _)| (k, v)).collect();
    let model_items: Vec<(u64, u64)> = model_store.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(
        items, model_items,
        "{engine:?} eNetSTL build: store contents"
    );
    for l in 1..MAX_LEVEL as u64 {
        let tall: Vec<u64> = level0
            .iter()
            .filter(|&&(_, _, h)| h > l)
            .map(|&(k, _, _)| k)
            .collect();
        let keys: Vec<u64> = walk(l).iter().map(|&(k, _, _)| k).collect();
        assert_eq!(keys, tall, "{engine:?} eNetSTL build: level {l}");
    }
    // The container owns the head and the keys, nothing else.
    assert_eq!(
        ptr::container_nodes(container).map(|n| n.len()),
        Some(model_store.len() + 1),
        "{engine:?}: nodes the container owns"
    );
    level0
}

/// The kernel running the rbtree build must give the model's replies, and
/// a control plane walking it with SUCC requests must find the model's
/// keys in order.
fn on_kernel_rbtree(frames: &[Vec<u8>], expected: &[Answer], model_store: &BTreeMap<u64, u64>) {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("skip-list store, kernel rbtree column", &why);
        return;
    }
    let path = rbtree_object();
    let k = bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
        .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    for (i, (f, e)) in frames.iter().zip(expected).enumerate() {
        let r = k.test_run("skiplist", f, 1, Some(0)).unwrap();
        assert_eq!(
            (r.retval, &r.data_out),
            (e.0, &e.1),
            "kernel rbtree: frame {i}"
        );
    }
    let mut scanned = Vec::new();
    let mut from = 0u64;
    loop {
        let r = k
            .test_run("skiplist", &request(PORT, SUCC, from, 0), 1, Some(0))
            .unwrap();
        if r.data_out[43] != 1 {
            break;
        }
        let key = u64_at(&r.data_out, 50);
        scanned.push((key, u64_at(&r.data_out, 58)));
        from = key + 1;
        assert!(scanned.len() <= NODES, "SUCC scan does not end");
    }
    let model_items: Vec<(u64, u64)> = model_store.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(scanned, model_items, "kernel rbtree: store contents");
}

/// A program around `body` (statements of an XDP function with `pool`
/// and `sz` in scope); returns its object.
fn node_prog(name: &str, body: &str) -> PathBuf {
    let text = format!(
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "bpfjet_kfuncs.h"
struct big {{ __u8 pool[BPFJET_NODE_POOL_BYTES(4, 16, 2)]; }};
struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct big);
	__uint(max_entries, 1);
}} pools SEC(".maps");
struct pair {{ __u64 a, b; }};
SEC("xdp")
int prog(struct xdp_md *ctx)
{{
	__u32 zero = 0;
	struct big *big = bpf_map_lookup_elem(&pools, &zero);
	if (!big)
		return 0;
	void *pool = big->pool;
	__u32 sz = sizeof(big->pool);
	if (bpfjet_node_pool_init(pool, sz, 16, 2) < 0)
		return 0;
{body}
}}
char _license[] SEC("license") = "GPL";
"#
    );
    Compile::text(name, &text).object()
}

/// The loader's (verifier's) refusal of `obj`, as text.
fn refusal(obj: &PathBuf) -> String {
    let o = bpfjet_obj::load_file(obj).unwrap();
    match LoadedObject::load(&o, &ObjectOptions::default()) {
        Ok(_) => panic!("{} was accepted", obj.display()),
        Err(e) => e.to_string(),
    }
}

fn retval(obj: &PathBuf, engine: XdpEngine) -> u32 {
    let o = bpfjet_obj::load_file(obj).unwrap();
    let jit = JitObject::load(&o, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", obj.display()));
    jit.test_run("prog", &[0u8; 64], &TestRunOptions::default(), engine)
        .unwrap()
        .retval
}

#[test]
fn a_leaked_node_reference_is_refused_naming_the_kfunc() {
    let obj = node_prog(
        "node_leak",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	struct pair *p = bpfjet_node_data(pool, sz, n, sizeof(*p));
	if (!p)
		return 1;
	return p->a == 0 ? 2 : 3;",
    );
    let why = refusal(&obj);
    assert!(why.contains("Unreleased reference"), "{why}");
    assert!(why.contains("kfunc bpfjet_node_data"), "{why}");
}

#[test]
fn a_node_reference_used_after_release_is_refused() {
    let obj = node_prog(
        "node_use_after_put",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	struct pair *p = bpfjet_node_data(pool, sz, n, sizeof(*p));
	if (!p)
		return 1;
	bpfjet_node_put(p);
	return p->a == 0 ? 2 : 3;",
    );
    let why = refusal(&obj);
    assert!(why.contains("invalid mem access"), "{why}");
    // Released twice: the second release names the kfunc and its argument.
    let obj = node_prog(
        "node_double_put",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	struct pair *p = bpfjet_node_data(pool, sz, n, sizeof(*p));
	if (!p)
		return 1;
	bpfjet_node_put(p);
	bpfjet_node_put(p);
	return 2;",
    );
    let why = refusal(&obj);
    assert!(
        why.contains("argument 1 of release kfunc bpfjet_node_put"),
        "{why}"
    );
}

#[test]
fn wrong_node_sizes_are_refused_or_null() {
    // Reading past the size asked for.
    let obj = node_prog(
        "node_read_past",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	__u64 *p = bpfjet_node_data(pool, sz, n, 8);
	if (!p)
		return 1;
	__u64 v = p[1];
	bpfjet_node_put(p);
	return v ? 2 : 3;",
    );
    let why = refusal(&obj);
    assert!(why.contains("mem"), "{why}");
    // A size the verifier does not know.
    let obj = node_prog(
        "node_size_unknown",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	__u32 size = (ctx->data_end - ctx->data) & 15;
	void *p = bpfjet_node_data(pool, sz, n, size + 1);
	if (!p)
		return 1;
	bpfjet_node_put(p);
	return 2;",
    );
    let why = refusal(&obj);
    assert!(
        why.contains("argument 4 of kfunc bpfjet_node_data"),
        "{why}"
    );
    // A pool larger than the memory passed.
    let obj = node_prog(
        "node_pool_too_big",
        "	return bpfjet_node_alloc(pool, sz + 8) ? 2 : 1;",
    );
    let why = refusal(&obj);
    assert!(
        why.contains("argument 2 of kfunc bpfjet_node_alloc"),
        "{why}"
    );
    // Larger than the pool's nodes (16 bytes): null at run time.
    let obj = node_prog(
        "node_size_over",
        "	__u64 n = bpfjet_node_alloc(pool, sz);
	struct { __u64 a[3]; } *p = bpfjet_node_data(pool, sz, n, 24);
	if (!p)
		return 7;
	bpfjet_node_put(p);
	return 8;",
    );
    for e in [XdpEngine::Interp, XdpEngine::Jit] {
        assert_eq!(retval(&obj, e), 7, "{e:?}");
    }
}

#[test]
fn released_nodes_and_an_exhausted_pool_answer_null_at_run_time() {
    // Four nodes fit: the fifth allocation is null; a released node's
    // links read as null, its data is null, releasing it again is -EINVAL;
    // its slot is reused under a new handle.
    let obj = node_prog(
        "node_lifecycle",
        "	__u64 a = bpfjet_node_alloc(pool, sz), b = bpfjet_node_alloc(pool, sz);
	__u64 c = bpfjet_node_alloc(pool, sz), d = bpfjet_node_alloc(pool, sz);
	if (!a || !b || !c || !d)
		return 1;
	if (bpfjet_node_alloc(pool, sz) != 0)
		return 2;
	if (bpfjet_node_connect(pool, sz, a, 0, b) || bpfjet_node_next(pool, sz, a, 0) != b)
		return 3;
	if (bpfjet_node_connect(pool, sz, a, 2, b) != -22)
		return 4;
	if (bpfjet_node_free(pool, sz, b) || bpfjet_node_next(pool, sz, a, 0) != 0)
		return 5;
	if (bpfjet_node_free(pool, sz, b) != -22)
		return 6;
	void *p = bpfjet_node_data(pool, sz, b, 8);
	if (p) {
		bpfjet_node_put(p);
		return 7;
	}
	__u64 e = bpfjet_node_alloc(pool, sz);
	if (!e || e == b || (__u32)e != (__u32)b || bpfjet_node_next(pool, sz, a, 0) != 0)
		return 8;
	return 9;",
    );
    for e in [XdpEngine::Interp, XdpEngine::Jit] {
        assert_eq!(retval(&obj, e), 9, "{e:?}");
    }
}

#[test]
fn unknown_kfuncs_and_other_program_types_are_refused_naming_the_kfunc() {
    let obj = Compile::text(
        "node_unknown",
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
extern __u64 bpfjet_node_teleport(void *pool, __u32 pool__sz) __ksym;
__u8 pool[64];
SEC("xdp")
int prog(struct xdp_md *ctx) { return bpfjet_node_teleport(pool, sizeof(pool)) ? 2 : 1; }
char _license[] SEC("license") = "GPL";
"#,
    )
    .object();
    let why = refusal(&obj);
    assert!(why.contains("kfunc bpfjet_node_teleport"), "{why}");
    let run = support::bpfjet(&["verify", &obj.display().to_string()], b"");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("kfunc bpfjet_node_teleport"),
        "{}",
        run.stderr
    );
    let obj = Compile::text(
        "node_kprobe",
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "bpfjet_kfuncs.h"
__u8 pool[256];
SEC("kprobe/do_nanosleep")
int prog(void *ctx) { return bpfjet_node_alloc(pool, sizeof(pool)) ? 1 : 0; }
char _license[] SEC("license") = "GPL";
"#,
    )
    .object();
    let why = refusal(&obj);
    assert!(why.contains("kfunc bpfjet_node_alloc"), "{why}");
    assert!(why.contains("kprobe"), "{why}");
    // `bpfjet verify` says the same.
    let run = support::bpfjet(&["verify", &obj.display().to_string()], b"");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("kfunc bpfjet_node_alloc may not be called from kprobe programs"),
        "{}",
        run.stderr
    );
}

/// Calls to `symbol` in optimized IR (the declaration is not a call).
fn calls(ir: &str, symbol: &str) -> usize {
    ir.lines()
        .filter(|l| l.contains("call ") && l.contains(&format!("@{symbol}(")))
        .count()
}

#[test]
fn node_accessors_are_compiled_in() {
    let obj = bpfjet_obj::load_file(skiplist_object()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit
        .dump("skiplist", bpfjet_jit::DumpStage::OptimizedIr, true)
        .unwrap();
    assert_eq!(calls(&ir, "bpfjet_jit_helper"), 0, "trampoline calls left");
    // The pool header check of the inline forms: the magic compared.
    assert!(
        ir.contains(&nodes::MAGIC.to_string()),
        "no inline pool check in the IR"
    );
    for inlined in ["bpfjet_node_next", "bpfjet_node_data", "bpfjet_node_put"] {
        assert_eq!(
            calls(&ir, &format!("bpfjet_kfunc_{inlined}")),
            0,
            "{inlined} is still called:\n{ir}"
        );
    }
    // The rest stay native calls, made directly (no trampoline).
    assert!(calls(&ir, "bpfjet_kfunc_bpfjet_node_alloc") > 0, "{ir}");
}

/// The rbtree store's graph kfuncs and its lock never take the helper
/// trampoline in the JIT: the walk's `bpf_rbtree_root/left/right` and the
/// spin lock are compiled in (no call at all), the rest are direct calls
/// of the graph natives (`bpf_rbtree_add` with its `less` callback passed
/// as a compiled function).
#[test]
fn rbtree_kfuncs_are_compiled_in_or_called_directly() {
    let obj = bpfjet_obj::load_file(rbtree_object()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit
        .dump("skiplist", bpfjet_jit::DumpStage::OptimizedIr, true)
        .unwrap();
    assert_eq!(
        calls(&ir, "bpfjet_jit_helper"),
        0,
        "trampoline calls left:\n{ir}"
    );
    // The uncontended lock: a compare-exchange in the program's code.
    assert!(ir.contains("cmpxchg"), "no inline spin lock:\n{ir}");
    for direct in [
        "bpfjet_jit_obj_new",
        "bpfjet_jit_obj_drop",
        "bpfjet_jit_rb_add",
        "bpfjet_jit_rb_remove",
    ] {
        assert!(
            calls(&ir, direct) > 0,
            "{direct} is not called directly:\n{ir}"
        );
    }
    // Every call left is a direct native: no dispatch by number.
    for line in ir.lines().filter(|l| l.contains(" call ")) {
        assert!(
            !line.contains("@bpfjet_jit_helper") && !line.contains("@bpfjet_jit_resume"),
            "{line}"
        );
    }
}

/// Two threads run the rbtree store's JIT code on the same maps at once,
/// as two XDP workers would: the tree is global, guarded by one
/// `bpf_spin_lock`, which the JIT compiles in (a compare-exchange and a
/// release store). Each thread puts and deletes its own keys over and
/// over; every reply must be the one a store of its own keys gives, and
/// the tree must end with exactly the keys both left, in order. A lock
/// that did not exclude would lose keys or corrupt the tree.
#[test]
fn the_compiled_spin_lock_excludes_two_threads_on_one_tree() {
    const PER_THREAD: u64 = 80;
    const ROUNDS: u64 = 25;
    let obj = bpfjet_obj::load_file(rbtree_object()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let status = |opts: &TestRunOptions, op: u8, key: u64, value: u64| {
        let r = jit
            .test_run(
                "skiplist",
                &request(PORT, op, key, value),
                opts,
                XdpEngine::Jit,
            )
            .unwrap();
        assert_eq!(r.retval, XDP_TX, "op {op} key {key}");
        r.data_out[43]
    };
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                let opts = TestRunOptions {
                    cpu: t as usize,
                    ..TestRunOptions::default()
                };
                for round in 0..ROUNDS {
                    for i in 0..PER_THREAD {
                        assert_eq!(
                            status(&opts, PUT, 2 * i + t, round),
                            1,
                            "put, round {round}"
                        );
                    }
                    for i in (0..PER_THREAD).filter(|i| round + 1 < ROUNDS || i % 2 == 0) {
                        assert_eq!(status(&opts, DEL, 2 * i + t, 0), 1, "del, round {round}");
                    }
                }
            });
        }
    });
    let mut scanned = Vec::new();
    let mut from = 0u64;
    loop {
        let r = jit
            .test_run(
                "skiplist",
                &request(PORT, SUCC, from, 0),
                &TestRunOptions::default(),
                XdpEngine::Jit,
            )
            .unwrap();
        if r.data_out[43] != 1 {
            break;
        }
        let key = u64_at(&r.data_out, 50);
        scanned.push((key, u64_at(&r.data_out, 58)));
        from = key + 1;
        assert!(scanned.len() <= NODES, "SUCC scan does not end");
    }
    let left: Vec<(u64, u64)> = (0..2 * PER_THREAD)
        .filter(|k| (k / 2) % 2 == 1)
        .map(|k| (k, ROUNDS - 1))
        .collect();
    assert_eq!(scanned, left, "the tree after both threads");
}

/// The JIT's inline node accessors against the interpreter's natives on a
/// pool the program itself corrupts: each frame writes 8 chosen bytes into
/// the pool (mostly the header and the first slots), then follows a link
/// and reads data from a real, stale or forged handle. Every result, kept
/// in a map, must be the same on both engines.
#[test]
fn inline_accessors_match_the_natives_on_corrupted_pools() {
    let obj = Compile::text(
        "node_corrupt",
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "bpfjet_kfuncs.h"
#define POOL BPFJET_NODE_POOL_BYTES(6, 16, 2)
struct st { __u64 h[4]; __u64 n; __u8 pool[POOL]; };
struct res { __u64 next; __u64 data_ok; __u64 data; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, struct st);
	 __uint(max_entries, 1); } state SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, struct res);
	 __uint(max_entries, 4096); } results SEC(".maps");
struct req { __u16 off; __u8 sel; __u8 size; __u32 link; __u64 val; } __attribute__((packed));
SEC("xdp")
int prog(struct xdp_md *ctx)
{
	struct req *r = (void *)(long)ctx->data;
	if ((void *)(r + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__u32 zero = 0;
	struct st *s = bpf_map_lookup_elem(&state, &zero);
	if (!s)
		return XDP_ABORTED;
	if (!(s->n & 31)) {
		/* A fresh layout every 32 frames: corruption accumulates. */
		__builtin_memset(s->pool, 0, 32);
		bpfjet_node_pool_init(s->pool, sizeof(s->pool), 16, 2);
		for (int i = 0; i < 4; i++)
			s->h[i] = bpfjet_node_alloc(s->pool, sizeof(s->pool));
		bpfjet_node_connect(s->pool, sizeof(s->pool), s->h[0], 0, s->h[1]);
		bpfjet_node_connect(s->pool, sizeof(s->pool), s->h[1], 1, s->h[2]);
		bpfjet_node_connect(s->pool, sizeof(s->pool), s->h[2], 0, s->h[3]);
		bpfjet_node_free(s->pool, sizeof(s->pool), s->h[3]);
	}
	if (r->off != 0xffff) {
		__u32 off = r->off & 255;	/* + 8 <= POOL (272) */
		__builtin_memcpy(&s->pool[off], &r->val, 8);
	}
	__u8 sel = r->sel;
	__u64 h = r->val;	/* forged, for sel >= 4 */
	if (sel == 0)
		h = s->h[0];
	else if (sel == 1)
		h = s->h[1];
	else if (sel == 2)
		h = s->h[2];
	else if (sel == 3)
		h = s->h[3];
	__u32 slot = s->n & 4095;
	s->n++;
	struct res *out = bpf_map_lookup_elem(&results, &slot);
	if (!out)
		return XDP_ABORTED;
	out->next = bpfjet_node_next(s->pool, sizeof(s->pool), h, r->link);
	__u64 *p = r->size & 1 ? bpfjet_node_data(s->pool, sizeof(s->pool), h, 16)
			       : bpfjet_node_data(s->pool, sizeof(s->pool), h, 8);
	out->data_ok = p != 0;
	if (p) {
		out->data = *p;
		bpfjet_node_put(p);
	}
	return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
"#,
    )
    .object();
    let o = bpfjet_obj::load_file(&obj).unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let frames: Vec<Vec<u8>> = (0..1500)
        .map(|i| {
            let r = next();
            // Mostly leave the pool alone (0xffff); otherwise hit the
            // header and the first slots most, anywhere sometimes.
            let off = match r % 12 {
                0..=7 => 0xffff,
                8 | 9 => (r >> 8) % 40,
                10 => (r >> 8) % 120,
                _ => (r >> 8) % 256,
            } as u16;
            let val = match (r >> 40) % 4 {
                0 => next(),
                1 => (r >> 20) % 8,
                2 => 0x4e4f_4445 | ((r >> 16) % 64) << 32,
                _ => (1 | ((r >> 24) % 5) << 1) << 32 | ((r >> 30) % 6),
            };
            let mut f = Vec::with_capacity(64);
            f.extend_from_slice(&off.to_le_bytes());
            f.push(((r >> 50) % 6) as u8);
            f.push((r >> 56) as u8);
            f.extend_from_slice(&(((r >> 33) % 3) as u32).to_le_bytes());
            f.extend_from_slice(&val.to_le_bytes());
            f.resize(64, i as u8);
            f
        })
        .collect();
    let mut dumps = Vec::new();
    for engine in [XdpEngine::Interp, XdpEngine::Jit] {
        let jit = JitObject::load(&o, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
        for f in &frames {
            assert_eq!(
                jit.test_run("prog", f, &TestRunOptions::default(), engine)
                    .unwrap()
                    .retval,
                XDP_PASS
            );
        }
        let maps = jit.loaded().dump_state().unwrap();
        let results = maps["results"].clone();
        // Some lookups must have succeeded and some failed, or the test
        // says nothing.
        let ok = results
            .iter()
            .filter_map(|e| e.value.as_deref())
            .filter(|v| bpfjet_maps::state::parse_hex(v).unwrap()[8] == 1)
            .count();
        let linked = results
            .iter()
            .filter_map(|e| e.value.as_deref())
            .filter(|v| bpfjet_maps::state::parse_hex(v).unwrap()[..8] != [0; 8])
            .count();
        support::announce(&format!(
            "{engine:?}: {ok} data lookups and {linked} links followed of {}",
            frames.len()
        ));
        assert!(
            ok > 10 && ok < frames.len(),
            "{engine:?}: {ok} successful lookups"
        );
        assert!(
            linked > 10 && linked < frames.len(),
            "{engine:?}: {linked} links followed"
        );
        dumps.push((results, maps["state"].clone()));
    }
    assert!(dumps[0] == dumps[1], "interpreter and JIT disagree");
}
