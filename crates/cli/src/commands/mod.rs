//! One module per subcommand.
pub mod asm;
pub mod attachment;
pub mod bench;
pub mod compile;
pub mod conformance;
pub mod conformance_elf;
pub mod deployment;
pub mod disasm;
pub mod exec;
pub mod map;
pub mod object_args;
pub mod replace;
pub mod run;
pub mod status;
pub mod test_run;
pub mod trace;
mod trace_pid;
pub mod verify;
