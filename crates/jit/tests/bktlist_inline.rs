//! The JIT's inline form of bpfjet's list-buckets against the natives the
//! interpreter calls: a program drives push / pop / peek / len from the
//! packet (buckets in and out of range, element buffers on the stack and
//! inside the structure itself) and now and then scribbles a byte over the
//! structure, as a buggy program may. Verdict and map contents must be the
//! same after every packet: same results, same -EINVAL / -ENOSPC / -ENOENT,
//! same bytes written — the checks compiled in stop where the native's do.

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};

/// Packet: op, bucket, scribble flag, scribble byte, scribble offset
/// (u16), element offset inside the structure (u16), 6 element bytes.
const PROGRAM: &str = r#"
#define NB 8
#define ELEM 6
struct wheel { __u8 lists[BPFJET_BKTLIST_BYTES(NB, 24, ELEM)]; };
struct out { __s64 r; __u8 elem[8]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, struct wheel); } wheel SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, struct out); } last SEC(".maps");

SEC("xdp") int p(struct xdp_md *ctx) {
    __u8 *d = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (d + 16 > end)
        return XDP_ABORTED;
    __u32 zero = 0;
    struct wheel *w = bpf_map_lookup_elem(&wheel, &zero);
    struct out *o = bpf_map_lookup_elem(&last, &zero);
    if (!w || !o)
        return XDP_ABORTED;
    __u8 op = d[0], bucket = d[1] % (NB + 2);
    __u16 scribble = d[4] | d[5] << 8, inside = d[6] | d[7] << 8;
    if (d[2] == 1 && scribble < sizeof(w->lists))
        w->lists[scribble] = d[3];
    __u8 elem[ELEM];
    __builtin_memcpy(elem, d + 8, ELEM);
    /* An element buffer inside the structure (op bit 3). */
    __u8 *buf = elem;
    if (op & 8)
        buf = &w->lists[inside & 255];
    __s64 r;
    switch (op & 7) {
    case 0:
    case 1:
        r = bpfjet_bktlist_push(w->lists, sizeof(w->lists), bucket, buf, ELEM);
        break;
    case 2:
    case 3:
        r = bpfjet_bktlist_pop(w->lists, sizeof(w->lists), bucket, buf, ELEM);
        break;
    case 4:
        r = bpfjet_bktlist_peek(w->lists, sizeof(w->lists), bucket, buf, ELEM);
        break;
    case 5:
        r = bpfjet_bktlist_len(w->lists, sizeof(w->lists), bucket);
        break;
    default:
        r = bpfjet_bktlist_init(w->lists, sizeof(w->lists), NB, ELEM);
        break;
    }
    o->r = r;
    __builtin_memcpy(o->elem, buf, ELEM);
    return (__u32)r & 0xffff;
}
"#;

fn compile() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("bktlist_inline.c");
    let out = dir.join("bktlist_inline.o");
    let include =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/bpfjet_kfuncs.h");
    std::fs::write(
        &src,
        format!(
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n#include \"{}\"\n{PROGRAM}\nchar _license[] SEC(\"license\") = \"GPL\";\n",
            include.display()
        ),
    )
    .unwrap();
    bpfjet_testsupport::Compile::file(&src).object_at(&out);
    out
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

/// Mostly well-formed traffic (pushes a little more often than pops, so
/// queues grow until the pool is full), re-initialisation now and then,
/// a scribble in one packet out of `scribble_every`.
fn packet(rng: &mut Rng, scribble_every: u64, size: u16) -> Vec<u8> {
    let x = rng.next();
    let mut p = vec![0u8; 16];
    p[0] = match x % 100 {
        0..=37 => 0,
        38..=67 => 2,
        68..=79 => 4,
        80..=94 => 5,
        95..=96 => 6,
        _ => 3,
    };
    if (x >> 8).is_multiple_of(5) {
        p[0] |= 8;
    }
    p[1] = (x >> 16) as u8;
    if (x >> 24).is_multiple_of(scribble_every) {
        p[2] = 1;
        p[3] = (x >> 32) as u8 % 40;
    }
    p[4..6].copy_from_slice(&(((x >> 40) as u16) % size).to_le_bytes());
    p[6..8].copy_from_slice(&((x >> 48) as u16).to_le_bytes());
    for b in &mut p[8..14] {
        *b = rng.next() as u8;
    }
    p
}

#[test]
fn inline_list_buckets_match_the_natives_even_on_corrupted_memory() {
    let path = compile();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let interp = LoadedObject::load(&obj, &ObjectOptions::default()).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();

    // The four operations are compiled in; init stays a call.
    let ir = jit.dump("p", DumpStage::OptimizedIr, true).unwrap();
    for op in ["push", "pop", "peek", "len"] {
        let symbol = format!("@bpfjet_kfunc_bpfjet_bktlist_{op}(");
        assert!(
            !ir.lines()
                .any(|l| l.contains("call ") && l.contains(&symbol)),
            "{op} is called:\n{ir}"
        );
    }
    assert!(ir.contains("@bpfjet_kfunc_bpfjet_bktlist_init("), "{ir}");

    let size = (16 + 12 * 8 + 24 * 12) as u16;
    let run = TestRunOptions::default();
    let mut rng = Rng(0xb17_1157);
    let mut seen = std::collections::BTreeMap::new();
    // Clean phases (queues fill and drain) and corrupting phases.
    for (phase, scribble_every) in [(0, u64::MAX), (1, 7), (2, u64::MAX), (3, 2)] {
        for i in 0..1500 {
            let mut p = packet(&mut rng, scribble_every, size);
            if phase == 2 && i == 0 {
                p[0] = 6; // lay the structure out again
            }
            let a = interp.test_run("p", &p, &run).unwrap().retval;
            let b = jit.test_run("p", &p, &run, XdpEngine::Jit).unwrap().retval;
            assert_eq!(a, b, "phase {phase}, packet {i} {p:?}: natives vs inline");
            *seen.entry(a as u16 as i16).or_insert(0u32) += 1;
            assert!(
                interp.dump_state().unwrap() == jit.loaded().dump_state().unwrap(),
                "phase {phase}, packet {i} {p:?}: maps differ"
            );
        }
    }
    // Every outcome was exercised: success, full pool, empty bucket, and
    // -EINVAL (bad bucket, corrupted links).
    for (r, what) in [
        (0, "0"),
        (-28, "-ENOSPC"),
        (-2, "-ENOENT"),
        (-22, "-EINVAL"),
    ] {
        assert!(seen.contains_key(&r), "no {what} result: {seen:?}");
    }
}
