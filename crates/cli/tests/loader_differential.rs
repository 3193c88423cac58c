//! What libbpf (1.x, with the kernel behind it) does with an object, bpfjet's
//! loader must do too: objects compiled here from C, each exercising one rule
//! of how an ELF object becomes maps and programs — symbol linkage and
//! visibility of maps and programs, sections, map definitions libbpf
//! rewrites (ring buffer sizes), `__kconfig` externs read from the running
//! kernel's configuration, global data. Per case: libbpf opens and loads it
//! or refuses it; bpfjet's loader must agree, refuse with a message that
//! names the rule, and where both load, every program's verdict, packet out
//! and the maps after a run are the kernel's on the interpreter and the JIT.
//!
//! Skips loudly (the kernel column) without a usable kernel: then only
//! bpfjet's expected outcome is checked.

mod support;

use bpfjet_testsupport::Compile;
use support::{skip, Engine, OnEngine};

const HEADERS: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
                       char _license[] SEC(\"license\") = \"GPL\";\n";

/// How libbpf and the kernel treat the case.
enum Outcome {
    /// Loads; these programs are run and compared.
    Loads(&'static [&'static str]),
    /// Refused; bpfjet's message must contain these words.
    Refused(&'static str),
}

struct Case {
    name: &'static str,
    source: String,
    outcome: Outcome,
}

fn case(name: &'static str, body: &str, outcome: Outcome) -> Case {
    Case {
        name,
        source: format!("{HEADERS}{body}\n"),
        outcome,
    }
}

const ARRAY_MAP: &str = "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); \
                         __type(key, __u32); __type(value, __u64); }";

/// A subprogram reading the first packet byte through `void *` arguments,
/// and its caller (attributes go before it).
const FIRST_BYTE: &str = "int first_byte(void *data, void *end) \
     { unsigned char *p = data; if (p + 1 > (unsigned char *)end) return -1; return p[0]; }\n\
     SEC(\"xdp\") int first(struct xdp_md *c) { return first_byte((void *)(long)c->data, \
     (void *)(long)c->data_end) == 0 ? XDP_TX : XDP_PASS; }";

/// A program that counts in `MAP` and answers TX.
fn counting(map: &str) -> String {
    format!(
        "SEC(\"xdp\") int count(struct xdp_md *c) {{ __u32 k = 1; \
         __u64 *v = bpf_map_lookup_elem(&{map}, &k); if (!v) return XDP_ABORTED; \
         *v += 3; return XDP_TX; }}"
    )
}

/// An XDP program calling a chain of `n` global functions, each calling
/// the next: `n + 1` frames deep.
fn global_chain(n: usize) -> String {
    let mut src = format!(
        "__attribute__((noinline)) int f{n}(int x) {{ volatile int y = x; return y + 1; }}\n"
    );
    for i in (1..n).rev() {
        src += &format!(
            "__attribute__((noinline)) int f{i}(int x) {{ volatile int y = x; return f{}(y) + 1; }}\n",
            i + 1
        );
    }
    src + &format!(
        "SEC(\"xdp\") int chain(struct xdp_md *c) {{ return f1(0) == {n} ? XDP_TX : XDP_DROP; }}"
    )
}

/// An XDP program storing each named `__kconfig` extern (as u64) in slot i
/// of an array map `seen`, answering PASS.
fn kconfig_reader(decls: &str, names: &[&str]) -> String {
    let stores: String = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("put({i}, (__u64){n});"))
        .collect();
    format!(
        "#include <stdbool.h>\n{decls}\n\
         struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8); \
         __type(key, __u32); __type(value, __u64); }} seen SEC(\".maps\");\n\
         static __always_inline void put(__u32 k, __u64 v) \
         {{ bpf_map_update_elem(&seen, &k, &v, BPF_ANY); }}\n\
         SEC(\"xdp\") int read_kconfig(struct xdp_md *ctx) {{ {stores} return XDP_PASS; }}"
    )
}

