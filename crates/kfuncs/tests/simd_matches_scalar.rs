//! The vector paths give exactly the scalar results, on this machine's
//! features; and the scalar definitions are checked against direct
//! element-wise definitions.

use bpfjet_kfuncs::hash::{crc32c_scalar, crc32c_with};
use bpfjet_kfuncs::search::{scalar, Simd};
use bpfjet_kfuncs::{features, CpuFeatures};
use proptest::prelude::*;

fn simd() -> Simd {
    let f = features();
    if !f.avx2 {
        bpfjet_testsupport::report_skip(
            "this CPU has no AVX2, the vector search path is not exercised",
        );
    }
    Simd::with(f)
}

/// Buckets with many repeated values, so that searches hit.
fn bucket() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(0u8), Just(7u8), Just(0xffu8), any::<u8>()],
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn find_and_mask_agree(bytes in bucket(), key in any::<u64>(), pick in any::<usize>()) {
        let s = simd();
        // Half the time search for an element that is there.
        let k16 = if pick % 2 == 0 && bytes.len() >= 2 {
            let i = (pick / 2) % (bytes.len() / 2);
            u16::from_ne_bytes([bytes[2 * i], bytes[2 * i + 1]])
        } else {
            key as u16
        };
        prop_assert_eq!(s.find_eq(&bytes, k16), scalar::find_eq(&bytes, k16));
        prop_assert_eq!(s.mask_eq(&bytes, k16), scalar::mask_eq(&bytes, k16));
        prop_assert_eq!(s.find_eq(&bytes, key as u32), scalar::find_eq(&bytes, key as u32));
        prop_assert_eq!(s.mask_eq(&bytes, key as u32), scalar::mask_eq(&bytes, key as u32));
        prop_assert_eq!(s.find_eq(&bytes, key), scalar::find_eq(&bytes, key));
        prop_assert_eq!(s.mask_eq(&bytes, key), scalar::mask_eq(&bytes, key));
    }

    #[test]
    fn min_max_agree(bytes in bucket()) {
        let s = simd();
        prop_assert_eq!(s.min::<u16>(&bytes), scalar::min::<u16>(&bytes));
        prop_assert_eq!(s.max::<u16>(&bytes), scalar::max::<u16>(&bytes));
        prop_assert_eq!(s.min::<u32>(&bytes), scalar::min::<u32>(&bytes));
        prop_assert_eq!(s.max::<u32>(&bytes), scalar::max::<u32>(&bytes));
        prop_assert_eq!(s.argmin::<u32>(&bytes), scalar::argmin::<u32>(&bytes));
        prop_assert_eq!(s.argmax::<u16>(&bytes), scalar::argmax::<u16>(&bytes));
        prop_assert_eq!(s.argmin::<u64>(&bytes), scalar::argmin::<u64>(&bytes));
    }

    #[test]
    fn key_compare_agrees(a in prop::collection::vec(any::<u8>(), 32), flip in 0usize..40) {
        let s = simd();
        let mut b = a.clone();
        if flip < 32 {
            b[flip] ^= 1;
        }
        for n in [16, 32] {
            prop_assert_eq!(s.key_eq(&a[..n], &b[..n]), a[..n] == b[..n]);
        }
    }

    #[test]
    fn crc32c_hardware_matches_table(data in prop::collection::vec(any::<u8>(), 0..200), seed in any::<u32>()) {
        let f = features();
        prop_assert_eq!(crc32c_with(f, &data, seed), crc32c_scalar(&data, seed));
        prop_assert_eq!(crc32c_with(CpuFeatures::SCALAR, &data, seed), crc32c_scalar(&data, seed));
    }

    #[test]
    fn fused_multi_hash_matches_k_separate_hashes(
        key in prop::collection::vec(any::<u8>(), 1..40),
        k in 1u64..=8,
        width in 1usize..50,
    ) {
        use bpfjet_kfuncs::multihash::{bloom_set, bloom_test, cm_inc, cm_min, SEEDS};
        let f = features();
        let mut rows = vec![0u8; k as usize * width * 4];
        prop_assert_eq!(cm_inc(f, &key, &mut rows, k), 1);
        prop_assert_eq!(cm_inc(CpuFeatures::SCALAR, &key, &mut rows, k), 2);
        prop_assert_eq!(cm_min(f, &key, &rows, k), 2);
        // Exactly the k counters named by k separate CRC32C hashes moved.
        let mut expect = vec![0u8; rows.len()];
        for (row, &seed) in SEEDS[..k as usize].iter().enumerate() {
            let col = crc32c_scalar(&key, seed) as usize % width;
            let at = (row * width + col) * 4;
            expect[at..at + 4].copy_from_slice(&2u32.to_ne_bytes());
        }
        prop_assert_eq!(&rows, &expect);
        let mut bits = vec![0u8; width];
        prop_assert_eq!(bloom_test(f, &key, &bits, k), 0);
        prop_assert_eq!(bloom_set(f, &key, &mut bits, k), 0);
        prop_assert_eq!(bloom_set(CpuFeatures::SCALAR, &key, &mut bits, k), 1);
        prop_assert_eq!(bloom_test(f, &key, &bits, k), 1);
        prop_assert!(bits.iter().map(|b| b.count_ones()).sum::<u32>() as u64 <= k);
    }
}

