//! eNetSTL's node-pointer kfuncs (`ptr_*`) and library objects kept in a
//! map value's `__kptr`: what the verifier refuses (each with the
//! instruction and the reason), what the run answers (NULL from an
//! exhausted space, NULL through links to released nodes), and eNetSTL's
//! timing-wheel pattern of a list-buckets handle stored as a `__kptr`.
//!
//! The kernel has no eNetSTL module loaded, so these programs have no
//! kernel column: the model is the module's documented semantics
//! (`bpfjet_kfuncs::enetstl_ptr`). The skip-list store built on these
//! kfuncs is run against its model in `nf_nodes.rs`.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::path::PathBuf;

/// The declarations an eNetSTL program carries, then `body` (functions).
fn program(name: &str, body: &str) -> PathBuf {
    let text = format!(
        r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define __kptr __attribute__((btf_type_tag("kptr")))
struct list_head {{ struct list_head *next, *prev; }};
struct ptr_node_container {{ struct list_head node_list; }};
struct __node_common {{
	struct ptr_node_container *owner;
	int refcnt;
	char data1[52];
	struct __node_common *outs[16];
	struct __node_common *ins[16];
	unsigned long in_map;
	unsigned long out_map;
	struct list_head node;
	char data2[160];
}};
typedef struct __node_common ptr_node;
struct view {{ char hdr[12]; int height; __u64 key; char rest[488]; }};
extern struct ptr_node_container *ptr_create_node_container(__u32 tmp_num) __ksym;
extern void ptr_destory_node_container(struct ptr_node_container *c) __ksym;
extern ptr_node *ptr_alloc_node(void) __ksym;
extern void ptr_release_node(ptr_node *node) __ksym;
extern ptr_node *ptr_get_out(ptr_node *parent, __u32 idx) __ksym;
extern int ptr_connect(ptr_node *p1, __u32 idx1, ptr_node *p2, __u32 idx2) __ksym;
extern int ptr_write_data1(ptr_node *node, __u64 off, void *data__buf, __u64 size__sz) __ksym;
extern void ptr_set_owner(struct ptr_node_container *c, ptr_node *node) __ksym;
extern void ptr_unset_owner(ptr_node *node) __ksym;
extern void ptr_container_set_tmp(struct ptr_node_container *c, ptr_node *node, __u32 idx) __ksym;
extern ptr_node *ptr_container_get_tmp(struct ptr_node_container *c, __u32 idx) __ksym;
struct value {{ struct ptr_node_container __kptr *c; __u64 stash; }};
struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct value);
	__uint(max_entries, 1);
}} vals SEC(".maps");
static __always_inline struct value *val(void)
{{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&vals, &zero);
}}
{body}
char _license[] SEC("license") = "GPL";
"#
    );
    Compile::text(name, &text).object()
}

/// The verifier's refusal of `obj`.
fn refusal(obj: &PathBuf) -> String {
    let o = bpfjet_obj::load_file(obj).unwrap();
    match LoadedObject::load(&o, &ObjectOptions::default()) {
        Ok(_) => panic!("{} was accepted", obj.display()),
        Err(e) => e.to_string(),
    }
}

/// Every refusal names the instruction (`insn N`) and the reason.
fn assert_refused(name: &str, body: &str, reason: &str) {
    let text = refusal(&program(name, body));
    assert!(
        text.contains(reason) && text.contains("insn"),
        "{name}: expected a refusal naming the instruction and \"{reason}\", got:\n{text}"
    );
}

