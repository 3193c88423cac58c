//! One module per subcommand.
pub mod asm;
pub mod conformance;
pub mod disasm;
pub mod test_run;
pub mod verify;
