//! Kernel semantics of every map type: creation rules, update flags, errno.

use bpfjet_maps::spec::{flags as mf, update};
use bpfjet_maps::{
    Map, MapError, MapOptions, MapSpec, MapType, PerfEvent, PerfEventConsumer, PerfbufStats,
    RingbufConsumer,
};
use std::sync::Arc;

const ENOENT: i32 = 2;
const E2BIG: i32 = 7;
const EEXIST: i32 = 17;
const EINVAL: i32 = 22;
const EPERM: i32 = 1;
const ENOSPC: i32 = 28;

fn spec(t: MapType, k: u32, v: u32, n: u32, flags: u32) -> MapSpec {
    let mut s = MapSpec::new("m", t, k, v, n);
    s.flags = flags;
    s
}

fn mk(t: MapType, k: u32, v: u32, n: u32, flags: u32) -> Map {
    Map::create_anonymous(&spec(t, k, v, n, flags), &MapOptions::with_cpus(2)).expect("create")
}

fn errno<T: std::fmt::Debug>(r: Result<T, MapError>) -> i32 {
    r.expect_err("expected an error").errno()
}

fn k32(i: u32) -> [u8; 4] {
    i.to_ne_bytes()
}

#[test]
fn creation_rules() {
    use MapType::*;
    let np = mf::NO_PREALLOC;
    // (type, key, value, max, flags, extra, expected errno or 0)
    let table: &[(MapType, u32, u32, u32, u32, u64, i32)] = &[
        (Array, 4, 8, 1, 0, 0, 0),
        (Array, 8, 8, 1, 0, 0, EINVAL),
        (Array, 4, 0, 1, 0, 0, EINVAL),
        (Array, 4, 8, 0, 0, 0, EINVAL),
        (Array, 4, 8, 1, mf::NO_PREALLOC, 0, EINVAL),
        (PercpuArray, 4, 8, 4, 0, 0, 0),
        (PercpuArray, 4, 40000, 4, 0, 0, E2BIG),
        (Hash, 4, 8, 16, 0, 0, 0),
        (Hash, 0, 8, 16, 0, 0, EINVAL),
        (Hash, 4, 0, 16, 0, 0, EINVAL),
        (Hash, 4, 8, 0, 0, 0, EINVAL),
        (Hash, 600, 8, 16, 0, 0, 0),
        (Array, 4, 5_619_752, 1, 0, 0, 0),
        (Hash, 4, 4_194_252, 1, 0, 0, E2BIG),
        (Hash, 4, 8, 16, mf::NO_COMMON_LRU, 0, EINVAL),
        (Hash, 4, 8, 16, mf::MMAPABLE, 0, EINVAL),
        (Hash, 4, 8, 16, np, 0, 0),
        (LruHash, 4, 8, 16, np, 0, 524),
        (LruHash, 4, 8, 16, mf::NO_COMMON_LRU, 0, 0),
        (LpmTrie, 8, 8, 16, np, 0, 0),
        (LpmTrie, 8, 8, 16, 0, 0, EINVAL),
        (LpmTrie, 4, 8, 16, np, 0, EINVAL),
        (LpmTrie, 4 + 257, 8, 16, np, 0, EINVAL),
        (LpmTrie, 8, 0, 16, np, 0, EINVAL),
        (Queue, 0, 8, 4, 0, 0, 0),
        (Queue, 4, 8, 4, 0, 0, EINVAL),
        (Stack, 0, 0, 4, 0, 0, EINVAL),
        (BloomFilter, 0, 8, 100, 0, 3, 0),
        (BloomFilter, 0, 8, 100, 0, 16, EINVAL),
        (BloomFilter, 4, 8, 100, 0, 0, EINVAL),
        (Ringbuf, 0, 0, 4096, 0, 0, 0),
        (Ringbuf, 0, 0, 4096 * 3, 0, 0, EINVAL),
        (Ringbuf, 0, 0, 1024, 0, 0, EINVAL),
        (Ringbuf, 4, 0, 4096, 0, 0, EINVAL),
        (ProgArray, 4, 4, 8, 0, 0, 0),
        (ProgArray, 4, 8, 8, 0, 0, EINVAL),
        (Devmap, 4, 8, 8, 0, 0, 0),
        (Devmap, 4, 6, 8, 0, 0, EINVAL),
        (DevmapHash, 4, 4, 8, 0, 0, 0),
        (Cpumap, 4, 8, 8, 0, 0, 0),
        (Cpumap, 4, 8, 100_000, 0, 0, E2BIG),
        (Xskmap, 4, 4, 8, 0, 0, 0),
        (Xskmap, 4, 8, 8, 0, 0, EINVAL),
        (PerfEventArray, 4, 4, 2, 0, 0, 0),
        (Hash, 4, 8, 16, mf::RDONLY_PROG | mf::WRONLY_PROG, 0, EINVAL),
    ];
    for &(t, k, v, n, fl, extra, want) in table {
        let mut s = spec(t, k, v, n, fl);
        s.map_extra = extra;
        let got = Map::create_anonymous(&s, &MapOptions::with_cpus(2));
        let got = match got {
            Ok(_) => 0,
            Err(e) => e.errno(),
        };
        assert_eq!(got, want, "{t} key={k} value={v} max={n} flags={fl:#x}");
    }
    // Map-in-map needs a template.
    let e = Map::create_anonymous(&spec(ArrayOfMaps, 4, 4, 4, 0), &MapOptions::default());
    assert_eq!(errno(e), EINVAL);
}

