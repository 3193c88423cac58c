//! `may_goto` (kernel 6.9+), what the `can_loop` and `cond_break` macros of
//! the kernel's `bpf_experimental.h` expand to, in C programs compiled
//! here: loops bounded by the packet, nested loops, a loop bounded by
//! nothing but its own exit, a loop in a subprogram and loops over a map.
//! Over one sequence of packets the kernel (`BPF_PROG_TEST_RUN`), bpfjet's
//! interpreter and its JIT must return the same verdicts and leave the same
//! statistics in the map a control plane reads.
//!
//! The loop budget: bpfjet counts like the kernel's count-based `may_goto`
//! (`BPF_MAX_LOOPS`, 8M fall-throughs per frame, then the jump); recent x86-64
//! kernels (6.18 here) use a timed budget instead (250 ms per frame), so a
//! loop that only the budget ends is compared between bpfjet's two engines
//! and the documented count, and only its verdict with the kernel.
//!
//! Negative corpus: programs the kernel verifier refuses (a pointer walked
//! off the stack, the packet read past its check, a reference leaked in
//! the loop, invalid encodings, a `may_goto` that jumps to itself) must be
//! refused by bpfjet's verifier too, naming the instruction and the reason.
//!
//! Without a usable kernel the kernel columns are skipped with a message.

mod support;
use support::stats_runs;

use bpfjet_jit::XdpEngine;
use bpfjet_maps::state::MapState;
use bpfjet_testsupport::Compile;
use std::path::{Path, PathBuf};

/// The two loop guards, written out: a `may_goto` whose target is the way
/// out once the loop budget is spent. `can_loop` is an expression (true
/// while the budget lasts), `cond_break` leaves the enclosing loop.
const PRELUDE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define can_loop ({ __label__ out, go_on; int ok_ = 1;			\
	asm volatile goto("may_goto %l[out]" :::: out);			\
	goto go_on;							\
out:	ok_ = 0;							\
go_on:	;								\
	ok_; })
#define cond_break ({ __label__ out, go_on;				\
	asm volatile goto("may_goto %l[out]" :::: out);			\
	goto go_on;							\
out:	break;								\
go_on:	; })

struct stats { __u64 runs, sum, count, nested, calls, found, last, steps; };
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

static __always_inline struct stats *get_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}
"#;

const PROGRAMS: &str = r#"
/* Sums table[a..b) with the index from a may_goto loop. */
static __noinline __u64 sum_table(__u32 a, __u32 b)
{
	__u64 s = 0;
	for (__u32 k = a; k < b && can_loop; k++) {
		__u64 *v = bpf_map_lookup_elem(&table, &k);
		if (v)
			s += *v;
	}
	return s;
}

