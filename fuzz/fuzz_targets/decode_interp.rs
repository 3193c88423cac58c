//! Random bytes → decoder → loader → bounds-checked interpreter with an
//! instruction budget. Every stage may refuse or fault; none may crash.
//! `cargo test -p bpfjet-runtime` runs the same property with proptest
//! (crates/runtime/tests/fuzz_decode_interp.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = bpfjet_runtime::fuzzing::decode_and_run(bytes);
});
