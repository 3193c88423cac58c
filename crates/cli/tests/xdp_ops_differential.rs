//! The frame helpers against the kernel, in random combinations: each test
//! run applies up to six operations read from the frame's first bytes —
//! `bpf_xdp_adjust_head`, `_adjust_tail`, `_adjust_meta` by random deltas
//! (inside and past every limit), `bpf_xdp_store_bytes` and
//! `bpf_xdp_load_bytes` at random offsets and lengths, direct stores
//! through the data and metadata pointers after the moves,
//! `bpf_xdp_get_buff_len` — on frames of random sizes. Every helper's
//! answer, the program's verdict and the frame the test run returns (from
//! the metadata to the end) must be the kernel's, on bpfjet's interpreter,
//! bounds-checked interpreter and JIT. The single limits are in
//! `crates/runtime/tests/xdp_adjust.rs`; this checks their combinations.
//!
//! Without a usable kernel the comparison is skipped with a message, and
//! the engines are still compared with each other.

mod support;

use bpfjet_testsupport::Compile;
use support::{Engine, OnEngine};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define OPS 6

/* What each operation answered, in order. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPS);
	__type(key, __u32);
	__type(value, __s64);
} answers SEC(".maps");

static void answer(__u32 i, __s64 v)
{
	__s64 *a = bpf_map_lookup_elem(&answers, &i);
	if (a)
		*a = v;
}

static __always_inline int run_ops(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	/* OPS operations of 4 bytes: op, a byte argument, a 16-bit one. */
	__u8 code[OPS * 4];
	if ((void *)(d + sizeof(code)) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__builtin_memcpy(code, d, sizeof(code));
	__u8 buf[64];
	__builtin_memset(buf, 0xa5, sizeof(buf));
	/* Offsets reach into the fragments of a multi-buffer frame. */
	__u32 reach = bpf_xdp_get_buff_len(ctx) > 3520 ? 0x3fff : 0x7ff;
	for (__u32 i = 0; i < OPS; i++) {
		__u8 op = code[i * 4], b = code[i * 4 + 1];
		__s16 w = (__s16)(code[i * 4 + 2] | code[i * 4 + 3] << 8);
		__s64 r;
		switch (op % 8) {
		case 0:
			r = bpf_xdp_adjust_head(ctx, w);
			break;
		case 1:
			r = bpf_xdp_adjust_tail(ctx, w);
			break;
		case 2:
			r = bpf_xdp_adjust_meta(ctx, w);
			break;
		case 3:
			r = bpf_xdp_store_bytes(ctx, w & reach, buf, (b & 63) + 1);
			break;
		case 4:
			r = bpf_xdp_load_bytes(ctx, w & reach, buf, (b & 63) + 1);
			if (!r)
				r = buf[0] | buf[b & 63] << 8;
			break;
		case 5: {
			/* A direct store at the data pointer's offset w. */
			__u8 *data = (void *)(long)ctx->data;
			__u8 *end = (void *)(long)ctx->data_end;
			__u32 off = w & 0x3ff;
			r = -1;
			if ((void *)(data + off + 1) <= (void *)end) {
				data[off] = b;
				r = end - data;
			}
			break;
		}
		case 6: {
			/* The metadata, when there is some: its first byte. */
			__u8 *meta = (void *)(long)ctx->data_meta;
			__u8 *data = (void *)(long)ctx->data;
			r = data - meta;
			if ((void *)(meta + 1) <= (void *)data) {
				meta[0] = b;
				r |= 0x1000;
			}
			break;
		}
		default:
			r = bpf_xdp_get_buff_len(ctx);
		}
		answer(i, r);
	}
	return XDP_PASS;
}

SEC("xdp")
int ops(struct xdp_md *ctx)
{
	return run_ops(ctx);
}

/* Frames past the linear part (3,520 bytes in a test run) arrive in
 * fragments. */
SEC("xdp.frags")
int ops_frags(struct xdp_md *ctx)
{
	return run_ops(ctx);
}

char _license[] SEC("license") = "GPL";
"#;