#[test]
fn misuse_of_library_objects_is_refused_with_the_instruction_and_reason() {
    let cases = [
        (
            "ptr_leak",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0; return 1; }"#,
            "Unreleased reference",
        ),
        (
            "ptr_use_after_release",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               ptr_release_node(n); return ((struct view *)n)->height; }"#,
            "invalid mem access 'scalar'",
        ),
        (
            "ptr_release_twice",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               ptr_release_node(n); ptr_release_node(n); return 0; }"#,
            "expected=ptr___node_common (argument 1 of kfunc ptr_release_node",
        ),
        (
            "ptr_unchecked_null",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node();
               ptr_release_node(n); return 0; }"#,
            "may be NULL",
        ),
        (
            "ptr_wrong_type_in_kptr",
            r#"SEC("xdp") int p(struct xdp_md *c) { struct value *v = val(); if (!v) return 0;
               ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               struct ptr_node_container *old = bpf_kptr_xchg(&v->c, (struct ptr_node_container *)n);
               if (old) ptr_destory_node_container(old); return 0; }"#,
            "R2 is struct __node_common but the kptr at off=0 holds struct ptr_node_container",
        ),
        (
            "ptr_forged_from_map",
            r#"SEC("xdp") int p(struct xdp_md *c) { struct value *v = val(); if (!v) return 0;
               ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               v->stash = (__u64)n; ptr_release_node(n);
               ptr_release_node((ptr_node *)v->stash); return 0; }"#,
            "R1 type=scalar expected=ptr___node_common",
        ),
        (
            "ptr_forged_container",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               ptr_set_owner((struct ptr_node_container *)n, n); ptr_release_node(n); return 0; }"#,
            "R1 is a pointer to struct __node_common but argument 1 of kfunc ptr_set_owner is a struct ptr_node_container",
        ),
        (
            "ptr_read_hidden_field",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               long x = (long)n->outs[0]; ptr_release_node(n); return x != 0; }"#,
            "reads __node_common.outs",
        ),
        (
            "ptr_store_into_node",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               ((struct view *)n)->height = 3; ptr_release_node(n); return 0; }"#,
            "stores into struct __node_common",
        ),
        (
            "ptr_kptr_loaded_directly",
            r#"SEC("xdp") int p(struct xdp_md *c) { struct value *v = val(); if (!v) return 0;
               return *(volatile __u64 *)&v->c != 0; }"#,
            "kptr at off=0 accessed directly",
        ),
        (
            "ptr_interior_pointer",
            r#"SEC("xdp") int p(struct xdp_md *c) { ptr_node *n = ptr_alloc_node(); if (!n) return 0;
               ptr_release_node((ptr_node *)((char *)n + 64)); return 0; }"#,
            "must have zero offset",
        ),
    ];
    for (name, body, reason) in cases {
        assert_refused(name, body, reason);
    }
}

#[test]
fn a_kptr_whose_struct_disagrees_with_the_library_layout_is_refused() {
    // The program's struct ptr_node_container is not the library's.
    let text = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define __kptr __attribute__((btf_type_tag("kptr")))
struct ptr_node_container { int count; long first; };
extern struct ptr_node_container *ptr_create_node_container(__u32 tmp_num) __ksym;
extern void ptr_destory_node_container(struct ptr_node_container *c) __ksym;
struct value { struct ptr_node_container __kptr *c; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct value);
	__uint(max_entries, 1);
} vals SEC(".maps");
SEC("xdp") int p(struct xdp_md *c)
{
	__u32 zero = 0;
	struct value *v = bpf_map_lookup_elem(&vals, &zero);
	if (!v) return 0;
	struct ptr_node_container *n = ptr_create_node_container(0);
	if (!n) return 0;
	n = bpf_kptr_xchg(&v->c, n);
	if (n) ptr_destory_node_container(n);
	return 1;
}
char _license[] SEC("license") = "GPL";
"#;
    let obj = Compile::text("ptr_bad_layout", text).object();
    let why = refusal(&obj);
    assert!(
        why.contains("declares member count at off 0 size 4, unlike the library's"),
        "{why}"
    );
}

