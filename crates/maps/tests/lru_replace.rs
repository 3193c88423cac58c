//! LRU_HASH replace path: a replaced key always gets a new element, the
//! elements cached by the lists for replaces (one spare per list) never
//! leak or shrink the map, and concurrent replaces, inserts, deletes and
//! lock-free lookups from several CPUs keep the table consistent. Bounded
//! by iteration counts, never by time.

use bpfjet_maps::spec::{flags, update};
use bpfjet_maps::{Map, MapOptions, MapSpec, MapType};
use std::sync::Arc;
use std::thread;

const CPUS: u32 = 4;

fn lru(max: u32, per_cpu_lists: bool) -> Arc<Map> {
    let mut s = MapSpec::new("r", MapType::LruHash, 4, 8, max);
    if per_cpu_lists {
        s.flags = flags::NO_COMMON_LRU;
    }
    Arc::new(Map::create_anonymous(&s, &MapOptions::with_cpus(CPUS)).unwrap())
}

fn val(k: u32, gen: u64) -> [u8; 8] {
    ((u64::from(k) << 40) | gen).to_ne_bytes()
}

/// Every live entry holds a value written for its own key, and the count
/// matches the chains.
fn check_consistent(m: &Map) {
    let n = m.element_count().unwrap();
    assert!(n <= m.max_entries(), "{n} > {}", m.max_entries());
    let entries = m.entries().unwrap();
    assert_eq!(entries.len() as u32, n, "count matches the chains");
    for e in entries {
        let k = u32::from_ne_bytes(e.key[..4].try_into().unwrap());
        let v = u64::from_ne_bytes(e.values[0][..8].try_into().unwrap());
        assert_eq!(v >> 40, u64::from(k), "value of another key under {k}");
    }
}

/// After any history the map must still take `max_entries` fresh keys
/// without evicting any of them early: no element is lost to the caches.
fn check_full_capacity(m: &Map) {
    for e in m.entries().unwrap() {
        m.delete_elem(&e.key).unwrap();
    }
    assert_eq!(m.element_count(), Some(0));
    for k in 0..m.max_entries() {
        // Control-plane inserts go to list 0 of a per-CPU-list map, whose
        // capacity is its share; spread them over the lists instead.
        m.update(&k.to_ne_bytes(), &val(k, 0), update::NOEXIST, k % CPUS)
            .unwrap_or_else(|e| panic!("insert {k}: {e}"));
    }
    assert_eq!(m.element_count(), Some(m.max_entries()));
    for k in 0..m.max_entries() {
        assert_eq!(m.lookup_copy(&k.to_ne_bytes()).unwrap(), val(k, 0));
    }
}

#[test]
fn replaced_key_gets_a_new_element() {
    for per_cpu_lists in [false, true] {
        let m = lru(16, per_cpu_lists);
        let key = 7u32.to_ne_bytes();
        m.update(&key, &val(7, 0), update::ANY, 1).unwrap();
        let mut prev = m.lookup(&key, 1).unwrap();
        for gen in 1..10 {
            m.update(&key, &val(7, gen), update::ANY, 1).unwrap();
            let p = m.lookup(&key, 1).unwrap();
            assert_ne!(p, prev, "replace {gen} reused the live element in place");
            assert_eq!(m.lookup_copy(&key).unwrap(), val(7, gen));
            prev = p;
        }
        assert_eq!(m.element_count(), Some(1));
        check_full_capacity(&m);
    }
}

#[test]
fn replaces_on_a_full_map_never_fail_or_evict() {
    for per_cpu_lists in [false, true] {
        let m = lru(8, per_cpu_lists);
        for k in 0..8u32 {
            m.update(&k.to_ne_bytes(), &val(k, 0), update::ANY, k % CPUS)
                .unwrap();
        }
        for gen in 1..200u64 {
            for k in 0..8u32 {
                // Same CPU as the insert: the key stays on its list.
                m.update(&k.to_ne_bytes(), &val(k, gen), update::EXIST, k % CPUS)
                    .unwrap_or_else(|e| panic!("replace {k} gen {gen}: {e}"));
            }
        }
        assert_eq!(m.element_count(), Some(8));
        for k in 0..8u32 {
            assert_eq!(m.lookup_copy(&k.to_ne_bytes()).unwrap(), val(k, 199));
        }
        check_consistent(&m);
        check_full_capacity(&m);
    }
}

/// Each CPU refreshes a few hot keys of its own on every iteration (the
/// katran flow pattern) while churning shared keys with inserts, deletes,
/// replaces from other CPUs and lock-free lookups.
fn replace_churn(m: Arc<Map>, iters: u64) {
    let hs: Vec<_> = (0..CPUS)
        .map(|cpu| {
            let m = m.clone();
            thread::spawn(move || {
                let mut s = 0x2545_f491_4f6c_dd1du64 ^ u64::from(cpu + 1);
                for gen in 0..iters {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    let hot = 1000 + cpu * 4 + (gen % 4) as u32;
                    m.update(&hot.to_ne_bytes(), &val(hot, gen), update::ANY, cpu)
                        .unwrap_or_else(|e| panic!("hot {hot}: {e}"));
                    let k = (s % 96) as u32;
                    let key = k.to_ne_bytes();
                    match (s >> 32) % 5 {
                        0 | 1 => {
                            m.update(&key, &val(k, gen), update::ANY, cpu)
                                .unwrap_or_else(|e| panic!("update {k}: {e}"));
                        }
                        2 => {
                            let _ = m.delete(&key);
                        }
                        _ => {
                            if let Some(p) = m.lookup(&hot.to_ne_bytes(), cpu) {
                                // The pointer stays readable even if the
                                // element is recycled under us.
                                // SAFETY: 8-byte value, memory never unmapped.
                                let _ = unsafe { std::ptr::read_volatile(p as *const u64) };
                            }
                            if let Ok(v) = m.lookup_copy(&key) {
                                let v = u64::from_ne_bytes(v[..8].try_into().unwrap());
                                assert_eq!(v >> 40, u64::from(k), "value of another key");
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    check_consistent(&m);
    check_full_capacity(&m);
}

#[test]
fn concurrent_replace_churn_common_list() {
    replace_churn(lru(48, false), 40_000);
}

#[test]
fn concurrent_replace_churn_per_cpu_lists() {
    replace_churn(lru(48, true), 40_000);
}
