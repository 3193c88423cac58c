//! Dynptrs at run time: XDP programs compiled here use every dynptr helper
//! (197–203) and the kernel's dynptr kfuncs on the frame, on a map value
//! and on ring-buffer reservations, success and error paths alike (bad
//! flags, out-of-range offsets, null dynptrs, a frame too short for a
//! slice, reservations too large). Over one sequence of frames the kernel
//! (`BPF_PROG_TEST_RUN`), bpfjet's interpreter and its JIT must return the
//! same actions and output frames and leave the same `stats` map, where the
//! programs keep every return code they saw.
//!
//! Without a usable kernel the kernel column is skipped with a message.

mod support;

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <bpf_dynptr_kfuncs.h>

#define SLOTS 32
struct stats { __u64 v[SLOTS]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[64]);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

static __always_inline struct stats *slot(__u32 k)
{
	return bpf_map_lookup_elem(&stats, &k);
}

/* The frame through slices: Ethernet, then IPv4 when there is one; the
 * MACs swapped in place. */
SEC("xdp")
int parse(struct xdp_md *ctx)
{
	struct stats *s = slot(0);
	struct bpf_dynptr d;
	__u8 eth_buf[14], ip_buf[20];

	if (!s)
		return XDP_ABORTED;
	s->v[0]++;
	bpf_dynptr_from_xdp(ctx, 0, &d);
	s->v[1] += bpf_dynptr_size(&d);
	__u8 *eth = bpf_dynptr_slice(&d, 0, eth_buf, sizeof(eth_buf));
	if (!eth) {
		s->v[2]++;
		return XDP_DROP;
	}
	if (eth[12] == 0x08 && eth[13] == 0x00) {
		__u8 *ip = bpf_dynptr_slice(&d, 14, ip_buf, sizeof(ip_buf));
		if (ip) {
			s->v[3] += ip[9];
			s->v[4] += ip[12] + ip[13] + ip[14] + ip[15];
		} else {
			s->v[5]++;
		}
	}
	__u8 *w = bpf_dynptr_slice_rdwr(&d, 0, NULL, 12);
	if (!w)
		return XDP_PASS;
	for (int i = 0; i < 6; i++) {
		__u8 t = w[i];
		w[i] = w[i + 6];
		w[i + 6] = t;
	}
	return XDP_TX;
}

/* bpf_dynptr_read/write on the frame at offsets the frame chooses. */
SEC("xdp")
int rw(struct xdp_md *ctx)
{
	struct stats *s = slot(1);
	struct bpf_dynptr d;
	__u8 buf[8] = {};
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!s || data + 2 > end)
		return XDP_ABORTED;
	__u32 off = ((__u8 *)data)[0], woff = ((__u8 *)data)[1];
	bpf_dynptr_from_xdp(ctx, 0, &d);
	long r1 = bpf_dynptr_read(buf, sizeof(buf), &d, off, 0);
	long r2 = bpf_dynptr_read(buf, sizeof(buf), &d, 0, 1);
	long r3 = bpf_dynptr_write(&d, woff, buf, sizeof(buf), 0);
	long r4 = bpf_dynptr_write(&d, 0, buf, sizeof(buf), 2);
	void *p = bpf_dynptr_data(&d, 0, 4);
	s->v[0] += r1 == 0;
	s->v[1] += (__u64)r1;
	s->v[2] += (__u64)r2;
	s->v[3] += (__u64)r3;
	s->v[4] += (__u64)r4;
	s->v[5] += p == 0;
	s->v[6] += buf[0] + buf[7];
	return r3 == 0 ? XDP_TX : XDP_PASS;
}

/* A local dynptr over a map value: the queries, adjust, clone, data,
 * copy from the frame and memset. */
