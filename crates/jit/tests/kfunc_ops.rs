//! Every kfunc of the NF library (bpfjet's names and eNetSTL's), called by
//! `tests/progs/kfunc_ops.c` on operands from the packet: the bounds-checked
//! interpreter, the verified interpreter and the JIT (inline forms where
//! there are some) must store exactly what the library's scalar definitions
//! compute, packet after packet, and leave the same counter tables.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_kfuncs::bits::*;
use bpfjet_kfuncs::hash::crc32c_scalar;
use bpfjet_kfuncs::multihash::{bloom_set, bloom_test, cm_inc, cm_min};
use bpfjet_kfuncs::search::scalar;
use bpfjet_kfuncs::{enetstl, CpuFeatures};
use bpfjet_maps::state::{parse_hex, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};

mod fixtures;

const SLOTS: usize = 48;
const INPUT: usize = 160;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A packet whose keys are often elements of its bucket (so searches hit)
/// and whose second key often equals the first bytes of the bucket.
fn packet(rng: &mut Rng) -> Vec<u8> {
    let mut p: Vec<u8> = (0..INPUT).map(|_| rng.next() as u8).collect();
    // Few distinct values: repeated elements, minimum/maximum ties.
    if rng.next().is_multiple_of(2) {
        for b in &mut p[..32] {
            *b &= 0x03;
        }
    }
    let pick = rng.next() as usize;
    if !pick.is_multiple_of(3) {
        let (i16, i32, i64) = (pick % 16, pick % 8, pick % 4);
        let (a, b, c) = (
            p[i16 * 2..i16 * 2 + 2].to_vec(),
            p[i32 * 4..i32 * 4 + 4].to_vec(),
            p[i64 * 8..i64 * 8 + 8].to_vec(),
        );
        p[64..66].copy_from_slice(&a);
        p[68..72].copy_from_slice(&b);
        p[72..80].copy_from_slice(&c);
    }
    match rng.next() % 3 {
        0 => {
            let bucket = p[..32].to_vec();
            p[96..128].copy_from_slice(&bucket);
        }
        1 => {
            let bucket = p[..32].to_vec();
            p[96..128].copy_from_slice(&bucket);
            let at = 96 + (rng.next() % 32) as usize;
            p[at] ^= 0x10;
        }
        _ => {}
    }
    if rng.next().is_multiple_of(4) {
        p[80..88].fill(0); // bit scans of zero
    }
    // Few distinct flows, so counters grow and Bloom bits repeat.
    p[128] %= 5;
    p[129..141].fill(7);
    p
}

/// The counter tables the program updates, mirrored here.
struct Tables {
    cm: Vec<u8>,
    bloom: Vec<u8>,
    enet: Vec<u8>,
}

fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([p[at], p[at + 1]])
}
fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(p[at..at + 4].try_into().unwrap())
}
fn u64_at(p: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(p[at..at + 8].try_into().unwrap())
}

