//! Map helpers from a program against the kernel, on random command
//! streams: every `bpf_map_update_elem` flag combination (`BPF_ANY`,
//! `BPF_NOEXIST`, `BPF_EXIST`, `BPF_F_LOCK` and invalid ones), deletes,
//! lookups and in-place increments, on hash maps (preallocated and not),
//! per-CPU hash and array maps, arrays, and hash and array maps whose
//! values hold a `bpf_spin_lock`, an LRU hash map that never has to evict,
//! and queue and stack maps (push with and without `BPF_EXIST`, pop, peek);
//! `bpf_map_lookup_percpu_elem` of every CPU and past the last; an LPM
//! trie (prefixes of every length and invalid ones, longest-prefix
//! lookups, a full trie), a bloom filter, and hash maps reached through
//! ARRAY_OF_MAPS and HASH_OF_MAPS slots (filled and empty). Each command is one test run whose return
//! value is the helper's answer (or the value read); the answers and
//! every map at the end must be the kernel's, on bpfjet's interpreter,
//! bounds-checked interpreter and JIT.
//!
//! Without a usable kernel the comparison is skipped with a message, and
//! the engines are still compared with each other.

mod support;

use bpfjet_testsupport::Compile;
use support::{Engine, OnEngine};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct locked {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 a;
};

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8);
	__type(key, __u32); __type(value, __u64); } h SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); __type(value, __u64); } hnp SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 8);
	__type(key, __u32); __type(value, __u64); } ph SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8);
	__type(key, __u32); __type(value, __u64); } a SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 8);
	__type(key, __u32); __type(value, __u64); } pa SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8);
	__type(key, __u32); __type(value, struct locked); } hl SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8);
	__type(key, __u32); __type(value, struct locked); } al SEC(".maps");
/* Room for every key: which element an LRU evicts differs from the
 * kernel's by design (crates/maps/src/lru.rs), and the kernel's small LRU
 * maps evict before they are full. */
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 1024);
	__type(key, __u32); __type(value, __u64); } lru SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_QUEUE); __uint(max_entries, 4);
	__type(value, __u64); } q SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_STACK); __uint(max_entries, 4);
	__type(value, __u64); } st SEC(".maps");

struct lpm_key {
	__u32 prefixlen;
	__u32 addr;
};
struct { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, 8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key); __type(value, __u64); } lpm SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_BLOOM_FILTER); __uint(max_entries, 16);
	__uint(map_extra, 3);
	__type(value, __u64); } bloom SEC(".maps");

/* Map-in-map: outer maps whose slots 0 and 1 hold two inner hash maps
 * (statically, as libbpf initialises them); slots 2 and 3 are empty. */
struct inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
};
struct inner in0 SEC(".maps"), in1 SEC(".maps"), in2 SEC(".maps"), in3 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 4);
	__type(key, __u32); __array(values, struct inner); } aom SEC(".maps") = {
	.values = { &in0, &in1 },
};
struct { __uint(type, BPF_MAP_TYPE_HASH_OF_MAPS); __uint(max_entries, 4);
	__type(key, __u32); __array(values, struct inner); } hom SEC(".maps") = {
	.values = { &in2, &in3 },
};

/* Map-in-map: the value's high byte picks the outer slot; a missing
 * inner map answers 0x200. */
#define NESTED(outer)                                                    \
	do {                                                             \
		__u32 slot = d[5] & 3;                                   \
		void *m = bpf_map_lookup_elem(&outer, &slot);            \
		__u64 v = val, *p;                                       \
		if (!m)                                                  \
			return 0x200;                                    \
		switch (op) {                                            \
		case 0:                                                  \
			return bpf_map_update_elem(m, &key, &v, flags & 3); \
		case 1:                                                  \
			return bpf_map_delete_elem(m, &key);             \
		default:                                                 \
			p = bpf_map_lookup_elem(m, &key);                \
			return p ? 0x100 | (*p & 0xff) : 0;              \
		}                                                        \
	} while (0)

/* Per-CPU maps, op 4: another CPU's value (the flags byte is the CPU). */
#define PERCPU(map)                                                      \
	do {                                                             \
		if (op == 4) {                                           \
			__u64 *p = bpf_map_lookup_percpu_elem(&map, &key, flags); \
			return p ? 0x100 | (*p & 0xff) : 0;              \
		}                                                        \
		PLAIN(map);                                              \
	} while (0)

/* op 0: push with flags; 1: pop; 2, 3: peek. The answer: the helper's
 * return, or 0x100 | the value's low byte. */