fn cases() -> Vec<Case> {
    use Outcome::*;
    let mut v = vec![
        // Map symbols: libbpf takes only global, default-visibility map
        // variables (its "unsupported map linkage").
        case(
            "static_map",
            &format!("static {ARRAY_MAP} m SEC(\".maps\");\n{}", counting("m")),
            Refused("map `m`: static linkage"),
        ),
        case(
            "hidden_map",
            &format!(
                "{ARRAY_MAP} m SEC(\".maps\") __attribute__((visibility(\"hidden\")));\n{}",
                counting("m")
            ),
            Refused("map `m`: static linkage"),
        ),
        case(
            "weak_map",
            &format!(
                "{ARRAY_MAP} m SEC(\".maps\") __attribute__((weak));\n{}",
                counting("m")
            ),
            Loads(&["count"]),
        ),
        case(
            "long_map_name",
            &format!(
                "{ARRAY_MAP} a_map_name_longer_than_fifteen SEC(\".maps\");\n{}",
                counting("a_map_name_longer_than_fifteen")
            ),
            Loads(&["count"]),
        ),
        // Program symbols: a static entry point outside .text is refused
        // ("is static and not supported"), a weak one loads.
        case(
            "static_program",
            "SEC(\"xdp\") static int quiet(struct xdp_md *c) { return XDP_TX; }",
            Refused("program `quiet` in section `xdp` is static"),
        ),
        case(
            "static_function_in_a_code_section_of_its_own",
            "__attribute__((noinline, section(\".text.helpers\"))) static int triple(int x) \
             { return x * 3; }\n\
             SEC(\"xdp\") int tripled(struct xdp_md *c) { return triple(c->ingress_ifindex); }",
            Refused("program `triple` in section `.text.helpers` is static"),
        ),
        // `xdp_md.egress_ifindex`: readable by a DEVMAP entry's program
        // only (the kernel does not test-run those: verdicts only).
        case(
            "devmap_program_reads_egress_ifindex",
            "SEC(\"xdp/devmap\") int egress(struct xdp_md *c) \
             { return c->egress_ifindex == 7 ? XDP_DROP : XDP_PASS; }",
            Loads(&[]),
        ),
        case(
            "device_program_reads_egress_ifindex",
            "SEC(\"xdp\") int egress(struct xdp_md *c) \
             { return c->egress_ifindex == 7 ? XDP_DROP : XDP_PASS; }",
            Refused("invalid bpf_context access off=20"),
        ),
        case(
            "weak_program",
            "SEC(\"xdp\") __attribute__((weak)) int loud(struct xdp_md *c) { return XDP_TX; }",
            Loads(&["loud"]),
        ),
        case(
            "two_programs_one_section",
            "SEC(\"xdp\") int first(struct xdp_md *c) { return XDP_DROP; }\n\
             SEC(\"xdp\") int second(struct xdp_md *c) { return XDP_TX; }",
            Loads(&["first", "second"]),
        ),
        case(
            "global_and_static_subprograms",
            "__attribute__((noinline)) int global_len(struct xdp_md *c) \
             { return c->data_end - c->data > 20 ? XDP_TX : XDP_DROP; }\n\
             __attribute__((noinline, section(\".text.helpers\"))) static int triple(int x) \
             { return x * 3; }\n\
             SEC(\"xdp\") int both(struct xdp_md *c) { return global_len(c) == XDP_TX ? triple(1) : 0; }",
            Loads(&["both"]),
        ),
        // A global subprogram is verified on its own, from its BTF
        // prototype: a `void *` argument has no size the verifier could
        // check. Hidden visibility makes it static to libbpf, verified in
        // its caller's context.
        case(
            "hidden_global_subprogram",
            &format!("__attribute__((noinline, visibility(\"hidden\"))) {FIRST_BYTE}"),
            Loads(&["first"]),
        ),
        case(
            "global_subprogram_void_pointer",
            &format!("__attribute__((noinline)) {FIRST_BYTE}"),
            Refused("argument 0 (R1) of global function first_byte() points to void"),
        ),
        case(
            "global_subprogram_sized_pointer",
            "__attribute__((noinline)) int plus_one(__u32 *v) { return v ? *v + 1 : 0; }\n\
             SEC(\"xdp\") int sized(struct xdp_md *c) { __u32 x = 2; \
             return plus_one(&x) == 3 ? XDP_TX : XDP_DROP; }",
            Loads(&["sized"]),
        ),
        case(
            "global_subprogram_returning_void",
            "__attribute__((noinline)) void store(__u32 *v) { if (v) *v = 5; }\n\
             SEC(\"xdp\") int stored(struct xdp_md *c) { __u32 x = 2; store(&x); \
             return x == 5 ? XDP_TX : XDP_DROP; }",
            Refused("does not return a scalar"),
        ),
        case(
            "global_subprogram_tagged_context",
            "__attribute__((noinline)) int len_of(void *ctx __attribute__((btf_decl_tag(\"arg:ctx\")))) \
             { struct xdp_md *c = ctx; return c->data_end - c->data; }\n\
             SEC(\"xdp\") int tagged(struct xdp_md *c) { return len_of(c) == 64 ? XDP_TX : XDP_DROP; }",
            Loads(&["tagged"]),
        ),
        // The body of a global function is verified once, from its
        // prototype alone: a sized pointer argument may be NULL, a scalar
        // argument has any value, and its caller sees an unknown result.
        // A pointer argument must be readable and writable for the
        // pointee's size, whatever its `const`: `.rodata` is not.
        case(
            "global_subprogram_unchecked_pointer",
            "__attribute__((noinline)) int plus_one(__u32 *v) { return *v + 1; }\n\
             SEC(\"xdp\") int unchecked(struct xdp_md *c) { __u32 x = 2; \
             return plus_one(&x) == 3 ? XDP_TX : XDP_DROP; }",
            Refused("mem_or_null"),
        ),
        case(
            "global_subprogram_argument_unbounded",
            &format!(
                "{ARRAY_MAP} vals SEC(\".maps\");\n\
                 __attribute__((noinline)) int byte_at(__u32 i) {{ __u32 k = 0; \
                 __u8 *v = bpf_map_lookup_elem(&vals, &k); if (!v) return 0; return v[i]; }}\n\
                 SEC(\"xdp\") int indexed(struct xdp_md *c) {{ return byte_at(3) ? XDP_TX : XDP_DROP; }}"
            ),
            Refused("unbounded"),
        ),
        case(
            "global_subprogram_result_unknown",
            &format!(
                "{ARRAY_MAP} vals SEC(\".maps\");\n\
                 __attribute__((noinline)) int four(void) {{ volatile int x = 4; return x; }}\n\
                 SEC(\"xdp\") int result(struct xdp_md *c) {{ __u32 k = 0; \
                 __u8 *v = bpf_map_lookup_elem(&vals, &k); if (!v) return 0; \
                 return v[four()] ? XDP_TX : XDP_DROP; }}"
            ),
            Refused("map_value pointer"),
        ),
        case(
            "global_subprogram_checked_argument",
            &format!(
                "{ARRAY_MAP} vals SEC(\".maps\");\n\
                 __attribute__((noinline)) int byte_at(__u32 i) {{ __u32 k = 0; \
                 __u8 *v = bpf_map_lookup_elem(&vals, &k); if (!v || i >= 8) return 0; return v[i]; }}\n\
                 SEC(\"xdp\") int indexed(struct xdp_md *c) {{ __u32 k = 0; __u64 *v = \
                 bpf_map_lookup_elem(&vals, &k); if (v) *v = 0x0400; \
                 return byte_at(1) == 4 ? XDP_TX : XDP_DROP; }}"
            ),
            Loads(&["indexed"]),
        ),
        case(
            "global_subprogram_packet_argument",
            "struct eth { __u8 dst[6], src[6]; __u16 proto; };\n\
             __attribute__((noinline)) int proto_of(struct eth *e) { return e ? e->proto : -1; }\n\
             SEC(\"xdp\") int parse(struct xdp_md *c) { void *d = (void *)(long)c->data; \
             if (d + sizeof(struct eth) > (void *)(long)c->data_end) return XDP_PASS; \
             return proto_of(d) == 0x0008 ? XDP_TX : XDP_DROP; }",
            Loads(&["parse"]),
        ),
        case(
            "global_subprogram_packet_unchecked",
            "struct eth { __u8 dst[6], src[6]; __u16 proto; };\n\
             __attribute__((noinline)) int proto_of(struct eth *e) { return e ? e->proto : -1; }\n\
             SEC(\"xdp\") int parse(struct xdp_md *c) { void *d = (void *)(long)c->data; \
             if (d + 4 > (void *)(long)c->data_end) return XDP_PASS; \
             return proto_of(d) == 0x0008 ? XDP_TX : XDP_DROP; }",
            Refused("invalid args"),
        ),
        case(
            "global_subprogram_fills_caller_stack",
            "struct pair { __u32 a, b; };\n\
             __attribute__((noinline)) int fill(struct pair *p) { if (!p) return -1; \
             p->a = 7; p->b = 9; return 0; }\n\
             SEC(\"xdp\") int filled(struct xdp_md *c) { struct pair p = {}; fill(&p); \
             return p.a + p.b == 16 ? XDP_TX : XDP_DROP; }",
            Loads(&["filled"]),
        ),
        case(
            "global_subprogram_pointer_as_scalar",
            "__attribute__((noinline)) int nonzero(long x) { return x != 0; }\n\
             SEC(\"xdp\") int cast(struct xdp_md *c) { __u32 k = 0; \
             return nonzero((long)&k) ? XDP_TX : XDP_DROP; }",
            Refused("is not a scalar"),
        ),
        case(
            "global_subprogram_context_by_type",
            "__attribute__((noinline)) int room(struct xdp_md *c) \
             { void *d = (void *)(long)c->data; if (d + 2 > (void *)(long)c->data_end) return 0; \
             return *(__u8 *)d + 1; }\n\
             SEC(\"xdp\") int by_type(struct xdp_md *c) { return room(c) > 0 ? XDP_TX : XDP_DROP; }",
            Loads(&["by_type"]),
        ),
        case(
            "global_subprogram_rodata_argument",
            "struct cfg { __u32 a, b; };\n\
             const volatile struct cfg conf = { 3, 4 };\n\
             __attribute__((noinline)) int sum(const volatile struct cfg *p) { return p ? p->a + p->b : 0; }\n\
             SEC(\"xdp\") int ro(struct xdp_md *c) { const volatile struct cfg *volatile pp = &conf; return sum(pp) == 7 \
             ? XDP_TX : XDP_DROP; }",
            Refused("write into map forbidden"),
        ),
        // A dynptr argument: an initialised dynptr at the call, a
        // read-only local one in the body.
        case(
            "global_subprogram_dynptr_argument",
            &format!(
                "{ARRAY_MAP} vals SEC(\".maps\");\n\
                 __attribute__((noinline)) int first_two(struct bpf_dynptr *p) {{ __u8 b[2]; \
                 if (bpf_dynptr_read(b, 2, p, 0, 0)) return -1; return b[0] + b[1]; }}\n\
                 SEC(\"xdp\") int dyn(struct xdp_md *c) {{ struct bpf_dynptr d; __u32 k = 0; \
                 __u64 *v = bpf_map_lookup_elem(&vals, &k); if (!v) return XDP_ABORTED; \
                 *v = 0x0302; if (bpf_dynptr_from_mem(v, 8, 0, &d)) return XDP_ABORTED; \
                 return first_two(&d) == 5 ? XDP_TX : XDP_DROP; }}"
            ),
            Loads(&["dyn"]),
        ),
        case(
            "global_subprogram_dynptr_uninitialised",
            "__attribute__((noinline)) int first(struct bpf_dynptr *p) { __u8 b[1]; \
             if (bpf_dynptr_read(b, 1, p, 0, 0)) return -1; return b[0]; }\n\
             SEC(\"xdp\") int undyn(struct xdp_md *c) { struct bpf_dynptr d; \
             return first(&d) == 5 ? XDP_TX : XDP_DROP; }",
            Refused("dynptr"),
        ),
        // A global function as a bpf_loop callback: the kernel refuses a
        // pointer to a global function (a callback is verified in its
        // caller's context).
        case(
            "global_function_as_loop_callback",
            "__attribute__((noinline)) int step(__u32 i, __u64 *sum) { *sum += i; return 0; }\n\
             SEC(\"xdp\") int looped(struct xdp_md *c) { __u64 sum = 0; \
             bpf_loop(10, step, &sum, 0); return sum == 45 ? XDP_TX : XDP_DROP; }",
            Refused("callback function not static"),
        ),
        // The kernel's limit of 8 frames counts a chain through global
        // functions whole, though each body is verified on its own.
        case("global_call_chain_of_8_frames", &global_chain(7), Loads(&["chain"])),
        case(
            "global_call_chain_of_9_frames",
            &global_chain(8),
            Refused("the call stack of 9 frames is too deep"),
        ),
        // Global data in sections of its own.
        case(
            "custom_data_sections",
            "volatile __u64 x SEC(\".data.custom\") = 3; volatile __u64 y SEC(\".bss.mine\");\n\
             volatile int a SEC(\".data.one\") = 1; volatile int b SEC(\".data.one\") = 2;\n\
             volatile const int r SEC(\".rodata.cfg\") = 9; static volatile __u64 s = 5;\n\
             SEC(\"xdp\") int data(struct xdp_md *c) { y += x; s++; \
             return y == 3 && a + b + r == 12 && s == 6 ? XDP_TX : XDP_DROP; }",
            Loads(&["data"]),
        ),
        case(
            "version_section",
            "__u32 _version SEC(\"version\") = 0x050a00;\n\
             SEC(\"xdp\") int versioned(struct xdp_md *c) { return XDP_TX; }",
            Loads(&["versioned"]),
        ),
        // Map definitions libbpf checks or rewrites.
        case(
            "ringbuf_size_rounded_up",
            "struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 5000); } rb SEC(\".maps\");\n\
             SEC(\"xdp\") int ring(struct xdp_md *c) { __u64 x = 7; \
             return bpf_ringbuf_output(&rb, &x, sizeof(x), 0) == 0 ? XDP_TX : XDP_DROP; }",
            Loads(&["ring"]),
        ),
        case(
            "map_fields_libbpf_knows",
            "struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8); __uint(key_size, 4); \
             __uint(value_size, 8); __uint(numa_node, 0); __uint(map_flags, BPF_F_NO_PREALLOC); } \
             sized SEC(\".maps\");\n\
             struct { __uint(type, BPF_MAP_TYPE_BLOOM_FILTER); __uint(max_entries, 64); \
             __type(value, __u32); __uint(map_extra, 3); } bloom SEC(\".maps\");\n\
             SEC(\"xdp\") int fields(struct xdp_md *c) { __u32 k = 1; __u64 v = 9; \
             bpf_map_update_elem(&sized, &k, &v, BPF_ANY); bpf_map_push_elem(&bloom, &k, 0); \
             return bpf_map_peek_elem(&bloom, &k) == 0 ? XDP_TX : XDP_DROP; }",
            Loads(&["fields"]),
        ),
        case(
            "prog_array_initialised",
            "SEC(\"xdp\") int target(struct xdp_md *c) { return XDP_TX; }\n\
             struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 2); \
             __uint(key_size, 4); __array(values, int (void *)); } jumps SEC(\".maps\") = \
             { .values = { [1] = (void *)&target } };\n\
             SEC(\"xdp\") int jumper(struct xdp_md *c) { bpf_tail_call(c, &jumps, 1); return XDP_DROP; }",
            Loads(&["jumper", "target"]),
        ),
        case(
            "map_of_maps_initialised",
            "struct inner { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); \
             __type(key, __u32); __type(value, __u64); } in0 SEC(\".maps\"), in1 SEC(\".maps\");\n\
             struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 3); \
             __type(key, __u32); __array(values, struct inner); } outer SEC(\".maps\") = \
             { .values = { &in0, [2] = &in1 } };\n\
             SEC(\"xdp\") int nested(struct xdp_md *c) { __u32 k = 2, i = 1; \
             void *m = bpf_map_lookup_elem(&outer, &k); if (!m) return XDP_ABORTED; \
             __u64 *v = bpf_map_lookup_elem(m, &i); if (!v) return XDP_DROP; *v = 11; \
             k = 1; return bpf_map_lookup_elem(&outer, &k) ? XDP_DROP : XDP_TX; }",
            Loads(&["nested"]),
        ),
        // libbpf's "?" prefix: not loaded unless asked (bpf_program__set_autoload).
        case(
            "autoload_off_program_the_verifier_refuses",
            "SEC(\"?xdp\") int broken(struct xdp_md *c) { return *(volatile int *)(long)c->data; }\n\
             SEC(\"xdp\") int fine(struct xdp_md *c) { return XDP_TX; }",
            Loads(&["fine"]),
        ),
        case(
            "read_only_map_written_by_the_program",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
             __uint(map_flags, BPF_F_RDONLY_PROG); __type(key, __u32); __type(value, __u64); } \
             ro SEC(\".maps\");\n\
             SEC(\"xdp\") int writes(struct xdp_md *c) { __u32 k = 0; __u64 *v = \
             bpf_map_lookup_elem(&ro, &k); if (v) *v = 1; return XDP_PASS; }",
            Refused("write into map forbidden"),
        ),
        case(
            "write_only_map_read_by_the_program",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
             __uint(map_flags, BPF_F_WRONLY_PROG); __type(key, __u32); __type(value, __u64); } \
             wo SEC(\".maps\");\n\
             SEC(\"xdp\") int reads(struct xdp_md *c) { __u32 k = 0; __u64 *v = \
             bpf_map_lookup_elem(&wo, &k); return v && *v ? XDP_DROP : XDP_PASS; }",
            Refused("read from map forbidden"),
        ),
        case(
            "write_only_map_value_read_by_a_helper",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
             __uint(map_flags, BPF_F_WRONLY_PROG); __type(key, __u32); __type(value, __u64); } \
             wo SEC(\".maps\");\n\
             struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
             __type(key, __u32); __type(value, __u64); } copy SEC(\".maps\");\n\
             SEC(\"xdp\") int copies(struct xdp_md *c) { __u32 k = 0; __u64 *v = \
             bpf_map_lookup_elem(&wo, &k); if (v) bpf_map_update_elem(&copy, &k, v, 0); \
             return XDP_PASS; }",
            Refused("read from map forbidden"),
        ),
        case(
            "write_only_map_written_by_the_program",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); \
             __uint(map_flags, BPF_F_WRONLY_PROG); __type(key, __u32); __type(value, __u64); } \
             wo SEC(\".maps\");\n\
             SEC(\"xdp\") int writes_only(struct xdp_md *c) { __u32 k = 1; __u64 *v = \
             bpf_map_lookup_elem(&wo, &k); if (v) *v = 42; return XDP_TX; }",
            Loads(&["writes_only"]),
        ),
        case(
            "lpm_trie_preallocated",
            "struct { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, 4); \
             __uint(key_size, 8); __uint(value_size, 4); } trie SEC(\".maps\");\n\
             SEC(\"xdp\") int lpm(struct xdp_md *c) { return XDP_PASS; }",
            Refused("lpm: needs BPF_F_NO_PREALLOC"),
        ),
        case(
            "queue_with_a_key",
            "struct { __uint(type, BPF_MAP_TYPE_QUEUE); __uint(max_entries, 4); \
             __type(key, __u32); __type(value, __u32); } q SEC(\".maps\");\n\
             SEC(\"xdp\") int queued(struct xdp_md *c) { return XDP_PASS; }",
            Refused("queue/stack: key_size 0"),
        ),
        case(
            "stack_frames_over_512_bytes",
            "__attribute__((noinline)) static int deep(int x) { volatile char b[300]; \
             b[x & 255] = 1; return b[(x + 1) & 255]; }\n\
             SEC(\"xdp\") int big(struct xdp_md *c) { volatile char a[300]; a[c->ingress_ifindex & 255] = 2; \
             return deep(a[0]) + a[1] ? XDP_PASS : XDP_DROP; }",
            Refused("combined stack size of the call chain is 640 bytes"),
        ),
        case(
            "tail_call_into_itself",
            "struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 1); \
             __uint(key_size, 4); __array(values, int (void *)); } self_jump SEC(\".maps\");\n\
             struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
             __type(key, __u32); __type(value, __u64); } hops SEC(\".maps\");\n\
             SEC(\"xdp\") int looping(struct xdp_md *c) { __u32 k = 0; __u64 *n = \
             bpf_map_lookup_elem(&hops, &k); if (n) *n += 1; bpf_tail_call(c, &self_jump, 0); \
             return XDP_TX; }\n\
             struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 1); \
             __uint(key_size, 4); __array(values, int (void *)); } unused SEC(\".maps\") = \
             { .values = { [0] = (void *)&looping } };",
            Loads(&["looping"]),
        ),
        case(
            "rodata_table_indexed_by_the_packet",
            "const volatile __u8 table[16] = { 1, 3, 5, 7, 9, 11, 13, 15, 2, 4, 6, 8, 10, 12, 14, 16 };\n\
             SEC(\"xdp\") int lookup(struct xdp_md *c) { unsigned char *p = (void *)(long)c->data; \
             if ((void *)(p + 2) > (void *)(long)c->data_end) return XDP_ABORTED; \
             return table[p[1] & 15] > 8 ? XDP_TX : XDP_PASS; }",
            Loads(&["lookup"]),
        ),
        case(
            "printk_strings",
            "SEC(\"xdp\") int chatty(struct xdp_md *c) { bpf_printk(\"len %d\", \
             (int)(c->data_end - c->data)); return XDP_PASS; }",
            Loads(&["chatty"]),
        ),
        case(
            "ringbuf_without_size",
            "struct { __uint(type, BPF_MAP_TYPE_RINGBUF); } rb0 SEC(\".maps\");\n\
             SEC(\"xdp\") int noring(struct xdp_md *c) { return XDP_PASS; }",
            Refused("map \"rb0\": invalid argument (EINVAL): max_entries is 0"),
        ),
        case(
            "frags_program",
            "SEC(\"xdp.frags\") int fragged(struct xdp_md *c) { return bpf_xdp_get_buff_len(c) == 64 \
             ? XDP_TX : XDP_DROP; }",
            Loads(&["fragged"]),
        ),
        case(
            "map_without_type",
            "struct { __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } nt SEC(\".maps\");\n\
             SEC(\"xdp\") int untyped(struct xdp_md *c) { __u32 k = 0; \
             return bpf_map_lookup_elem(&nt, &k) ? XDP_TX : XDP_DROP; }",
            Refused("map `nt`: no `type` field"),
        ),
        case(
            "map_unknown_field",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); \
             __type(value, __u64); __uint(bogus, 3); } uf SEC(\".maps\");\n\
             SEC(\"xdp\") int odd(struct xdp_md *c) { __u32 k = 0; \
             return bpf_map_lookup_elem(&uf, &k) ? XDP_TX : XDP_DROP; }",
            Refused("map `uf`: unknown field `bogus`"),
        ),
        case(
            "map_key_size_conflict",
            "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __uint(key_size, 8); \
             __type(key, __u32); __type(value, __u64); } km SEC(\".maps\");\n\
             SEC(\"xdp\") int keyed(struct xdp_md *c) { __u32 k = 0; \
             return bpf_map_lookup_elem(&km, &k) ? XDP_TX : XDP_DROP; }",
            Refused("map `km`: conflicting key size"),
        ),
    ];
    // `__kconfig` externs: libbpf's own virtual LINUX_* ones, CONFIG_*
    // options from /boot/config-$(uname -r) or /proc/config.gz (bool,
    // tristate, char, integers of every size, strings), weak ones the
    // configuration lacks (zero), and the errors.
    let kconfig_types = "#include <bpf/bpf_helpers.h>\n\
         extern _Bool CONFIG_BPF_SYSCALL __kconfig __weak;\n\
         extern enum libbpf_tristate CONFIG_BPF_JIT __kconfig __weak;\n\
         extern enum libbpf_tristate CONFIG_NET __kconfig __weak;\n\
         extern int CONFIG_HZ __kconfig __weak;\n\
         extern unsigned long long CONFIG_NR_CPUS __kconfig __weak;\n\
         extern char CONFIG_64BIT __kconfig __weak;\n\
         extern unsigned short CONFIG_BPFJET_NOT_AN_OPTION __kconfig __weak;\n\
         extern int LINUX_BPFJET_UNKNOWN __kconfig __weak;";
    v.push(case(
        "kconfig_values",
        &kconfig_reader(
            kconfig_types,
            &[
                "CONFIG_BPF_SYSCALL",
                "CONFIG_BPF_JIT",
                "CONFIG_NET",
                "CONFIG_HZ",
                "CONFIG_NR_CPUS",
                "CONFIG_64BIT",
                "CONFIG_BPFJET_NOT_AN_OPTION",
                "LINUX_BPFJET_UNKNOWN",
            ],
        ),
        Outcome::Loads(&["read_kconfig"]),
    ));
    v.push(case(
        "kconfig_string",
        &format!(
            "{}\nSEC(\"xdp\") int first_char(struct xdp_md *c) \
             {{ return CONFIG_DEFAULT_HOSTNAME[0] == '(' ? XDP_TX : XDP_PASS; }}",
            "extern char CONFIG_DEFAULT_HOSTNAME[8] __kconfig __weak;"
        ),
        Outcome::Loads(&["first_char"]),
    ));
    v.push(case(
        "kconfig_strong_missing",
        &kconfig_reader(
            "extern int CONFIG_BPFJET_NOT_AN_OPTION __kconfig;",
            &["CONFIG_BPFJET_NOT_AN_OPTION"],
        ),
        Outcome::Refused("`CONFIG_BPFJET_NOT_AN_OPTION`: not set in the kernel configuration"),
    ));
    v.push(case(
        "kconfig_strong_linux_unknown",
        &kconfig_reader(
            "extern int LINUX_BPFJET_UNKNOWN __kconfig;",
            &["LINUX_BPFJET_UNKNOWN"],
        ),
        Outcome::Refused("`LINUX_BPFJET_UNKNOWN`: not a virtual extern libbpf knows"),
    ));
    v.push(case(
        "kconfig_neither_config_nor_linux",
        &kconfig_reader(
            "extern int BPFJET_OPTION __kconfig __weak;",
            &["BPFJET_OPTION"],
        ),
        Outcome::Refused("`BPFJET_OPTION`: not a virtual extern libbpf knows"),
    ));
    v.push(case(
        "kconfig_bool_given_a_number",
        &kconfig_reader("extern _Bool CONFIG_HZ __kconfig __weak;", &["CONFIG_HZ"]),
        Outcome::Refused("`CONFIG_HZ`: the number 250 needs an integer or char extern"),
    ));
    v.push(case(
        "kconfig_int_too_small",
        &kconfig_reader(
            "extern unsigned char CONFIG_NR_CPUS __kconfig __weak;",
            &["CONFIG_NR_CPUS"],
        ),
        Outcome::Refused("`CONFIG_NR_CPUS`: the number"),
    ));
    v.push(case(
        "kconfig_unsupported_type",
        &kconfig_reader(
            "struct pair { int a, b; }; extern struct pair CONFIG_HZ __kconfig __weak;",
            &["CONFIG_HZ.a"],
        ),
        Outcome::Refused("`CONFIG_HZ`: its type cannot hold"),
    ));
    v
}

