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
    /// Run an unmodified program (bpftool, a libbpf application) with its
    /// bpf() calls served by bpfjet: maps, verified XDP programs, pins.
    Exec(commands::exec::ExecArgs),
    /// XDP attachments made through `bpfjet exec` (netlink or links): their
    /// programs, data planes and counters.
    Status(commands::status::StatusArgs),
    /// The data plane of one attachment (started by the attaching process).
    #[command(hide = true)]
    ServeAttachment(commands::attachment::ServeAttachmentArgs),
    /// Run a dynamically linked program with an object's uprobes, uretprobes,
    /// syscall tracepoints and perf_event samplers attached inside it; print
    /// the maps at exit.
    Trace(commands::trace::TraceArgs),
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
        object_args: commands::object_args::ObjectArgs,
    },
    /// The bpf_conformance plugin protocol: program as hex on stdin, memory as
    /// argument, r0 as hex on stdout. The runner calls its plugin as
    /// `PLUGIN MEM OPTIONS... [--elf]`, so with `--plugin_path bpfjet
    /// --plugin_options conformance-plugin` the memory comes first: bpfjet
    /// accepts it there too.
    ConformancePlugin {
        /// Memory: each byte as two hex digits followed by two spaces.
        mem: Vec<String>,
        #[arg(long, default_value = "interp")]
        engine: String,
        /// The program on stdin is an ELF object (hex), entry function `main`.
        #[arg(long)]
        elf: bool,
    },
}

/// The bpf_conformance runner puts the memory argument before its plugin
/// options (`bpfjet MEM conformance-plugin --engine jit --elf`): move what
/// precedes `conformance-plugin` after it, where clap expects it.
fn runner_argv(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(at) = args.iter().position(|a| a == "conformance-plugin") else {
        return args;
    };
    // Only hex bytes ("11  22  "): never a subcommand or a file name.
    let is_memory = |m: &str| {
        m.split_whitespace()
            .all(|b| b.len() == 2 && b.bytes().all(|c| c.is_ascii_hexdigit()))
    };
    let before_is_memory = args[1..at]
        .iter()
        .all(|a| a.to_str().is_some_and(is_memory));
    if at > 1 && before_is_memory {
        let memory: Vec<_> = args.drain(1..at).collect();
        args.splice(2..2, memory);
    }
    args
}

/// Commands that print a lot end quietly, like other Unix tools, when the
/// reader of their output goes away (`bpfjet conformance -v DIR | head`):
/// the default SIGPIPE action instead of Rust's ignored SIGPIPE and a panic
/// on EPIPE. Not for `run` and `replace`, which talk over a Unix socket and
/// handle a peer that went away as an error.
fn exit_quietly_on_closed_stdout() {
    // SAFETY: setting a signal disposition to its default before any thread
    // starts has no memory-safety effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(runner_argv(std::env::args_os().collect()));
    if !matches!(cli.command, Command::Run(_) | Command::Replace(_)) {
        exit_quietly_on_closed_stdout();
    }
    // `run` and `map` document exit 1 for failures past argument parsing
    // (instance taken, missing map, I/O); the other commands use 2.
    let failure_code = match cli.command {
        Command::Run(_) | Command::Map(_) | Command::Replace(_) | Command::ServeAttachment(_) => 1,
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
        Command::ConformancePlugin { mem, engine, elf } => {
            // The runner passes no memory argument for tests without memory;
            // split plugin options may leave empty arguments.
            let mem = mem.join(" ");
            let input = if elf {
                commands::conformance::PluginInput::Elf
            } else {
                commands::conformance::PluginInput::Bytecode
            };
            commands::conformance::parse_engine(&engine)
                .and_then(|engine| commands::conformance::plugin(Some(mem.as_str()), engine, input))
        }
        Command::Verify {
            obj,
            prog,
            json,
            unprivileged,
            object_args,
        } => commands::verify::run(&obj, prog.as_deref(), json, unprivileged, &object_args),
        Command::Compile(args) => commands::compile::run(&args),
        Command::TestRun(args) => commands::test_run::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Map(args) => commands::map::run(&args),
        Command::Replace(args) => commands::replace::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Exec(args) => commands::exec::run(&args),
        Command::Status(args) => commands::status::run(&args),
        Command::ServeAttachment(args) => commands::attachment::run(&args),
        Command::Trace(args) => commands::trace::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bpfjet: {e:#}");
            ExitCode::from(failure_code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runner_argv;
    use std::ffi::OsString;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn runner_memory_first() {
        assert_eq!(
            runner_argv(argv(&["bpfjet", "11  22  ", "conformance-plugin", "--elf"])),
            argv(&["bpfjet", "conformance-plugin", "11  22  ", "--elf"])
        );
        assert_eq!(
            runner_argv(argv(&["bpfjet", "conformance-plugin", "--engine", "jit"])),
            argv(&["bpfjet", "conformance-plugin", "--engine", "jit"])
        );
        // Nothing to move when an option comes first.
        assert_eq!(
            runner_argv(argv(&["bpfjet", "--help", "conformance-plugin"])),
            argv(&["bpfjet", "--help", "conformance-plugin"])
        );
        assert_eq!(
            runner_argv(argv(&["bpfjet", "disasm", "x.o"])),
            argv(&["bpfjet", "disasm", "x.o"])
        );
        // A file that happens to be named like the subcommand.
        assert_eq!(
            runner_argv(argv(&["bpfjet", "verify", "conformance-plugin"])),
            argv(&["bpfjet", "verify", "conformance-plugin"])
        );
    }
}
