//! Helpers that compute from their arguments alone, against the kernel on
//! random arguments: `bpf_csum_diff` (sizes of every multiple of 4 up to
//! 60 and odd ones, zero-length sides, random seeds), `bpf_strncmp`
//! (random prefixes of the packet against fixed strings, every length),
//! and `bpf_loop` (random counts past the limit, callbacks that stop
//! early). Each frame is one call; the program's return value is the
//! helper's answer. On bpfjet's interpreter, bounds-checked interpreter and
//! JIT the answers must be the kernel's.
//!
//! Without a usable kernel the comparison is skipped with a message, and
//! the engines are still compared with each other.

mod support;

use bpfjet_testsupport::Compile;
use support::{Engine, OnEngine};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char target0[] = "GET /index.html";
static const char target1[] = "abc";
static const char target2[] = "";

struct loop_ctx {
	__u32 stop;
	__u32 sum;
};

static long step(__u32 i, void *data)
{
	struct loop_ctx *c = data;
	c->sum += i * 7 + 1;
	return i == c->stop;
}

SEC("xdp")
int call(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 160) > (void *)(long)ctx->data_end)
		return 0;
	__u32 a[32], b[32];
	__builtin_memcpy(a, d + 16, sizeof(a) / 2);
	__builtin_memcpy(a + 16, d + 16, sizeof(a) / 2);
	__builtin_memcpy(b, d + 80, sizeof(b) / 2);
	__builtin_memcpy(b + 16, d + 96, sizeof(b) / 2);
	__u32 seed = d[4] | d[5] << 8 | d[6] << 16 | d[7] << 24;
	__u32 n1 = d[1] & 63, n2 = d[2] & 63;
	switch (d[0] % 6) {
	case 0:
		/* Multiples of 4 on both sides. */
		return bpf_csum_diff(a, n1 & ~3, b, n2 & ~3, seed);
	case 1:
		/* Any size: odd ones are -EINVAL. */
		return bpf_csum_diff(a, n1, b, n2, seed);
	case 2:
		return bpf_csum_diff(0, 0, b, n2 & ~3, seed);
	case 3: {
		char s[32];
		__builtin_memcpy(s, d + 16, sizeof(s));
		/* A string that may end early. */
		if (d[3] & 1)
			s[d[3] >> 4 & 15] = 0;
		__u32 n = (d[1] & 31) + 1;
		switch (d[2] % 3) {
		case 0:
			return bpf_strncmp(s, n, target0);
		case 1:
			return bpf_strncmp(s, n, target1);
		default:
			return bpf_strncmp(s, n, target2);
		}
	}
	case 4: {
		struct loop_ctx c = { .stop = d[1] | d[2] << 8, .sum = 0 };
		long r = bpf_loop(seed & 0xffffff, step, &c, 0);
		return (__u32)r ^ c.sum << 8;
	}
	default: {
		/* Flags other than 0 are -EINVAL. */
		struct loop_ctx c = { .stop = 3, .sum = 0 };
		return bpf_loop(10, step, &c, d[1] & 3);
	}
	}
}

char _license[] SEC("license") = "GPL";
"#;

fn frames(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut next = bpfjet_testsupport::xorshift(seed | 1);
    (0..n)
        .map(|i| {
            let mut f: Vec<u8> = (0..160).map(|_| next() as u8).collect();
            f[0] = (i % 6) as u8;
            // Strings that often share a prefix with the targets.
            if i % 3 == 0 {
                let t: &[u8] = if i % 2 == 0 {
                    b"GET /index.html"
                } else {
                    b"abc"
                };
                f[16..16 + t.len()].copy_from_slice(t);
                let at = 16 + (next() as usize % (t.len() + 1));
                f[at] = (next() % 3) as u8 + b'a';
            }
            // Loop counts: small, and now and then past 1 << 23.
            if i % 6 == 4 && !next().is_multiple_of(4) {
                f[4..8].copy_from_slice(&((next() % 300) as u32).to_le_bytes());
                f[1] = (next() % 320) as u8;
                f[2] = 0;
            }
            f
        })
        .collect()
}

fn on_bpfjet(path: &std::path::Path, engine: Engine, frames: &[Vec<u8>]) -> Vec<u32> {
    let on = OnEngine::load(path, engine);
    frames.iter().map(|f| on.run("call", f).0).collect()
}

fn on_kernel(path: &std::path::Path, frames: &[Vec<u8>]) -> Option<Vec<u32>> {
    let k = support::kernel_object(path, "pure helpers on random arguments, kernel column")?;
    Some(
        frames
            .iter()
            .map(|f| k.test_run("call", f, 1, Some(0)).unwrap().retval)
            .collect(),
    )
}

#[test]
fn pure_helpers_answer_like_the_kernel() {
    let path = Compile::text("pure_helpers", SOURCE).object();
    for seed in [11u64, 0x7777_0001, 0x00c0_ffee_0099] {
        let frames = frames(seed, 600);
        let kernel = on_kernel(&path, &frames);
        let interp = on_bpfjet(&path, Engine::Interp, &frames);
        let reference = kernel.as_ref().unwrap_or(&interp);
        for engine in [Engine::Interp, Engine::Checked, Engine::Jit] {
            let got = on_bpfjet(&path, engine, &frames);
            if let Some(i) = reference.iter().zip(&got).position(|(w, g)| w != g) {
                panic!(
                    "seed {seed:#x}, {engine:?}, frame {i} (call {}, bytes {:02x?}): want {:#x}, got {:#x}",
                    frames[i][0],
                    &frames[i][..8],
                    reference[i],
                    got[i]
                );
            }
        }
        // Every helper answered both ways at least once.
        let einval = (-22i32) as u32;
        assert!(reference.contains(&einval), "seed {seed:#x}: no -EINVAL");
        let strncmp: std::collections::BTreeSet<u32> = reference
            .iter()
            .zip(&frames)
            .filter(|(_, f)| f[0] == 3)
            .map(|(r, _)| *r)
            .collect();
        assert!(
            strncmp.len() >= 3,
            "seed {seed:#x}: strncmp answers {strncmp:?}"
        );
    }
}