#[test]
fn array_semantics() {
    let m = mk(MapType::Array, 4, 12, 4, 0);
    assert!(m.lookup(&k32(4), 0).is_none());
    let p = m.lookup(&k32(3), 0).expect("in range");
    // SAFETY: 12-byte value.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 12) }, &[0; 12]);
    let v = [7u8; 12];
    m.update(&k32(1), &v, update::ANY, 0).unwrap();
    m.update(&k32(1), &v, update::EXIST, 0).unwrap();
    assert_eq!(m.lookup_copy(&k32(1)).unwrap(), v);
    assert_eq!(errno(m.update(&k32(1), &v, update::NOEXIST, 0)), EEXIST);
    assert_eq!(errno(m.update(&k32(4), &v, update::ANY, 0)), E2BIG);
    assert_eq!(errno(m.update(&k32(0), &v, 8, 0)), EINVAL);
    assert_eq!(errno(m.update(&k32(0), &v, update::F_LOCK, 0)), EINVAL);
    assert_eq!(errno(m.delete(&k32(0))), EINVAL);
    // get_next_key: index order, missing key restarts, last ends.
    assert_eq!(m.get_next_key(None).unwrap(), k32(0));
    assert_eq!(m.get_next_key(Some(&k32(2))).unwrap(), k32(3));
    assert_eq!(errno(m.get_next_key(Some(&k32(3)))), ENOENT);
    assert_eq!(m.get_next_key(Some(&k32(99))).unwrap(), k32(0));
    let l = m.array_layout().unwrap();
    assert_eq!((l.stride, l.max_entries, l.cpu_stride), (16, 4, 0));
    assert_eq!(l.values.wrapping_add(16), m.lookup(&k32(1), 0).unwrap());
}

#[test]
fn percpu_array_slots() {
    let m = mk(MapType::PercpuArray, 4, 4, 2, 0);
    m.update(&k32(1), &[1, 0, 0, 0], update::ANY, 1).unwrap();
    assert_eq!(
        m.lookup_percpu(&k32(1)).unwrap(),
        vec![vec![0; 4], vec![1, 0, 0, 0]]
    );
    m.update_percpu(&k32(0), &[&[5, 0, 0, 0], &[6, 0, 0, 0]], update::ANY)
        .unwrap();
    // The syscall view: each CPU's value padded to 8 bytes.
    assert_eq!(
        m.lookup_copy(&k32(0)).unwrap(),
        vec![5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]
    );
    let l = m.array_layout().unwrap();
    assert!(l.cpu_stride >= 16 && l.cpu_stride.is_multiple_of(64));
    assert_eq!(
        l.values.wrapping_add(l.cpu_stride + 8),
        m.lookup(&k32(1), 1).unwrap()
    );
    assert_eq!(errno(m.update(&k32(0), &[0; 4], update::F_LOCK, 0)), EINVAL);
}

