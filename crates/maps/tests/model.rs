//! Model-based test: HASH against a BTreeMap with the kernel's rules.

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
