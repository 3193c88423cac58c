//! The kernel's open-coded number iterator (`bpf_iter_num_new`,
//! `bpf_iter_num_next`, `bpf_iter_num_destroy`: what libbpf's `bpf_for`
//! and `bpf_repeat` expand to), in C programs compiled here: over one
//! sequence of packets the kernel (`BPF_PROG_TEST_RUN`), bpfjet's
//! interpreter and its JIT must return the same verdicts and leave the
//! same statistics in the map a control plane reads.
//!
//! Negative corpus: programs the kernel verifier refuses (an iterator not
//! destroyed, one used after its destroy or created twice, a write through
//! the element pointer) must be refused by bpfjet's verifier too, naming
//! the instruction and the reason.
//!
//! Without a usable kernel the kernel columns are skipped with a message.

mod support;
use support::stats_runs;

use bpfjet_jit::XdpEngine;
use bpfjet_maps::state::MapState;
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};

/// The uapi struct and kfuncs libbpf-dev's headers predate, and libbpf's
/// `bpf_for`/`bpf_repeat` (v1.2+) written out the same way.
const PRELUDE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_iter_num { __u64 __opaque[1]; } __attribute__((aligned(8)));
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

#define for_range(i, start, end) \
	for (struct bpf_iter_num ___it __attribute__((cleanup(bpf_iter_num_destroy))), \
	     *___p = (bpf_iter_num_new(&___it, (start), (end)), &___it); \
	     ({ int *___t = bpf_iter_num_next(___p); (___t) ? ((i) = *___t, 1) : 0; }); )

struct stats { __u64 runs, sum, count, nested, calls, einval, e2big, empty, last; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} table SEC(".maps");
"#;

const PROGRAMS: &str = r#"
static __always_inline struct stats *get_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

/* Sums table[i] over [a, b) with an index from the iterator. */
static __noinline __u64 sum_table(int a, int b)
{
	__u64 s = 0;
	int i;
	for_range(i, a, b) {
		__u32 k = i;
		__u64 *v = bpf_map_lookup_elem(&table, &k);
		if (v)
			s += *v;
	}
	return s;
}

SEC("xdp")
int iter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct stats *st = get_stats();
	if (!st || data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	int lo = (__s8)b[0], hi = (__s8)b[1], inner = b[2] & 7, stop = b[3];
	int i, j;

	st->runs++;
	/* The numbers, a count and an early exit. */
	for_range(i, lo, hi) {
		st->sum += i;
		st->count++;
		st->last = i;
		if (i == stop)
			break;
	}
	/* Nested iterators. */
	for_range(i, 0, 3) {
		for_range(j, 0, inner)
			st->nested += i * 10 + j;
	}
	/* In a subprogram, the index used for map lookups. */
	st->calls += sum_table(lo & 63, (hi & 63) + 1);
	/* The kernel's errors: start > end, too many, and an empty range. */
	struct bpf_iter_num it;
	int r = bpf_iter_num_new(&it, hi, lo);
	if (r < 0)
		st->einval++;
	if (!bpf_iter_num_next(&it))
		st->empty++;
	bpf_iter_num_destroy(&it);
	if (bpf_iter_num_new(&it, 0, 8 * 1024 * 1024 + 1) == -7)
		st->e2big++;
	bpf_iter_num_destroy(&it);
	return st->count & 1 ? XDP_PASS : XDP_DROP;
}

/* libbpf's bpf_repeat(n): a counter the loop does not otherwise need. */
SEC("xdp")
int repeat(struct xdp_md *ctx)
{
	struct stats *st = get_stats();
	struct bpf_iter_num it;
	__u64 n = 0;
	if (!st)
		return XDP_ABORTED;
	bpf_iter_num_new(&it, 0, 1000);
	while (bpf_iter_num_next(&it))
		n++;
	bpf_iter_num_destroy(&it);
	st->last = n;
	return XDP_PASS;
}

/* A million numbers: verified in a few iterations (the sum widens). */
SEC("xdp")
int big(struct xdp_md *ctx)
{
	struct stats *st = get_stats();
	__u64 sum = 0;
	int i;
	if (!st)
		return XDP_ABORTED;
	for_range(i, 0, 1 << 20)
		sum += i;
	st->last = sum;
	return sum & 1 ? XDP_PASS : XDP_DROP;
}

/* The element as a stack array index, bounded by the program's check. */
SEC("xdp")
int stack_index(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	int arr[16] = {}, i;
	long s = 0;
	if (data + 1 > end)
		return XDP_ABORTED;
	int n = *(__u8 *)data;
	for_range(i, 0, n) {
		if (i < 0 || i >= 16)
			break;
		arr[i] = i * 3;
	}
	for_range(i, 0, 16) {
		if (i < 0 || i >= 16)
			break;
		s += arr[i];
	}
	return (__u64)s % 5;
}

/* The iterator in the caller's frame, advanced by a subprogram through
 * a pointer; and iterators inside a bpf_loop callback. */
static __noinline int advance(struct bpf_iter_num *it)
{
	int *p = bpf_iter_num_next(it);
	return p ? *p : -1;
}

