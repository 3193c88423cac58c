//! bpfjet obj