#define FIFO(map)                                                        \
	do {                                                             \
		__u64 v = val;                                           \
		long r;                                                  \
		switch (op) {                                            \
		case 0:                                                  \
			return bpf_map_push_elem(&map, &v, flags);       \
		case 1:                                                  \
			r = bpf_map_pop_elem(&map, &v);                  \
			break;                                           \
		default:                                                 \
			r = bpf_map_peek_elem(&map, &v);                 \
		}                                                        \
		return r ? r : 0x100 | (v & 0xff);                       \
	} while (0)

/* op 0: update with flags; 1: delete; 2: lookup (0x100 | low byte, or
 * 0); 3 (and 4 where it means nothing else): lookup and add 1 in place
 * (1 if found). */
#define PLAIN(map)                                                       \
	do {                                                             \
		__u64 v = val;                                           \
		__u64 *p;                                                \
		switch (op) {                                            \
		case 0:                                                  \
			return bpf_map_update_elem(&map, &key, &v, flags); \
		case 1:                                                  \
			return bpf_map_delete_elem(&map, &key);          \
		case 2:                                                  \
			p = bpf_map_lookup_elem(&map, &key);             \
			return p ? 0x100 | (*p & 0xff) : 0;              \
		default:                                                 \
			p = bpf_map_lookup_elem(&map, &key);             \
			if (!p)                                          \
				return 0;                                \
			*p += 1;                                         \
			return 1;                                        \
		}                                                        \
	} while (0)

#define LOCKED(map)                                                      \
	do {                                                             \
		struct locked v = { .a = val };                          \
		struct locked *p;                                        \
		switch (op) {                                            \
		case 0:                                                  \
			return bpf_map_update_elem(&map, &key, &v, flags); \
		case 1:                                                  \
			return bpf_map_delete_elem(&map, &key);          \
		case 2:                                                  \
			p = bpf_map_lookup_elem(&map, &key);             \
			return p ? 0x100 | (p->a & 0xff) : 0;            \
		default:                                                 \
			p = bpf_map_lookup_elem(&map, &key);             \
			if (!p)                                          \
				return 0;                                \
			bpf_spin_lock(&p->lock);                         \
			p->a += 1;                                       \
			bpf_spin_unlock(&p->lock);                       \
			return 1;                                        \
		}                                                        \
	} while (0)

SEC("xdp")
int ops(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 8) > (void *)(long)ctx->data_end)
		return 0;
	__u32 key = d[2];
	__u64 flags = d[3];
	__u64 val = d[4] | ((__u64)d[5] << 8);
	__u8 op = d[1];
	switch (d[0]) {
	case 0: PLAIN(h);
	case 1: PLAIN(hnp);
	case 2: PERCPU(ph);
	case 3: PLAIN(a);
	case 4: PERCPU(pa);
	case 5: LOCKED(hl);
	case 6: LOCKED(al);
	case 7: PLAIN(lru);
	case 8: FIFO(q);
	case 9: FIFO(st);
	case 12: NESTED(aom);
	case 13: NESTED(hom);
	case 10: {
		/* The key's prefix length: the value's high byte (0..32 and
		 * past); the address: the key in the top nibble. */
		struct lpm_key k = { .prefixlen = d[5] % 40, .addr = key << 28 | key };
		__u64 v = val, *p;
		switch (op) {
		case 0:
			return bpf_map_update_elem(&lpm, &k, &v, flags);
		case 1:
			return bpf_map_delete_elem(&lpm, &k);
		default:
			k.prefixlen = 32;
			p = bpf_map_lookup_elem(&lpm, &k);
			return p ? 0x100 | (*p & 0xff) : 0;
		}
	}
	default: {
		__u64 v = key;
		if (op == 0)
			return bpf_map_push_elem(&bloom, &v, flags);
		return bpf_map_peek_elem(&bloom, &v);
	}
	}
}

char _license[] SEC("license") = "GPL";
"#;

/// A deterministic command stream: map, op, key, flags, value.
fn commands(seed: u64, n: usize) -> Vec<[u8; 8]> {
    let mut next = bpfjet_testsupport::xorshift(seed);
    (0..n)
        .map(|_| {
            let r = next();
            let map = (r % 14) as u8;
            // Updates most often, so the maps fill up and overflow.
            let op = match (r >> 8) % 11 {
                0..=4 => 0,
                5 | 6 => 1,
                7 | 8 => 2,
                9 => 3,
                _ => 4,
            };
            // Keys past the arrays' 8 entries and past the hashes'
            // capacity.
            let key = ((r >> 16) % 12) as u8;
            // Mostly valid flags; now and then an invalid combination or
            // BPF_F_LOCK on any map.
            let flags = match (r >> 24) % 16 {
                0..=4 => 0,
                5..=7 => 1,
                8..=10 => 2,
                11 | 12 => 4,
                13 => 5,
                14 => 6,
                _ => ((r >> 32) % 16) as u8,
            };
            [map, op, key, flags, (r >> 40) as u8, (r >> 48) as u8, 0, 0]
        })
        .collect()
}

