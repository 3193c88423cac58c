//! eNetSTL's node-pointer kfuncs compiled in (`src/lift/ptr_kfunc.rs`)
//! against their natives: a program drives `ptr_container_get_tmp`,
//! `ptr_get_out`, `ptr_container_set_tmp` and `ptr_release_node` (and the
//! kfuncs around them: alloc, owner, destroy) from the packet — nodes
//! taken out of their container while links and tmps still name them,
//! slots freed and reused, tmp and link numbers out of range, nodes set in
//! a tmp without being owned; `ptr_connect`/`ptr_unconnect` (also compiled
//! in) on links free, taken, joining other nodes or out of range and on
//! unowned nodes; writes of `ptr_write_data1/2` (compiled in too) inside,
//! across the ends of and outside their data area —
//! and records what every call answered. The same packets run on the
//! verified interpreter, the JIT with the inline forms and the JIT with
//! every kfunc call kept on the trampoline (`inline_helpers: false`, the
//! natives): every answer, every reference count, link and data byte a
//! control plane reads, and the objects left alive must be the same. The
//! skip list's optimized IR must call none of the eight.

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_kfuncs::enetstl_ptr as ptr;
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::path::PathBuf;

const OPS: usize = 16;

/// Packet: op count, destroy flag (2: and create no new container),
/// then `OPS` ops of 4 bytes (op, a, b,
/// c). Tmps 2..=9 name the nodes ops work on; tmp 0/1 stay as the program
/// leaves them. Every op's answer goes to `res[i]`: a node's key, `NUL`
/// for NULL, or the call's result.
const PROGRAM: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define __kptr __attribute__((btf_type_tag("kptr")))
struct list_head { struct list_head *next, *prev; };
struct ptr_node_container { struct list_head node_list; };
struct __node_common {
	struct ptr_node_container *owner;
	int refcnt;
	char data1[52];
	struct __node_common *outs[16];
	struct __node_common *ins[16];
	unsigned long in_map;
	unsigned long out_map;
	struct list_head node;
	char data2[160];
};
typedef struct __node_common ptr_node;
struct view { char hdr[12]; int height; __u64 key; char pad[328]; __u64 d2[20]; };
extern struct ptr_node_container *ptr_create_node_container(__u32 tmp_num) __ksym;
extern void ptr_destory_node_container(struct ptr_node_container *c) __ksym;
extern ptr_node *ptr_alloc_node(void) __ksym;
extern void ptr_release_node(ptr_node *node) __ksym;
extern ptr_node *ptr_get_out(ptr_node *parent, __u32 idx) __ksym;
extern int ptr_connect(ptr_node *p1, __u32 idx1, ptr_node *p2, __u32 idx2) __ksym;
extern int ptr_unconnect(ptr_node *p1, __u32 idx1, ptr_node *p2, __u32 idx2) __ksym;
extern int ptr_write_data1(ptr_node *node, __u64 off, void *data__buf, __u64 size__sz) __ksym;
extern int ptr_write_data2(ptr_node *node, __u64 off, void *data__buf, __u64 size__sz) __ksym;
extern void ptr_set_owner(struct ptr_node_container *c, ptr_node *node) __ksym;
extern void ptr_unset_owner(ptr_node *node) __ksym;
extern void ptr_container_set_tmp(struct ptr_node_container *c, ptr_node *node, __u32 idx) __ksym;
extern ptr_node *ptr_container_get_tmp(struct ptr_node_container *c, __u32 idx) __ksym;

#define OPS 16
#define NUL 0xffffffffffffULL
struct value { struct ptr_node_container __kptr *c; __u64 res[OPS]; __u8 ops[4 * OPS]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct value);
	__uint(max_entries, 1);
} vals SEC(".maps");

#define KEY(n) (((struct view *)(n))->key)

struct step_ctx { struct ptr_node_container *c; };