#[test]
fn hash_semantics() {
    for flags in [0, mf::NO_PREALLOC] {
        let m = mk(MapType::Hash, 4, 8, 2, flags);
        let v = |x: u8| [x; 8];
        assert!(m.lookup(&k32(1), 0).is_none());
        assert_eq!(errno(m.update(&k32(1), &v(1), update::EXIST, 0)), ENOENT);
        m.update(&k32(1), &v(1), update::NOEXIST, 0).unwrap();
        assert_eq!(errno(m.update(&k32(1), &v(2), update::NOEXIST, 0)), EEXIST);
        m.update(&k32(1), &v(2), update::EXIST, 0).unwrap();
        m.update(&k32(2), &v(3), update::ANY, 0).unwrap();
        // Full: a new key fails, replacing an existing one still works.
        assert_eq!(errno(m.update(&k32(3), &v(4), update::ANY, 0)), E2BIG);
        m.update(&k32(2), &v(5), update::ANY, 0).unwrap();
        assert_eq!(m.lookup_copy(&k32(2)).unwrap(), v(5));
        assert_eq!(errno(m.update(&k32(1), &v(1), 5, 0)), EINVAL);
        assert_eq!(errno(m.delete(&k32(3))), ENOENT);
        // get_next_key walks every key once; missing key → first key.
        let mut seen = vec![];
        let mut k = None;
        while let Ok(n) = m.get_next_key(k.as_deref()) {
            seen.push(n.clone());
            k = Some(n);
        }
        seen.sort();
        assert_eq!(seen, vec![k32(1).to_vec(), k32(2).to_vec()]);
        let first = m.get_next_key(None).unwrap();
        assert_eq!(m.get_next_key(Some(&k32(77))).unwrap(), first);
        m.delete(&k32(1)).unwrap();
        m.update(&k32(3), &v(6), update::ANY, 0).unwrap();
        assert_eq!(m.element_count(), Some(2));
        assert_eq!(errno(m.lookup_copy(&[0; 3])), EINVAL);
    }
}

#[test]
fn hash_value_pointer_survives_replacement_like_kernel() {
    // The kernel swaps in a new element: an old pointer keeps the old value.
    let m = mk(MapType::Hash, 4, 8, 4, 0);
    m.update(&k32(1), &[1; 8], update::ANY, 0).unwrap();
    let p = m.lookup(&k32(1), 0).unwrap();
    m.update(&k32(1), &[2; 8], update::ANY, 0).unwrap();
    // SAFETY: element memory is never unmapped.
    assert_eq!(unsafe { *p }, 1);
    assert_eq!(m.lookup_copy(&k32(1)).unwrap(), [2; 8]);
}

#[test]
fn percpu_hash() {
    let m = mk(MapType::PercpuHash, 4, 4, 4, 0);
    m.update(&k32(1), &[9, 0, 0, 0], update::ANY, 1).unwrap();
    assert_eq!(
        m.lookup_percpu(&k32(1)).unwrap(),
        vec![vec![0; 4], vec![9, 0, 0, 0]]
    );
    m.update(&k32(1), &[3, 0, 0, 0], update::EXIST, 0).unwrap();
    assert_eq!(
        m.lookup_percpu(&k32(1)).unwrap(),
        vec![vec![3, 0, 0, 0], vec![9, 0, 0, 0]]
    );
    m.update_elem(&k32(2), &[4, 0, 0, 0], update::ANY).unwrap();
    assert_eq!(m.lookup_percpu(&k32(2)).unwrap(), vec![vec![4, 0, 0, 0]; 2]);
    assert_eq!(errno(m.update(&k32(1), &[0; 4], update::F_LOCK, 0)), EINVAL);
}

