//! bpfjet verifier