static long step(__u64 i, void *ctx)
{
	struct step_ctx *x = ctx;
	__u32 zero = 0;
	struct value *v = bpf_map_lookup_elem(&vals, &zero);
	if (!v)
		return 1;
	__u32 at = (i & (OPS - 1)) * 4;
	__u8 op = v->ops[at], a = v->ops[at + 1], b = v->ops[at + 2], c = v->ops[at + 3];
	__u32 s = 2 + (a & 7), t = 2 + (b & 7), l = c & 3;
	__u64 r = NUL;
	ptr_node *n, *m, *k;
	__u64 src[2] = { i * 0x9e3779b97f4a7c15ULL, (__u64)c << 40 | (__u64)b << 8 | a };
	__u64 size = 1 + (c & 15), off;
	long w;
	switch (op & 15) {
	case 0: /* a node with key a.b, owned when c is odd, named by tmp s */
		n = ptr_alloc_node();
		if (!n) {
			r = NUL - 1;
			break;
		}
		__u64 key = (__u64)a << 8 | b;
		ptr_write_data1(n, 16, &key, sizeof(key));
		if (c & 1)
			ptr_set_owner(x->c, n);
		ptr_container_set_tmp(x->c, n, s);
		m = ptr_container_get_tmp(x->c, s);
		r = m ? KEY(m) : NUL;
		if (m)
			ptr_release_node(m);
		if (!(c & 1)) {
			/* links of an unowned node: -EINVAL (low byte kept) */
			k = c & 4 ? 0 : ptr_container_get_tmp(x->c, t);
			if (c & 2)
				w = k ? ptr_connect(k, l, n, l) : ptr_connect(n, l, n, l + 1);
			else
				w = k ? ptr_unconnect(n, l, k, l) : ptr_unconnect(n, l, n, l);
			r ^= w & 0xff;
			if (k)
				ptr_release_node(k);
		}
		ptr_release_node(n);
		break;
	case 1: /* connect s -> t on links l or c (any number) */
	case 6: /* unconnect */
		n = ptr_container_get_tmp(x->c, s);
		m = ptr_container_get_tmp(x->c, t);
		__u32 i1 = a & 0x80 ? c : l, i2 = b & 0x80 ? c : l;
		if (n && m)
			r = (op & 7) == 1 ? ptr_connect(n, i1, m, i2) : ptr_unconnect(n, i1, m, i2);
		if (n)
			ptr_release_node(n);
		if (m)
			ptr_release_node(m);
		break;
	case 2: /* follow link c (any number: the kfunc masks it) */
		n = ptr_container_get_tmp(x->c, s);
		if (!n)
			break;
		m = ptr_get_out(n, c);
		r = m ? KEY(m) : NUL - 2;
		if (m)
			ptr_release_node(m);
		ptr_release_node(n);
		break;
	case 3: /* take s's node out of the container while holding it */
		n = ptr_container_get_tmp(x->c, s);
		if (!n)
			break;
		ptr_unset_owner(n);
		m = ptr_get_out(n, l);		/* its own links stay */
		k = ptr_container_get_tmp(x->c, s);	/* stale now */
		r = (m ? KEY(m) : 0xff0000) ^ (k ? KEY(k) << 24 : 0);
		if (m)
			ptr_release_node(m);
		if (k)
			ptr_release_node(k);
		if (c & 2) {
			/* set it in a tmp while unowned: ignored */
			ptr_container_set_tmp(x->c, n, t);
		}
		ptr_release_node(n);		/* the last reference: freed */
		break;
	case 4: /* tmp number a, any (masked by the kfunc) */
		n = ptr_container_get_tmp(x->c, a);
		r = n ? KEY(n) : NUL;
		if (n)
			ptr_release_node(n);
		break;
	case 5: /* s's node into tmp c, any number (32 and up: ignored) */
		n = ptr_container_get_tmp(x->c, s);
		if (!n)
			break;
		ptr_container_set_tmp(x->c, n, c);
		ptr_release_node(n);
		m = ptr_container_get_tmp(x->c, c & 31);
		r = m ? KEY(m) : NUL;
		if (m)
			ptr_release_node(m);
		break;
	case 8: /* write 1..16 bytes to data1 at offset b: in range, across its
		 * ends, or outside */
	case 9: /* to data2 at 256 + b or 352 + b */
		n = ptr_container_get_tmp(x->c, s);
		if (!n)
			break;
		if ((op & 15) == 8) {
			off = b;
			w = ptr_write_data1(n, off, src, size);
		} else {
			off = 256 + b + (a & 0x10 ? 96 : 0);
			w = ptr_write_data2(n, off, src, size);
		}
		/* an error as NUL with its low byte; else what the node reads */
		r = w ? (NUL ^ 0xff) ^ (w & 0xff) : KEY(n) ^ ((struct view *)n)->d2[1];
		ptr_release_node(n);
		break;
	default: /* unlink what s's link l leads to from the container, then read the link */
		n = ptr_container_get_tmp(x->c, s);
		if (!n)
			break;
		m = ptr_get_out(n, l);
		if (m) {
			if (c & 4) {
				ptr_unset_owner(m);
			}
			ptr_release_node(m);
		}
		k = ptr_get_out(n, l);
		r = k ? KEY(k) : NUL;
		if (k)
			ptr_release_node(k);
		ptr_release_node(n);
		break;
	}
	v->res[i & (OPS - 1)] = r;
	return 0;
}