#[test]
fn spin_lock_values() {
    let s = spec(MapType::Hash, 4, 16, 4, 0);
    let opts = MapOptions {
        spin_lock_off: Some(8),
        ..MapOptions::with_cpus(1)
    };
    let m = Map::create_anonymous(&s, &opts).unwrap();
    let v = [1u8; 16];
    m.update(&k32(1), &v, update::ANY, 0).unwrap();
    m.update(&k32(1), &[2u8; 16], update::F_LOCK, 0).unwrap();
    let got = m.lookup_copy_flags(&k32(1), update::F_LOCK).unwrap();
    // The lock word reads as zero and is never overwritten.
    assert_eq!(&got[..8], &[2; 8]);
    assert_eq!(&got[8..12], &[0; 4]);
    assert_eq!(&got[12..], &[2; 4]);
    assert_eq!(errno(m.lookup_copy_flags(&k32(1), 8)), EINVAL);
    let bad = MapOptions {
        spin_lock_off: Some(14),
        ..MapOptions::default()
    };
    assert_eq!(errno(Map::create_anonymous(&s, &bad)), EINVAL);
}

#[test]
fn frozen_and_readonly_maps_refuse_control_plane_writes() {
    let mut s = spec(MapType::Array, 4, 4, 1, 0);
    s.initial_data = Some(vec![1, 2, 3, 4]);
    s.frozen = true;
    let m = Map::create_anonymous(&s, &MapOptions::default()).unwrap();
    assert_eq!(m.lookup_copy(&k32(0)).unwrap(), [1, 2, 3, 4]);
    assert_eq!(errno(m.update_elem(&k32(0), &[0; 4], 0)), EPERM);
    let h = mk(MapType::Hash, 4, 4, 4, 0);
    h.update_elem(&k32(0), &[0; 4], 0).unwrap();
    h.freeze();
    assert!(h.is_frozen());
    assert_eq!(errno(h.update_elem(&k32(1), &[0; 4], 0)), EPERM);
    assert_eq!(errno(h.delete_elem(&k32(0))), EPERM);
    let ro = mk(MapType::Hash, 4, 4, 4, mf::RDONLY);
    assert_eq!(errno(ro.update_elem(&k32(1), &[0; 4], 0)), EPERM);
}

#[test]
fn lru_evicts_least_recently_used() {
    let m = mk(MapType::LruHash, 4, 8, 4, 0);
    for i in 0..4 {
        m.update(&k32(i), &[i as u8; 8], update::ANY, 0).unwrap();
    }
    // Touch 0 and 1: they get a second chance.
    assert!(m.lookup(&k32(0), 0).is_some());
    assert!(m.lookup(&k32(1), 0).is_some());
    m.update(&k32(4), &[4; 8], update::ANY, 0).unwrap();
    assert!(m.lookup_copy(&k32(2)).is_err(), "2 was least recently used");
    m.update(&k32(5), &[5; 8], update::ANY, 0).unwrap();
    assert!(m.lookup_copy(&k32(3)).is_err());
    for k in [0, 1, 4, 5] {
        assert!(m.lookup_copy(&k32(k)).is_ok(), "{k} kept");
    }
    assert_eq!(m.element_count(), Some(4));
    assert_eq!(errno(m.update(&k32(9), &[0; 8], update::F_LOCK, 0)), EINVAL);
    assert_eq!(errno(m.update(&k32(9), &[0; 8], update::EXIST, 0)), ENOENT);
    // Never E2BIG: many more inserts than entries.
    for i in 100..1000 {
        m.update(&k32(i), &[1; 8], update::ANY, 0).unwrap();
    }
    assert_eq!(m.element_count(), Some(4));
    m.delete(&k32(999)).unwrap();
    assert_eq!(m.element_count(), Some(3));
}