/// Random frames: the six operations' bytes, then filler, of `min` to
/// `max` bytes.
fn frames(seed: u64, n: usize, min: usize, max: usize) -> Vec<Vec<u8>> {
    let mut next = bpfjet_testsupport::xorshift(seed | 1);
    (0..n)
        .map(|_| {
            let len = min + (next() as usize % (max - min + 1));
            let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            for i in 0..6 {
                let r = next();
                // Deltas mostly small, so that several moves succeed in a
                // row; now and then up to the limits and past them.
                let w: i16 = match r % 8 {
                    0 => (r >> 8) as i16,
                    1 => ((r >> 8) % 8001) as i16 - 4000,
                    2 => ((r >> 8) % 601) as i16 - 300,
                    _ => ((r >> 8) % 129) as i16 - 64,
                };
                f[i * 4] = (r >> 32) as u8;
                f[i * 4 + 1] = (r >> 40) as u8;
                f[i * 4 + 2..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            f
        })
        .collect()
}

/// Per frame: the verdict, the frame out, the answers.
type Outcome = Vec<(u32, Vec<u8>, String)>;

fn answers_of(state: &bpfjet_maps::state::MapState) -> String {
    state["answers"]
        .iter()
        .map(|e| e.value.clone().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
}

fn on_bpfjet(path: &std::path::Path, prog: &str, engine: Engine, frames: &[Vec<u8>]) -> Outcome {
    let on = OnEngine::load(path, engine);
    frames
        .iter()
        .map(|f| {
            let (verdict, out) = on.run(prog, f);
            let state = on.loaded().dump_state().unwrap();
            (verdict, out, answers_of(&state))
        })
        .collect()
}

fn on_kernel(path: &std::path::Path, prog: &str, frames: &[Vec<u8>]) -> Option<Outcome> {
    let k = support::kernel_object(path, "frame helper combinations, kernel column")?;
    Some(
        frames
            .iter()
            .map(|f| {
                let r = k.test_run(prog, f, 1, Some(0)).unwrap();
                let state = k.dump_maps().unwrap();
                (r.retval, r.data_out, answers_of(&state))
            })
            .collect(),
    )
}

fn compare(frames: &[Vec<u8>], want: &Outcome, got: &Outcome, what: &str) {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        assert!(
            w == g,
            "{what}, frame {i} ({} bytes, ops {:02x?}):\n want verdict {} answers {}\n      out {:02x?}\n  got verdict {} answers {}\n      out {:02x?}",
            frames[i].len(),
            &frames[i][..24],
            w.0,
            w.2,
            w.1,
            g.0,
            g.2,
            g.1
        );
    }
}

fn combinations(prog: &str, min: usize, max: usize) {
    let path = Compile::text("xdp_ops", SOURCE).object();
    for seed in [5u64, 0x1234_5678, 0x0bad_cafe_0042] {
        let frames = frames(seed, 300, min, max);
        let kernel = on_kernel(&path, prog, &frames);
        let interp = on_bpfjet(&path, prog, Engine::Interp, &frames);
        let reference = kernel.as_ref().unwrap_or(&interp);
        // The frames reached what they are for: moves that worked and
        // moves refused (-EINVAL), frames of many sizes out.
        let answers: String = reference.iter().map(|o| o.2.as_str()).collect();
        assert!(answers.contains("0000000000000000") && answers.contains("eaffffffffffffff"));
        let sizes: std::collections::BTreeSet<usize> =
            reference.iter().map(|o| o.1.len()).collect();
        assert!(sizes.len() > 100, "{} sizes out", sizes.len());
        for engine in [Engine::Interp, Engine::Checked, Engine::Jit] {
            let got = on_bpfjet(&path, prog, engine, &frames);
            compare(
                &frames,
                reference,
                &got,
                &format!("{prog}, seed {seed:#x}, {engine:?}"),
            );
        }
    }
}

#[test]
fn frame_helper_combinations_match_the_kernel() {
    combinations("ops", 24, 1500);
}

#[test]
fn multi_buffer_frame_helper_combinations_match_the_kernel() {
    combinations("ops_frags", 3000, 12_000);
}