fn expected(p: &[u8], t: &mut Tables) -> [u64; SLOTS] {
    let bucket = &p[..32];
    let (k16, k32, k64, x) = (u16_at(p, 64), u32_at(p, 68), u64_at(p, 72), u64_at(p, 80));
    let b = &p[96..128];
    let data = &p[128..141];
    let seed = u32_at(p, 144);
    let s = CpuFeatures::SCALAR;
    let mut r = [0u64; SLOTS];
    r[0] = ffs32(x as u32);
    r[1] = ffs64(x);
    r[2] = ctz32(x as u32);
    r[3] = ctz64(x);
    r[4] = clz32((x >> 32) as u32);
    r[5] = clz64(x);
    r[6] = popcount32(x as u32);
    r[7] = popcount64(x);
    r[8] = scalar::find_eq(bucket, k16);
    r[9] = scalar::find_eq(bucket, k32);
    r[10] = scalar::find_eq(bucket, k64);
    r[11] = scalar::mask_eq(bucket, k16);
    r[12] = scalar::mask_eq(bucket, k32);
    r[13] = scalar::mask_eq(bucket, k64);
    r[14] = u64::from(scalar::min::<u16>(bucket));
    r[15] = u64::from(scalar::max::<u32>(bucket));
    r[16] = scalar::argmin::<u32>(bucket);
    r[17] = scalar::argmax::<u16>(bucket);
    r[18] = scalar::min::<u64>(bucket);
    r[19] = scalar::argmax::<u64>(bucket);
    r[20] = u64::from(bucket[..16] == b[..16]);
    r[21] = u64::from(bucket == b);
    r[22] = u64::from(crc32c_scalar(data, seed));
    r[23] = cm_inc(s, data, &mut t.cm, 4);
    r[24] = cm_min(s, data, &t.cm, 4);
    r[25] = bloom_set(s, data, &mut t.bloom, 3);
    r[26] = bloom_test(s, &bucket[..13], &t.bloom, 3);
    r[27] = scalar::find_eq(&bucket[..20], k16);
    r[28] = u64::from(crc32c_scalar(bucket, seed));
    r[30] = ctz64(x);
    r[31] = ctz32(x as u32);
    r[32] = scalar::find_eq(bucket, k16);
    r[33] = enetstl::byte_mask_u16(scalar::mask_eq(bucket, k16));
    r[34] = u64::from(bucket[..16] != b[..16]);
    r[35] = u64::from(crc32c_scalar(data, seed));
    r[36] = r[35];
    enetstl::hash_simd_cnt_u32(data, &mut t.enet, 4);
    r
}

fn value(state: &MapState, map: &str) -> Vec<u8> {
    let entries = &state[map];
    parse_hex(entries[0].value.as_deref().expect("array value")).unwrap()
}

const NAMES: [&str; 37] = [
    "bpfjet_ffs32",
    "bpfjet_ffs64",
    "bpfjet_ctz32",
    "bpfjet_ctz64",
    "bpfjet_clz32",
    "bpfjet_clz64",
    "bpfjet_popcount32",
    "bpfjet_popcount64",
    "bpfjet_find_u16",
    "bpfjet_find_u32",
    "bpfjet_find_u64",
    "bpfjet_mask_u16",
    "bpfjet_mask_u32",
    "bpfjet_mask_u64",
    "bpfjet_min_u16",
    "bpfjet_max_u32",
    "bpfjet_argmin_u32",
    "bpfjet_argmax_u16",
    "bpfjet_min_u64",
    "bpfjet_argmax_u64",
    "bpfjet_key16_eq",
    "bpfjet_key32_eq",
    "bpfjet_crc32c",
    "bpfjet_cm_inc",
    "bpfjet_cm_min",
    "bpfjet_bloom_set",
    "bpfjet_bloom_test",
    "bpfjet_find_u16 (10 lanes)",
    "bpfjet_crc32c (32 bytes)",
    "-",
    "bpf_ffs",
    "bpf_tzcnt_u32",
    "bpf_find_u16_avx",
    "bpf__find_mask_u16_avx",
    "bpf_k16_cmp_eq",
    "bpf_crc32c_sse",
    "bpf_crc32_hash",
];