#[test]
fn lru_percpu_lists_evict_per_cpu() {
    // 4 entries over 2 CPUs: each CPU's list holds 2.
    let m = mk(MapType::LruPercpuHash, 4, 8, 4, mf::NO_COMMON_LRU);
    m.update(&k32(0), &[0; 8], update::ANY, 0).unwrap();
    m.update(&k32(1), &[1; 8], update::ANY, 0).unwrap();
    m.update(&k32(10), &[0; 8], update::ANY, 1).unwrap();
    m.update(&k32(2), &[2; 8], update::ANY, 0).unwrap();
    // CPU 0's oldest went; CPU 1's entry was not touched.
    assert!(m.lookup_copy(&k32(0)).is_err());
    assert!(m.lookup_copy(&k32(10)).is_ok());
    assert_eq!(m.element_count(), Some(3));
    // max_entries is rounded up to a multiple of the CPU count.
    let r = mk(MapType::LruHash, 4, 8, 5, mf::NO_COMMON_LRU);
    assert_eq!(r.max_entries(), 6);
}

fn lpm_key(plen: u32, data: &[u8]) -> Vec<u8> {
    let mut k = plen.to_ne_bytes().to_vec();
    k.extend_from_slice(data);
    k
}

#[test]
fn lpm_ipv4() {
    let m = mk(MapType::LpmTrie, 8, 4, 8, mf::NO_PREALLOC);
    let put =
        |plen, ip: [u8; 4], v: u32| m.update(&lpm_key(plen, &ip), &v.to_ne_bytes(), update::ANY, 0);
    put(8, [10, 0, 0, 0], 1).unwrap();
    put(16, [10, 1, 0, 0], 2).unwrap();
    put(24, [10, 1, 2, 0], 3).unwrap();
    put(0, [0, 0, 0, 0], 99).unwrap();
    let get = |ip: [u8; 4]| {
        m.lookup_copy(&lpm_key(32, &ip))
            .map(|v| u32::from_ne_bytes(v.try_into().unwrap()))
    };
    assert_eq!(get([10, 1, 2, 3]).unwrap(), 3);
    assert_eq!(get([10, 1, 3, 3]).unwrap(), 2);
    assert_eq!(get([10, 9, 9, 9]).unwrap(), 1);
    assert_eq!(get([11, 0, 0, 0]).unwrap(), 99);
    // The lookup key's own prefix length bounds the match.
    assert_eq!(
        u32::from_ne_bytes(
            m.lookup_copy(&lpm_key(20, &[10, 1, 2, 3]))
                .unwrap()
                .try_into()
                .unwrap()
        ),
        2
    );
    // Update/delete act on exact prefixes only.
    assert_eq!(errno(m.delete(&lpm_key(12, &[10, 0, 0, 0]))), ENOENT);
    assert_eq!(
        errno(m.update(&lpm_key(16, &[10, 1, 0, 0]), &[0; 4], update::NOEXIST, 0)),
        EEXIST
    );
    assert_eq!(
        errno(m.update(&lpm_key(17, &[10, 1, 0, 0]), &[0; 4], update::EXIST, 0)),
        ENOENT
    );
    assert_eq!(
        errno(m.update(&lpm_key(33, &[10, 1, 0, 0]), &[0; 4], update::ANY, 0)),
        EINVAL
    );
    assert_eq!(
        errno(m.update(&lpm_key(8, &[10, 1, 0, 0]), &[0; 4], 4, 0)),
        EINVAL
    );
    m.delete(&lpm_key(24, &[10, 1, 2, 0])).unwrap();
    assert_eq!(get([10, 1, 2, 3]).unwrap(), 2);
    m.delete(&lpm_key(0, &[0; 4])).unwrap();
    assert_eq!(errno(get([11, 0, 0, 0])), ENOENT);
    // Full → ENOSPC like the kernel trie.
    for i in 0..6u8 {
        put(32, [192, 168, 0, i], i as u32).unwrap();
    }
    assert_eq!(errno(put(32, [192, 168, 1, 1], 0)), ENOSPC);
}

