//! Load one corpus case into the kernel and print the verifier logs:
//! `cargo run -p bpfjet-verifier --example kernel_check -- tests/corpus/X.s [variant] [--unpriv]`.
#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let unpriv = args.iter().any(|a| a == "--unpriv");
    let variants = common::parse_case(std::path::Path::new(&args[1]));
    for v in variants {
        if args
            .get(2)
            .is_some_and(|n| !n.starts_with("--") && *n != v.name)
        {
            continue;
        }
        let (bytes, maps) = (v.bytes.clone(), v.maps.clone());
        let load = move || {
            use bpfjet_kernel::raw_load::{load_raw, RawLoadOptions};
            match load_raw(
                &bytes,
                &maps,
                &RawLoadOptions {
                    log_level: 2,
                    ..Default::default()
                },
            ) {
                Ok(p) => format!("ACCEPT\n{}", p.verifier_log),
                Err(e) => format!("REJECT {}\n{}", e.errno, e.verifier_log),
            }
        };
        let out = if unpriv {
            common::unprivileged(load).unwrap()
        } else {
            load()
        };
        let lines: Vec<&str> = out.lines().collect();
        println!("== {} {}", v.name, lines[0]);
        for l in lines
            .iter()
            .skip(1)
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            println!("  {l}");
        }
    }
}