#[test]
fn every_engine_computes_the_library_definitions() {
    let path = fixtures::test_prog("kfunc_ops");
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let checked = LoadedObject::load(
        &obj,
        &ObjectOptions {
            unverified: true,
            ..ObjectOptions::default()
        },
    )
    .unwrap();
    let verified = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let run = TestRunOptions::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut mirror = Tables {
        cm: vec![0; 1024],
        bloom: vec![0; 64],
        enet: vec![0; 512],
    };
    for i in 0..300 {
        let p = packet(&mut rng);
        let want = expected(&p, &mut mirror);
        let outcomes = [
            (
                "interp (bounds-checked)",
                checked.test_run("kfunc_ops", &p, &run).unwrap().retval,
                checked.dump_state().unwrap(),
            ),
            (
                "interp (verified)",
                verified.test_run("kfunc_ops", &p, &run).unwrap().retval,
                verified.dump_state().unwrap(),
            ),
            (
                "jit",
                jit.test_run("kfunc_ops", &p, &run, XdpEngine::Jit)
                    .unwrap()
                    .retval,
                jit.loaded().dump_state().unwrap(),
            ),
        ];
        for (engine, retval, state) in &outcomes {
            assert_eq!(*retval, 3, "{engine} packet {i}: XDP_TX expected");
            let out = value(state, "out");
            for (slot, name) in NAMES.iter().enumerate() {
                let got = u64_at(&out, slot * 8);
                assert_eq!(got, want[slot], "{engine} packet {i}: {name} (slot {slot})");
            }
            let tables = value(state, "tables");
            assert_eq!(
                &tables[..1024],
                &mirror.cm[..],
                "{engine} packet {i}: count-min rows"
            );
            assert_eq!(
                &tables[1024..1088],
                &mirror.bloom[..],
                "{engine} packet {i}: Bloom bits"
            );
            assert_eq!(
                &tables[1088..1600],
                &mirror.enet[..],
                "{engine} packet {i}: eNetSTL count-min"
            );
        }
    }
}

/// `body` (after bpfjet_kfuncs.h) compiled with clang-19 into an object.
fn compile_snippet(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join(format!("{name}.c"));
    let out = dir.join(format!("{name}.o"));
    let include =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/bpfjet_kfuncs.h");
    std::fs::write(
        &src,
        format!(
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n#include \"{}\"\n{body}\nchar _license[] SEC(\"license\") = \"GPL\";\n",
            include.display()
        ),
    )
    .unwrap();
    bpfjet_testsupport::Compile::file(&src).object_at(&out);
    out
}