fn frame(cmd: &[u8; 8]) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..8].copy_from_slice(cmd);
    f
}

type Outcome = (Vec<u32>, bpfjet_maps::state::MapState);

fn on_bpfjet(path: &std::path::Path, engine: Engine, cmds: &[[u8; 8]]) -> Outcome {
    let on = OnEngine::load(path, engine);
    let answers = cmds.iter().map(|c| on.run("ops", &frame(c)).0).collect();
    (answers, on.loaded().dump_state().unwrap())
}

fn on_kernel(path: &std::path::Path, cmds: &[[u8; 8]]) -> Option<Outcome> {
    let k = support::kernel_object(path, "map helper commands, kernel column")?;
    let answers = cmds
        .iter()
        .map(|c| k.test_run("ops", &frame(c), 1, Some(0)).unwrap().retval)
        .collect();
    Some((answers, k.dump_maps().unwrap()))
}

/// The commands whose answer is the kernel's choice, not a rule: a bloom
/// filter's "maybe present" for a value never pushed (a false positive of
/// the kernel's randomly seeded hashes). Both answers must still be
/// "maybe" (0) or "absent" (-ENOENT).
fn free_answers(cmds: &[[u8; 8]]) -> Vec<bool> {
    let mut pushed = std::collections::BTreeSet::new();
    cmds.iter()
        .map(|c| {
            if c[0] != 11 {
                return false;
            }
            if c[1] == 0 {
                if c[3] == 0 {
                    pushed.insert(c[2]);
                }
                false
            } else {
                !pushed.contains(&c[2])
            }
        })
        .collect()
}

/// The first command whose answer differs, with its context.
fn first_difference(cmds: &[[u8; 8]], want: &[u32], got: &[u32]) -> Option<String> {
    let free = free_answers(cmds);
    let either = |a: u32| a == 0 || a == (-2i32) as u32;
    let i = want
        .iter()
        .zip(got)
        .zip(&free)
        .position(|((w, g), &free)| {
            if free {
                !(either(*w) && either(*g))
            } else {
                w != g
            }
        })?;
    let c = cmds[i];
    Some(format!(
        "command {i} (map {}, op {}, key {}, flags {}, value {}): kernel {:#x}, bpfjet {:#x}",
        c[0],
        c[1],
        c[2],
        c[3],
        u16::from_le_bytes([c[4], c[5]]),
        want[i],
        got[i]
    ))
}

#[test]
fn map_helpers_answer_like_the_kernel() {
    let path = Compile::text("map_ops", SOURCE).object();
    for seed in [1u64, 0x9e37_79b9, 0xdead_beef_1234, 42, 7_777_777] {
        let cmds = commands(seed, 1500);
        let kernel = on_kernel(&path, &cmds);
        let interp = on_bpfjet(&path, Engine::Interp, &cmds);
        let checked = on_bpfjet(&path, Engine::Checked, &cmds);
        let jit = on_bpfjet(&path, Engine::Jit, &cmds);
        for (name, got) in [
            ("interpreter", &interp),
            ("bounds-checked", &checked),
            ("JIT", &jit),
        ] {
            if let Some(k) = &kernel {
                if let Some(d) = first_difference(&cmds, &k.0, &got.0) {
                    panic!("seed {seed:#x}, {name}: {d}");
                }
                assert_eq!(
                    k.1, got.1,
                    "seed {seed:#x}, {name}: maps after the commands"
                );
            } else if let Some(d) = first_difference(&cmds, &interp.0, &got.0) {
                panic!("seed {seed:#x}, {name} against the interpreter: {d}");
            }
        }
        // The stream must have exercised what it is for.
        let answers = &interp.0;
        let errno = |e: i32| (-e) as u32;
        for (what, e) in [
            ("EEXIST", 17),
            ("ENOENT", 2),
            ("E2BIG", 7),
            ("EINVAL", 22),
            ("ENOSPC", 28),
        ] {
            assert!(
                answers.contains(&errno(e)),
                "seed {seed:#x}: no command answered -{what}"
            );
        }
    }
}
