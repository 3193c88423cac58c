//! bpfjet jit
