//! A program using bpf_spin_lock on BTF-described map values
//! (examples/verifier/spin_lock_counter.c): the obj crate finds the lock,
//! bpfjet's verifier accepts the program, and the verified program run by
//! the runtime gives the kernel's verdicts and map contents.

mod common;

use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::Path;

#[test]
fn spin_lock_counter_verified_and_runs_like_the_kernel() {
    let path = common::verifier_example("spin_lock_counter");
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
            bpfjet_testsupport::report_skip(format!(
                "kernel comparison ({why}); running bpfjet only"
            ));
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

/// bpfjet's verdict on the program of `path` (Ok, or the rejection message).
fn bpfjet_verdict(path: &Path, prog: &str) -> Result<(), String> {
    let obj = bpfjet_obj::load_file(path).unwrap();
    let p = obj.program(prog).unwrap();
    let insns = bpfjet_isa::decode_program(&p.insns).unwrap();
    let globals = obj.global_subprog_sigs(p);
    let mut env = bpfjet_verifier::VerifyEnv::new(&obj.maps);
    env.spin_locks = &obj.spin_locks;
    env.global_funcs = &globals;
    bpfjet_verifier::verify(&insns, &env)
        .map(|_| ())
        .map_err(|e| e.message)
}

/// A call to a global function under the lock is refused by the kernel; a
/// call to the same function made static is accepted. bpfjet must agree.
#[test]
fn global_call_under_lock_matches_kernel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = root.join("examples/verifier/spin_lock_global_call.c");
    let dir = std::env::temp_dir().join(format!("bpfjet-sgc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        bpfjet_testsupport::report_skip(format!("kernel side ({why})"));
    }
    for (define, accepted) in [("-DGLOBAL_BUMP", false), ("-DSTATIC_BUMP", true)] {
        let out = dir.join(format!("sgc{define}.o"));
        bpfjet_testsupport::Compile::file(&src)
            .arg(define)
            .object_at(&out);
        let ours = bpfjet_verdict(&out, "spin_lock_global_call");
        println!("{define}: bpfjet {ours:?}");
        assert_eq!(ours.is_ok(), accepted, "{define}: bpfjet {ours:?}");
        if !accepted {
            assert!(ours.unwrap_err().contains("global function calls"));
        }
        if kernel.is_ok() {
            let k = bpfjet_kernel::KernelObject::open(&out);
            let why = k
                .as_ref()
                .err()
                .and_then(|e| e.verifier_log())
                .unwrap_or("")
                .to_string();
            assert_eq!(k.is_ok(), accepted, "{define}: kernel {why}");
            if !accepted {
                assert!(why.contains("global function calls"), "{why}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