SEC("xdp") int p(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (d + 2 + 4 * OPS > end)
		return 0;
	__u32 zero = 0;
	struct value *v = bpf_map_lookup_elem(&vals, &zero);
	if (!v)
		return 0;
	__builtin_memcpy(v->ops, d + 2, 4 * OPS);
	struct ptr_node_container *c = bpf_kptr_xchg(&v->c, NULL);
	if (c && d[1]) {
		ptr_destory_node_container(c);
		c = 0;
	}
	if (d[1] == 2) {
		/* the last packet: nothing left (the verifier does not know
		 * c is NULL here) */
		if (c)
			ptr_destory_node_container(c);
		return 5;
	}
	if (!c) {
		c = ptr_create_node_container(32);
		if (!c)
			return 0;
	}
	struct step_ctx x = { .c = c };
	long done = bpf_loop(d[0] & (OPS - 1), step, &x, 0);
	c = bpf_kptr_xchg(&v->c, c);
	if (c)
		ptr_destory_node_container(c);
	return done + 1;
}
char _license[] SEC("license") = "GPL";
"#;

fn object() -> PathBuf {
    Compile::text("enetstl_ptr_inline", PROGRAM).object()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Allocations, links, reads and removals mixed so that tmps and links
/// often name nodes freed or reused since; a destroyed container now and
/// then.
fn packet(rng: &mut Rng) -> Vec<u8> {
    let mut p = vec![0u8; 2 + 4 * OPS];
    p[0] = 1 + (rng.next() % OPS as u64) as u8;
    p[1] = u8::from(rng.next().is_multiple_of(40));
    for op in p[2..].chunks_mut(4) {
        let x = rng.next();
        op[0] = match x % 100 {
            0..=21 => 0,
            22..=38 => 1,
            39..=52 => 2,
            53..=59 => 3,
            60..=68 => 4,
            69..=76 => 5,
            77..=82 => 6,
            83..=89 => 7,
            90..=94 => 8,
            _ => 9,
        };
        op[1] = (x >> 8) as u8;
        op[2] = (x >> 16) as u8;
        op[3] = (x >> 24) as u8;
        // Mostly small tmp and link numbers, so ops meet each other.
        if (x >> 32).is_multiple_of(4) {
            op[3] = (x >> 40) as u8 % 40;
        } else {
            op[3] &= 0x0f;
        }
        if op[0] == 4 && !(x >> 48).is_multiple_of(3) {
            op[1] = 2 + (op[1] & 7);
        }
    }
    p
}

/// A tmp's node: key, reference count, where its out links lead (keys),
/// its two data areas.
type TmpView = (u64, u32, Vec<u64>, Vec<u8>, Vec<u8>);

/// What a control plane reads of the container: for each tmp, the key
/// and reference count of the node it names and the keys its 16 out links
/// lead to, and its data; and how many nodes the container owns.
fn snapshot(container: u64) -> (Vec<Option<TmpView>>, Option<usize>) {
    let key = |n: u64| u64::from_ne_bytes(ptr::node_data(n).unwrap().0[4..12].try_into().unwrap());
    let tmps = (0..ptr::TMPS)
        .map(|i| {
            let n = ptr::peek_tmp(container, i);
            (n != 0).then(|| {
                let links = (0..ptr::LINKS)
                    .map(|l| {
                        let to = ptr::peek_out(n, l);
                        if to == 0 {
                            u64::MAX
                        } else {
                            key(to)
                        }
                    })
                    .collect();
                let (d1, d2) = ptr::node_data(n).unwrap();
                (
                    key(n),
                    ptr::refcount(n).unwrap(),
                    links,
                    d1.to_vec(),
                    d2.to_vec(),
                )
            })
        })
        .collect();
    (tmps, ptr::container_nodes(container).map(|v| v.len()))
}

fn run_engine(engine: &'static str, packets: Vec<Vec<u8>>) -> Vec<(u32, Vec<u8>, String)> {
    let live = ptr::live_objects();
    // A thread of its own: its space, and run caches that end with it
    // (freeing the map, so the container its kptr holds).
    let out = std::thread::spawn(move || {
        let obj = bpfjet_obj::load_file(object()).unwrap();
        let (jit_opts, xdp) = match engine {
            "interp" => (JitOptions::uncached(), XdpEngine::Interp),
            "jit" => (JitOptions::uncached(), XdpEngine::Jit),
            _ => (
                JitOptions {
                    inline_helpers: false,
                    ..JitOptions::uncached()
                },
                XdpEngine::Jit,
            ),
        };
        let jit = JitObject::load(&obj, &ObjectOptions::default(), &jit_opts)
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        let mut out = Vec::new();
        for p in &packets {
            let r = jit
                .test_run("p", p, &TestRunOptions::default(), xdp)
                .unwrap();
            let state = jit.loaded().dump_state().unwrap();
            let value =
                bpfjet_maps::state::parse_hex(&state["vals"][0].value.clone().unwrap()).unwrap();
            let container = u64::from_ne_bytes(value[0..8].try_into().unwrap());
            out.push((
                r.retval,
                value[8..8 + 8 * OPS].to_vec(),
                format!("{:?}", snapshot(container)),
            ));
        }
        // The last packet destroys the container: every node with it.
        let mut last = vec![0u8; 2 + 4 * OPS];
        last[1] = 2;
        let r = jit
            .test_run("p", &last, &TestRunOptions::default(), xdp)
            .unwrap();
        assert_eq!(r.retval, 5, "{engine}: the destroying packet");
        out
    })
    .join()
    .unwrap();
    // The map freed: its container destroyed, every node with it.
    assert_eq!(ptr::live_objects(), live, "{engine}: objects left alive");
    out
}

#[test]
fn inline_node_pointer_kfuncs_match_the_natives() {
    let mut rng = Rng(0x5eed_9a7e);
    let packets: Vec<Vec<u8>> = (0..600).map(|_| packet(&mut rng)).collect();
    let native = run_engine("jit-no-inline", packets.clone());
    let interp = run_engine("interp", packets.clone());
    let inline = run_engine("jit", packets.clone());
    let mut answers = std::collections::BTreeMap::new();
    let mut link_results = std::collections::BTreeSet::new();
    for (i, p) in packets.iter().enumerate() {
        assert_eq!(
            interp[i], native[i],
            "packet {i} {p:?}: interpreter vs natives"
        );
        assert_eq!(inline[i], native[i], "packet {i} {p:?}: inline vs natives");
        for (op, r) in p[2..].chunks(4).zip(native[i].1.chunks(8)) {
            let r = u64::from_ne_bytes(r.try_into().unwrap());
            *answers.entry((op[0], r >> 40 == 0xff)).or_insert(0u32) += 1;
            if op[0] == 1 || op[0] == 6 {
                link_results.insert((op[0], r));
            }
        }
    }
    // Every answer of connect and unconnect came: done, a link taken or
    // not joining the two, nodes of no common container or a link past 15.
    let einval = (-22i64) as u64;
    for op in [1u8, 6] {
        for r in [0, u64::MAX, einval] {
            assert!(
                link_results.contains(&(op, r)),
                "op {op} never answered {r:#x}: {link_results:?}"
            );
        }
    }
    // Both kinds of answer (a node, NULL) came from every op that reads one.
    for op in [0u8, 2, 3, 4, 5, 7, 8, 9] {
        for null in [false, true] {
            assert!(
                answers.contains_key(&(op, null)),
                "op {op} never answered {}: {answers:?}",
                if null { "NULL" } else { "a node" }
            );
        }
    }
}

#[test]
fn skip_list_search_calls_no_inlined_node_pointer_kfunc() {
    let path = Compile::file(
        bpfjet_testsupport::clang::workspace().join("examples/nf/skiplist_enetstl.c"),
    )
    .object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("skiplist", DumpStage::OptimizedIr, true).unwrap();
    let calls = |name: &str| {
        let symbol = format!("@bpfjet_kfunc_{name}(");
        ir.lines()
            .filter(|l| l.contains("call ") && l.contains(&symbol))
            .count()
    };
    for name in [
        "ptr_container_get_tmp",
        "ptr_get_out",
        "ptr_container_set_tmp",
        "ptr_release_node",
        "ptr_write_data1",
        "ptr_write_data2",
        "ptr_connect",
        "ptr_unconnect",
    ] {
        assert_eq!(calls(name), 0, "{name} is called:\n{ir}");
    }
    // What has no inline form stays a call (allocation, owner changes);
    // the helper trampoline is not used.
    assert!(calls("ptr_alloc_node") > 0, "{ir}");
    assert!(!ir.contains("call i64 @bpfjet_jit_helper("), "{ir}");
    // The search step (the bpf_loop callback) calls nothing but the
    // rare end of a release.
    let asm = jit.dump("skiplist", DumpStage::Assembly, true).unwrap();
    assert!(asm.contains(ptr::DROPPED_SYMBOL), "{asm}");
}
