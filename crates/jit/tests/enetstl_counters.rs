//! eNetSTL's counter and signature kfuncs (`bpf_fasthash32_cnt32`,
//! `bpf_fasthash32_pkt_cnt32`, `bpf_xxh32_cnt32`, `bpf_xxh32_pkt_cnt32`,
//! `bpf_htss_sig_cmp`), called by a program written against the module's
//! declarations (its names and signatures, declared here as an eNetSTL
//! program declares them), on the bounds-checked interpreter, the verified
//! interpreter and the JIT. Every counter table and result must be what an
//! independent model computes: fasthash and XXH32 written again here from
//! their definitions (XXH32 checked against its published reference
//! values), the module's seed table and row/column layout.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::{parse_hex, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};

const PROG: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* As an eNetSTL program declares the module's kfuncs. */
typedef __u16 u16;
typedef __u32 u32;
typedef __u32 uint32_t;
typedef unsigned long size_t;
struct pkt_5tuple {
	__be32 src_ip;
	__be32 dst_ip;
	__be16 src_port;
	__be16 dst_port;
	__u8 proto;
} __attribute__((packed));
extern void bpf_fasthash32_cnt32(const void *input, size_t input__sz, void *table,
				 size_t table__sz, uint32_t column_shift) __ksym;
extern void bpf_fasthash32_pkt_cnt32(const struct pkt_5tuple *input, void *table,
				     size_t table__sz, uint32_t column_shift) __ksym;
extern void bpf_xxh32_cnt32(const void *input, size_t input__sz, void *table,
			    size_t table__sz, uint32_t column_shift) __ksym;
extern void bpf_xxh32_pkt_cnt32(const struct pkt_5tuple *input, void *table,
				size_t table__sz, uint32_t column_shift) __ksym;
extern u32 bpf_htss_sig_cmp(const void *sigs, size_t sigs__sz, u16 tmp_sig) __ksym;

struct tables {
	__u32 fh[8 * 16];	/* 8 rows of 16: two 4-lane groups */
	__u32 fh_pkt[5 * 32];	/* 5 rows of 32: one group and one more */
	__u32 xx[12 * 8];	/* 12 rows of 8: one 8-lane group and 4 more */
	__u32 xx_pkt[3 * 64];	/* 3 rows of 64 */
	__u32 big[65 * 1];	/* 65 rows: past the seed table, nothing counted */
	__u32 hitmask[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tables);
} tables SEC(".maps");