SEC("xdp")
int loops(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct stats *st = get_stats();
	if (!st || data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	__u32 n = b[0], inner = b[1] & 15, stop = b[2], seed = b[3];
	__u64 x = seed, steps = 0;

	st->runs++;
	/* Bounded by the packet. */
	for (__u32 i = 0; i < n && can_loop; i++) {
		st->sum += i * i;
		st->count++;
	}
	/* Nested, with cond_break. */
	for (__u32 i = 0; i < inner; i++) {
		for (__u32 j = 0; j <= i; j++) {
			st->nested += i * 16 + j;
			cond_break;
		}
		cond_break;
	}
	/* Bounded by nothing but itself (an LCG of full period mod 256). */
	while (can_loop) {
		x = x * 13 + 7;
		steps++;
		if ((x & 0xff) == stop)
			break;
	}
	st->steps += steps;
	st->last = x;
	/* In a subprogram, over a map. */
	st->calls += sum_table(n & 63, (n & 63) + inner);
	return (st->count + steps) & 1 ? XDP_PASS : XDP_DROP;
}

/* The index of a stack array, bounded by the program's own check. */
SEC("xdp")
int stack_index(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u64 arr[16] = {}, s = 0;
	if (data + 1 > end)
		return XDP_ABORTED;
	__u32 n = *(__u8 *)data;
	for (__u32 i = 0; i < n; i++) {
		if (i >= 16)
			break;
		arr[i] = i * 3 + n;
		cond_break;
	}
	for (__u32 i = 0; i < 16 && can_loop; i++)
		s += arr[i];
	return s % 5;
}

/* A table entry found by value, the search starting where the packet says. */
SEC("xdp")
int find(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct stats *st = get_stats();
	if (!st || data + 4 > end)
		return XDP_ABORTED;
	__u64 want = ((__u8 *)data)[2] * 7 + 1;
	__u32 k = ((__u8 *)data)[3] & 63;
	while (can_loop) {
		__u64 *v = bpf_map_lookup_elem(&table, &k);
		if (!v)
			break;
		if (*v == want) {
			st->found += k;
			return XDP_TX;
		}
		k++;
	}
	return XDP_PASS;
}

/* `may_goto +0`: both ways lead to the next instruction. */
SEC("xdp")
int zero_off(struct xdp_md *ctx)
{
	int r;
	asm volatile ("%0 = 2; .quad 0x00000000000000e5;" : "=r"(r));
	return r;
}

/* A may_goto with its imm set on a path the verifier proves dead: the
 * kernel checks the fields only where its walk goes (and then removes the
 * dead code), so the program loads. */
SEC("xdp")
int dead_invalid(struct xdp_md *ctx)
{
	int r;
	asm volatile ("%0 = 2; if %0 == 2 goto +1; .quad 0x00000001000000e5;" : "=r"(r));
	return r;
}

char _license[] SEC("license") = "GPL";
"#;

/// Loops only the budget ends: in the program's frame, twice in a
/// subprogram's and twice in a `bpf_loop` callback's (each call a frame
/// with a budget of its own).
const SPIN: &str = r#"
static __noinline __u64 spin_sub(__u64 from)
{
	__u64 n = from;
	while (can_loop)
		n++;
	return n;
}

static long spin_cb(__u32 i, void *ctx)
{
	__u64 *acc = ctx, n = 0;
	while (can_loop)
		n++;
	*acc += n;
	return 0;
}

SEC("xdp")
int spin(struct xdp_md *ctx)
{
	struct stats *st = get_stats();
	__u64 n = 0, acc = 0;
	if (!st)
		return XDP_ABORTED;
	while (can_loop)
		n++;
	st->steps = n;
	st->calls = spin_sub(1) + spin_sub(2);
	bpf_loop(2, spin_cb, &acc, 0);
	st->nested = acc;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

fn object() -> PathBuf {
    Compile::text("may_goto", &format!("{PRELUDE}{PROGRAMS}")).object()
}

/// (program, frame) pairs: loop counts 0..255, inner counts 0..15, stops
/// and search values in and out of what the loops reach.
fn requests() -> Vec<(&'static str, Vec<u8>)> {
    let mut x: u32 = 0x1234_5678;
    let mut out = Vec::new();
    for i in 0..60 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let b = x.to_le_bytes();
        let mut frame = vec![0u8; 64];
        frame[..4].copy_from_slice(&b);
        let prog = match i % 6 {
            3 => "stack_index",
            4 => "find",
            5 if i % 12 == 5 => "zero_off",
            5 => "dead_invalid",
            _ => "loops",
        };
        out.push((prog, frame));
    }
    out
}

/// The table every engine starts from: table[i] = 7 * i + 1.
fn table_state() -> MapState {
    stats_runs::table_state(|i| 7 * i + 1)
}

fn on_bpfjet(path: &Path, reqs: &[(&str, Vec<u8>)], engine: XdpEngine) -> (Vec<u32>, MapState) {
    stats_runs::on_bpfjet(path, &table_state(), reqs, engine)
}

fn on_kernel(path: &Path, reqs: &[(&str, Vec<u8>)]) -> Option<(Vec<u32>, MapState)> {
    stats_runs::on_kernel(path, &table_state(), reqs, "may_goto, kernel column")
}

/// The `stats` fields of a dumped state, in declaration order.
fn stats_fields(maps: &MapState) -> Vec<u64> {
    let value = maps["stats"][0].value.as_deref().expect("stats value");
    let bytes: Vec<u8> = (0..value.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&value[i..i + 2], 16).unwrap())
        .collect();
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn may_goto_programs_agree_with_the_kernel_on_interp_and_jit() {
    let path = object();
    let reqs = requests();
    let interp = on_bpfjet(&path, &reqs, XdpEngine::Interp);
    let jit = on_bpfjet(&path, &reqs, XdpEngine::Jit);
    assert_eq!(interp.0, jit.0, "verdicts: interpreter vs JIT");
    assert_eq!(interp.1, jit.1, "statistics: interpreter vs JIT");
    let f = stats_fields(&interp.1);
    // runs, sum, count, nested, calls, found, last, steps: every loop ran.
    for (i, name) in ["runs", "sum", "count", "nested", "calls", "found", "steps"]
        .iter()
        .enumerate()
    {
        let at = if *name == "steps" { 7 } else { i };
        assert_ne!(f[at], 0, "the programs never counted {name}: {f:?}");
    }
    if let Some(kernel) = on_kernel(&path, &reqs) {
        assert_eq!(interp.0, kernel.0, "verdicts: bpfjet vs the kernel");
        assert_eq!(interp.1, kernel.1, "statistics: bpfjet vs the kernel");
    }
}

/// A loop that only the budget ends runs `MAY_GOTO_BUDGET` times per frame
/// on both engines (the kernel's count-based budget); the kernel accepts
/// the program too (its x86-64 budget is timed, so its count is not
/// compared).
#[test]
fn the_budget_is_per_frame_and_the_same_on_both_engines() {
    let path = Compile::text("may_goto_spin", &format!("{PRELUDE}{SPIN}")).object();
    let budget = bpfjet_isa::MAY_GOTO_BUDGET;
    let req = [("spin", vec![0u8; 64])];
    for engine in [XdpEngine::Interp, XdpEngine::Jit] {
        let (v, maps) = on_bpfjet(&path, &req, engine);
        assert_eq!(v, [2], "{engine:?}: verdict");
        let f = stats_fields(&maps);
        assert_eq!(
            f[7], budget,
            "{engine:?}: iterations in the program's frame"
        );
        assert_eq!(
            f[4],
            (budget + 1) + (budget + 2),
            "{engine:?}: two subprogram frames, a budget each"
        );
        assert_eq!(
            f[3],
            2 * budget,
            "{engine:?}: two callback calls, a budget each"
        );
    }
    match bpfjet_kernel::kernel_available() {
        Err(why) => support::skip("may_goto budget, kernel load", &why),
        Ok(()) => {
            bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
                .unwrap_or_else(|e| panic!("the kernel refuses the spin program: {e}"));
        }
    }
}

/// Programs the kernel refuses: (name, program text, a word of bpfjet's
/// reason).
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "pointer_walk",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            volatile char buf[16] = {};
            volatile char *p = buf;
            while (can_loop) {
                *p = 1;
                p++;
            }
            return buf[3];
        }"#,
        "invalid write to stack",
    ),
    (
        "packet_walk",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            __u8 *d = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
            __u32 s = 0;
            if ((void *)(d + 4) > (void *)end)
                return XDP_ABORTED;
            for (__u32 i = 0; can_loop; i++) {
                s += d[i];
                if (s > 1000)
                    break;
            }
            return s & 3;
        }"#,
        "invalid access to packet",
    ),
    (
        "ringbuf_leak",
        r#"struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } rb SEC(".maps");
        SEC("xdp") int bad(struct xdp_md *ctx)
        {
            __u64 n = 0;
            while (can_loop) {
                void *e = bpf_ringbuf_reserve(&rb, 8, 0);
                if (!e)
                    break;
                if (++n > 3) {
                    bpf_ringbuf_discard(e, 0);
                    break;
                }
            }
            return n & 3;
        }"#,
        "Unreleased reference",
    ),
    (
        // A constant map key is precise (the lookup depends on it), so
        // the iterations never converge.
        "precise_counter",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
            struct stats *st = get_stats();
            if (!st || data + 4 > end)
                return XDP_ABORTED;
            __u64 want = ((__u8 *)data)[2];
            __u32 k = 0;
            while (can_loop) {
                __u64 *v = bpf_map_lookup_elem(&table, &k);
                if (!v)
                    break;
                if (*v == want) {
                    st->found++;
                    return XDP_TX;
                }
                k++;
            }
            return XDP_PASS;
        }"#,
        "too complex",
    ),
    (
        "imm_set",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            int r;
            asm volatile ("%0 = 2; .quad 0x00000001000100e5; %0 = 1;" : "=r"(r));
            return r;
        }"#,
        "invalid may_goto",
    ),
    (
        "src_set",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            int r;
            asm volatile ("%0 = 2; .quad 0x00000000000110e5; %0 = 1;" : "=r"(r));
            return r;
        }"#,
        "invalid may_goto",
    ),
    (
        "jumps_to_itself",
        r#"SEC("xdp") int bad(struct xdp_md *ctx)
        {
            int r;
            asm volatile ("%0 = 2; .quad 0x00000000ffff00e5;" : "=r"(r));
            return r;
        }"#,
        "infinite loop",
    ),
];