/// bpfjet's load of `path`: the interpreter's object, or the error.
fn bpfjet_load(path: &std::path::Path) -> Result<(), String> {
    let obj = bpfjet_obj::load_file(path).map_err(|e| e.to_string())?;
    bpfjet_runtime::LoadedObject::load(&obj, &Default::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

const PACKET: [u8; 64] = {
    let mut p = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        p[i] = (i as u8).wrapping_mul(7);
        i += 1;
    }
    p
};

#[test]
fn objects_load_or_are_refused_as_libbpf_does() {
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        skip("loader differential, kernel column", why);
    }
    let mut failures = Vec::new();
    for c in cases() {
        let path = Compile::text(&format!("loader_{}", c.name), &c.source).object();
        let ours = bpfjet_load(&path);
        let theirs = kernel.as_ref().ok().map(|()| {
            bpfjet_kernel::KernelObject::open_with(&path, &bpfjet_kernel::LoadOptions::default())
        });
        match (&c.outcome, &ours, &theirs) {
            (Outcome::Refused(_), _, Some(Ok(_))) => failures.push(format!(
                "{}: the kernel (libbpf) loads it: the expectation is wrong",
                c.name
            )),
            (Outcome::Loads(_), _, Some(Err(e))) => failures.push(format!(
                "{}: the kernel (libbpf) refuses it: {e}: the expectation is wrong",
                c.name
            )),
            (Outcome::Refused(words), Ok(()), _) => {
                failures.push(format!("{}: bpfjet loads it (want: {words})", c.name))
            }
            (Outcome::Refused(words), Err(e), _) if !e.contains(words) => failures.push(format!(
                "{}: refused, but the message does not say `{words}`: {e}",
                c.name
            )),
            (Outcome::Refused(_), Err(e), _) => eprintln!("{}: refused like libbpf: {e}", c.name),
            (Outcome::Loads(_), Err(e), _) => {
                failures.push(format!("{}: bpfjet refuses it: {e}", c.name))
            }
            (Outcome::Loads(progs), Ok(()), k) => {
                let k = k.as_ref().and_then(|k| k.as_ref().ok());
                if let Err(e) = compare_runs(c.name, &path, progs, k) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each program run once on the kernel and on each engine (a fresh load
/// each): verdict, packet out, the maps after, and every map's geometry.
fn compare_runs(
    name: &str,
    path: &std::path::Path,
    progs: &[&str],
    kernel: Option<&bpfjet_kernel::KernelObject>,
) -> Result<(), String> {
    let mut want = Vec::new();
    if let Some(k) = kernel {
        for prog in progs {
            let r = k
                .test_run(prog, &PACKET, 1, None)
                .map_err(|e| format!("{name}: kernel run of {prog}: {e}"))?;
            want.push((r.retval, r.data_out));
        }
    }
    let want_maps = kernel
        .map(|k| k.dump_maps())
        .transpose()
        .map_err(|e| format!("{name}: kernel maps: {e}"))?;
    for engine in [Engine::Interp, Engine::Jit] {
        let ours = OnEngine::load(path, engine);
        let got: Vec<(u32, Vec<u8>)> = progs.iter().map(|p| ours.run(p, &PACKET)).collect();
        let Some(k) = kernel else { continue };
        for ((prog, got), want) in progs.iter().zip(&got).zip(&want) {
            if got != want {
                return Err(format!(
                    "{name} ({engine:?}): {prog} answers {}, the kernel {} (or the packets differ)",
                    got.0, want.0
                ));
            }
        }
        let got_maps = ours.loaded().dump_state().map_err(|e| e.to_string())?;
        if want_maps.as_ref() != Some(&got_maps) {
            return Err(format!(
                "{name} ({engine:?}): maps differ\n  kernel: {want_maps:?}\n  bpfjet: {got_maps:?}"
            ));
        }
        for m in k.maps() {
            let map = ours
                .loaded()
                .map(&m.name)
                .ok_or_else(|| format!("{name}: bpfjet has no map {}", m.name))?;
            let kernel_geometry = (
                m.info.key_size,
                m.info.value_size,
                m.info.max_entries,
                m.info.flags,
            );
            let geometry = (
                map.key_size(),
                map.value_size(),
                map.max_entries(),
                map.spec().flags,
            );
            if kernel_geometry != geometry {
                return Err(format!(
                    "{name}: map {} is {geometry:?} (key, value, entries, flags), the kernel's {kernel_geometry:?}",
                    m.name
                ));
            }
        }
    }
    Ok(())
}