SEC("xdp")
int local(struct xdp_md *ctx)
{
	struct stats *s = slot(2);
	__u32 zero = 0;
	__u8 *v = bpf_map_lookup_elem(&scratch, &zero);
	struct bpf_dynptr m, c, x, n;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!s || !v || data + 3 > end)
		return XDP_ABORTED;
	__u32 a = ((__u8 *)data)[0] & 63, b = ((__u8 *)data)[1] & 127;
	__u8 val = ((__u8 *)data)[2];
	s->v[0] += bpf_dynptr_from_mem(v, 64, 0, &m);
	s->v[1] += bpf_dynptr_is_null(&m) + 2 * bpf_dynptr_is_rdonly(&m);
	s->v[2] += (__u64)bpf_dynptr_from_mem(v, 64, 1, &n);
	s->v[3] += bpf_dynptr_is_null(&n);
	s->v[4] += bpf_dynptr_size(&n);
	s->v[5] += (__u32)bpf_dynptr_memset(&m, a, 16, val);
	bpf_dynptr_from_xdp(ctx, 0, &x);
	s->v[6] += (__u32)bpf_dynptr_copy(&m, a, &x, b, 8);
	s->v[7] += (__u32)bpf_dynptr_clone(&m, &c);
	s->v[8] += (__u32)bpf_dynptr_adjust(&c, a, b);
	s->v[9] += bpf_dynptr_size(&c);
	s->v[10] += (__u32)bpf_dynptr_adjust(&c, 100, 200);
	__u8 *p = bpf_dynptr_data(&c, 0, 2);
	if (p) {
		s->v[11] += p[0] + p[1];
		p[1] ^= 0x5a;
	} else {
		s->v[12]++;
	}
	s->v[13] += (__u32)bpf_dynptr_clone(&n, &c);
	s->v[14] += bpf_dynptr_is_null(&c);
	s->v[15] += (__u32)bpf_dynptr_memset(&x, 0, 2, 0xee);
	for (int i = 0; i < 8; i++)
		s->v[16 + i] += v[(a + i) & 63];
	return XDP_TX;
}

/* Ring-buffer dynptrs: reservations of sizes the frame asks for, some too
 * large for the ring or for any dynptr, written, then submitted or
 * discarded. */
SEC("xdp")
int ring(struct xdp_md *ctx)
{
	struct stats *s = slot(3);
	struct bpf_dynptr d;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!s || data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	__u32 size = b[0] == 0xff ? 0x1000000 : (__u32)b[0] * 64;
	long r = bpf_ringbuf_reserve_dynptr(&rb, size, b[1] & 1, &d);
	s->v[0] += (__u64)r;
	s->v[1] += bpf_dynptr_is_null(&d);
	s->v[2] += bpf_dynptr_size(&d);
	__u8 hdr[4] = { b[0], b[1], b[2], b[3] };
	s->v[3] += (__u64)bpf_dynptr_write(&d, 8, hdr, 4, 0);
	__u64 *p = bpf_dynptr_data(&d, 0, 8);
	if (p)
		*p = 0x1122334455667788ull;
	else
		s->v[4]++;
	if (b[2] & 1)
		bpf_ringbuf_discard_dynptr(&d, 0);
	else
		bpf_ringbuf_submit_dynptr(&d, 0);
	s->v[6] += bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > 0;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

fn object() -> PathBuf {
    Compile::text("dynptr_run", SOURCE).object()
}

/// An Ethernet + IPv4 + UDP frame of `len` bytes whose first bytes (the
/// destination MAC) are `head`.
fn frame(head: &[u8], len: usize, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    if len >= 34 {
        f[12] = 0x08;
        f[13] = 0x00;
        f[14] = 0x45;
        f[23] = 17;
    }
    f[..head.len()].copy_from_slice(head);
    f
}

fn requests() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, len) in [64usize, 60, 33, 20, 14, 128, 1500].into_iter().enumerate() {
        out.push(("parse", frame(&[], len, i as u8)));
    }
    for (off, woff, len) in [
        (0u8, 8u8, 64usize),
        (56, 56, 64),
        (57, 57, 64),
        (200, 3, 64),
        (10, 250, 255),
    ] {
        out.push(("rw", frame(&[off, woff], len, off)));
    }
    for (a, b, val) in [
        (0u8, 20u8, 1u8),
        (10, 60, 2),
        (60, 70, 3),
        (40, 30, 4),
        (63, 127, 5),
    ] {
        out.push(("local", frame(&[a, b, val], 64, a)));
    }
    for (sz, flags, discard) in [
        (1u8, 0u8, 0u8),
        (4, 0, 1),
        (0, 0, 0),
        (80, 0, 0),
        (0xff, 0, 0),
        (2, 1, 0),
        (3, 0, 0),
    ] {
        out.push(("ring", frame(&[sz, flags, discard, 0], 64, sz)));
    }
    out
}

