//! The bpf_conformance test vectors, read at test time through the crate's
//! own `.data` parser.

pub use bpfjet_isa::conformance::ConformanceTest as DataFile;

/// Every `.data` file, sorted by name. Panics when the vectors are missing:
/// a conformance test that finds nothing would pass while testing nothing.
pub fn data_files() -> Vec<DataFile> {
    bpfjet_isa::conformance::load_default()
}