#[test]
fn lpm_ipv6_and_next_key_postorder() {
    let m = mk(MapType::LpmTrie, 20, 1, 16, mf::NO_PREALLOC);
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    m.update(&lpm_key(32, &a), &[1], 0, 0).unwrap();
    let mut b = a;
    b[4] = 0x80;
    m.update(&lpm_key(33, &b), &[2], 0, 0).unwrap();
    let mut c = a;
    c[4] = 0x00;
    c[5] = 0x01;
    m.update(&lpm_key(48, &c), &[3], 0, 0).unwrap();
    m.update(&lpm_key(128, &b), &[4], 0, 0).unwrap();
    let mut q = a;
    q[15] = 9;
    assert_eq!(m.lookup_copy(&lpm_key(128, &q)).unwrap(), [1]);
    q[4] = 0x81;
    assert_eq!(m.lookup_copy(&lpm_key(128, &q)).unwrap(), [2]);
    assert_eq!(m.lookup_copy(&lpm_key(128, &b)).unwrap(), [4]);
    q = c;
    q[10] = 1;
    assert_eq!(m.lookup_copy(&lpm_key(128, &q)).unwrap(), [3]);
    // Post-order: more specific first, 0-branch before 1-branch, parent last.
    let mut order = vec![];
    let mut k = None;
    while let Ok(n) = m.get_next_key(k.as_deref()) {
        order.push(u32::from_ne_bytes(n[..4].try_into().unwrap()));
        k = Some(n);
    }
    assert_eq!(order, vec![48, 128, 33, 32]);
}

#[test]
fn queue_and_stack() {
    let q = mk(MapType::Queue, 0, 4, 3, 0);
    let s = mk(MapType::Stack, 0, 4, 3, 0);
    let mut out = [0u8; 4];
    for m in [&q, &s] {
        assert_eq!(errno(m.pop(&mut out)), ENOENT);
        assert_eq!(errno(m.peek(&mut out)), ENOENT);
        for i in 1..=3u32 {
            m.push(&i.to_ne_bytes(), update::ANY).unwrap();
        }
        assert_eq!(errno(m.push(&k32(4), update::ANY)), E2BIG);
        assert_eq!(errno(m.push(&k32(4), update::NOEXIST)), EINVAL);
        // Overwrite drops the oldest element.
        m.push(&k32(4), update::EXIST).unwrap();
        assert_eq!(errno(m.delete(&[])), EINVAL);
        assert_eq!(errno(m.get_next_key(None)), EINVAL);
    }
    let drain = |m: &Map| {
        let mut v = vec![];
        let mut o = [0u8; 4];
        while m.pop(&mut o).is_ok() {
            v.push(u32::from_ne_bytes(o));
        }
        v
    };
    q.peek(&mut out).unwrap();
    assert_eq!(u32::from_ne_bytes(out), 2);
    s.peek(&mut out).unwrap();
    assert_eq!(u32::from_ne_bytes(out), 4);
    assert_eq!(drain(&q), vec![2, 3, 4]);
    assert_eq!(drain(&s), vec![4, 3, 2]);
    // Through the syscall-style API: update pushes, lookup peeks.
    q.update_elem(&[], &k32(7), 0).unwrap();
    assert_eq!(q.lookup_copy(&[]).unwrap(), k32(7));
    assert_eq!(q.pop_elem().unwrap(), k32(7));
}

#[test]
fn bloom_filter_has_no_false_negatives() {
    let mut s = spec(MapType::BloomFilter, 0, 8, 1000, 0);
    s.map_extra = 3;
    let m = Map::create_anonymous(&s, &MapOptions::default()).unwrap();
    for i in 0..1000u64 {
        m.push(&i.to_ne_bytes(), update::ANY).unwrap();
    }
    for i in 0..1000u64 {
        m.peek(&mut i.to_ne_bytes()).unwrap();
    }
    let fp = (1000..11000u64)
        .filter(|i| m.peek(&mut i.to_ne_bytes()).is_ok())
        .count();
    assert!(fp < 1000, "false positive rate too high: {fp}/10000");
    assert_eq!(errno(m.push(&[0; 8], update::EXIST)), EINVAL);
    assert_eq!(m.pop(&mut [0; 8]).unwrap_err().errno(), 95);
    assert_eq!(m.delete(&[]).unwrap_err().errno(), 95);
}

