//! The environment of one program of a loaded BPF object: everything the
//! object file tells the verifier beyond the instructions (maps, kfunc
//! names, spin-lock offsets from BTF, global functions, source lines for
//! messages). One place, so that `bpfjet verify` and the runtime's loader
//! verify against exactly the same facts.

use crate::env::{Policy, VerifyEnv};
use bpfjet_obj::{Object, Program};
use std::collections::BTreeMap;

/// What [`VerifyEnv`] borrows for a program, owned.
#[derive(Clone, Debug)]
pub struct ObjectProgramEnv {
    lines: BTreeMap<usize, String>,
    globals: Vec<usize>,
    global_refusals: Vec<(usize, String)>,
    prog_type: Option<bpfjet_obj::ProgType>,
    /// A `tp_btf` program's arguments from the running kernel's BTF, or
    /// why they are not known.
    tp_args: Vec<bpfjet_obj::TpArg>,
    kernel_structs: Vec<bpfjet_obj::KernelStruct>,
    tp_name: String,
    tp_error: Option<String>,
}

impl ObjectProgramEnv {
    pub fn new(object: &Object, program: &Program) -> ObjectProgramEnv {
        let lines = program
            .line_info
            .iter()
            .map(|l| {
                (
                    l.slot,
                    format!("{}:{}: {}", l.file, l.line, l.source.trim()),
                )
            })
            .collect();
        let (tp_name, proto) = match &program.kind {
            bpfjet_obj::ProgKind::TpBtf { name } => (
                name.clone(),
                Some(bpfjet_obj::TpBtfProto::running_kernel(name)),
            ),
            bpfjet_obj::ProgKind::XdpTrace { func, exit } => (
                func.clone(),
                Some(bpfjet_obj::TpBtfProto::running_kernel_xdp_entry(
                    func, *exit,
                )),
            ),
            _ => (String::new(), None),
        };
        let (tp_args, kernel_structs, tp_error) = match proto {
            Some(Ok(p)) => (p.args, p.structs, None),
            Some(Err(e)) => (Vec::new(), Vec::new(), Some(e)),
            None => (Vec::new(), Vec::new(), None),
        };
        ObjectProgramEnv {
            lines,
            globals: object.global_subprogs(program),
            global_refusals: object.global_subprog_refusals(program),
            prog_type: program.kind.prog_type(),
            tp_args,
            kernel_structs,
            tp_name,
            tp_error,
        }
    }

    /// The verifier's environment for the program under `policy`.
    pub fn env<'a>(&'a self, object: &'a Object, policy: Policy) -> VerifyEnv<'a> {
        let mut env = VerifyEnv::new(&object.maps).with_policy(policy);
        if let Some(t) = self.prog_type {
            env.prog_type = t;
        }
        env.kfuncs = &object.kfuncs;
        env.spin_locks = &object.spin_locks;
        env.map_fields = &object.map_fields;
        env.btf = object.btf.as_ref();
        env.global_subprogs = &self.globals;
        env.global_refusals = &self.global_refusals;
        env.line_info = Some(&self.lines);
        env.gpl_compatible = bpfjet_obj::license_is_gpl_compatible(&object.license);
        env.tp_args = &self.tp_args;
        env.tp_name = &self.tp_name;
        env.kernel_structs = &self.kernel_structs;
        env.tp_error = self.tp_error.as_deref();
        env
    }
}
