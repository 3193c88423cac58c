//! `bpfjet`: the command-line contract of DESIGN.md.

mod commands;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "bpfjet",
    version,
    about = "Userspace eBPF runtime and optimizing compiler for network functions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Disassemble a BPF ELF object (every program) or a raw instruction file.
    Disasm {
        /// ELF object or raw little-endian instruction bytes.
        file: PathBuf,
        /// Print in the conformance assembler syntax instead of llvm-objdump's.
        #[arg(long)]
        asm_syntax: bool,
    },
    /// Assemble the conformance-suite text syntax into raw instruction bytes.
    Asm {
        file: PathBuf,
        /// Output file (default: hex text on stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run every `.data` test of a bpf_conformance directory; prints "N passed, M failed".
    Conformance {
        dir: PathBuf,
        #[arg(long, default_value = "interp")]
        engine: String,
        /// Print every test's outcome, not only failures.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Compile an object's XDP programs ahead of time into one artifact that
    /// `test-run --aot` runs without LLVM.
    Compile(commands::compile::CompileArgs),
    /// Run an XDP program on one packet, like the kernel's BPF_PROG_TEST_RUN.
    TestRun(commands::test_run::TestRunArgs),
    /// Run an XDP program on a packet source (pcap, generator, AF_XDP) until it
    /// ends, --duration elapses or Ctrl-C; maps published under --name.
    Run(commands::run::RunArgs),
    /// Read and write the maps of a running instance from another process.
    Map(commands::map::MapArgs),
    /// Hot-swap the program of a running instance between batches, keeping
    /// the maps whose name and layout are unchanged.
    Replace(commands::replace::ReplaceArgs),
    /// Benchmark one program side by side on the kernel, the interpreter and the JIT.
    Bench(commands::bench::BenchArgs),
    /// Run bpfjet's verifier on an object's XDP programs: exit 0 accepted, 1 rejected
    /// (instruction, disassembly, source line, rule and register state on stderr).
    Verify {
        obj: PathBuf,
        #[arg(long)]
        prog: Option<String>,
        #[arg(long)]
        json: bool,
        /// Apply the kernel's policy for loaders without CAP_BPF/CAP_PERFMON.
        #[arg(long)]
        unprivileged: bool,
        #[command(flatten)]
        core: commands::object_args::CoreArgs,
    },
    /// The bpf_conformance plugin protocol: program as hex on stdin, memory as argument.
    ConformancePlugin {
        /// Memory: each byte as two hex digits followed by two spaces.
        mem: Option<String>,
        #[arg(long, default_value = "interp")]
        engine: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `run` and `map` document exit 1 for failures past argument parsing
    // (instance taken, missing map, I/O); the other commands use 2.
    let failure_code = match cli.command {
        Command::Run(_) | Command::Map(_) | Command::Replace(_) => 1,
        _ => 2,
    };
    let result = match cli.command {
        Command::Disasm { file, asm_syntax } => commands::disasm::run(&file, asm_syntax),
        Command::Asm { file, output } => commands::asm::run(&file, output.as_deref()),
        Command::Conformance {
            dir,
            engine,
            verbose,
        } => commands::conformance::run(&dir, &engine, verbose),
        Command::ConformancePlugin { mem, engine } => commands::conformance::parse_engine(&engine)
            .and_then(|engine| commands::conformance::plugin(mem.as_deref(), engine)),
        Command::Verify {
            obj,
            prog,
            json,
            unprivileged,
            core,
        } => commands::verify::run(&obj, prog.as_deref(), json, unprivileged, &core),
        Command::Compile(args) => commands::compile::run(&args),
        Command::TestRun(args) => commands::test_run::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Map(args) => commands::map::run(&args),
        Command::Replace(args) => commands::replace::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bpfjet: {e:#}");
            ExitCode::from(failure_code)
        }
    }
}