#[test]
fn enetstl_geo_sampling_replays_the_library_model() {
    // eNetSTL's sampler API as its programs use it: take the 10% context
    // once, keep it in a map's __kptr, ask with the fd read from it whether
    // to sample; the 6% stream through gen_geo_cnt. With a fixed seed every engine replays the model's
    // decisions (the pools are per worker thread; test runs happen on this
    // thread).
    use bpfjet_kfuncs::random::{enetstl_ctx, set_enetstl_seed};
    let path = compile_snippet(
        "enetstl_geo",
        // eNetSTL's own declarations and use (its NitroSketch keeps the
        // context in a map's __kptr and passes the fd it reads from it).
        "struct geo_sampling_ctx { int fd; __u32 cnt;\n\
           __u32 geo_sampling_idx __attribute__((aligned(64)));\n\
           __u32 pool[1024] __attribute__((aligned(64))); };\n\
         extern struct geo_sampling_ctx *bpf_geo_sampling_ctx_new(int p) __ksym;\n\
         extern void bpf_geo_sampling_ctx_free(struct geo_sampling_ctx *c) __ksym;\n\
         extern _Bool bpf_geo_sampling_should_do(int fd) __ksym;\n\
         extern __u32 bpf_geo_sampling_gen_geo_cnt(int fd) __ksym;\n\
         struct holder { struct geo_sampling_ctx __kptr *ctx; int fd; };\n\
         struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);\n\
           __type(key, int); __type(value, struct holder); } holders SEC(\".maps\");\n\
         SEC(\"xdp\") int p(struct xdp_md *c) {\n\
           int zero = 0;\n\
           struct holder *h = bpf_map_lookup_elem(&holders, &zero);\n\
           if (!h) return XDP_ABORTED;\n\
           if (!h->fd) {\n\
             struct geo_sampling_ctx *g = bpf_geo_sampling_ctx_new(10);\n\
             if (!g) return XDP_ABORTED;\n\
             h->fd = g->fd;\n\
             if (g->geo_sampling_idx != 0 || g->cnt != g->pool[0]) { bpf_geo_sampling_ctx_free(g); return 1001; }\n\
             g = bpf_kptr_xchg(&h->ctx, g);\n\
             if (g) bpf_geo_sampling_ctx_free(g);\n\
           }\n\
           if (h->fd != 10) return 1002;\n\
           int r = bpf_geo_sampling_should_do(h->fd) ? XDP_DROP : XDP_PASS;\n\
           if (c->data_end - c->data == 61 && bpf_geo_sampling_gen_geo_cnt(6) == 0) return XDP_ABORTED;\n\
           struct geo_sampling_ctx *none = bpf_geo_sampling_ctx_new(7);\n\
           if (none) { bpf_geo_sampling_ctx_free(none); return XDP_ABORTED; }\n\
           return r; }",
    );
    let obj = bpfjet_obj::load_file(&path).unwrap();
    // No bounds-checked interpreter: bpf_kptr_xchg runs only in verified
    // programs.
    let verified = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let run = TestRunOptions::default();
    let packets: Vec<Vec<u8>> = (0..3000).map(|i| vec![0u8; 60 + i % 3]).collect();
    set_enetstl_seed(Some(7));
    let model: Vec<u32> = packets
        .iter()
        .map(|p| {
            // SAFETY: this thread's contexts, one call at a time.
            let sampled = unsafe { (*enetstl_ctx(10).unwrap()).should_do() };
            if p.len() == 61 {
                let c = unsafe { (*enetstl_ctx(6).unwrap()).gen_geo_cnt() };
                assert!(c >= 1);
            }
            if sampled == 1 {
                1
            } else {
                2
            }
        })
        .collect();
    let sampled = model.iter().filter(|&&v| v == 1).count();
    assert!((200..400).contains(&sampled), "10%: {sampled} of 3000");
    type Engine<'a> = Box<dyn Fn(&[u8]) -> u32 + 'a>;
    let engines: [(&str, Engine); 2] = [
        (
            "interp (verified)",
            Box::new(|p| verified.test_run("p", p, &run).unwrap().retval),
        ),
        (
            "jit",
            Box::new(|p| jit.test_run("p", p, &run, XdpEngine::Jit).unwrap().retval),
        ),
    ];
    for (name, engine) in engines {
        set_enetstl_seed(Some(7));
        let got: Vec<u32> = packets.iter().map(|p| engine(p)).collect();
        assert_eq!(got, model, "{name}");
    }
    set_enetstl_seed(None);
}

#[test]
fn enetstl_list_buckets_are_fifos_per_thread() {
    // eNetSTL's list-bucket API as its timing wheel uses it: take the
    // handle, push a u64 to one slot, pop from another. The queues belong
    // to the worker thread and persist across runs (as the module's per-CPU
    // ones do), so the model carries on from one engine to the next.
    let path = compile_snippet(
        "enetstl_bktlist",
        "struct bpf_bkt_list { int fd; };\n\
         extern struct bpf_bkt_list *bpf_bktlist_new(void) __ksym;\n\
         extern void bpf_bktlist_free(struct bpf_bkt_list *l) __ksym;\n\
         extern int bpf_bktlist_push_back(int fd, const void *val, __u64 size__szk, __u64 slot) __ksym;\n\
         extern int bpf_bktlist_pop_front(int fd, void *val, __u64 size__szk, __u64 slot) __ksym;\n\
         SEC(\"xdp\") int p(struct xdp_md *c) {\n\
           struct bpf_bkt_list *l = bpf_bktlist_new();\n\
           if (!l) return 1001;\n\
           int fd = l->fd;\n\
           bpf_bktlist_free(l);\n\
           __u64 n = c->data_end - c->data, out = 0;\n\
           if (bpf_bktlist_push_back(fd, &n, sizeof(n), n % 5)) return 1002;\n\
           int r = bpf_bktlist_pop_front(fd, &out, sizeof(out), (n * 3) % 5);\n\
           if (bpf_bktlist_push_back(fd, &n, sizeof(n), 320) != -22) return 1003;\n\
           return r == 1 ? 1000 : r ? 1004 : out; }",
    );
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let checked = LoadedObject::load(
        &obj,
        &ObjectOptions {
            unverified: true,
            ..ObjectOptions::default()
        },
    )
    .unwrap();
    let verified = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let run = TestRunOptions::default();
    let mut queues = vec![std::collections::VecDeque::new(); 5];
    let mut rng = Rng(0x5eed);
    for round in 0..3 {
        for i in 0..500 {
            let n = 14 + (rng.next() % 200) as usize;
            let p = vec![0u8; n];
            let got = match round {
                0 => checked.test_run("p", &p, &run).unwrap().retval,
                1 => verified.test_run("p", &p, &run).unwrap().retval,
                _ => jit.test_run("p", &p, &run, XdpEngine::Jit).unwrap().retval,
            };
            queues[n % 5].push_back(n as u32);
            let want = queues[(n * 3) % 5].pop_front().unwrap_or(1000);
            assert_eq!(got, want, "engine {round}, packet {i} ({n} bytes)");
        }
    }
}