SEC("xdp")
int p(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 in[48];
	__u16 sigs[16];
	__u32 zero = 0;
	if (data + 96 > end)
		return XDP_ABORTED;
	__builtin_memcpy(in, data, sizeof(in));
	__builtin_memcpy(sigs, data + 48, sizeof(sigs));
	__u16 sig = *(__u16 *)(data + 80);
	struct tables *t = bpf_map_lookup_elem(&tables, &zero);
	if (!t)
		return XDP_ABORTED;
	/* 1..39 bytes: every tail length of both hashes, stripes of XXH32. */
	size_t len = (in[0] & 31) + (in[1] & 7) + 1;
	bpf_fasthash32_cnt32(in + 8, len, t->fh, sizeof(t->fh), 4);
	bpf_fasthash32_pkt_cnt32((const struct pkt_5tuple *)(in + 16), t->fh_pkt,
				 sizeof(t->fh_pkt), 5);
	bpf_xxh32_cnt32(in + 8, len, t->xx, sizeof(t->xx), 3);
	bpf_xxh32_pkt_cnt32((const struct pkt_5tuple *)(in + 16), t->xx_pkt,
			    sizeof(t->xx_pkt), 6);
	bpf_xxh32_cnt32(in + 8, len, t->big, sizeof(t->big), 0);
	t->hitmask[0] = bpf_htss_sig_cmp(sigs, sizeof(sigs), sig);
	/* A shorter buffer: only its signatures are compared. */
	t->hitmask[1] = bpf_htss_sig_cmp(sigs, 10, sig);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
"#;

/// eNetSTL's eight published seeds; row i of a counter table uses seed i % 8.
const SEEDS: [u32; 8] = [
    0xec5853, 0xec5859, 0xec5861, 0xec587f, 0xec58a7, 0xec58b3, 0xec58c7, 0xec58d1,
];

/// fasthash64 (Zilong Tan), from its definition: words little-endian, the
/// last partial word zero-padded and mixed only if present.
fn fasthash64(buf: &[u8], seed: u64) -> u64 {
    fn mix(mut h: u64) -> u64 {
        h ^= h >> 23;
        h = h.wrapping_mul(0x2127599bf4325c37);
        h ^ (h >> 47)
    }
    const M: u64 = 0x880355f21e6d1965;
    let mut h = seed ^ (buf.len() as u64).wrapping_mul(M);
    let full = buf.len() / 8 * 8;
    for i in (0..full).step_by(8) {
        let v = u64::from_le_bytes(buf[i..i + 8].try_into().unwrap());
        h ^= mix(v);
        h = h.wrapping_mul(M);
    }
    if buf.len() > full {
        let mut v = 0u64;
        for (k, &b) in buf[full..].iter().enumerate() {
            v ^= u64::from(b) << (8 * k);
        }
        h ^= mix(v);
        h = h.wrapping_mul(M);
    }
    mix(h)
}

fn fasthash32(buf: &[u8], seed: u32) -> u32 {
    let h = fasthash64(buf, u64::from(seed));
    h.wrapping_sub(h >> 32) as u32
}

/// XXH32 from its specification.
fn xxh32(input: &[u8], seed: u32) -> u32 {
    const P: [u32; 5] = [2654435761, 2246822519, 3266489917, 668265263, 374761393];
    let rd = |i: usize| u32::from_le_bytes(input[i..i + 4].try_into().unwrap());
    let len = input.len();
    let mut i = 0;
    let mut acc = if len >= 16 {
        let mut v = [
            seed.wrapping_add(P[0]).wrapping_add(P[1]),
            seed.wrapping_add(P[1]),
            seed,
            seed.wrapping_sub(P[0]),
        ];
        while i + 16 <= len {
            for (lane, v) in v.iter_mut().enumerate() {
                *v = v
                    .wrapping_add(rd(i + 4 * lane).wrapping_mul(P[1]))
                    .rotate_left(13)
                    .wrapping_mul(P[0]);
            }
            i += 16;
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P[4])
    };
    acc = acc.wrapping_add(len as u32);
    while i + 4 <= len {
        acc = acc
            .wrapping_add(rd(i).wrapping_mul(P[2]))
            .rotate_left(17)
            .wrapping_mul(P[3]);
        i += 4;
    }
    while i < len {
        acc = acc
            .wrapping_add(u32::from(input[i]).wrapping_mul(P[4]))
            .rotate_left(11)
            .wrapping_mul(P[0]);
        i += 1;
    }
    acc ^= acc >> 15;
    acc = acc.wrapping_mul(P[1]);
    acc ^= acc >> 13;
    acc = acc.wrapping_mul(P[2]);
    acc ^ (acc >> 16)
}

#[test]
fn xxh32_model_gives_the_published_reference_values() {
    // xxHash's published test vectors for XXH32 (seed 0).
    assert_eq!(xxh32(b"", 0), 0x02CC5D05);
    assert_eq!(xxh32(b"a", 0), 0x550D7456);
    assert_eq!(xxh32(b"abc", 0), 0x32D153FF);
    // ... and the library agrees with the model on them.
    for s in [
        &b""[..],
        b"a",
        b"abc",
        b"Nobody inspects the spammish repetition",
    ] {
        assert_eq!(bpfjet_kfuncs::hash::xxh32(s, 0), xxh32(s, 0));
        assert_eq!(bpfjet_kfuncs::enetstl::fasthash32(s, 7), fasthash32(s, 7));
    }
}

/// Count `input` into `rows` rows of `1 << shift` u32 counters, row i
/// hashed with seed i % 8 (the module's layout); 65+ rows count nothing.
fn count(table: &mut [u32], shift: u32, hash: fn(&[u8], u32) -> u32, input: &[u8]) {
    let columns = 1usize << shift;
    let rows = table.len() / columns;
    if rows > 64 {
        return;
    }
    for row in 0..rows {
        let col = hash(input, SEEDS[row % 8]) as usize & (columns - 1);
        table[row * columns + col] += 1;
    }
}

/// Two bits per signature equal to `sig` among the first `bytes / 2`.
fn hitmask(sigs: &[u8], bytes: usize, sig: u16) -> u32 {
    (0..bytes / 2).fold(0, |m, i| {
        if u16::from_ne_bytes([sigs[2 * i], sigs[2 * i + 1]]) == sig {
            m | (3 << (2 * i))
        } else {
            m
        }
    })
}

struct Model {
    fh: Vec<u32>,
    fh_pkt: Vec<u32>,
    xx: Vec<u32>,
    xx_pkt: Vec<u32>,
    big: Vec<u32>,
    hitmask: [u32; 2],
}

impl Model {
    fn new() -> Model {
        Model {
            fh: vec![0; 8 * 16],
            fh_pkt: vec![0; 5 * 32],
            xx: vec![0; 12 * 8],
            xx_pkt: vec![0; 3 * 64],
            big: vec![0; 65],
            hitmask: [0; 2],
        }
    }

    fn packet(&mut self, p: &[u8]) {
        let len = usize::from(p[0] & 31) + usize::from(p[1] & 7) + 1;
        let input = &p[8..8 + len];
        let tuple = &p[16..29];
        count(&mut self.fh, 4, fasthash32, input);
        count(&mut self.fh_pkt, 5, fasthash32, tuple);
        count(&mut self.xx, 3, xxh32, input);
        count(&mut self.xx_pkt, 6, xxh32, tuple);
        count(&mut self.big, 0, xxh32, input);
        let sig = u16::from_ne_bytes([p[80], p[81]]);
        self.hitmask = [hitmask(&p[48..80], 32, sig), hitmask(&p[48..80], 10, sig)];
    }

    fn bytes(&self) -> Vec<u8> {
        [
            &self.fh,
            &self.fh_pkt,
            &self.xx,
            &self.xx_pkt,
            &self.big,
            &self.hitmask[..],
        ]
        .iter()
        .flat_map(|t| t.iter().flat_map(|v| v.to_ne_bytes()))
        .collect()
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Few distinct inputs (so counters grow past 1) and signatures that often
/// repeat in the bucket.
fn packet(rng: &mut Rng) -> Vec<u8> {
    let mut p: Vec<u8> = (0..96).map(|_| rng.next() as u8).collect();
    if !rng.next().is_multiple_of(3) {
        let flow = (rng.next() % 6) as u8;
        p[8..48]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = flow ^ i as u8);
    }
    for b in &mut p[48..80] {
        *b &= 0x01;
    }
    if !rng.next().is_multiple_of(4) {
        let i = 48 + 2 * (rng.next() % 16) as usize;
        let (a, b) = (p[i], p[i + 1]);
        p[80] = a;
        p[81] = b;
    }
    p
}

fn value(state: &MapState, map: &str) -> Vec<u8> {
    parse_hex(state[map][0].value.as_deref().expect("array value")).unwrap()
}

#[test]
fn enetstl_counters_and_signatures_match_the_model_on_every_engine() {
    let path = bpfjet_testsupport::compile_c("enetstl_counters", PROG);
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
    let mut model = Model::new();
    let mut rng = Rng(0x00c0_ffee_1234_5678);
    for i in 0..400 {
        let p = packet(&mut rng);
        model.packet(&p);
        let want = model.bytes();
        let outcomes = [
            (
                "interp (bounds-checked)",
                checked.test_run("p", &p, &run).unwrap().retval,
                checked.dump_state().unwrap(),
            ),
            (
                "interp (verified)",
                verified.test_run("p", &p, &run).unwrap().retval,
                verified.dump_state().unwrap(),
            ),
            (
                "jit",
                jit.test_run("p", &p, &run, XdpEngine::Jit).unwrap().retval,
                jit.loaded().dump_state().unwrap(),
            ),
        ];
        for (engine, retval, state) in &outcomes {
            assert_eq!(*retval, 3, "{engine} packet {i}: XDP_TX expected");
            let got = value(state, "tables");
            assert_eq!(got.len(), want.len(), "{engine}: table size");
            for (name, at, n) in [
                ("bpf_fasthash32_cnt32", 0, 128),
                ("bpf_fasthash32_pkt_cnt32", 128, 160),
                ("bpf_xxh32_cnt32", 288, 96),
                ("bpf_xxh32_pkt_cnt32", 384, 192),
                ("bpf_xxh32_cnt32 (65 rows)", 576, 65),
                ("bpf_htss_sig_cmp", 641, 2),
            ] {
                assert_eq!(
                    &got[at * 4..(at + n) * 4],
                    &want[at * 4..(at + n) * 4],
                    "{engine} packet {i}: {name}"
                );
            }
        }
    }
    // The tables did count: some counters well above 1.
    assert!(model.fh.iter().any(|&c| c > 20) && model.xx_pkt.iter().sum::<u32>() == 3 * 400);
}

#[test]
fn enetstl_counter_misuse_is_rejected_naming_the_kfunc() {
    // A table argument that is not writable memory of the size given.
    let body = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
extern void bpf_xxh32_cnt32(const void *input, unsigned long input__sz, void *table,
			    unsigned long table__sz, __u32 column_shift) __ksym;
SEC("xdp") int p(struct xdp_md *c) {
	__u32 t[4] = {};
	__u8 in[8] = {};
	bpf_xxh32_cnt32(in, sizeof(in), t, 64, 2);
	return t[0];
}
char _license[] SEC("license") = "GPL";
"#;
    let path = bpfjet_testsupport::compile_c("enetstl_cnt_misuse", body);
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let err = match LoadedObject::load(&obj, &ObjectOptions::default()) {
        Ok(_) => panic!("a 16-byte table passed as 64 bytes must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("bpf_xxh32_cnt32"), "{err}");
}