static long per_index(__u32 idx, void *ctx)
{
	struct bpf_iter_num it;
	long *s = ctx;
	int *p;
	bpf_iter_num_new(&it, 0, idx);
	while ((p = bpf_iter_num_next(&it)))
		*s += *p;
	bpf_iter_num_destroy(&it);
	return 0;
}

SEC("xdp")
int frames(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct stats *st = get_stats();
	struct bpf_iter_num it;
	long s = 0;
	int v;
	if (!st || data + 4 > end)
		return XDP_ABORTED;
	int n = ((__u8 *)data)[2] & 15;
	bpf_iter_num_new(&it, 0, n);
	while ((v = advance(&it)) >= 0)
		s += v;
	bpf_iter_num_destroy(&it);
	bpf_loop(n, per_index, &s, 0);
	st->nested += s;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

fn object() -> PathBuf {
    Compile::text("iter_kfuncs", &format!("{PRELUDE}{PROGRAMS}")).object()
}

/// (program, frame) pairs: ranges from -16 to 15 both ways round, inner
/// counts 0..7, stops inside and outside the range.
fn requests() -> Vec<(&'static str, Vec<u8>)> {
    let mut x: u32 = 0x9e37_79b9;
    let mut out = Vec::new();
    for i in 0..60 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let b = x.to_le_bytes();
        let lo = (b[0] % 32) as i8 - 16;
        let hi = (b[1] % 32) as i8 - 16;
        let mut frame = vec![0u8; 64];
        frame[..4].copy_from_slice(&[lo as u8, hi as u8, b[2], b[3] % 40]);
        let prog = match i % 10 {
            6 => "repeat",
            7 => "big",
            8 => "stack_index",
            9 => "frames",
            _ => "iter",
        };
        out.push((prog, frame));
    }
    out
}

/// The table every engine starts from: table[i] = i * i + 1.
fn table_state() -> MapState {
    stats_runs::table_state(|i| i * i + 1)
}

fn on_bpfjet(path: &Path, reqs: &[(&str, Vec<u8>)], engine: XdpEngine) -> (Vec<u32>, MapState) {
    stats_runs::on_bpfjet(path, &table_state(), reqs, engine)
}

fn on_kernel(path: &Path, reqs: &[(&str, Vec<u8>)]) -> Option<(Vec<u32>, MapState)> {
    stats_runs::on_kernel(path, &table_state(), reqs, "iterator kfuncs, kernel column")
}

#[test]
fn iterator_programs_agree_with_the_kernel_on_interp_and_jit() {
    let path = object();
    let reqs = requests();
    let interp = on_bpfjet(&path, &reqs, XdpEngine::Interp);
    let jit = on_bpfjet(&path, &reqs, XdpEngine::Jit);
    assert_eq!(interp.0, jit.0, "verdicts: interpreter vs JIT");
    assert_eq!(interp.1, jit.1, "statistics: interpreter vs JIT");
    let stats = &interp.1["stats"][0];
    assert_ne!(
        stats.value.as_deref().map(|v| v.trim_start_matches('0')),
        Some(""),
        "the programs counted nothing"
    );
    if let Some(kernel) = on_kernel(&path, &reqs) {
        assert_eq!(interp.0, kernel.0, "verdicts: bpfjet vs the kernel");
        assert_eq!(interp.1, kernel.1, "statistics: bpfjet vs the kernel");
    }
}

/// Programs the kernel refuses, with a word of bpfjet's reason.
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "leaked",
        "struct bpf_iter_num it; bpf_iter_num_new(&it, 0, 3); return XDP_PASS;",
        "Unreleased reference",
    ),
    (
        "next_after_destroy",
        "struct bpf_iter_num it; bpf_iter_num_new(&it, 0, 3); bpf_iter_num_destroy(&it);
         return bpf_iter_num_next(&it) ? XDP_DROP : XDP_PASS;",
        "expected an initialized iter_num",
    ),
    (
        "created_twice",
        "struct bpf_iter_num it; bpf_iter_num_new(&it, 0, 3); bpf_iter_num_new(&it, 0, 4);
         bpf_iter_num_destroy(&it); return XDP_PASS;",
        "expected uninitialized iter_num",
    ),
    (
        "write_through_element",
        "struct bpf_iter_num it; int *p; bpf_iter_num_new(&it, 0, 3);
         while ((p = bpf_iter_num_next(&it))) *p = 7;
         bpf_iter_num_destroy(&it); return XDP_PASS;",
        "read-only",
    ),
    (
        "destroy_uninitialized",
        "struct bpf_iter_num it = {}; bpf_iter_num_destroy(&it); return XDP_PASS;",
        "expected an initialized iter_num",
    ),
];

#[test]
fn kernel_refused_iterator_misuse_is_refused() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("iterator kfuncs negative corpus, kernel column", why);
    }
    for (name, body, words) in REFUSED {
        let text = format!(
            "{PRELUDE}\nSEC(\"xdp\")\nint bad(struct xdp_md *ctx)\n{{\n{body}\n}}\n\
             char _license[] SEC(\"license\") = \"GPL\";\n"
        );
        let path = Compile::text(&format!("iter_bad_{name}"), &text).object();
        let refused = kernel.is_ok().then(|| {
            bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
                .is_err()
        });
        support::assert_refused_like_the_kernel(name, &path, refused, words);
    }
}