#[test]
fn bad_hash_counts_and_tables_are_einval() {
    use bpfjet_kfuncs::multihash::{bloom_set, cm_inc};
    let f = features();
    let einval = 22u64.wrapping_neg();
    let mut rows = [0u8; 64];
    assert_eq!(cm_inc(f, b"k", &mut rows, 0), einval);
    assert_eq!(cm_inc(f, b"k", &mut rows, 9), einval);
    assert_eq!(cm_inc(f, b"k", &mut rows[..12], 4), einval);
    assert_eq!(bloom_set(f, b"k", &mut [], 1), einval);
    assert_eq!(rows, [0u8; 64]);
}

#[test]
fn crc32c_known_answer() {
    // The CRC-32C check value ("123456789", inverted in and out) from the
    // catalogue of parametrised CRCs, computed with the raw register.
    let raw = crc32c_scalar(b"123456789", !0);
    assert_eq!(!raw, 0xe306_9283);
    assert_eq!(crc32c_with(features(), b"123456789", !0), raw);
}

#[test]
fn xxh32_known_answers() {
    use bpfjet_kfuncs::hash::xxh32;
    // Reference values of the XXH32 specification's implementation.
    assert_eq!(xxh32(b"", 0), 0x02cc_5d05);
    assert_eq!(xxh32(b"a", 0), 0x550d_7456);
    assert_eq!(xxh32(b"abc", 0), 0x32d1_53ff);
    assert_eq!(
        xxh32(b"Nobody inspects the spammish repetition", 0),
        0xe229_3b2f
    );
}

#[test]
fn bit_scans_are_defined_at_zero() {
    use bpfjet_kfuncs::bits::*;
    assert_eq!(
        (ffs64(0), ffs64(1), ffs64(0x8000_0000_0000_0000)),
        (0, 1, 64)
    );
    assert_eq!((ctz32(0), ctz64(0), clz32(0), clz64(0)), (32, 64, 32, 64));
    assert_eq!(
        (clz32(1), popcount64(u64::MAX), popcount32(0xf0f0)),
        (31, 64, 8)
    );
}

