//! The LLVM side of compilation: target selection, verification, the
//! optimization pipeline and machine-code generation.

use crate::error::JitError;
use crate::options::{CpuTarget, JitOptions, OptLevel};
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::OptimizationLevel;
use std::sync::OnceLock;

/// The CPU and features code is generated for (part of the cache key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TargetSpec {
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

/// LLVM's process-wide options, set once before the first compile.
///
/// `-disable-x86-domain-reassignment`: on AVX-512 hosts that x86 pass
/// dominates code generation of long branchy functions (two thirds of llc's
/// time on a 2000-instruction program) and buys nothing for scalar BPF code.
const LLVM_ARGS: &[&str] = &["bpfjet", "-disable-x86-domain-reassignment"];

fn init_native() -> Result<(), JitError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default())?;
        let args: Vec<std::ffi::CString> = LLVM_ARGS
            .iter()
            .filter_map(|a| std::ffi::CString::new(*a).ok())
            .collect();
        let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: argv holds NUL-terminated strings that outlive the call;
        // the option is registered by the x86 target initialized above, and
        // this runs once, before any other LLVM use of this crate.
        unsafe {
            inkwell::llvm_sys::support::LLVMParseCommandLineOptions(
                argv.len() as i32,
                argv.as_ptr(),
                std::ptr::null(),
            );
        }
        Ok(())
    })
    .clone()
    .map_err(JitError::Target)
}

pub(crate) fn target_spec(cpu: &CpuTarget) -> Result<TargetSpec, JitError> {
    init_native()?;
    let triple = TargetMachine::get_default_triple()
        .as_str()
        .to_string_lossy()
        .into_owned();
    let (cpu, features) = match cpu {
        CpuTarget::Host => (
            TargetMachine::get_host_cpu_name().to_string(),
            TargetMachine::get_host_cpu_features().to_string(),
        ),
        CpuTarget::Portable => {
            let cpu = if triple.starts_with("x86_64") {
                "x86-64"
            } else {
                "generic"
            };
            (cpu.to_string(), String::new())
        }
        CpuTarget::Named { cpu, features } => (cpu.clone(), features.clone()),
    };
    Ok(TargetSpec {
        triple,
        cpu,
        features,
    })
}

fn codegen_level(level: OptLevel) -> OptimizationLevel {
    match level {
        OptLevel::O0 => OptimizationLevel::None,
        OptLevel::O1 => OptimizationLevel::Less,
        OptLevel::O2 => OptimizationLevel::Default,
        OptLevel::O3 => OptimizationLevel::Aggressive,
    }
}

pub(crate) fn target_machine(
    spec: &TargetSpec,
    opts: &JitOptions,
) -> Result<TargetMachine, JitError> {
    init_native()?;
    let triple = inkwell::targets::TargetTriple::create(&spec.triple);
    let target = Target::from_triple(&triple).map_err(|e| JitError::Target(e.to_string()))?;
    target
        .create_target_machine(
            &triple,
            &spec.cpu,
            &spec.features,
            codegen_level(opts.opt_level),
            // Position-independent, small code model: the loader places the
            // object anywhere and reaches the trampolines through stubs.
            RelocMode::PIC,
            CodeModel::Small,
        )
        .ok_or_else(|| JitError::Target(format!("no target machine for {spec:?}")))
}

/// Run LLVM's verifier on every function, naming the first bad one.
pub(crate) fn verify(module: &Module<'_>) -> Result<(), JitError> {
    for f in module.get_functions() {
        if f.count_basic_blocks() > 0 && !f.verify(false) {
            let message = module
                .verify()
                .err()
                .map(|m| m.to_string())
                .unwrap_or_else(|| "invalid function".into());
            return Err(JitError::Verify {
                function: f.get_name().to_string_lossy().into_owned(),
                message,
            });
        }
    }
    module.verify().map_err(|m| JitError::Verify {
        function: "<module>".into(),
        message: m.to_string(),
    })
}

/// The new-pass-manager pipeline for `level`. Registers are promoted (and
/// the dead frame-pointer arithmetic they leave removed) before the standard
/// pipeline, so SROA's first run already sees which stacks never escape.
pub(crate) fn pipeline_text(level: OptLevel) -> &'static str {
    match level {
        OptLevel::O0 => "function(mem2reg,adce)",
        OptLevel::O1 => "function(mem2reg,adce),default<O1>",
        OptLevel::O2 => "function(mem2reg,adce),default<O2>",
        OptLevel::O3 => "function(mem2reg,adce),default<O3>",
    }
}

pub(crate) fn optimize(
    module: &Module<'_>,
    machine: &TargetMachine,
    level: OptLevel,
) -> Result<(), JitError> {
    let options = PassBuilderOptions::create();
    module
        .run_passes(pipeline_text(level), machine, options)
        .map_err(|e| JitError::Pipeline(e.to_string()))
}

/// Give the module the machine's triple and data layout (before optimizing,
/// so that the passes know the target).
pub(crate) fn configure(module: &Module<'_>, machine: &TargetMachine) {
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
}

pub(crate) fn emit_object(
    module: &Module<'_>,
    machine: &TargetMachine,
) -> Result<Vec<u8>, JitError> {
    machine
        .write_to_memory_buffer(module, FileType::Object)
        .map(|buf| buf.as_slice().to_vec())
        .map_err(|e| JitError::Codegen(e.to_string()))
}

/// Number of IR instructions in the module's function bodies.
pub(crate) fn ir_instruction_count(module: &Module<'_>) -> usize {
    module
        .get_functions()
        .flat_map(|f| f.get_basic_block_iter())
        .map(|bb| bb.get_instructions().count())
        .sum()
}
