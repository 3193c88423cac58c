//! Malformed input must produce `Err` (or a valid `Ok`), never a panic:
//! truncations and bit flips of real objects.

mod common;

use common::compile;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn try_load(bytes: &[u8]) {
    // Any outcome but a panic is acceptable; programs that load must still
    // be well-formed enough to walk.
    if let Ok(obj) = bpfjet_obj::load(bytes) {
        for p in &obj.programs {
            let _ = bpfjet_isa::decode_program(&p.insns);
        }
    }
}

fn mutate_all(name: &str, seed: u64) {
    let bytes = compile(name);
    assert!(bpfjet_obj::load(&bytes).is_ok());
    // Truncation at every length (coarser steps past the headers).
    let mut len = 0;
    while len < bytes.len() {
        try_load(&bytes[..len]);
        len += if len < 512 { 1 } else { 7 };
    }
    let mut rng = Rng(seed);
    for _ in 0..3000 {
        let mut m = bytes.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(m.len());
            m[i] ^= 1 << rng.below(8);
        }
        try_load(&m);
    }
    // Random bytes over the ELF and section headers and the BTF region.
    for _ in 0..1000 {
        let mut m = bytes.clone();
        let i = rng.below(m.len());
        m[i] = rng.next() as u8;
        try_load(&m);
    }
}

#[test]
fn mutated_calls_object() {
    mutate_all("calls", 0x1234_5678);
}

#[test]
fn mutated_maps_object() {
    mutate_all("maps_btf", 0x9abc_def0);
}

#[test]
fn mutated_globals_object() {
    mutate_all("globals", 0x0bad_cafe);
}

#[test]
fn mutated_kfunc_and_legacy_objects() {
    mutate_all("kfunc", 42);
    mutate_all("legacy", 43);
}

#[test]
fn mutated_core_object() {
    mutate_all("core", 0xc0_2e);
}

/// Every byte of the `.BTF.ext` CO-RE records, set to values that hit the
/// edges (out-of-range type ids, string offsets, kinds, misaligned slots):
/// each load is an error or a well-formed program, never a panic.
#[test]
fn mutated_core_relo_records() {
    use object::{Object as _, ObjectSection as _};
    let bytes = compile("core");
    let file = object::File::parse(&*bytes).unwrap();
    let ext = file.section_by_name(".BTF.ext").expect(".BTF.ext");
    let (start, _) = ext.file_range().unwrap();
    let data = ext.data().unwrap();
    let word = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    let (hdr_len, core_off, core_len) = (word(4), word(24), word(28));
    assert!(core_len > 0, "core.c has CO-RE relocations");
    let region =
        start as usize + hdr_len + core_off..start as usize + hdr_len + core_off + core_len;
    let mut errors = 0;
    for i in region {
        for value in [0u8, 1, 4, 0x7f, 0x80, 0xff] {
            let mut m = bytes.clone();
            m[i] = value;
            match bpfjet_obj::load(&m) {
                Ok(obj) => {
                    for p in &obj.programs {
                        let _ = bpfjet_isa::decode_program(&p.insns);
                    }
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    errors += 1;
                }
            }
        }
    }
    assert!(errors > 0, "no mutation of the CO-RE records was refused");
}