#[test]
fn ringbuf_reserve_submit_discard_query_wraparound() {
    let page = 4096u64;
    let m = Arc::new(mk(MapType::Ringbuf, 0, 0, page as u32, 0));
    assert_eq!(m.ringbuf_query(1), page);
    assert!(m.ringbuf_reserve(8, 1).is_none(), "flags must be 0");
    assert!(m.ringbuf_reserve(page, 0).is_none(), "larger than the ring");
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    let mut total = 0u64;
    let mut got: Vec<Vec<u8>> = vec![];
    // Records of 1000 bytes (1008 with header) wrap around a 4 KiB ring.
    for round in 0..20u8 {
        let p = m.ringbuf_reserve(1000, 0).expect("room");
        // SAFETY: 1000 reserved bytes.
        unsafe {
            std::ptr::write_bytes(p, round, 1000);
            if round % 3 == 2 {
                Map::ringbuf_discard(p, 0);
            } else {
                Map::ringbuf_submit(p, 0);
            }
        }
        total += 1008;
        assert_eq!(m.ringbuf_query(3), total, "producer position");
        if round % 2 == 1 {
            c.poll(|r| got.push(r.to_vec()));
            assert_eq!(m.ringbuf_query(0), 0, "all consumed");
            assert_eq!(m.ringbuf_query(2), total);
        }
    }
    let want: Vec<Vec<u8>> = (0..20u8)
        .filter(|r| r % 3 != 2)
        .map(|r| vec![r; 1000])
        .collect();
    assert_eq!(got, want);
    // Full: reserve fails (NULL), output fails with EAGAIN, busy records block the consumer.
    let a = m.ringbuf_reserve(2000, 0).unwrap();
    assert!(m.ringbuf_reserve(2100, 0).is_none());
    assert_eq!(m.ringbuf_output(&[0; 2100], 0).unwrap_err().errno(), 11);
    assert_eq!(m.ringbuf_output(&[0; 8], 4).unwrap_err().errno(), EINVAL);
    m.ringbuf_output(&[5; 16], 0).unwrap();
    assert_eq!(c.poll(|_| {}), 0, "first record still busy");
    // SAFETY: reserved above.
    unsafe { Map::ringbuf_submit(a, 0) };
    let mut n = vec![];
    assert_eq!(c.poll(|r| n.push(r.len())), 2);
    assert_eq!(n, vec![2000, 16]);
    assert_eq!(m.ringbuf_query(9), 0);
}

#[test]
fn perf_event_array_rings_and_losses() {
    let s = spec(MapType::PerfEventArray, 4, 4, 2, 0);
    let opts = MapOptions {
        ncpus: 2,
        perf_ring_bytes: 256,
        ..Default::default()
    };
    let m = Arc::new(Map::create_anonymous(&s, &opts).unwrap());
    m.perf_event_output(bpfjet_maps::BPF_F_CURRENT_CPU, &[b"abc", b"de"], 1)
        .unwrap();
    m.perf_event_output(0, &[&[7; 100]], 1).unwrap();
    assert_eq!(
        m.perf_event_output(2, &[b"x"], 0).unwrap_err().errno(),
        E2BIG
    );
    assert_eq!(
        m.perf_event_output(1 << 40, &[b"x"], 0)
            .unwrap_err()
            .errno(),
        EINVAL
    );
    // Ring 0 holds 256 bytes: records of 108 bytes, the third is lost.
    m.perf_event_output(0, &[&[1; 100]], 0).unwrap();
    assert_eq!(
        m.perf_event_output(0, &[&[2; 100]], 0).unwrap_err().errno(),
        ENOSPC
    );
    let mut c = PerfEventConsumer::new(m.clone()).unwrap();
    let mut ev = vec![];
    c.poll(|e| {
        ev.push(match e {
            PerfEvent::Sample { cpu, data } => format!("s{cpu}:{}", data.len()),
            PerfEvent::Lost { cpu, count } => format!("l{cpu}:{count}"),
        })
    });
    assert_eq!(ev, vec!["l0:1", "s0:100", "s0:100", "s1:5"]);
    assert_eq!(
        c.stats(),
        PerfbufStats {
            produced: 3,
            consumed: 3,
            dropped: 1
        }
    );
    // Wraparound after consumption.
    for _ in 0..10 {
        m.perf_event_output(0, &[&[3; 100]], 0).unwrap();
        assert_eq!(c.poll(|_| {}), 1);
    }
    assert_eq!(c.stats().produced, 13);
    assert_eq!(c.stats().consumed, 13);
}