#[test]
fn kernel_refused_may_goto_misuse_is_refused() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("may_goto negative corpus, kernel column", why);
    }
    for (name, program, words) in REFUSED {
        let text = format!("{PRELUDE}\n{program}\nchar _license[] SEC(\"license\") = \"GPL\";\n");
        let path = Compile::text(&format!("may_goto_bad_{name}"), &text).object();
        let refused = kernel.is_ok().then(|| {
            bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
                .is_err()
        });
        support::assert_refused_like_the_kernel(name, &path, refused, words);
    }
}

/// The disassembler prints `may_goto` as llvm-objdump does.
#[test]
fn disasm_prints_may_goto() {
    let path = Compile::text("may_goto_spin", &format!("{PRELUDE}{SPIN}")).object();
    let run = support::bpfjet(&["disasm", path.to_str().unwrap()], b"");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.lines().any(|l| l.contains(": may_goto +")),
        "no may_goto in:\n{}",
        run.stdout
    );
}

/// Each loop converges at its `may_goto` (widened counters, the next
/// iteration's state within the one being explored) in a number of
/// processed instructions of the kernel's order, not once per iteration.
#[test]
fn loops_converge_like_the_kernels() {
    let path = object();
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("may_goto processed counts, kernel column", why);
    }
    let kobj = kernel.is_ok().then(|| {
        let opts = bpfjet_kernel::LoadOptions {
            verifier_log_level: 4,
            ..Default::default()
        };
        bpfjet_kernel::KernelObject::open_with(&path, &opts).expect("kernel load")
    });
    for prog in ["loops", "stack_index", "find"] {
        let run = support::bpfjet(
            &["verify", path.to_str().unwrap(), "--prog", prog, "--json"],
            b"",
        );
        assert_eq!(run.code, Some(0), "{prog}: {}", run.stderr);
        let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("verify --json");
        let ours = json[0]["facts"]["insns_processed"]
            .as_u64()
            .expect("insns_processed");
        let theirs = kobj.as_ref().and_then(|k| {
            k.verifier_log(prog).and_then(|log| {
                log.lines().find_map(|l| {
                    l.strip_prefix("processed ")
                        .and_then(|r| r.split_whitespace().next())
                        .and_then(|n| n.parse::<u64>().ok())
                })
            })
        });
        println!("{prog}: bpfjet processed {ours}, the kernel {theirs:?}");
        assert!(
            ours < 5_000,
            "{prog}: {ours} instructions: the loops did not converge"
        );
        if let Some(k) = theirs {
            assert!(
                ours <= 4 * k + 500,
                "{prog}: bpfjet processed {ours}, the kernel {k}"
            );
        }
    }
}
