//! Random bytes → the object loader: ELF, BTF and .BTF.ext parsing, map
//! definitions, linking and CO-RE relocation (against bpfjet's context
//! types and the kernel BTF, or against the input itself read as a target
//! BTF). Every stage may refuse; none may crash, and every program it
//! returns must decode. `cargo test -p bpfjet-obj --test malformed` checks
//! the same property on mutations of compiled objects.
#![no_main]

use bpfjet_obj::{Btf, KernelBtf, TargetBtf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(obj) = bpfjet_obj::load_with(bytes, &KernelBtf::Running) {
        for p in &obj.programs {
            let _ = bpfjet_isa::decode_program(&p.insns);
        }
    }
    // The same bytes as a target BTF: indexing it must not crash either.
    if let Ok(btf) = Btf::parse(bytes) {
        let target = TargetBtf::new(btf, "fuzz input");
        let _ = target.btf().types().len();
    }
});
