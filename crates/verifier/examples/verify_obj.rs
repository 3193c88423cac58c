//! Verify every program of an object: `cargo run -p bpfjet-verifier --example verify_obj -- OBJ [--unpriv]`.
use bpfjet_verifier::{verify, Policy, VerifyEnv};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let unpriv = args.iter().any(|a| a == "--unpriv");
    for path in args.iter().skip(1).filter(|a| !a.starts_with("--")) {
        let obj = bpfjet_obj::load_file(path).expect("load object");
        for p in &obj.programs {
            let insns = bpfjet_isa::decode_program(&p.insns).expect("decode");
            let mut env = VerifyEnv::new(&obj.maps);
            env.kfuncs = &obj.kfuncs;
            if unpriv {
                env.policy = Policy::Unprivileged;
            }
            let t = std::time::Instant::now();
            match verify(&insns, &env) {
                Ok(f) => println!(
                    "{path} {}: OK {} insns, processed {}, states {}, {:?}",
                    p.name,
                    insns.len(),
                    f.insns_processed,
                    f.states_stored,
                    t.elapsed()
                ),
                Err(e) => println!(
                    "{path} {}: REJECT ({} insns) {:?}\n{e}",
                    p.name,
                    insns.len(),
                    t.elapsed()
                ),
            }
        }
    }
}
