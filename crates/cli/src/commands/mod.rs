//! One module per subcommand.
pub mod asm;
pub mod bench;
pub mod compile;
pub mod conformance;
pub mod conformance_elf;
pub mod disasm;
pub mod exec;
pub mod map;
pub mod object_args;
pub mod replace;
pub mod run;
pub mod test_run;
pub mod trace;
pub mod verify;
