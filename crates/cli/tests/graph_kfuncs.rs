//! The kernel's object and graph kfuncs (`bpf_obj_new`/`bpf_obj_drop`,
//! `bpf_rbtree_*`, `bpf_list_*`, `bpf_refcount_acquire`) and
//! `bpf_kptr_xchg`, in C programs compiled here: over one sequence of
//! requests, the kernel (`BPF_PROG_TEST_RUN`), bpfjet's interpreter and
//! its JIT must return the same verdicts and leave the same statistics
//! (sums and counts the programs compute from what they find in their
//! trees, lists and kptrs) in the map a control plane reads.
//!
//! Negative corpus: programs the kernel verifier refuses (a leaked object,
//! a graph operation without the lock, a non-owning reference used after
//! the unlock, `bpf_obj_new` under the lock, a direct write to a node
//! field, ...) must be refused by bpfjet's verifier too, with the
//! instruction and the reason.
//!
//! Without a usable kernel the kernel columns are skipped with a message.

mod support;

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};

/// Declarations every program shares: the uapi structs libbpf-dev's
/// header predates (sizes of the kernel's), the kfuncs, the object types.
const PRELUDE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct bpf_rb_root { __u64 :64; __u64 :64; } __attribute__((aligned(8)));
struct bpf_rb_node { __u64 :64; __u64 :64; __u64 :64; __u64 :64; } __attribute__((aligned(8)));
struct bpf_list_head { __u64 :64; __u64 :64; } __attribute__((aligned(8)));
struct bpf_list_node { __u64 :64; __u64 :64; __u64 :64; } __attribute__((aligned(8)));
struct bpf_refcount { __u32 :32; } __attribute__((aligned(4)));

extern void *bpf_obj_new_impl(__u64 local_type_id__k, void *meta__ign) __ksym;
extern void bpf_obj_drop_impl(void *p__alloc, void *meta__ign) __ksym;
extern void *bpf_refcount_acquire_impl(void *kptr__ign, void *meta__ign) __ksym;
extern int bpf_rbtree_add_impl(struct bpf_rb_root *root, struct bpf_rb_node *node,
			       _Bool (less)(struct bpf_rb_node *a, const struct bpf_rb_node *b),
			       void *meta__ign, __u64 off) __ksym;
