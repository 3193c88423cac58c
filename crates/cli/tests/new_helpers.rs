//! `bpf_trace_vprintk` and `bpf_check_mtu` against the kernel: the same
//! program (compiled here from C), packet and maps on the interpreter, the
//! JIT and the kernel's BPF_PROG_TEST_RUN must give the same return value,
//! output bytes and maps. test-run's frame arrives on the host's loopback,
//! as the kernel's does, so both see that device's MTU.

mod support;

use support::{bpfjet, BpfjetRun, Scratch};

const HEADERS: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";

fn run(obj: &str, packet: &str, engine: &str) -> BpfjetRun {
    bpfjet(
        &[
            "test-run",
            obj,
            "--data",
            packet,
            "--engine",
            engine,
            "--json",
            "--dump-maps",
        ],
        b"",
    )
}

/// (retval, data_out, maps) of a successful run.
fn outcome(run: &BpfjetRun, what: &str) -> (u64, String, serde_json::Value) {
    assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON report");
    (
        v["retval"].as_u64().expect("retval"),
        v["data_out"].as_str().expect("data_out").to_string(),
        v["maps"].clone(),
    )
}

/// Runs `obj` on every engine; returns bpfjet's outcome after checking the
/// engines agree (with the kernel when it is available).
fn engines_agree(test: &str, obj: &str, packet: &str) -> (u64, String, serde_json::Value) {
    let interp = outcome(&run(obj, packet, "interp"), "interp");
    let jit = outcome(&run(obj, packet, "jit"), "jit");
    assert_eq!(interp, jit, "{test}: interp vs jit");
    match bpfjet_kernel::kernel_available() {
        Ok(()) => {
            let kernel = outcome(&run(obj, packet, "kernel"), "kernel");
            assert_eq!(interp, kernel, "{test}: bpfjet vs kernel");
        }
        Err(why) => support::skip(test, &why),
    }
    interp
}

#[test]
fn trace_vprintk_like_the_kernel() {
    let dir = Scratch::new("vprintk");
    let packet = dir.file("pkt.bin", (0u8..60).collect::<Vec<u8>>());
    let obj = dir.compile_c(
        "vprintk",
        &format!(
            "{HEADERS}
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __s64);
         __uint(max_entries, 4); }} out SEC(\".maps\");
static void put(__u32 k, __s64 v) {{ bpf_map_update_elem(&out, &k, &v, BPF_ANY); }}
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    unsigned char *p = data;
    if (p + 8 > (unsigned char *)end) return XDP_ABORTED;
    /* bpf_printk with more than three arguments is bpf_trace_vprintk. */
    put(0, bpf_printk(\"vprintk %d %u %x %c %llx\", -5, p[1], p[2] * 1000, 'z', 0x1234567890ULL));
    char fmt[] = \"%d %d\";
    __u64 args[2] = {{ 7, 8 }};
    put(1, bpf_trace_vprintk(fmt, sizeof(fmt), args, 12)); /* not a multiple of 8 */
    put(2, bpf_trace_vprintk(fmt, sizeof(fmt), args, 8));  /* fewer arguments than %s */
    put(3, bpf_trace_vprintk(fmt, sizeof(fmt), args, 16));
    return XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let (retval, _, maps) = engines_agree("trace_vprintk", &obj, &packet);
    assert_eq!(retval, 2);
    let text = maps.to_string();
    // "7 8" is 3 characters: the return value is the formatted length.
    assert!(text.contains("0300000000000000"), "{text}");
}

#[test]
fn check_mtu_like_the_kernel() {
    let dir = Scratch::new("check-mtu");
    let packet = dir.file("pkt.bin", (0u8..98).collect::<Vec<u8>>());
    let obj = dir.compile_c(
        "mtu",
        &format!(
            "{HEADERS}
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __s64);
         __uint(max_entries, 16); }} out SEC(\".maps\");
static void put(__u32 k, __s64 v) {{ bpf_map_update_elem(&out, &k, &v, BPF_ANY); }}
static void check(__u32 slot, __u32 ifindex, __u32 len_in, __s32 diff, __u64 flags, struct xdp_md *ctx) {{
    __u32 mtu = len_in;
    put(slot, bpf_check_mtu(ctx, ifindex, &mtu, diff, flags));
    put(slot + 1, mtu);
}}
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    check(0, 0, 0, 0, 0, ctx);           /* the frame on its ingress device */
    check(2, 0, 0, 70000, 0, ctx);       /* grown past the MTU: FRAG_NEEDED */
    check(4, 0, 65536, 0, 0, ctx);       /* an L3 length instead of the frame's */
    check(6, 0, 65537, -1, 0, ctx);
    check(8, 0, 0, 0, 1, ctx);           /* flags: EINVAL, mtu 0 */
    check(10, 999999, 0, 0, 0, ctx);     /* no such device: ENODEV */
    check(12, 1, 100, 0, 0, ctx);        /* loopback by index */
    return XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let (retval, _, maps) = engines_agree("check_mtu", &obj, &packet);
    assert_eq!(retval, 2);
    assert!(!maps.is_null(), "maps dumped");
}