#[test]
fn catalog_is_consistent() {
    use bpfjet_kfuncs::catalog::{by_name, by_symbol, KFUNCS};
    use bpfjet_verifier::proto::KfuncArg;
    for k in KFUNCS {
        assert_eq!(k.proto.name, k.name);
        assert!(
            k.c_decl.contains(&format!(" {}(", k.name))
                || k.c_decl.contains(&format!("*{}(", k.name)),
            "{}",
            k.c_decl
        );
        assert_eq!(by_name(k.name).map(|x| x.name), Some(k.name));
        assert_eq!(by_symbol(&k.symbol()).map(|x| x.name), Some(k.name));
        assert_eq!(KFUNCS.iter().filter(|x| x.name == k.name).count(), 1);
        // Every size follows a memory argument, every memory argument has one.
        for (i, a) in k.proto.args.iter().enumerate() {
            let mem = matches!(a, KfuncArg::Mem | KfuncArg::MutMem);
            let next = k.proto.args.get(i + 1);
            assert_eq!(
                mem,
                next == Some(&KfuncArg::Size),
                "{} arg {}",
                k.name,
                i + 1
            );
        }
        // The C declaration has as many parameters as the prototype.
        let params = k.c_decl.split('(').nth(1).unwrap().trim_end_matches(')');
        let declared = params
            .split(',')
            .filter(|p| !p.trim().is_empty() && p.trim() != "void")
            .count();
        let proto = k
            .proto
            .args
            .iter()
            .filter(|a| **a != KfuncArg::None)
            .count();
        assert_eq!(declared, proto, "{}", k.name);
    }
}

#[test]
fn header_declares_every_own_kfunc_as_the_catalog_does() {
    use bpfjet_kfuncs::{Origin, KFUNCS};
    let header = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/bpfjet_kfuncs.h"),
    )
    .unwrap();
    for k in KFUNCS.iter().filter(|k| k.origin == Origin::Bpfjet) {
        let decl = format!("extern {} __ksym;", k.c_decl);
        assert!(
            header.contains(&decl),
            "include/bpfjet_kfuncs.h lacks `{decl}`"
        );
    }
    let seeds = bpfjet_kfuncs::multihash::SEEDS
        .iter()
        .map(|s| format!("{s:#010x}"))
        .collect::<Vec<_>>();
    for s in seeds {
        assert!(header.contains(&s), "BPFJET_SEEDS lacks {s}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// eNetSTL's counter kfuncs hash 8 (XXH32) or 4 (fasthash32) seeds per
    /// vector; every row must get the scalar hash, for any input length
    /// (stripes, words and byte tails) and row count (groups and rest).
    #[test]
    fn enetstl_seeded_hashes_agree(
        data in prop::collection::vec(any::<u8>(), 0..80),
        seeds in prop::collection::vec(any::<u32>(), 0..20),
    ) {
        use bpfjet_kfuncs::enetstl::{hash_seeds_with, CntHash};
        for hash in [CntHash::Xxh32, CntHash::Fasthash32] {
            let mut vector = vec![0u32; seeds.len()];
            let mut scalar = vec![0u32; seeds.len()];
            hash_seeds_with(features(), hash, &data, &seeds, &mut vector);
            hash_seeds_with(CpuFeatures::SCALAR, hash, &data, &seeds, &mut scalar);
            prop_assert_eq!(&vector, &scalar, "{:?}", hash);
        }
    }

    /// `bpf_htss_sig_cmp`: the vector compare and the scalar one give the
    /// same byte mask, two bits per equal signature among the first 16.
    #[test]
    fn enetstl_htss_mask_agrees(sigs in bucket(), pick in any::<usize>()) {
        use bpfjet_kfuncs::enetstl::htss_sig_cmp_with;
        let sig = if sigs.len() >= 2 && pick % 2 == 0 {
            let i = (pick / 2) % (sigs.len() / 2);
            u16::from_ne_bytes([sigs[2 * i], sigs[2 * i + 1]])
        } else {
            pick as u16
        };
        let want = (0..sigs.len().min(32) / 2).fold(0u64, |m, i| {
            if u16::from_ne_bytes([sigs[2 * i], sigs[2 * i + 1]]) == sig { m | 3 << (2 * i) } else { m }
        });
        prop_assert_eq!(htss_sig_cmp_with(features(), &sigs, sig), want);
        prop_assert_eq!(htss_sig_cmp_with(CpuFeatures::SCALAR, &sigs, sig), want);
    }
}
