//! A program using bpf_spin_lock on BTF-described map values
//! (examples/verifier/spin_lock_counter.c): the obj crate finds the lock,
//! bpfjet's verifier accepts the program, and the verified program run by
//! the runtime gives the kernel's verdicts and map contents.

use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::Path;

#[test]
fn spin_lock_counter_verified_and_runs_like_the_kernel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = std::process::Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("examples"))
        .arg("verifier")
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "make -C examples verifier failed"
    );
    let path = root.join("build/examples/verifier/spin_lock_counter.o");
    let obj = bpfjet_obj::load_file(&path).unwrap();
    for (name, off) in [("totals", 0), ("by_len", 0), ("last", 8)] {
        let i = obj.map_index(name).unwrap();
        assert_eq!(obj.spin_locks[i], Some(off), "lock offset of {name}");
    }

    // Verified load (ObjectOptions::default() runs bpfjet's verifier).
    let ours = LoadedObject::load(&obj, &ObjectOptions::default())
        .unwrap_or_else(|e| panic!("bpfjet refuses spin_lock_counter: {e}"));
    assert!(ours.verified("spin_lock_counter").unwrap().is_some());

    let kernel = match bpfjet_kernel::kernel_available() {
        Ok(()) => Some(bpfjet_kernel::KernelObject::open(&path).expect("kernel load")),
        Err(why) => {
            println!("SKIPPED: kernel comparison ({why}); running bpfjet only");
            None
        }
    };
    let mut verdicts = Vec::new();
    for (i, len) in [60usize, 200, 60, 64, 130, 60, 200, 200].iter().enumerate() {
        let pkt: Vec<u8> = (0..*len).map(|b| (b * 7 + i) as u8).collect();
        let mine = ours
            .test_run("spin_lock_counter", &pkt, &TestRunOptions::default())
            .expect("bpfjet test run");
        assert!(mine.notes.is_empty(), "runtime clean-up: {:?}", mine.notes);
        verdicts.push(mine.retval);
        if let Some(k) = &kernel {
            let theirs = k
                .test_run("spin_lock_counter", &pkt, 1, Some(0))
                .expect("kernel test run");
            assert_eq!(mine.retval, theirs.retval, "packet {i} ({len} bytes)");
        }
    }
    // 60-byte class: packets 1, 2, 3 -> the third is dropped (XDP_DROP = 1).
    assert_eq!(verdicts, vec![2, 2, 2, 1, 2, 2, 1, 2], "verdicts");
    if let Some(k) = &kernel {
        assert_eq!(
            ours.dump_state().unwrap(),
            k.dump_maps().unwrap(),
            "maps differ from the kernel"
        );
    }
}
