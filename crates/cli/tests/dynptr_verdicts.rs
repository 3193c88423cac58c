//! Dynptr kfuncs (`bpf_dynptr_from_xdp`, `bpf_dynptr_slice(_rdwr)`,
//! `bpf_dynptr_adjust`, `bpf_dynptr_is_null`, `bpf_dynptr_is_rdonly`,
//! `bpf_dynptr_size`, `bpf_dynptr_clone`) with the dynptr helpers, in C
//! programs compiled here: every program must get the kernel verifier's
//! verdict from bpfjet's loader, and a refused one must name the
//! instruction and the reason. The helpers alone are compared instruction
//! by instruction in the verifier's corpus (crates/verifier/tests/corpus/
//! dynptr_*.s); kfunc calls need the kernel's BTF ids, so they are here.
//!
//! Without a usable kernel the kernel column is skipped with a message and
//! bpfjet is checked against the expected verdicts.

mod support;

const PRELUDE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <bpf_dynptr_kfuncs.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");
"#;

/// (name, body of `int prog(struct xdp_md *ctx)`, kernel accepts, words of
/// bpfjet's reason when refused).
const CASES: &[(&str, &str, bool, &str)] = &[
    (
        "slice_read",
        "struct bpf_dynptr d; __u8 buf[14];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         __u8 *eth = bpf_dynptr_slice(&d, 0, buf, sizeof(buf));
         if (!eth) return XDP_PASS;
         return eth[12] == 8 ? XDP_DROP : XDP_PASS;",
        true,
        "",
    ),
    (
        "slice_rdwr_write",
        "struct bpf_dynptr d;
         bpf_dynptr_from_xdp(ctx, 0, &d);
         __u8 *p = bpf_dynptr_slice_rdwr(&d, 0, NULL, 6);
         if (!p) return XDP_PASS;
         p[0] = 0xff;
         return XDP_TX;",
        true,
        "",
    ),
    (
        "queries_and_adjust",
        "struct bpf_dynptr d;
         bpf_dynptr_from_xdp(ctx, 0, &d);
         if (bpf_dynptr_is_null(&d) || bpf_dynptr_is_rdonly(&d)) return XDP_ABORTED;
         __u32 n = bpf_dynptr_size(&d);
         if (bpf_dynptr_adjust(&d, 14, n)) return XDP_DROP;
         return bpf_dynptr_size(&d) + 14 == n ? XDP_PASS : XDP_ABORTED;",
        true,
        "",
    ),
    (
        "clone_slice",
        "struct bpf_dynptr d, c; __u8 buf[2];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         bpf_dynptr_clone(&d, &c);
         bpf_dynptr_adjust(&c, 12, 14);
         __u8 *t = bpf_dynptr_slice(&c, 0, buf, 2);
         return t && t[0] == 8 ? XDP_DROP : XDP_PASS;",
        true,
        "",
    ),
    (
        "read_write_helpers_on_xdp",
        "struct bpf_dynptr d; __u8 mac[6];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         if (bpf_dynptr_read(mac, 6, &d, 6, 0)) return XDP_PASS;
         if (bpf_dynptr_write(&d, 0, mac, 6, 0)) return XDP_DROP;
         return XDP_TX;",
        true,
        "",
    ),
    (
        "ringbuf_clone_submit",
        "struct bpf_dynptr d, c; __u64 v = 7;
         bpf_ringbuf_reserve_dynptr(&rb, 8, 0, &d);
         bpf_dynptr_clone(&d, &c);
         bpf_dynptr_write(&c, 0, &v, 8, 0);
         bpf_ringbuf_submit_dynptr(&d, 0);
         return XDP_PASS;",
        true,
        "",
    ),
    (
        "copy_frame_into_ringbuf",
        "struct bpf_dynptr x, d;
         bpf_dynptr_from_xdp(ctx, 0, &x);
         bpf_ringbuf_reserve_dynptr(&rb, 64, 0, &d);
         bpf_dynptr_memset(&d, 0, 64, 0xaa);
         bpf_dynptr_copy(&d, 0, &x, 0, 14);
         bpf_ringbuf_submit_dynptr(&d, 0);
         return XDP_PASS;",
        true,
        "",
    ),
    (
        "copy_from_uninitialized",
        "struct bpf_dynptr x, d;
         bpf_ringbuf_reserve_dynptr(&rb, 64, 0, &d);
         bpf_dynptr_copy(&d, 0, &x, 0, 14);
         bpf_ringbuf_submit_dynptr(&d, 0);
         return XDP_PASS;",
        false,
        "initialized dynptr",
    ),
    (
        "slice_no_null_check",
        "struct bpf_dynptr d; __u8 buf[14];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         __u8 *eth = bpf_dynptr_slice(&d, 0, buf, sizeof(buf));
         return eth[12] == 8 ? XDP_DROP : XDP_PASS;",
        false,
        "null",
    ),
    (
        "slice_past_its_size",
        "struct bpf_dynptr d; __u8 buf[14];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         volatile __u8 *eth = bpf_dynptr_slice(&d, 0, buf, sizeof(buf));
         if (!eth) return XDP_PASS;
         return eth[14] == 8 ? XDP_DROP : XDP_PASS;",
        false,
        "",
    ),
    (
        "write_through_read_only_slice",
        "struct bpf_dynptr d;
         bpf_dynptr_from_xdp(ctx, 0, &d);
         __u8 *p = bpf_dynptr_slice(&d, 0, NULL, 6);
         if (!p) return XDP_PASS;
         p[0] = 0xff;
         return XDP_TX;",
        false,
        "read-only",
    ),
    (
        "slice_after_adjust_head",
        "struct bpf_dynptr d;
         bpf_dynptr_from_xdp(ctx, 0, &d);
         volatile __u8 *p = bpf_dynptr_slice_rdwr(&d, 0, NULL, 6);
         if (!p) return XDP_PASS;
         bpf_xdp_adjust_head(ctx, 0);
         return p[0] ? XDP_DROP : XDP_PASS;",
        false,
        "",
    ),
    (
        "buffer_smaller_than_slice",
        "struct bpf_dynptr d; __u8 buf[8];
         bpf_dynptr_from_xdp(ctx, 0, &d);
         __u8 *eth = bpf_dynptr_slice(&d, 0, buf, 14);
         return eth && eth[0] ? XDP_DROP : XDP_PASS;",
        false,
        "",
    ),
    (
        "clone_leaks_reference",
        "struct bpf_dynptr d, c;
         bpf_ringbuf_reserve_dynptr(&rb, 8, 0, &d);
         bpf_dynptr_clone(&d, &c);
         return XDP_PASS;",
        false,
        "reference",
    ),
    (
        "clone_used_after_submit",
        "struct bpf_dynptr d, c; __u64 v = 7;
         bpf_ringbuf_reserve_dynptr(&rb, 8, 0, &d);
         bpf_dynptr_clone(&d, &c);
         bpf_ringbuf_submit_dynptr(&d, 0);
         bpf_dynptr_write(&c, 0, &v, 8, 0);
         return XDP_PASS;",
        false,
        "initialized dynptr",
    ),
    (
        "slice_of_uninitialized",
        "struct bpf_dynptr d; __u8 buf[4];
         __u8 *p = bpf_dynptr_slice(&d, 0, buf, 4);
         return p && p[0] ? XDP_DROP : XDP_PASS;",
        false,
        "initialized dynptr",
    ),
];

#[test]
fn dynptr_kfunc_programs_get_the_kernels_verdict() {
    let cases = CASES.iter().map(|(name, body, accepts, words)| {
        let text = format!(
            "{PRELUDE}\nSEC(\"xdp\")\nint prog(struct xdp_md *ctx)\n{{\n{body}\n}}\n\
             char _license[] SEC(\"license\") = \"GPL\";\n"
        );
        (*name, text, *accepts, *words)
    });
    let failures = support::verdict_failures("dynptr kfunc verdicts", cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
