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
    xdp_devmap: bool,
    /// The object's maps' special fields and spin-lock offsets, followed by
    /// those of the inner templates of its map-in-maps, in the order the
    /// verifier numbers the templates (after the object's maps, in map
    /// order).
    map_fields: Vec<Vec<bpfjet_obj::SpecialField>>,
    spin_locks: Vec<Option<u32>>,
    global_funcs: Vec<bpfjet_obj::GlobalSubprog>,
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
            xdp_devmap: matches!(
                program.kind,
                bpfjet_obj::ProgKind::XdpMapEntry {
                    attach: bpfjet_obj::XdpAttach::Devmap,
                    ..
                }
            ),
            map_fields: with_templates(
                object,
                |i| object.map_fields.get(i).cloned(),
                |i| object.inner_map_fields.get(&i).cloned(),
            ),
            spin_locks: with_templates(
                object,
                |i| object.spin_locks.get(i).copied(),
                |i| {
                    object.inner_map_fields.get(&i).map(|f| {
                        f.iter()
                            .find(|f| f.kind == bpfjet_obj::FieldKind::SpinLock)
                            .map(|f| f.off)
                    })
                },
            ),
            global_funcs: object.global_subprog_sigs(program),
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
        env.spin_locks = &self.spin_locks;
        env.map_fields = &self.map_fields;
        env.btf = object.btf.as_ref();
        env.global_funcs = &self.global_funcs;
        env.xdp_devmap = self.xdp_devmap;
        env.line_info = Some(&self.lines);
        env.gpl_compatible = bpfjet_obj::license_is_gpl_compatible(&object.license);
        env.tp_args = &self.tp_args;
        env.tp_name = &self.tp_name;
        env.kernel_structs = &self.kernel_structs;
        env.tp_error = self.tp_error.as_deref();
        env
    }
}

/// Per map of `object` its `own` entry, then per map-in-map (in map order)
/// its inner template's `template` entry (default when it has none): the
/// verifier's numbering of maps and templates (`env::template_owners`).
fn with_templates<T: Default>(
    object: &Object,
    own: impl Fn(usize) -> Option<T>,
    template: impl Fn(usize) -> Option<T>,
) -> Vec<T> {
    (0..object.maps.len())
        .map(|i| own(i).unwrap_or_default())
        .chain(crate::env::template_owners(&object.maps).map(|i| template(i).unwrap_or_default()))
        .collect()
}