#[test]
fn misuse_is_rejected_naming_the_kfunc() {
    // A kfunc the library does not have, a wrong-size buffer: the loader
    // names the kfunc (and the verifier the argument).
    let cases = [
        (
            "unknown",
            "extern __u64 bpfjet_no_such_kfunc(__u64 x) __ksym;\n\
             SEC(\"xdp\") int p(struct xdp_md *c) { return bpfjet_no_such_kfunc(c->data) & 1; }",
            "bpfjet_no_such_kfunc",
        ),
        (
            "oversize",
            "SEC(\"xdp\") int p(struct xdp_md *c) { __u8 b[16] = {}; \
             __u32 n = c->data_end - c->data; if (n < 2) return 0; \
             return bpfjet_find_u16(b, n, 1) & 1; }",
            "bpfjet_find_u16",
        ),
        (
            "signature",
            "extern __u32 bpf_tzcnt_u32(__u64 *x) __ksym;\n\
             SEC(\"xdp\") int p(struct xdp_md *c) { __u64 v = c->data; \
             return bpf_tzcnt_u32(&v) & 1; }",
            "bpf_tzcnt_u32",
        ),
        (
            "short_key",
            "SEC(\"xdp\") int p(struct xdp_md *c) { __u8 a[8] = {}, b[32] = {}; \
             return bpfjet_key16_eq((void *)a, (void *)b) & 1; }",
            "bpfjet_key16_eq",
        ),
        (
            "short_pool",
            "SEC(\"xdp\") int p(struct xdp_md *c) { __u32 b[4] = {}; \
             return bpfjet_geo_should_do((void *)b) & 1; }",
            "bpfjet_geo_should_do",
        ),
        (
            "short_lists",
            "SEC(\"xdp\") int p(struct xdp_md *c) { __u32 lists = 1; \
             return bpfjet_bktlist_len(&lists, 64, 0) & 1; }",
            "bpfjet_bktlist_len",
        ),
        (
            "leaked_sampler",
            "struct geo_sampling_ctx;\n\
             extern struct geo_sampling_ctx *bpf_geo_sampling_ctx_new(int p) __ksym;\n\
             SEC(\"xdp\") int p(struct xdp_md *c) { \
             return bpf_geo_sampling_ctx_new(10) ? 1 : 2; }",
            "bpf_geo_sampling_ctx_new",
        ),
    ];
    for (name, body, kfunc) in cases {
        let out = compile_snippet(&format!("kfunc_misuse_{name}"), body);
        let obj = bpfjet_obj::load_file(&out).unwrap();
        let err = LoadedObject::load(&obj, &ObjectOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{name}: loaded"))
            .to_string();
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(kfunc), "{name}: {err}");
        println!("{name}: {first}");
    }
}
