//! Model-based tests: HASH against a BTreeMap with the kernel's rules, and
//! LPM_TRIE against a linear longest-prefix search.

use bpfjet_maps::spec::update;
use bpfjet_maps::{Map, MapOptions, MapSpec, MapType};
use proptest::prelude::*;
use std::collections::BTreeMap;

const CAP: usize = 8;

#[derive(Clone, Debug)]
enum Op {
    Update(u8, u8, u64),
    Delete(u8),
    Lookup(u8),
    NextKey(Option<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..16, any::<u8>(), 0u64..3).prop_map(|(k, v, f)| Op::Update(k, v, f)),
        2 => (0u8..16).prop_map(Op::Delete),
        2 => (0u8..16).prop_map(Op::Lookup),
        1 => proptest::option::of(0u8..16).prop_map(Op::NextKey),
    ]
}

fn key(k: u8) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0] = k;
    b[15] = k.wrapping_mul(7);
    b
}

proptest! {
    #[test]
    fn hash_matches_model(ops in proptest::collection::vec(op(), 1..200), prealloc in any::<bool>()) {
        let mut spec = MapSpec::new("h", MapType::Hash, 16, 4, CAP as u32);
        if !prealloc {
            spec.flags = bpfjet_maps::spec::flags::NO_PREALLOC;
        }
        let m = Map::create_anonymous(&spec, &MapOptions::with_cpus(2)).unwrap();
        let mut model: BTreeMap<[u8; 16], [u8; 4]> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Update(k, v, flags) => {
                    let (k, v) = (key(k), [v; 4]);
                    let exists = model.contains_key(&k);
                    let want = match flags {
                        update::NOEXIST if exists => Err(17),
                        update::EXIST if !exists => Err(2),
                        _ if !exists && model.len() == CAP => Err(7),
                        _ => Ok(()),
                    };
                    let got = m.update(&k, &v, flags, 0).map_err(|e| e.errno());
                    prop_assert_eq!(got, want);
                    if want.is_ok() {
                        model.insert(k, v);
                    }
                }
                Op::Delete(k) => {
                    let k = key(k);
                    let want = if model.remove(&k).is_some() { Ok(()) } else { Err(2) };
                    prop_assert_eq!(m.delete(&k).map_err(|e| e.errno()), want);
                }
                Op::Lookup(k) => {
                    let k = key(k);
                    let got = m.lookup_copy(&k).ok();
                    prop_assert_eq!(got, model.get(&k).map(|v| v.to_vec()));
                    prop_assert_eq!(m.lookup(&k, 1).is_some(), model.contains_key(&k));
                }
                Op::NextKey(k) => {
                    let k = k.map(key);
                    match m.get_next_key(k.as_ref().map(|k| &k[..])) {
                        Ok(n) => {
                            let n: [u8; 16] = n.try_into().unwrap();
                            prop_assert!(model.contains_key(&n));
                            prop_assert!(Some(n) != k);
                        }
                        Err(e) => {
                            prop_assert_eq!(e.errno(), 2);
                            // ENOENT only at the end of a walk or on an empty map.
                            prop_assert!(model.is_empty() || k.is_some_and(|k| model.contains_key(&k)));
                        }
                    }
                }
            }
        }
        // A full get_next_key walk visits exactly the model's keys.
        let mut seen = BTreeMap::new();
        let mut k: Option<Vec<u8>> = None;
        while let Ok(n) = m.get_next_key(k.as_deref()) {
            prop_assert!(seen.insert(n.clone(), ()).is_none(), "key visited twice");
            k = Some(n);
        }
        prop_assert_eq!(seen.len(), model.len());
        prop_assert_eq!(m.element_count(), Some(model.len() as u32));
    }
}

/// Whether the first `plen` bits of `a` and `b` agree.
fn prefix_eq(a: &[u8], b: &[u8], plen: u32) -> bool {
    (0..plen as usize).all(|i| (a[i / 8] ^ b[i / 8]) >> (7 - i % 8) & 1 == 0)
}

fn lpm_key(plen: u32, data: &[u8]) -> Vec<u8> {
    let mut k = plen.to_ne_bytes().to_vec();
    k.extend_from_slice(data);
    k
}

/// Data bytes built from two random bytes, so that prefixes of random
/// lengths often share bits with the probed addresses.
fn lpm_data(n: usize, a: u8, b: u8) -> Vec<u8> {
    (0..n).map(|i| if i % 3 == 2 { b } else { a }).collect()
}

proptest! {
    // Data sizes 4 and 16 take the IPv4/IPv6 fixed-size paths, 8 the
    // generic one; 16 also spans several words of the present-lengths
    // bitmap.
    #[test]
    fn lpm_matches_model(
        data_size in prop_oneof![Just(4usize), Just(8), Just(16)],
        ops in proptest::collection::vec(
            (0u8..3, any::<u32>(), 0u8..4, 0u8..4, any::<u8>()), 1..150),
    ) {
        let max_plen = data_size as u32 * 8;
        let mut spec = MapSpec::new("t", MapType::LpmTrie, 4 + data_size as u32, 1, 32);
        spec.flags = bpfjet_maps::spec::flags::NO_PREALLOC;
        let m = Map::create_anonymous(&spec, &MapOptions::default()).unwrap();
        // (plen, data) -> value; data kept as last written.
        let mut model: Vec<(u32, Vec<u8>, u8)> = Vec::new();
        for (kind, plen, a, b, v) in ops {
            let plen = plen % (max_plen + 1);
            let data = lpm_data(data_size, a.wrapping_mul(0x55), b.wrapping_mul(0x33));
            let key = lpm_key(plen, &data);
            let pos = model.iter().position(|(l, d, _)| *l == plen && prefix_eq(d, &data, plen));
            match kind {
                0 => {
                    let r = m.update(&key, &[v], 0, 0);
                    match pos {
                        Some(i) => { prop_assert!(r.is_ok()); model[i] = (plen, data, v); }
                        None if model.len() == 32 => prop_assert!(r.is_err()),
                        None => { prop_assert!(r.is_ok()); model.push((plen, data, v)); }
                    }
                }
                1 => {
                    let r = m.delete(&key);
                    prop_assert_eq!(r.is_ok(), pos.is_some());
                    if let Some(i) = pos { model.remove(i); }
                }
                _ => {
                    let want = model
                        .iter()
                        .filter(|(l, d, _)| *l <= plen && prefix_eq(d, &data, *l))
                        .max_by_key(|(l, _, _)| *l)
                        .map(|(_, _, v)| vec![*v]);
                    prop_assert_eq!(m.lookup_copy(&key).ok(), want.clone());
                    let got = m.lookup(&key, 0).map(|p| unsafe { *p });
                    prop_assert_eq!(got.map(|v| vec![v]), want);
                }
            }
        }
        prop_assert_eq!(m.element_count(), Some(model.len() as u32));
    }
}
