//! Concurrency: no lost updates through value pointers, no crashes or
//! cross-key corruption under concurrent update/delete/lookup. Bounded by
//! iteration counts, never by time.

use bpfjet_maps::spec::update;
use bpfjet_maps::{Map, MapOptions, MapSpec, MapType};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

const THREADS: u32 = 4;

fn map(t: MapType, k: u32, v: u32, n: u32) -> Arc<Map> {
    Arc::new(
        Map::create_anonymous(
            &MapSpec::new("s", t, k, v, n),
            &MapOptions::with_cpus(THREADS),
        )
        .unwrap(),
    )
}

/// Tiny deterministic PRNG per thread.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn atomic_counters_through_lookup_pointers() {
    let arr = map(MapType::Array, 4, 8, 4);
    let hash = map(MapType::Hash, 4, 8, 64);
    hash.update_elem(&5u32.to_ne_bytes(), &0u64.to_ne_bytes(), 0)
        .unwrap();
    const N: u64 = 20_000;
    let hs: Vec<_> = (0..THREADS)
        .map(|cpu| {
            let (arr, hash) = (arr.clone(), hash.clone());
            thread::spawn(move || {
                for i in 0..N {
                    let p = arr.lookup(&1u32.to_ne_bytes(), cpu).unwrap();
                    // SAFETY: 8-aligned 8-byte value in shared memory;
                    // the program would use BPF_ATOMIC_ADD here.
                    unsafe { (*(p as *const AtomicU64)).fetch_add(1, Ordering::Relaxed) };
                    let q = hash.lookup(&5u32.to_ne_bytes(), cpu).unwrap();
                    // SAFETY: as above; key 5 is never replaced.
                    unsafe { (*(q as *const AtomicU64)).fetch_add(1, Ordering::Relaxed) };
                    // Churn other keys in the same table.
                    let k = (cpu * 1000 + (i % 16) as u32 + 10).to_ne_bytes();
                    let _ = hash.update(&k, &i.to_ne_bytes(), update::ANY, cpu);
                    if i % 3 == 0 {
                        let _ = hash.delete(&k);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let total = N * THREADS as u64;
    assert_eq!(
        arr.lookup_copy(&1u32.to_ne_bytes()).unwrap(),
        total.to_ne_bytes()
    );
    assert_eq!(
        hash.lookup_copy(&5u32.to_ne_bytes()).unwrap(),
        total.to_ne_bytes()
    );
}

fn churn(m: Arc<Map>, keys: u64, iters: u64) {
    let hs: Vec<_> = (0..THREADS)
        .map(|cpu| {
            let m = m.clone();
            thread::spawn(move || {
                let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (cpu as u64 + 1);
                for _ in 0..iters {
                    let r = xorshift(&mut s);
                    let k = (r % keys) as u32;
                    let key = k.to_ne_bytes();
                    let val = [k as u8; 8];
                    match (r >> 32) % 4 {
                        0 | 1 => {
                            let _ = m.update(&key, &val, update::ANY, cpu);
                        }
                        2 => {
                            let _ = m.delete(&key);
                        }
                        _ => {
                            if let Ok(v) = m.lookup_copy(&key) {
                                assert_eq!(v, val, "value of another key under {k}");
                            }
                            if let Some(p) = m.lookup(&key, cpu) {
                                // A data-plane pointer must stay readable.
                                // SAFETY: 8-byte value, memory never unmapped.
                                let _ = unsafe { std::ptr::read_volatile(p) };
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
    let n = m.element_count().unwrap();
    assert!(n <= m.max_entries(), "{n} > {}", m.max_entries());
    let entries = m.entries().unwrap();
    assert_eq!(entries.len() as u32, n, "count matches the chains");
    for e in entries {
        assert_eq!(e.values[0], [e.key[0]; 8]);
    }
}

#[test]
fn concurrent_hash_churn() {
    churn(map(MapType::Hash, 4, 8, 32), 64, 30_000);
}

#[test]
fn concurrent_lru_churn() {
    churn(map(MapType::LruHash, 4, 8, 32), 128, 30_000);
}

#[test]
fn concurrent_percpu_lru_churn() {
    let mut s = MapSpec::new("s", MapType::LruHash, 4, 8, 32);
    s.flags = bpfjet_maps::spec::flags::NO_COMMON_LRU;
    let m = Arc::new(Map::create_anonymous(&s, &MapOptions::with_cpus(THREADS)).unwrap());
    churn(m, 128, 30_000);
}

#[test]
fn concurrent_ringbuf_producers() {
    let m = map(MapType::Ringbuf, 0, 0, 1 << 16);
    let mut c = bpfjet_maps::RingbufConsumer::new(m.clone()).unwrap();
    const PER: u32 = 5_000;
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                let mut sent = 0;
                while sent < PER {
                    if m.ringbuf_output(&[t as u8; 24], 0).is_ok() {
                        sent += 1;
                    } else {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let mut counts = [0u32; THREADS as usize];
    let mut bad = 0;
    while counts.iter().sum::<u32>() < PER * THREADS {
        c.poll(|r| {
            if r.len() != 24 || r.iter().any(|&b| b != r[0]) {
                bad += 1;
            } else {
                counts[r[0] as usize] += 1;
            }
        });
        assert_eq!(bad, 0);
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(counts, [PER; THREADS as usize]);
}
