//! The NF corpus (examples/xdp, built to build/examples/xdp/*.o) must be
//! accepted by bpfjet and by the kernel; prints verification and load times.

mod common;

use bpfjet_verifier::{verify, VerifyEnv};
use std::time::Instant;

#[test]
fn nf_corpus_accepted_by_bpfjet_and_kernel() {
    let objects = common::nf_objects();
    let kernel = bpfjet_kernel::kernel_available();
    if let Err(why) = &kernel {
        bpfjet_testsupport::report_skip(format!("kernel side of the NF corpus ({why})"));
    }
    let mut failures = Vec::new();
    let mut programs = 0;
    for path in &objects {
        let obj = bpfjet_obj::load_file(path).expect("load object");
        for prog in &obj.programs {
            programs += 1;
            let insns = bpfjet_isa::decode_program(&prog.insns).expect("decode");
            let mut env = VerifyEnv::new(&obj.maps);
            env.kfuncs = &obj.kfuncs;
            let t = Instant::now();
            let result = verify(&insns, &env);
            let ours = t.elapsed();
            match &result {
                Ok(f) => println!(
                    "{:<22} {:<14} {:>5} insns  bpfjet accept in {:>8.2?} (processed {}, states {})",
                    path.file_name().unwrap().to_string_lossy(),
                    prog.name,
                    insns.len(),
                    ours,
                    f.insns_processed,
                    f.states_stored
                ),
                Err(e) => failures.push(format!("{} {}: bpfjet rejects:\n{e}", path.display(), prog.name)),
            }
        }
        if kernel.is_ok() {
            let t = Instant::now();
            match bpfjet_kernel::KernelObject::open(path) {
                Ok(_) => println!(
                    "{:<22} kernel accepts the object in {:.2?}",
                    path.file_name().unwrap().to_string_lossy(),
                    t.elapsed()
                ),
                Err(e) => failures.push(format!("{}: kernel rejects: {e}", path.display())),
            }
        }
    }
    println!("{} objects, {programs} programs", objects.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
