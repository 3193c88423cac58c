//! Dynptrs at run time: XDP programs compiled here use every dynptr helper
//! (197–203) and the kernel's dynptr kfuncs on the frame (multi-buffer
//! frames too: reads, writes, slices, memset and copy across the linear
//! part's end and page borders; frames moved by adjust_head/tail under a
//! dynptr), on a map value and on ring-buffer
//! reservations, success and error paths alike (bad flags, out-of-range
//! offsets, null dynptrs, adjust's check order, a frame too short for a
//! slice, reservations too large). Over one sequence of frames the kernel
//! (`BPF_PROG_TEST_RUN`), bpfjet's interpreter (verified and bounds-checked)
//! and its JIT must return the same actions and output frames, leave the
//! same `stats` and `scratch` maps, where the programs keep every return
//! code they saw, and the same ring-buffer records.
//!
//! Without a usable kernel the kernel column is skipped with a message.

mod support;

use bpfjet_jit::{DumpStage, JitObject, JitOptions};
use bpfjet_maps::state::MapState;
use bpfjet_maps::RingbufSnapshot;
use bpfjet_runtime::ObjectOptions;
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};
use support::{Engine, OnEngine};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <bpf_dynptr_kfuncs.h>

#define SLOTS 32
struct stats { __u64 v[SLOTS]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 6);
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
	/* adjust's checks in order: start > end is EINVAL before either end
	 * past the size is ERANGE. */
	s->v[24] += (__u32)bpf_dynptr_clone(&m, &c);
	s->v[25] += (__u32)bpf_dynptr_adjust(&c, 100 + a, 70 + a);
	s->v[26] += (__u32)bpf_dynptr_adjust(&c, 70, 100);
	s->v[27] += (__u32)bpf_dynptr_adjust(&c, a, a);
	s->v[28] += bpf_dynptr_size(&c) + (bpf_dynptr_data(&c, 0, 1) == 0);
	/* A null dynptr: every call refuses it. */
	s->v[29] += (__u32)bpf_dynptr_adjust(&n, 0, 0) + (__u64)bpf_dynptr_read(v, 1, &n, 0, 0);
	s->v[30] += (__u64)bpf_dynptr_write(&n, 0, v, 1, 0) + (bpf_dynptr_data(&n, 0, 0) == 0);
	s->v[31] += (bpf_dynptr_slice(&n, 0, 0, 4) == 0) + bpf_dynptr_is_rdonly(&n);
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
	/* A clone narrowed by adjust writes into the same sample. */
	struct bpf_dynptr c;
	__u8 mark[2] = { 0xc0, 0xde };
	s->v[7] += (__u32)bpf_dynptr_clone(&d, &c);
	s->v[8] += (__u32)bpf_dynptr_adjust(&c, 2, 6);
	s->v[9] += (__u64)bpf_dynptr_write(&c, 2, mark, 2, 0);
	s->v[10] += (__u64)bpf_dynptr_write(&c, 3, mark, 2, 0);
	s->v[11] += bpf_dynptr_size(&c);
	__u8 *q = bpf_dynptr_slice_rdwr(&d, 12, 0, 2);
	if (q)
		q[1] = 0x99;
	else
		s->v[12]++;
	if (b[2] & 1)
		bpf_ringbuf_discard_dynptr(&d, 0);
	else
		bpf_ringbuf_submit_dynptr(&d, 0);
	s->v[6] += bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > 0;
	return XDP_PASS;
}

/* Multi-buffer frames: the dynptr spans the linear part and the page
 * fragments. The frame's first two bytes (little-endian) pick the offset;
 * reads, writes, slices (a pointer within one piece, the buffer across a
 * border, NULL without one), memset and copy across the borders. */
