//! Tracing objects on native code: [`load_tracing`] loads a
//! [`TracingObject`] and installs the JIT's code for each of its tracing
//! programs, so [`TracingObject::run`] runs native code. The programs are
//! compiled from the form bpfjet's verifier accepted; the helpers every
//! program type shares are inlined as for XDP (map lookups as address
//! arithmetic or key-size-specialised calls, updates, deletes, ring-buffer
//! reserve/submit, the CPU id, the clock, `bpf_loop`: see `lift::inline`),
//! the per-thread map operations of internalised hand-off maps are direct
//! calls (`crate::thread_maps`), `bpf_get_current_pid_tgid` is a direct
//! call to the runtime's per-thread cache, the other tracing helpers go
//! through the trampoline to the runtime's; context loads of `pt_regs` and the
//! tracepoint records are plain loads.

use crate::object::{CompiledPrograms, ObjectError};
use crate::options::JitOptions;
use crate::program::JitProgram;
use bpfjet_obj::Object;
use bpfjet_runtime::tracing::{NativeEntry, TracingEnv, TracingObject, TracingOptions};
use bpfjet_runtime::{Fault, LoadedObject, ObjectOptions, RunState};
use std::any::Any;
use std::sync::Arc;

impl NativeEntry for JitProgram {
    fn run_native(
        &self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        ctx: u64,
    ) -> Result<u64, Fault> {
        self.run(state, user, &[ctx])
    }

    fn run_tracing(
        &self,
        state: &mut RunState,
        env: &mut TracingEnv,
        ctx: u64,
    ) -> Result<u64, Fault> {
        JitProgram::run_tracing(self, state, env, ctx)
    }
}

/// Load `obj` as [`TracingObject::load`] does and compile every tracing
/// program with the JIT; a program that fails to compile is an error.
pub fn load_tracing(
    obj: &Object,
    opts: &TracingOptions,
    jit: &JitOptions,
) -> Result<TracingObject, ObjectError> {
    let loaded = LoadedObject::load(
        obj,
        &ObjectOptions {
            ncpus: opts.ncpus,
            unverified: false,
            instance_name: opts.instance_name.clone(),
            state: opts.state.clone(),
            fib: None,
        },
    )?;
    // Wrap first: maps kept per thread have their calls rewritten then,
    // and the JIT compiles the rewritten form.
    let mut tracing = TracingObject::from_loaded(loaded, opts)?;
    let compiled = CompiledPrograms::compile(tracing.loaded(), jit);
    let names: Vec<String> = tracing
        .programs()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    for name in names {
        let native = compiled.program(&name)?.clone();
        tracing.install_native(&name, Arc::new(native))?;
    }
    Ok(tracing)
}
