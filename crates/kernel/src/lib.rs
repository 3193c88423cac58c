//! bpfjet kernel
