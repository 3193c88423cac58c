//! `bpf_user_ringbuf_drain` (209) on bpfjet's engines: samples pushed with
//! `UserRingbufProducer` (libbpf's producer semantics) are drained by an XDP
//! program whose callback counts them, records their order through its
//! context, and stops early on request. The verified interpreter and the
//! JIT must give the kernel's results (the drain's return value, discards
//! skipped and not counted, a BUSY record ending the drain, -EINVAL for
//! flags, wrapping records) — the values tests/preload/user_ringbuf.sh
//! checks against the kernel itself under `bpfjet exec`.
//!
//! The bounds-checked interpreter (unverified) also runs a callback that
//! reads the dynptr it is given as memory: the layout bpfjet's dynptr
//! helpers read (`u64 data`, size word with the LOCAL type, offset 0), the
//! sample readable and writable through it only during the call.

mod support;

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::{Map, UserRingbufProducer};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::sync::Arc;

const COMMON: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, 4096);
} urb SEC(".maps");

/* ctl[0]: stop at this sample (1-based, 0 never); ctl[1]: drain flags. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} ctl SEC(".maps");

/* out[0]: drain result; out[1]: calls; out[2]: what the callbacks saw. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

struct cb_ctx {
	__u64 calls;
	__u64 stop_at;
	__u64 seen;
};

static __always_inline void put(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&out, &k);
	if (p)
		*p = v;
}
"#;

const VERIFIED: &str = r#"
static long on_sample(struct bpf_dynptr *d, void *data)
{
	struct cb_ctx *c = data;

	c->calls++;
	c->seen = c->seen * 31 + c->calls;
	return c->calls == c->stop_at ? 1 : 0;
}

SEC("xdp")
int drain(struct xdp_md *ctx)
{
	struct cb_ctx c = {};
	__u32 k0 = 0, k1 = 1;
	__u64 *stop_at = bpf_map_lookup_elem(&ctl, &k0);
	__u64 *flags = bpf_map_lookup_elem(&ctl, &k1);
	long r;

	if (!stop_at || !flags)
		return XDP_ABORTED;
	c.stop_at = *stop_at;
	r = bpf_user_ringbuf_drain(&urb, on_sample, &c, *flags);
	put(0, r);
	put(1, c.calls);
	put(2, c.seen);
	return XDP_PASS;
}
"#;

/// Reads the dynptr as memory (only the bounds-checked interpreter runs
/// this: no verifier accepts it): seen = sum of (size word, every byte),
/// and the first byte is overwritten with 0xee through the data pointer.
const RAW: &str = r#"
static long on_sample(void *d, void *data)
{
	struct cb_ctx *c = data;
	__u8 *p = (__u8 *)*(__u64 *)d;
	__u32 word = *(__u32 *)(d + 8), off = *(__u32 *)(d + 12);
	__u32 size = word & 0xffffff;

	c->calls++;
	c->seen += (__u64)(word >> 24) << 40 | (__u64)off << 32;
	for (__u32 i = 0; i < size && i < 512; i++)
		c->seen += p[i];
	if (size)
		p[0] = 0xee;
	return c->calls == c->stop_at ? 1 : 0;
}

SEC("xdp")
int drain(struct xdp_md *ctx)
{
	struct cb_ctx c = {};
	long r = bpf_user_ringbuf_drain(&urb, on_sample, &c, 0);

	put(0, r);
	put(1, c.calls);
	put(2, c.seen);
	return XDP_PASS;
}
"#;

/// One engine's view of the object: its maps and a test run.
enum Engine {
    Interp(LoadedObject),
    Jit(JitObject),
}

impl Engine {
    fn loaded(&self) -> &LoadedObject {
        match self {
            Engine::Interp(l) => l,
            Engine::Jit(j) => j.loaded(),
        }
    }

    fn map(&self, name: &str) -> Arc<Map> {
        self.loaded().map(name).unwrap()
    }

    /// Drain once with `stop_at` and `flags`: (result, calls, seen).
    fn drain(&self, stop_at: u64, flags: u64) -> (i64, u64, u64) {
        let ctl = self.map("ctl");
        ctl.update_elem(&0u32.to_ne_bytes(), &stop_at.to_ne_bytes(), 0)
            .unwrap();
        ctl.update_elem(&1u32.to_ne_bytes(), &flags.to_ne_bytes(), 0)
            .unwrap();
        let pkt = bpfjet_testsupport::packet::scrambled(64);
        let opts = TestRunOptions::default();
        let r = match self {
            Engine::Interp(l) => l.test_run("drain", &pkt, &opts).unwrap(),
            Engine::Jit(j) => j.test_run("drain", &pkt, &opts, XdpEngine::Jit).unwrap(),
        };
        assert_eq!(r.retval, 2, "XDP_PASS");
        let out = self.map("out");
        let get = |k: u32| {
            let v = out.lookup_copy(&k.to_ne_bytes()).unwrap();
            u64::from_ne_bytes(v[..8].try_into().unwrap())
        };
        (get(0) as i64, get(1), get(2))
    }
}

/// The `seen` a drain of `n` samples leaves (the verified callback's hash
/// of its call numbers).
fn seen_after(n: u64) -> u64 {
    (1..=n).fold(0u64, |s, i| s.wrapping_mul(31).wrapping_add(i))
}

fn push(p: &mut UserRingbufProducer, len: usize, discard: bool) {
    let s = p.reserve(len as u32).unwrap();
    for (i, b) in s.iter_mut().enumerate() {
        *b = (i * 3 + len) as u8;
    }
    let ptr = s.as_mut_ptr();
    // SAFETY: reserved just above.
    unsafe {
        if discard {
            p.discard(ptr)
        } else {
            p.submit(ptr)
        }
    }
}

fn scenario(e: &Engine, label: &str) {
    let mut p = UserRingbufProducer::new(e.map("urb")).unwrap();
    assert_eq!(e.drain(0, 0), (0, 0, 0), "{label}: empty");
    for (i, len) in [0usize, 1, 7, 8, 9, 100, 255].into_iter().enumerate() {
        push(&mut p, len, i == 2 || i == 5);
    }
    assert_eq!(
        e.drain(0, 0),
        (5, 5, seen_after(5)),
        "{label}: 7 samples, 2 discarded"
    );
    // Rounds that wrap the ring, stopped early, then the rest.
    for round in 0..5u64 {
        let mut n = 0u64;
        while p.push(&vec![round as u8; 40 + round as usize * 53]).is_ok() {
            n += 1;
        }
        assert_eq!(
            e.drain(3, 0),
            (3, 3, seen_after(3)),
            "{label}: round {round}"
        );
        assert_eq!(
            e.drain(0, round % 3),
            ((n - 3) as i64, n - 3, seen_after(n - 3)),
            "{label}: round {round}, the rest"
        );
    }
    // A reservation left BUSY ends the drain in front of it.
    push(&mut p, 4, false);
    let busy = p.reserve(12).unwrap().as_mut_ptr();
    push(&mut p, 5, false);
    assert_eq!(e.drain(0, 0).0, 1, "{label}: busy second");
    assert_eq!(e.drain(0, 0).0, 0, "{label}: still busy");
    // SAFETY: reserved above, not committed.
    unsafe { p.submit(busy) };
    assert_eq!(e.drain(0, 0).0, 2, "{label}: submitted");
    push(&mut p, 1, false);
    assert_eq!(e.drain(0, 4), (-22, 0, 0), "{label}: flags 4");
    assert_eq!(e.drain(0, 3).0, 1, "{label}: both wake-up flags");
    let (c, pr) = p.positions();
    assert_eq!(c, pr, "{label}: all consumed");
    assert!(pr > 4096 * 4, "{label}: wrapped several times");
}

fn options() -> ObjectOptions {
    ObjectOptions::default()
}

#[test]
fn drains_alike_on_the_interpreter_and_the_jit() {
    let scratch = support::Scratch::new("user_ringbuf_engines");
    let path = scratch.compile_c("urb_verified", &format!("{COMMON}{VERIFIED}"));
    let obj = bpfjet_obj::load_file(std::path::Path::new(&path)).unwrap();
    let interp = Engine::Interp(LoadedObject::load(&obj, &options()).unwrap());
    scenario(&interp, "interpreter");
    let jit = Engine::Jit(JitObject::load(&obj, &options(), &JitOptions::uncached()).unwrap());
    scenario(&jit, "jit");
}

#[test]
fn the_dynptr_is_local_writable_and_covers_the_sample() {
    let scratch = support::Scratch::new("user_ringbuf_raw");
    let path = scratch.compile_c("urb_raw", &format!("{COMMON}{RAW}"));
    let obj = bpfjet_obj::load_file(std::path::Path::new(&path)).unwrap();
    let loaded = LoadedObject::load(
        &obj,
        &ObjectOptions {
            unverified: true,
            ..ObjectOptions::default()
        },
    )
    .unwrap();
    let e = Engine::Interp(loaded);
    let mut p = UserRingbufProducer::new(e.map("urb")).unwrap();
    // Move the positions near the end of the ring, so that the samples
    // below wrap around it.
    push(&mut p, 3800, false);
    assert_eq!(e.drain(0, 0).0, 1);
    let sizes = [3usize, 0, 64, 300];
    let mut want = 0u64;
    for &n in &sizes {
        push(&mut p, n, false);
        // Type LOCAL (1) in bits 28..30 of the size word, not read-only,
        // offset 0.
        want += 1 << 44;
        want += (0..n).map(|i| u64::from((i * 3 + n) as u8)).sum::<u64>();
    }
    // The last record wraps around the end of the ring.
    let (_, prod) = p.positions();
    assert!(prod > 4096 && prod - 312 < 4096);
    // Bounds-checked: every byte read and the writes through the dynptr's
    // data pointer are inside the regions the drain registered.
    let (r, calls, seen) = e.drain(0, 0);
    assert_eq!((r, calls), (4, 4));
    assert_eq!(seen, want);
    let (c, pr) = p.positions();
    assert_eq!(c, pr);
}