type Outcome = (Vec<(u32, Vec<u8>)>, MapState);

fn stats_of(mut maps: MapState) -> MapState {
    maps.retain(|name, _| name == "stats" || name == "scratch");
    maps
}

fn on_bpfjet(path: &Path, reqs: &[(&str, Vec<u8>)], engine: XdpEngine) -> Outcome {
    let obj = bpfjet_obj::load_file(path).unwrap();
    let opts = TestRunOptions::default();
    if engine == XdpEngine::Interp {
        let loaded = bpfjet_runtime::LoadedObject::load(&obj, &ObjectOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let runs = reqs
            .iter()
            .map(|(p, f)| {
                let r = loaded.test_run(p, f, &opts).unwrap();
                (r.retval, r.data_out)
            })
            .collect();
        return (runs, stats_of(loaded.dump_state().unwrap()));
    }
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let runs = reqs
        .iter()
        .map(|(p, f)| {
            let r = jit.test_run(p, f, &opts, engine).unwrap();
            (r.retval, r.data_out)
        })
        .collect();
    (runs, stats_of(jit.loaded().dump_state().unwrap()))
}

fn on_kernel(path: &Path, reqs: &[(&str, Vec<u8>)]) -> Option<Outcome> {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("dynptr runs, kernel column", &why);
        return None;
    }
    let k = bpfjet_kernel::KernelObject::open_with(path, &bpfjet_kernel::LoadOptions::default())
        .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    let runs = reqs
        .iter()
        .map(|(p, f)| {
            let r = k.test_run(p, f, 1, Some(0)).unwrap();
            (r.retval, r.data_out)
        })
        .collect();
    Some((runs, stats_of(k.dump_maps().unwrap())))
}

fn assert_same(what: &str, a: &Outcome, b: &Outcome, reqs: &[(&str, Vec<u8>)]) {
    for (i, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
        assert_eq!(
            x, y,
            "{what}: request {i} ({}): action and frame",
            reqs[i].0
        );
    }
    assert_eq!(a.1, b.1, "{what}: maps");
}

#[test]
fn dynptr_programs_agree_with_the_kernel_on_interp_and_jit() {
    let path = object();
    let reqs = requests();
    let interp = on_bpfjet(&path, &reqs, XdpEngine::Interp);
    let jit = on_bpfjet(&path, &reqs, XdpEngine::Jit);
    assert_same("interpreter vs JIT", &interp, &jit, &reqs);
    // Every program kept something, errors included (a run where the
    // calls did nothing would compare equal too).
    let stats = &interp.1["stats"];
    let words: Vec<u64> = stats
        .iter()
        .flat_map(|e| {
            let v = e.value.as_deref().unwrap_or("");
            (0..v.len() / 16)
                .map(|i| {
                    u64::from_str_radix(&v[i * 16..i * 16 + 16], 16)
                        .unwrap()
                        .swap_bytes()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        stats.len() == 4 && words.iter().filter(|&&w| w != 0).count() >= 30,
        "too few results recorded: {words:x?}"
    );
    // ring: the failed reservations' return codes (-E2BIG for a size over
    // the dynptr limit, -EINVAL for flags and for a size over the ring).
    assert_eq!(
        words[3 * 32] as i64,
        -7 - 22 - 22,
        "ring reservations: {words:x?}"
    );
    if let Some(kernel) = on_kernel(&path, &reqs) {
        assert_same("bpfjet vs the kernel", &kernel, &interp, &reqs);
    }
}
