//! bpfjet runtime
