//! Assembler for the conformance-suite text syntax (placeholder).