/// Each packet of this program, on an empty map, allocates nodes until
/// the space is full or `packet bytes << LIMIT_SHIFT` nodes, links them in
/// a chain through out link 0 (owned by a container it keeps in the map's
/// kptr) and returns how many it got; later packets take the chain's
/// second node out of the container, release it, and check that the link
/// from the first now reads NULL (lazy safety): 4, else 2 or 3; a packet
/// of 99 bytes destroys the container (5).
const CHAIN: &str = r#"
struct chain_ctx { struct ptr_node_container *c; __u32 made; __u32 limit; };
static long grow(__u64 i, void *ctx)
{
	struct chain_ctx *x = ctx;
	ptr_node *n = ptr_alloc_node();
	if (!n)
		return 1;
	ptr_set_owner(x->c, n);
	ptr_node *last = ptr_container_get_tmp(x->c, 1);
	if (last) {
		ptr_connect(last, 0, n, 0);
		ptr_release_node(last);
	} else {
		ptr_container_set_tmp(x->c, n, 0);
	}
	ptr_container_set_tmp(x->c, n, 1);
	ptr_release_node(n);
	x->made++;
	return x->made >= x->limit;
}
SEC("xdp") int p(struct xdp_md *ctx)
{
	struct value *v = val();
	if (!v) return 0;
	struct ptr_node_container *c = bpf_kptr_xchg(&v->c, NULL);
	int ret = 0;
	if (!c) {
		c = ptr_create_node_container(0);
		if (!c) return 1;
		struct chain_ctx x = { .c = c, .limit = (ctx->data_end - ctx->data) << LIMIT_SHIFT };
		bpf_loop(1 << 20, grow, &x, 0);
		ret = x.made;
	} else if (ctx->data_end - ctx->data == 99) {
		/* Destroy the container: the nodes it owns go with it. */
		ptr_destory_node_container(c);
		return 5;
	} else {
		ptr_node *first = ptr_container_get_tmp(c, 0);
		if (!first) goto out;
		ptr_node *second = ptr_get_out(first, 0);
		if (!second) { ptr_release_node(first); ret = 2; goto out; }
		ptr_unset_owner(second);
		ptr_release_node(second);
		ptr_node *again = ptr_get_out(first, 0);
		ret = again ? 3 : 4;
		if (again) ptr_release_node(again);
		ptr_release_node(first);
	}
out:;
	struct ptr_node_container *old = bpf_kptr_xchg(&v->c, c);
	if (old) ptr_destory_node_container(old);
	return ret;
}
"#;

/// The chain program's results for `frames` on `engine`, in a thread of
/// its own (its space, and run caches that end with it, freeing the map
/// and so what its kptr holds).
fn chain_run(shift: u32, engine: XdpEngine, frames: Vec<usize>) -> Vec<u32> {
    let obj = program(
        &format!("ptr_chain_{shift}"),
        &format!("#define LIMIT_SHIFT {shift}\n{CHAIN}"),
    );
    std::thread::spawn(move || {
        let o = bpfjet_obj::load_file(&obj).unwrap();
        let jit = JitObject::load(&o, &ObjectOptions::default(), &JitOptions::uncached())
            .unwrap_or_else(|e| panic!("{e}"));
        frames
            .iter()
            .map(|&n| {
                jit.test_run("p", &vec![0u8; n], &TestRunOptions::default(), engine)
                    .unwrap()
                    .retval
            })
            .collect()
    })
    .join()
    .unwrap()
}

#[test]
fn destroyed_containers_free_their_nodes_and_full_spaces_answer_null() {
    use bpfjet_kfuncs::enetstl_ptr::{live_objects, SPACE_SLOTS};
    let before = live_objects();
    for engine in [XdpEngine::Interp, XdpEngine::Jit] {
        // 100 nodes asked and made; then the link to a released node;
        // then the container destroyed with the nodes it owns.
        let got = chain_run(0, engine, vec![100, 64, 99]);
        assert_eq!(got, [100, 4, 5], "{engine:?}");
        assert_eq!(live_objects(), before, "{engine:?}: objects left alive");
    }
    // More nodes than a space holds: the allocation returns NULL at the
    // capacity (the container takes a slot).
    let got = chain_run(12, XdpEngine::Jit, vec![100, 99]);
    assert_eq!(
        got,
        [SPACE_SLOTS as u32 - 1, 5],
        "nodes made before the space ran out"
    );
    assert_eq!(live_objects(), before, "objects left alive after the fill");
}

