//! `bpf_trace_vprintk`, `bpf_check_mtu`, `bpf_get_current_uid_gid` and
//! reads of the kernel's map structs through a map pointer against the
//! kernel: the same
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

/// The kernel's restricted printf, conversion by conversion, through
/// `bpf_snprintf` into a map: flags, widths, lengths, characters, strings
/// and the address forms; a destination shorter than the text (cut, the
/// whole length returned); addresses that cannot be read.
#[test]
fn snprintf_formats_like_the_kernel() {
    let dir = Scratch::new("snprintf-formats");
    let packet = dir.file("pkt.bin", (0u8..60).collect::<Vec<u8>>());
    let obj = dir.compile_c(
        "snprintf_formats",
        &format!(
            "{HEADERS}
struct line {{ __s64 ret; char text[88]; }};
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, struct line);
         __uint(max_entries, 12); }} out SEC(\".maps\");
static const char word[] = \"bpfjet\";
static const unsigned char v6[16] = {{ 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd }};
static const unsigned char v4[4] = {{ 10, 0, 2, 15 }};
/* Computed at run time: in a constant initializer clang would leave data
   relocations in .rodata, which no loader applies. */
static __always_inline __u64 addr(const void *p) {{ __u64 v = (__u64)p; asm volatile(\"\" : \"+r\"(v)); return v; }}
#define FMT(k, size, f, ...) do {{ \\
    __u32 key = k; struct line *l = bpf_map_lookup_elem(&out, &key); \\
    static const char fmt_##k[] = f; \\
    __u64 args_##k[] = {{ __VA_ARGS__ }}; \\
    if (l) l->ret = bpf_snprintf(l->text, size, fmt_##k, args_##k, sizeof(args_##k)); \\
}} while (0)
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    FMT(0, 88, \"%d|%+d|% d|%5d|%-5d|%05d|%i\", -42, 42, 42, 42, 42, -42, 0);
    FMT(1, 88, \"%u|%lu|%llu|%x|%X|%lx|%08llx\", -1, -1, 123, 0xbeef, 0xbeef, 0xdeadbeefcafeULL, 0xabc);
    FMT(2, 88, \"%c%c|%s|%10s|%-8s|%%\", 'o', 'k', addr(word), addr(word), addr(word));
    FMT(3, 88, \"%pI4|%pi4|%pks\", addr(v4), addr(v4), addr(word));
    FMT(4, 88, \"%pI6\", addr(v6));
    FMT(5, 88, \"%pi6\", addr(v6));
    FMT(6, 8, \"%d-%s\", 123456, addr(word));
    FMT(7, 88, \"%lld|%llx\", -9000000000LL, -1LL);
    /* Addresses nobody checked: an unmapped one prints as empty or zeros. */
    FMT(8, 88, \"[%s][%pI4][%pks]\", 16, 16, 16);
    return XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let (_, _, maps) = engines_agree("snprintf_formats", &obj, &packet);
    let text = maps.to_string();
    let hex = |s: &[u8]| -> String { s.iter().map(|b| format!("{b:02x}")).collect() };
    for want in [
        &b"-42|+42| 42|   42|42   |-0042|0"[..],
        b"ok|bpfjet|    bpfjet|bpfjet  |%",
        b"10.0.2.15|010.000.002.015|bpfjet",
        b"2001:0db8:0000:0000:0000:0000:0000:abcd",
        b"123456-\0",
        b"[][0.0.0.0][]",
    ] {
        assert!(
            text.contains(&hex(want)),
            "{}: {text}",
            String::from_utf8_lossy(want)
        );
    }
}

/// The kernel checks a `bpf_snprintf` format at load
/// (`check_bpf_snprintf_call`: "Invalid format string"): a conversion it
/// does not have, or more conversions than `data_len` gives arguments,
/// refuses the program. bpfjet's verifier refuses the same ones, and
/// accepts the others, as the kernel does.
#[test]
fn snprintf_formats_refused_at_load_like_the_kernel() {
    let dir = Scratch::new("snprintf-load");
    let packet = dir.file("pkt.bin", (0u8..60).collect::<Vec<u8>>());
    let cases = [
        ("fine", "%d %s", "1, 2", true),
        ("fewer conversions", "%d", "1, 2", true),
        ("unknown conversion", "%d %q", "1, 2", false),
        ("too many conversions", "%d %d %d", "1, 2", false),
        ("unknown pointer form", "%pZ", "1", false),
        ("bad length", "%lllx", "1", false),
    ];
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        support::skip("snprintf_formats_refused_at_load", why);
    }
    for (i, (what, fmt, args, accepted)) in cases.iter().enumerate() {
        let obj = dir.compile_c(
            &format!("snprintf_load_{i}"),
            &format!(
                "{HEADERS}
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, char[32]);
         __uint(max_entries, 1); }} out SEC(\".maps\");
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    __u32 k = 0; char *o = bpf_map_lookup_elem(&out, &k);
    static const char fmt[] = \"{fmt}\";
    __u64 args[] = {{ {args} }};
    if (o) bpf_snprintf(o, 32, fmt, args, sizeof(args));
    return XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
            ),
        );
        let ours = bpfjet(&["verify", &obj], b"");
        assert_eq!(
            ours.code == Some(0),
            *accepted,
            "{what}: bpfjet verify: {}",
            ours.stderr
        );
        if !*accepted {
            assert!(
                ours.stderr.contains("Invalid format string"),
                "{what}: {}",
                ours.stderr
            );
        }
        if kernel.is_ok() {
            let k = run(&obj, &packet, "kernel");
            let loaded = k.code == Some(0);
            assert!(
                loaded || k.stderr.contains("loading BPF object"),
                "{what}: kernel: {}",
                k.stderr
            );
            assert_eq!(loaded, *accepted, "{what}: the kernel: {}", k.stderr);
        }
    }
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

/// The real uid and gid bpfjet runs with in the uid/gid test (its effective
/// ids stay root, so it can still load into the kernel).
const REAL_UID: u32 = 4243;
const REAL_GID: u32 = 4242;

/// `bpfjet test-run` of `obj` on `engine` as a process whose real uid/gid
/// are REAL_UID/REAL_GID: what `bpf_get_current_uid_gid` reports is the
/// real ids (`current_cred()->uid`), so a root run could not tell them from
/// zero.
fn run_with_real_ids(obj: &str, packet: &str, engine: &str) -> BpfjetRun {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_bpfjet"));
    cmd.args([
        "test-run",
        obj,
        "--data",
        packet,
        "--engine",
        engine,
        "--json",
        "--dump-maps",
    ]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setresgid(REAL_GID, 0, 0) != 0 || libc::setresuid(REAL_UID, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("starting bpfjet");
    BpfjetRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn current_uid_gid_from_xdp_like_the_kernel() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        support::skip("current_uid_gid", "changing the real uid/gid needs root");
        return;
    }
    let dir = Scratch::new("uid-gid");
    let packet = dir.file("pkt.bin", (0u8..60).collect::<Vec<u8>>());
    let obj = dir.compile_c(
        "uidgid",
        &format!(
            "{HEADERS}
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __u64);
         __uint(max_entries, 1); }} out SEC(\".maps\");
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    __u32 k = 0;
    __u64 ids = bpf_get_current_uid_gid();
    bpf_map_update_elem(&out, &k, &ids, BPF_ANY);
    /* uid in the low half, gid in the high half */
    return (__u32)ids == {REAL_UID} && (ids >> 32) == {REAL_GID} ? XDP_PASS : XDP_DROP;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let interp = outcome(&run_with_real_ids(&obj, &packet, "interp"), "interp");
    let jit = outcome(&run_with_real_ids(&obj, &packet, "jit"), "jit");
    assert_eq!(interp, jit, "uid/gid: interp vs jit");
    match bpfjet_kernel::kernel_available() {
        Ok(()) => {
            let kernel = outcome(&run_with_real_ids(&obj, &packet, "kernel"), "kernel");
            assert_eq!(interp, kernel, "uid/gid: bpfjet vs kernel");
        }
        Err(why) => support::skip("current_uid_gid", &why),
    }
    assert_eq!(interp.0, 2, "the program saw other ids: {}", interp.2);
}

#[test]
fn map_struct_reads_like_the_kernel() {
    // Direct reads as libbpf programs write them against vmlinux.h: the
    // struct definitions carry preserve_access_index, so the offsets are
    // CO-RE-relocated to the running kernel's.
    let dir = Scratch::new("map-struct");
    let packet = dir.file("pkt.bin", (0u8..60).collect::<Vec<u8>>());
    let obj = dir.compile_c(
        "mapstruct",
        &format!(
            "{HEADERS}
struct bpf_map {{ enum bpf_map_type map_type; __u32 key_size, value_size, max_entries, map_flags;
                  int numa_node;
                  __u64 map_extra; }} __attribute__((preserve_access_index));
struct bpf_array {{ struct bpf_map map; __u32 elem_size, index_mask; }}
    __attribute__((preserve_access_index));
struct bpf_htab {{ struct bpf_map map; __u32 n_buckets; }} __attribute__((preserve_access_index));
struct val12 {{ __u32 a, b, c; }};
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, struct val12);
         __uint(max_entries, 5); }} arr SEC(\".maps\");
struct {{ __uint(type, BPF_MAP_TYPE_HASH); __type(key, __u64); __type(value, __u32);
         __uint(max_entries, 100); __uint(map_flags, BPF_F_NO_PREALLOC); }} h SEC(\".maps\");
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __u64);
         __uint(max_entries, 16); }} out SEC(\".maps\");
static void put(__u32 k, __u64 v) {{ bpf_map_update_elem(&out, &k, &v, BPF_ANY); }}
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    struct bpf_map *a = (struct bpf_map *)&arr;
    struct bpf_htab *t = (struct bpf_htab *)&h;
    put(0, a->map_type);
    put(1, a->key_size);
    put(2, a->value_size);
    put(3, a->max_entries);
    put(4, a->map_flags);
    put(5, ((struct bpf_array *)&arr)->elem_size);
    put(6, ((struct bpf_array *)&arr)->index_mask);
    put(7, t->map.map_type);
    put(8, t->map.key_size);
    put(9, t->map.max_entries);
    put(10, t->map.map_flags);
    put(11, t->n_buckets);
    put(12, (__u64)(__s64)a->numa_node);
    put(13, a->map_extra);
    return ((struct bpf_map *)&out)->max_entries == 16 ? XDP_PASS : XDP_DROP;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let (retval, _, maps) = engines_agree("map_struct_reads", &obj, &packet);
    assert_eq!(retval, 2, "max_entries of `out` read through its pointer");
    // The values themselves: array (type 2), 4-byte key, 12-byte value, 5
    // entries, no flags, elem_size 16, index_mask 7; hash (type 1), 8-byte
    // key, 100 entries, BPF_F_NO_PREALLOC (1), 128 buckets; NUMA_NO_NODE;
    // map_extra 0.
    let slot = |k: u32| -> u64 {
        let key = hex(&k.to_le_bytes());
        let entry = maps["out"]
            .as_array()
            .and_then(|es| es.iter().find(|e| e["key"] == key.as_str()))
            .unwrap_or_else(|| panic!("no slot {k} in {maps}"));
        let v = entry["value"].as_str().expect("value");
        u64::from_str_radix(
            &v.chars()
                .collect::<Vec<_>>()
                .chunks(2)
                .rev()
                .flatten()
                .collect::<String>(),
            16,
        )
        .expect("hex value")
    };
    for (k, want) in [
        (0, 2),
        (1, 4),
        (2, 12),
        (3, 5),
        (4, 0),
        (5, 16),
        (6, 7),
        (7, 1),
        (8, 8),
        (9, 100),
        (10, 1),
        (11, 128),
        (12, u64::MAX),
        (13, 0),
    ] {
        assert_eq!(slot(k), want, "slot {k}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