SEC("xdp.frags")
int frags(struct xdp_md *ctx)
{
	struct stats *s = slot(4);
	struct bpf_dynptr d, e;
	__u8 buf[16], got[16] = {};
	__u16 off16 = 0;

	if (!s)
		return XDP_ABORTED;
	s->v[0] += (__u32)bpf_dynptr_from_xdp(ctx, 0, &d);
	s->v[1] += bpf_dynptr_size(&d);
	s->v[2] += (__u64)bpf_dynptr_read(&off16, 2, &d, 0, 0);
	__u32 off = off16;
	long r = bpf_dynptr_read(got, sizeof(got), &d, off, 0);
	s->v[3] += (__u64)r;
	s->v[4] += got[0] + got[7] + got[15];
	__u8 *p = bpf_dynptr_slice(&d, off, buf, sizeof(buf));
	s->v[5] += !p ? 0 : p == buf ? 1 : 2;
	s->v[20] += !p;
	s->v[21] += p == buf;
	s->v[22] += p && p != buf;
	if (p)
		s->v[6] += p[0] + p[15];
	__u8 *q = bpf_dynptr_slice_rdwr(&d, off + 16, 0, 8);
	s->v[7] += !q ? 0 : q == buf ? 1 : 2;
	if (q)
		q[0] ^= 0xff;
	/* Through the buffer the frame keeps its bytes (no write-back). */
	__u8 *w = bpf_dynptr_slice_rdwr(&d, off, buf, sizeof(buf));
	s->v[8] += !w ? 0 : w == buf ? 1 : 2;
	s->v[23] += !w;
	s->v[24] += w == buf;
	s->v[25] += w && w != buf;
	s->v[26] += !q;
	if (w)
		w[1] = 0x77;
	s->v[9] += (__u64)bpf_dynptr_write(&d, off + 32, got, sizeof(got), 0);
	s->v[10] += (__u32)bpf_dynptr_clone(&d, &e);
	s->v[11] += (__u32)bpf_dynptr_adjust(&e, off, off + 100);
	s->v[12] += (__u64)bpf_dynptr_read(got, sizeof(got), &e, 84, 0);
	s->v[13] += got[3] + got[12];
	s->v[14] += (__u64)bpf_dynptr_read(got, sizeof(got), &e, 85, 0);
	s->v[15] += (__u32)bpf_dynptr_memset(&e, 40, 20, 0x5a);
	s->v[16] += (__u32)bpf_dynptr_copy(&d, off + 64, &e, 0, 30);
	s->v[17] += bpf_dynptr_slice(&e, 90, buf, sizeof(buf)) == 0;
	s->v[18] += bpf_dynptr_size(&e);
	s->v[19] += (__u64)bpf_dynptr_write(&d, 0, got, 4, 1);
	return XDP_TX;
}

/* The frame moves under an XDP dynptr: it keeps its size (the kernel's
 * too), reads and writes go to the frame as it is now, a range past its
 * new end is EINVAL, and a slice there copies what there is. */
SEC("xdp")
int moved(struct xdp_md *ctx)
{
	struct stats *s = slot(5);
	struct bpf_dynptr d;
	__u8 buf[8] = {}, got[8] = {};

	if (!s)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &d);
	__u32 size = bpf_dynptr_size(&d);
	s->v[0] += size;
	s->v[1] += (__u32)bpf_xdp_adjust_head(ctx, 14);
	s->v[2] += (__u64)bpf_dynptr_read(got, sizeof(got), &d, 0, 0);
	s->v[3] += got[0] + got[7];
	s->v[4] += (__u32)bpf_xdp_adjust_tail(ctx, -20);
	s->v[5] += bpf_dynptr_size(&d);
	s->v[6] += (__u64)bpf_dynptr_read(got, sizeof(got), &d, size - 8, 0);
	__u8 *p = bpf_dynptr_slice(&d, size - 40, buf, sizeof(buf));
	s->v[7] += !p ? 0 : p == buf ? 1 : 2;
	if (p)
		s->v[8] += p[0] + p[5] + p[7];
	s->v[9] += (__u64)bpf_dynptr_write(&d, 4, got, sizeof(got), 0);
	s->v[10] += (__u64)bpf_dynptr_write(&d, size - 30, got, sizeof(got), 0);
	return XDP_TX;
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

/// The kernel test run's linear part (page - headroom - shared info); the
/// rest of a frame goes to 4096-byte page fragments.
const LINEAR: usize = 3520;
const PAGE: usize = 4096;

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
    // Multi-buffer frames: offsets in the linear part, across its end,
    // inside a fragment, across a page border, near and past the end.
    let two_pages = LINEAR + PAGE + 700;
    for (len, off) in [
        (200usize, 100usize),
        (LINEAR + 80, 40),
        (LINEAR + 80, LINEAR - 8),
        (LINEAR + 80, LINEAR - 20),
        (LINEAR + 300, LINEAR + 4),
        (two_pages, LINEAR + PAGE - 10),
        (two_pages, LINEAR + PAGE - 40),
        (two_pages, LINEAR + PAGE - 100),
        (two_pages, LINEAR + 50),
        (two_pages, two_pages - 16),
        (two_pages, two_pages - 15),
        (two_pages, 0xfff0),
        (LINEAR, LINEAR - 16),
    ] {
        let mut f = frame(&[], len, off as u8);
        f[..2].copy_from_slice(&(off as u16).to_le_bytes());
        // Bytes that differ from page to page.
        for (i, b) in f.iter_mut().enumerate().skip(34) {
            *b ^= (i / PAGE) as u8;
        }
        out.push(("frags", f));
    }
    for (len, seed) in [(64usize, 1u8), (100, 2), (40, 3), (54, 4)] {
        out.push(("moved", frame(&[], len, seed)));
    }
    out
}

/// Actions and output frames, the maps the programs write, and the ring
/// buffer's records (raw headers, DISCARD bits, bytes).
type Outcome = (Vec<(u32, Vec<u8>)>, MapState, RingbufSnapshot);