extern struct bpf_rb_node *bpf_rbtree_remove(struct bpf_rb_root *root,
					     struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_first(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_root(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_left(struct bpf_rb_root *root,
					   struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_right(struct bpf_rb_root *root,
					    struct bpf_rb_node *node) __ksym;
extern int bpf_list_push_front_impl(struct bpf_list_head *head, struct bpf_list_node *node,
				    void *meta__ign, __u64 off) __ksym;
extern int bpf_list_push_back_impl(struct bpf_list_head *head, struct bpf_list_node *node,
				   void *meta__ign, __u64 off) __ksym;
extern struct bpf_list_node *bpf_list_pop_front(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_pop_back(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_front(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_back(struct bpf_list_head *head) __ksym;

#define new_obj(T) ((struct T *)bpf_obj_new_impl(bpf_core_type_id_local(struct T), 0))
#define drop_obj(p) bpf_obj_drop_impl(p, 0)
#define container_of(ptr, type, member) ((type *)((void *)(ptr) - __builtin_offsetof(type, member)))
#define __contains(name, node) __attribute__((btf_decl_tag("contains:" #name ":" #node)))
#define __kptr __attribute__((btf_type_tag("kptr")))
#define private(name) SEC(".data." #name) __attribute__((visibility("hidden"), aligned(8)))

struct elem { __u64 key; __u64 val; struct bpf_rb_node rb; };
struct item { __u64 val; struct bpf_list_node ln; };
struct box { __u64 a; __u64 b; };
struct shared { __u64 key; struct bpf_rb_node rb; struct bpf_list_node ln; struct bpf_refcount ref; };

private(T) struct bpf_spin_lock tlock;
private(T) struct bpf_rb_root troot __contains(elem, rb);
private(L) struct bpf_spin_lock llock;
private(L) struct bpf_list_head lhead __contains(item, ln);
private(S) struct bpf_spin_lock slock;
private(S) struct bpf_rb_root sroot __contains(shared, rb);
private(S) struct bpf_list_head shead __contains(shared, ln);

struct stats {
	__u64 count, sum, first, popped, pop_sum, hits, hit_val, misses;
	__u64 queued, q_sum, front, back, swaps, x_sum, fails, empty;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

struct kval { struct box __kptr *ptr; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct kval);
} kmap SEC(".maps");

static _Bool less(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct elem, rb)->key < container_of(b, struct elem, rb)->key;
}

static _Bool sless(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct shared, rb)->key < container_of(b, struct shared, rb)->key;
}

/* A request: byte 0 the operation, bytes 8..16 the key. */
static __always_inline int request(struct xdp_md *ctx, __u8 *op, __u64 *key)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 16 > end)
		return -1;
	*op = *(__u8 *)data;
	*key = *(__u64 *)(data + 8);
	return 0;
}

static __always_inline struct stats *st(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}
"#;

/// The programs the differential runs: an rbtree keyed store, a deque on
/// a list, kptr swaps, refcounted objects in a tree and a list at once, and
/// whole-value updates of a map value holding a kptr (never copied from the
/// caller).
const PROGRAMS: &str = r#"
SEC("xdp")
int tree(struct xdp_md *ctx)
{
	__u8 op; __u64 key;
	struct stats *s = st();
	if (!s || request(ctx, &op, &key))
		return XDP_PASS;
	if (op == 1) {
		struct elem *n = new_obj(elem);
		if (!n)
			return XDP_ABORTED;
		n->key = key;
		n->val = key * 3;
		bpf_spin_lock(&tlock);
		bpf_rbtree_add_impl(&troot, &n->rb, less, 0, 0);
		struct bpf_rb_node *f = bpf_rbtree_first(&troot);
		if (f)
			s->first = container_of(f, struct elem, rb)->key;
		bpf_spin_unlock(&tlock);
		s->count++;
		s->sum += key;
		return XDP_PASS;
	}
	if (op == 2) {
		bpf_spin_lock(&tlock);
		struct bpf_rb_node *f = bpf_rbtree_first(&troot);
		if (!f) {
			bpf_spin_unlock(&tlock);
			s->empty++;
			return XDP_DROP;
		}
		struct bpf_rb_node *r = bpf_rbtree_remove(&troot, f);
		f = bpf_rbtree_first(&troot);
		s->first = f ? container_of(f, struct elem, rb)->key : 0;
		bpf_spin_unlock(&tlock);
		if (!r)
			return XDP_ABORTED;
		struct elem *e = container_of(r, struct elem, rb);
		s->popped++;
		s->pop_sum += e->key * 1000 + e->val;
		s->count--;
		drop_obj(e);
		return XDP_TX;
	}
	/* Search from the root; a hit bumps the value in place. */
	int found = 0;
	__u64 v = 0;
	bpf_spin_lock(&tlock);
	struct bpf_rb_node *n = bpf_rbtree_root(&troot);
	for (int i = 0; i < 40 && n; i++) {
		struct elem *e = container_of(n, struct elem, rb);
		if (e->key == key) {
			e->val += 1;
			v = e->val;
			found = 1;
			break;
		}
		n = key < e->key ? bpf_rbtree_left(&troot, n) : bpf_rbtree_right(&troot, n);
	}
	bpf_spin_unlock(&tlock);
	if (found) {
		s->hits++;
		s->hit_val += v;
		return XDP_TX;
	}
	s->misses++;
	return XDP_DROP;
}

SEC("xdp")
int deque(struct xdp_md *ctx)
{
	__u8 op; __u64 key;
	struct stats *s = st();
	if (!s || request(ctx, &op, &key))
		return XDP_PASS;
	if (op <= 2) {
		struct item *it = new_obj(item);
		if (!it)
			return XDP_ABORTED;
		it->val = key;
		bpf_spin_lock(&llock);
		if (op == 1)
			bpf_list_push_back_impl(&lhead, &it->ln, 0, 0);
		else
			bpf_list_push_front_impl(&lhead, &it->ln, 0, 0);
		struct bpf_list_node *f = bpf_list_front(&lhead), *b = bpf_list_back(&lhead);
		s->front = f ? container_of(f, struct item, ln)->val : 0;
		s->back = b ? container_of(b, struct item, ln)->val : 0;
		bpf_spin_unlock(&llock);
		s->queued++;
		return XDP_PASS;
	}
	bpf_spin_lock(&llock);
	struct bpf_list_node *n = op == 3 ? bpf_list_pop_front(&lhead) : bpf_list_pop_back(&lhead);
	bpf_spin_unlock(&llock);
	if (!n) {
		s->empty++;
		return XDP_DROP;
	}
	struct item *it = container_of(n, struct item, ln);
	s->queued--;
	s->q_sum = s->q_sum * 31 + it->val;
	drop_obj(it);
	return XDP_TX;
}

SEC("xdp")
int swap(struct xdp_md *ctx)
{
	__u8 op; __u64 key;
	struct stats *s = st();
	if (!s || request(ctx, &op, &key))
		return XDP_PASS;
	__u32 idx = key & 3;
	struct kval *v = bpf_map_lookup_elem(&kmap, &idx);
	if (!v)
		return XDP_PASS;
	struct box *old;
	if (op == 1) {
		struct box *b = new_obj(box);
		if (!b)
			return XDP_ABORTED;
		b->a = key;
		b->b = key ^ 0x55;
		old = bpf_kptr_xchg(&v->ptr, b);
	} else {
		old = bpf_kptr_xchg(&v->ptr, 0);
	}
	s->swaps++;
	if (!old)
		return XDP_DROP;
	s->x_sum = s->x_sum * 7 + old->a + old->b;
	drop_obj(old);
	return XDP_TX;
}

/* A value written whole by bpf_map_update_elem, with bytes where the
 * kptr is: the kernel never copies a kptr from the caller (and frees what
 * the field held), so the next swap finds NULL, not this address. */
SEC("xdp")
int forge(struct xdp_md *ctx)
{
	__u8 op; __u64 key;
	if (request(ctx, &op, &key))
		return XDP_PASS;
	__u32 idx = key & 3;
	__u64 raw[1] = { 0x4141414141414140ULL ^ (key << 4) };
	if (bpf_map_update_elem(&kmap, &idx, raw, BPF_ANY))
		return XDP_ABORTED;
	return XDP_TX;
}

SEC("xdp")
int refs(struct xdp_md *ctx)
{
	__u8 op; __u64 key;
	struct stats *s = st();
	if (!s || request(ctx, &op, &key))
		return XDP_PASS;
	if (op == 1) {
		struct shared *n = new_obj(shared);
		if (!n)
			return XDP_ABORTED;
		n->key = key;
		struct shared *m = bpf_refcount_acquire_impl(n, 0);
		if (!m) {
			drop_obj(n);
			return XDP_ABORTED;
		}
		bpf_spin_lock(&slock);
		bpf_rbtree_add_impl(&sroot, &n->rb, sless, 0, 0);
		if (bpf_list_push_back_impl(&shead, &m->ln, 0, 0))
			s->fails++;
		bpf_spin_unlock(&slock);
		return XDP_PASS;
	}
	/* Take the oldest from the list, then out of the tree too. */
	bpf_spin_lock(&slock);
	struct bpf_list_node *l = bpf_list_pop_front(&shead);
	if (!l) {
		bpf_spin_unlock(&slock);
		s->empty++;
		return XDP_DROP;
	}
	struct shared *o = container_of(l, struct shared, ln);
	struct bpf_rb_node *r = bpf_rbtree_remove(&sroot, &o->rb);
	bpf_spin_unlock(&slock);
	s->hits++;
	s->hit_val += o->key;
	drop_obj(o);
	if (r)
		drop_obj(container_of(r, struct shared, rb));
	else
		s->fails++;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
"#;

fn object() -> PathBuf {
    Compile::text("graph_kfuncs", &format!("{PRELUDE}{PROGRAMS}")).object()
}

/// A request frame (16 bytes).
fn frame(op: u8, key: u64) -> Vec<u8> {
    let mut f = vec![0u8; 16];
    f[0] = op;
    f[8..16].copy_from_slice(&key.to_le_bytes());
    f
}

/// (program, frame) pairs: each program gets inserts, removals and
/// lookups in a pseudo-random mix over a small key range (duplicates,
/// empty structures and misses happen).
fn requests(n: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut x: u32 = 0x2545_f491;
    let mut out = Vec::new();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let key = u64::from(x % 97);
        let (prog, ops) = match i % 5 {
            0 => ("tree", 3),
            1 => ("deque", 4),
            2 => ("swap", 2),
            3 => ("refs", 2),
            _ => ("forge", 2),
        };
        // Inserts dominate the first half, removals the second.
        let r = (x >> 8) % 10;
        let op = if i < n / 2 {
            if r < 6 {
                1
            } else {
                2 + (r as u8 % (ops - 1))
            }
        } else if r < 3 {
            1
        } else {
            2 + (r as u8 % (ops - 1))
        };
        out.push((prog, frame(op, key)));
    }
    out
}

/// The statistics map only: global data holds the roots (pointers).
fn control_plane(mut maps: MapState) -> MapState {
    maps.retain(|name, _| name == "stats");
    maps
}

/// Verdicts and statistics on one bpfjet engine (the interpreter of a
/// plain `LoadedObject`, or the JIT); the trees, lists and kptrs must hold
/// objects at the end (allocated from the program's arena).
fn on_bpfjet(path: &Path, reqs: &[(&str, Vec<u8>)], engine: XdpEngine) -> (Vec<u32>, MapState) {
    let live_before = bpfjet_kfuncs::graph::live_objects();
    let obj = bpfjet_obj::load_file(path).unwrap();
    if engine == XdpEngine::Interp {
        let loaded = bpfjet_runtime::LoadedObject::load(&obj, &ObjectOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v = reqs
            .iter()
            .map(|(p, f)| {
                loaded
                    .test_run(p, f, &TestRunOptions::default())
                    .unwrap()
                    .retval
            })
            .collect();
        assert!(
            bpfjet_kfuncs::graph::live_objects() > live_before,
            "{engine:?}: the structures hold no objects at the end"
        );
        return (v, control_plane(loaded.dump_state().unwrap()));
    }
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v = reqs
        .iter()
        .map(|(p, f)| {
            jit.test_run(p, f, &TestRunOptions::default(), engine)
                .unwrap()
                .retval
        })
        .collect();
    assert!(
        bpfjet_kfuncs::graph::live_objects() > live_before,
        "{engine:?}: the structures hold no objects at the end"
    );
    (v, control_plane(jit.loaded().dump_state().unwrap()))
}

fn on_kernel(path: &Path, reqs: &[(&str, Vec<u8>)]) -> Option<(Vec<u32>, MapState)> {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("graph kfuncs, kernel column", &why);
        return None;
    }
    let k = bpfjet_kernel::KernelObject::open_with(path, &bpfjet_kernel::LoadOptions::default())
        .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    let v = reqs
        .iter()
        .map(|(p, f)| k.test_run(p, f, 1, Some(0)).unwrap().retval)
        .collect();
    Some((v, control_plane(k.dump_maps().unwrap())))
}

#[test]
fn graph_programs_agree_with_the_kernel_on_interp_and_jit() {
    let path = object();
    let reqs = requests(1200);
    let interp = on_bpfjet(&path, &reqs, XdpEngine::Interp);
    let jit = on_bpfjet(&path, &reqs, XdpEngine::Jit);
    // The programs did real work: objects went in and came out of every
    // structure.
    let s = interp.1["stats"][0].value.clone().unwrap();
    let s = bpfjet_maps::state::parse_hex(&s).unwrap();
    let field = |i: usize| u64::from_le_bytes(s[i * 8..i * 8 + 8].try_into().unwrap());
    assert!(field(3) > 0 && field(5) > 0, "tree pops and hits: {s:?}");
    assert!(field(9) != 0 && field(13) != 0, "deque and swaps: {s:?}");
    for (i, (a, b)) in interp.0.iter().zip(&jit.0).enumerate() {
        assert_eq!(a, b, "request {i} ({}): interp vs jit", reqs[i].0);
    }
    assert!(interp.1 == jit.1, "stats differ: interp vs jit");
    if let Some(kernel) = on_kernel(&path, &reqs) {
        for (i, (k, b)) in kernel.0.iter().zip(&interp.0).enumerate() {
            assert_eq!(k, b, "request {i} ({}): kernel vs bpfjet", reqs[i].0);
        }
        assert!(
            kernel.1 == interp.1,
            "stats differ: kernel {:?} vs bpfjet {:?}",
            kernel.1,
            interp.1
        );
    }
}

/// Programs the kernel's verifier refuses, each for one ownership rule,
/// with words of the reason bpfjet must give.
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "leak",
        "struct elem *n = new_obj(elem); if (!n) return 1; n->key = 1; return 2;",
        "Unreleased reference",
    ),
    (
        "no_lock",
        "struct elem *n = new_obj(elem); if (!n) return 1;
         bpf_rbtree_add_impl(&troot, &n->rb, less, 0, 0); return 2;",
        "must be held",
    ),
    (
        "list_no_lock",
        "struct bpf_list_node *n = bpf_list_pop_front(&lhead);
         if (n) drop_obj(container_of(n, struct item, ln)); return 2;",
        "must be held",
    ),
    (
        "non_owning_after_unlock",
        "struct elem *n = new_obj(elem); if (!n) return 1;
         bpf_spin_lock(&tlock); bpf_rbtree_add_impl(&troot, &n->rb, less, 0, 0);
         bpf_spin_unlock(&tlock); n->key = 5; return 2;",
        "invalid mem access",
    ),
    (
        "obj_new_under_lock",
        "bpf_spin_lock(&tlock); struct elem *n = new_obj(elem); bpf_spin_unlock(&tlock);
         if (n) drop_obj(n); return 2;",
        "function calls are not allowed while holding a lock",
    ),
    (
        "write_list_node",
        "struct item *it = new_obj(item); if (!it) return 1;
         *(volatile __u64 *)&it->ln = 0; drop_obj(it); return 2;",
        "bpf_list_node",
    ),
    (
        "write_rb_node",
        "struct elem *n = new_obj(elem); if (!n) return 1;
         *(volatile __u64 *)((void *)&n->rb + 8) = 0; drop_obj(n); return 2;",
        "bpf_rb_node",
    ),
    (
        "use_after_drop",
        "struct elem *n = new_obj(elem); if (!n) return 1; drop_obj(n);
         *(volatile __u64 *)&n->key = 1; return 2;",
        "invalid mem access",
    ),
    (
        "no_null_check",
        "struct elem *n = new_obj(elem); n->key = 1; drop_obj(n); return 2;",
        "NULL",
    ),
    (
        "out_of_object",
        "struct elem *n = new_obj(elem); if (!n) return 1;
         *(volatile __u64 *)((void *)n + 48) = 1; drop_obj(n); return 2;",
        "access beyond struct elem",
    ),
    (
        "double_drop",
        "struct elem *n = new_obj(elem); if (!n) return 1; drop_obj(n); drop_obj(n); return 2;",
        "",
    ),
    (
        "drop_non_owning",
        "struct elem *n = new_obj(elem); if (!n) return 1;
         bpf_spin_lock(&tlock); bpf_rbtree_add_impl(&troot, &n->rb, less, 0, 0);
         bpf_spin_unlock(&tlock); drop_obj(n); return 2;",
        "",
    ),
    (
        "wrong_node_type",
        "struct item *it = new_obj(item); if (!it) return 1;
         bpf_spin_lock(&tlock);
         bpf_rbtree_add_impl(&troot, (struct bpf_rb_node *)&it->ln, less, 0, 0);
         bpf_spin_unlock(&tlock); return 2;",
        "",
    ),
    (
        "kptr_wrong_type",
        "__u32 i = 0; struct kval *v = bpf_map_lookup_elem(&kmap, &i); if (!v) return 1;
         struct elem *n = new_obj(elem); if (!n) return 1;
         struct box *old = bpf_kptr_xchg(&v->ptr, (struct box *)n);
         if (old) drop_obj(old); return 2;",
        "",
    ),
    (
        "kptr_direct_store",
        "__u32 i = 0; struct kval *v = bpf_map_lookup_elem(&kmap, &i); if (!v) return 1;
         *(volatile __u64 *)&v->ptr = 0; return 2;",
        "kptr",
    ),
    (
        "root_direct_access",
        "bpf_spin_lock(&tlock); __u64 x = *(volatile __u64 *)&troot;
         bpf_spin_unlock(&tlock); return x ? 1 : 2;",
        "bpf_rb_root",
    ),
    (
        "list_and_tree_node_without_refcount",
        "struct twin { long key; struct bpf_list_node l; struct bpf_rb_node r; };
         struct twin *t = new_obj(twin); if (!t) return 1; drop_obj(t); return 2;",
        "without a bpf_refcount",
    ),
    (
        "pop_leak",
        "bpf_spin_lock(&llock); struct bpf_list_node *n = bpf_list_pop_front(&lhead);
         bpf_spin_unlock(&llock); return n ? 1 : 2;",
        "Unreleased reference",
    ),
];

/// Programs the kernel's verifier accepts on one ownership rule that
/// bpfjet's must follow too.
const ACCEPTED: &[(&str, &str)] = &[(
    // Another count taken through an owning reference cannot fail: the
    // result needs no NULL check (the kernel's is_kfunc_ret_null).
    "acquire_through_owning_is_not_null",
    "struct shared *n = new_obj(shared); if (!n) return 1;
     struct shared *m = bpf_refcount_acquire_impl(n, 0);
     m->key = 7; drop_obj(m); drop_obj(n); return 2;",
)];

#[test]
fn kernel_accepted_ownership_cases_are_accepted() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("graph kfuncs accepted corpus, kernel column", why);
    }
    for (name, body) in ACCEPTED {
        let (path, in_kernel) = case("good", name, body, kernel.is_ok());
        if let Some(k) = in_kernel {
            assert!(
                k.is_ok(),
                "{name}: the kernel refuses it (corpus is wrong): {:?}",
                k.err()
            );
        }
        let obj = bpfjet_obj::load_file(&path).unwrap();
        if let Err(e) = bpfjet_runtime::LoadedObject::load(&obj, &ObjectOptions::default()) {
            panic!("{name}: bpfjet refuses a program the kernel accepts: {e}");
        }
    }
}

/// One corpus case: `body` as an XDP program next to the valid programs
/// (so that every type is defined), compiled, and the kernel's load of it
/// when `ask_kernel`.
fn case(
    kind: &str,
    name: &str,
    body: &str,
    ask_kernel: bool,
) -> (
    PathBuf,
    Option<Result<bpfjet_kernel::KernelObject, bpfjet_kernel::KernelError>>,
) {
    let text = format!(
        "{PRELUDE}\nSEC(\"xdp\")\nint {kind}(struct xdp_md *ctx)\n{{\n{body}\n}}\n{PROGRAMS}"
    );
    let path = Compile::text(&format!("graph_{kind}_{name}"), &text).object();
    let kernel = ask_kernel.then(|| {
        bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
    });
    (path, kernel)
}

#[test]
fn kernel_refused_ownership_violations_are_refused() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("graph kfuncs negative corpus, kernel column", why);
    }
    for (name, body, words) in REFUSED {
        let (path, in_kernel) = case("bad", name, body, kernel.is_ok());
        let refused = in_kernel.map(|k| k.is_err());
        support::assert_refused_like_the_kernel(name, &path, refused, words);
    }
}