/// eNetSTL's timing wheel keeps its list-buckets handle in a map value as
/// a `__kptr` (`struct bktlists { int fd; struct bpf_bkt_list __kptr
/// *map; }`): created once, its fd read through the handle, exchanged
/// into the map, then push/pop by fd.
const WHEEL: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define __kptr __attribute__((btf_type_tag("kptr")))
struct bpf_bkt_list { int fd; };
extern struct bpf_bkt_list *bpf_bktlist_new(void) __ksym;
extern void bpf_bktlist_free(struct bpf_bkt_list *bktlist) __ksym;
extern int bpf_bktlist_pop_front(int fd, void *val, __u64 size__kz, __u64 slot) __ksym;
extern int bpf_bktlist_push_back(int fd, const void *val, __u64 size__kz, __u64 slot) __ksym;
struct bktlists { int fd; struct bpf_bkt_list __kptr *map; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct bktlists);
	__uint(max_entries, 1);
} bpf_bktlist_map SEC(".maps");
SEC("xdp") int wheel(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct bktlists *b = bpf_map_lookup_elem(&bpf_bktlist_map, &key);
	if (!b)
		return 1000;
	if (!b->fd) {
		struct bpf_bkt_list *l = bpf_bktlist_new();
		if (!l)
			return 1001;
		b->fd = l->fd;
		struct bpf_bkt_list *old = bpf_kptr_xchg(&b->map, l);
		if (old) {
			bpf_bktlist_free(old);
			return 1002;
		}
	}
	__u64 n = ctx->data_end - ctx->data, out = 0;
	if (bpf_bktlist_push_back(b->fd, &n, sizeof(n), n % 7))
		return 1003;
	int r = bpf_bktlist_pop_front(b->fd, &out, sizeof(out), (n * 3) % 7);
	return r == 1 ? 999 : r ? 1004 : out;
}
char _license[] SEC("license") = "GPL";
"#;

#[test]
fn enetstl_bktlist_handle_kept_in_a_kptr_loads_and_runs() {
    let obj = Compile::text("enetstl_wheel_kptr", WHEEL).object();
    // Each engine in a thread of its own: the queues are the thread's.
    for engine in [XdpEngine::Interp, XdpEngine::Jit] {
        let obj = obj.clone();
        std::thread::spawn(move || {
            let o = bpfjet_obj::load_file(&obj).unwrap();
            let jit = JitObject::load(&o, &ObjectOptions::default(), &JitOptions::uncached())
                .unwrap_or_else(|e| panic!("{e}"));
            let mut queues = vec![std::collections::VecDeque::new(); 7];
            let mut x = 0x2545_f491u32;
            for i in 0..300 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let n = 14 + (x % 200) as usize;
                let got = jit
                    .test_run("wheel", &vec![0u8; n], &TestRunOptions::default(), engine)
                    .unwrap()
                    .retval;
                queues[n % 7].push_back(n as u32);
                let want = queues[(n * 3) % 7].pop_front().unwrap_or(999);
                assert_eq!(got, want, "{engine:?}: packet {i} ({n} bytes)");
            }
            // The handle's fd went into the map; the kptr holds the handle.
            let state = jit.loaded().dump_state_with_special_fields().unwrap();
            let hex = state["bpf_bktlist_map"][0].value.clone().unwrap();
            let v = bpfjet_maps::state::parse_hex(&hex).unwrap();
            assert_eq!(u32::from_le_bytes(v[0..4].try_into().unwrap()), 1, "fd");
            assert_eq!(
                u64::from_le_bytes(v[8..16].try_into().unwrap()),
                bpfjet_kfuncs::enetstl_ptr::bkt_handle(),
                "the kptr holds the handle"
            );
        })
        .join()
        .unwrap();
    }
}