fn stats_of(mut maps: MapState) -> MapState {
    maps.retain(|name, _| name == "stats" || name == "scratch");
    maps
}

fn on_bpfjet(path: &Path, reqs: &[(&str, Vec<u8>)], engine: Engine) -> Outcome {
    let on = OnEngine::load(path, engine);
    let runs = reqs.iter().map(|(p, f)| on.run(p, f)).collect();
    let loaded = on.loaded();
    let ring = loaded.map("rb").unwrap().ringbuf_snapshot().unwrap();
    (runs, stats_of(loaded.dump_state().unwrap()), ring)
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
    let ring = k.ringbuf_snapshot("rb").unwrap();
    Some((runs, stats_of(k.dump_maps().unwrap()), ring))
}

fn assert_same(what: &str, a: &Outcome, b: &Outcome, reqs: &[(&str, Vec<u8>)]) {
    for (i, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
        assert_eq!(
            x, y,
            "{what}: request {i} ({}): action and frame",
            reqs[i].0
        );
    }
    for (name, entries) in &a.1 {
        assert_eq!(Some(entries), b.1.get(name), "{what}: map {name}");
    }
    assert_eq!(a.1, b.1, "{what}: maps");
    assert_eq!(a.2, b.2, "{what}: ring buffer records");
}

/// The `stats` map as rows of 32 u64 words.
fn stat_rows(o: &Outcome) -> Vec<Vec<u64>> {
    o.1["stats"]
        .iter()
        .map(|e| {
            let v = e.value.as_deref().unwrap_or("");
            (0..v.len() / 16)
                .map(|i| {
                    u64::from_str_radix(&v[i * 16..i * 16 + 16], 16)
                        .unwrap()
                        .swap_bytes()
                })
                .collect()
        })
        .collect()
}

#[test]
fn dynptr_programs_agree_with_the_kernel_on_interp_and_jit() {
    let path = object();
    let reqs = requests();
    let interp = on_bpfjet(&path, &reqs, Engine::Interp);
    let checked = on_bpfjet(&path, &reqs, Engine::Checked);
    let jit = on_bpfjet(&path, &reqs, Engine::Jit);
    assert_same("interpreter vs JIT", &interp, &jit, &reqs);
    assert_same("interpreter vs bounds-checked", &interp, &checked, &reqs);
    // Every program kept something, errors included (a run where the
    // calls did nothing would compare equal too).
    let rows = stat_rows(&interp);
    assert_eq!(rows.len(), 6, "stats rows");
    for (i, row) in rows.iter().enumerate() {
        assert!(
            row.iter().filter(|&&w| w != 0).count() >= 4,
            "program {i} recorded too little: {row:x?}"
        );
    }
    // ring: the failed reservations' return codes (-E2BIG for a size over
    // the dynptr limit, -EINVAL for flags and for a size over the ring).
    assert_eq!(
        rows[3][0] as i64,
        -7 - 22 - 22,
        "ring reservations: {rows:x?}"
    );
    // local: adjust(start > end, both past the size) is EINVAL, not ERANGE.
    assert_eq!(
        rows[2][25],
        5 * u64::from(-22i32 as u32),
        "adjust order: {rows:x?}"
    );
    // frags: slices into one piece, through the buffer and NULL all seen.
    let f = &rows[4];
    assert!(
        f[20..27].iter().all(|&n| n > 0),
        "frags slices (NULL, buffer, pointer): {f:x?}"
    );
    // The ring holds the submitted and the discarded samples.
    assert_eq!(interp.2.records.len(), 4, "ring records: {:?}", interp.2);
    if let Some(kernel) = on_kernel(&path, &reqs) {
        assert_same("bpfjet vs the kernel", &kernel, &interp, &reqs);
    }
}

/// The JIT calls `bpf_dynptr_from_xdp`, `bpf_dynptr_slice(_rdwr)` and
/// `bpf_dynptr_size` of a verified XDP program directly: `parse`, which
/// uses only those, calls no helper trampoline; `bpf_dynptr_read` too.
#[test]
fn xdp_dynptr_kfuncs_are_direct_calls() {
    let obj = bpfjet_obj::load_file(object()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("parse", DumpStage::OptimizedIr, true).unwrap();
    assert!(ir.contains("@bpfjet_jit_dynptr_from_xdp("), "{ir}");
    assert!(ir.contains("@bpfjet_jit_dynptr_slice("), "{ir}");
    assert!(ir.contains("@bpfjet_jit_dynptr_query("), "{ir}");
    assert!(!ir.contains("call i64 @bpfjet_jit_helper("), "{ir}");
    // bpf_dynptr_read (helper 201) of an XDP program too.
    let ir = jit.dump("rw", DumpStage::OptimizedIr, true).unwrap();
    assert!(ir.contains("@bpfjet_jit_dynptr_read("), "{ir}");
}