#[test]
fn fd_arrays() {
    let p = mk(MapType::ProgArray, 4, 4, 4, 0);
    assert_eq!(
        errno(p.update(&k32(0), &k32(5), update::NOEXIST, 0)),
        EINVAL
    );
    assert_eq!(errno(p.update(&k32(4), &k32(5), update::ANY, 0)), E2BIG);
    p.update(&k32(0), &k32(0), update::ANY, 0).unwrap();
    assert_eq!(p.lookup_copy(&k32(0)).unwrap(), k32(0));
    assert_eq!(errno(p.lookup_copy(&k32(1))), ENOENT);
    p.delete(&k32(0)).unwrap();
    assert_eq!(errno(p.delete(&k32(0))), ENOENT);
    assert_eq!(errno(p.delete(&k32(9))), E2BIG);

    let d = mk(MapType::Devmap, 4, 8, 4, 0);
    let val = |ifindex: u32, prog: u32| [ifindex.to_ne_bytes(), prog.to_ne_bytes()].concat();
    assert_eq!(
        errno(d.update(&k32(0), &val(3, 0), update::NOEXIST, 0)),
        EEXIST
    );
    d.update(&k32(0), &val(3, 7), update::ANY, 0).unwrap();
    let ptr = d.lookup(&k32(0), 0).unwrap();
    // SAFETY: 8-byte devmap value.
    assert_eq!(
        unsafe { std::slice::from_raw_parts(ptr, 8) },
        &val(3, 7)[..]
    );
    assert_eq!(errno(d.update(&k32(1), &val(0, 7), update::ANY, 0)), EINVAL);
    d.update(&k32(0), &val(0, 0), update::ANY, 0).unwrap();
    assert!(d.lookup(&k32(0), 0).is_none());
    d.delete(&k32(1)).unwrap();
    assert_eq!(errno(d.delete(&k32(4))), EINVAL);

    let x = mk(MapType::Xskmap, 4, 4, 4, 0);
    assert_eq!(errno(x.update(&k32(0), &k32(1), update::EXIST, 0)), ENOENT);
    x.update(&k32(0), &k32(1), update::NOEXIST, 0).unwrap();
    assert_eq!(
        errno(x.update(&k32(0), &k32(1), update::NOEXIST, 0)),
        EEXIST
    );

    let c = mk(MapType::Cpumap, 4, 8, 4, 0);
    c.update(&k32(1), &val(192, 0), update::ANY, 0).unwrap();
    assert_eq!(
        c.update(&k32(1), &val(20000, 0), update::ANY, 0)
            .unwrap_err()
            .errno(),
        75
    );
    assert_eq!(
        c.update(&k32(3), &val(192, 0), update::ANY, 0)
            .unwrap_err()
            .errno(),
        19
    );

    let dh = mk(MapType::DevmapHash, 4, 4, 2, 0);
    dh.update(&k32(10), &k32(3), update::ANY, 0).unwrap();
    dh.update(&k32(11), &k32(3), update::ANY, 0).unwrap();
    assert_eq!(errno(dh.update(&k32(12), &k32(3), update::ANY, 0)), E2BIG);
    assert_eq!(errno(dh.update(&k32(10), &k32(0), update::ANY, 0)), EINVAL);
    assert_eq!(errno(dh.delete(&k32(12))), ENOENT);
}
