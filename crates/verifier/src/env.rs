//! What a program is verified against: its type, maps, kfuncs and the
//! privilege policy.

use bpfjet_maps::MapSpec;
use std::collections::BTreeMap;

/// Program types bpfjet verifies: the workspace's one definition, from
/// `bpfjet_obj` (the kernel's numbering).
pub use bpfjet_obj::ProgType;

/// Whose rules apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// The kernel's rules for a loader with CAP_BPF + CAP_PERFMON (root):
    /// pointer leaks allowed, uninitialised stack readable.
    #[default]
    Privileged,
    /// The kernel's rules without CAP_PERFMON/CAP_SYS_ADMIN: no pointer
    /// leaks (into maps, return values, comparisons, helper scalars), no
    /// reads of uninitialised stack, no variable stack offsets.
    Unprivileged,
}

/// The kernel's limit on processed instructions.
pub const COMPLEXITY_LIMIT: u64 = 1_000_000;

#[derive(Clone, Debug)]
pub struct VerifyEnv<'a> {
    /// Selects the context rules, the helper set and the kfuncs allowed.
    pub prog_type: ProgType,
    /// Indexed by the imm of `PSEUDO_MAP_IDX` / `PSEUDO_MAP_IDX_VALUE` lddws.
    pub maps: &'a [MapSpec],
    /// Indexed by the imm of kfunc calls (names as in `Object::kfuncs`).
    pub kfuncs: &'a [String],
    /// Parallel to `maps`: byte offset of the `struct bpf_spin_lock` in each
    /// map's value (from the map's BTF, `Object::spin_locks`); missing
    /// entries mean no lock.
    pub spin_locks: &'a [Option<u32>],
    /// Kfunc prototypes besides the built-in ones (`proto::kfunc_protos`),
    /// e.g. a library's; looked up first.
    pub extra_kfuncs: &'a [crate::proto::KfuncProto],
    /// Global subprograms with their prototypes
    /// (`Object::global_subprog_sigs`): each is verified once, on its own,
    /// and its calls are checked against the prototype (`global_func.rs`).
    /// A global subprogram missing here is verified in its callers'
    /// context, as a static one.
    pub global_funcs: &'a [bpfjet_obj::GlobalSubprog],
    /// An XDP program for a DEVMAP entry (`BPF_XDP_DEVMAP`): the kernel lets
    /// it read `xdp_md.egress_ifindex`.
    pub xdp_devmap: bool,
    pub policy: Policy,
    /// Maximum processed instructions before "too complex".
    pub complexity_limit: u64,
    /// Slot → source line text, for messages.
    pub line_info: Option<&'a BTreeMap<usize, String>>,
    /// The program's license is GPL-compatible (`license_is_gpl_compatible`
    /// of the object's `license` section): GPL-only helpers are refused
    /// otherwise. True for programs without an object (raw instructions).
    pub gpl_compatible: bool,
    /// The program's BTF: the local types `bpf_obj_new` allocates.
    pub btf: Option<&'a bpfjet_obj::Btf>,
    /// Parallel to `maps`: the special fields of each value (graph roots,
    /// kptrs; `Object::map_fields`).
    pub map_fields: &'a [Vec<bpfjet_obj::SpecialField>],
    /// The object types a kfunc library defines (eNetSTL's nodes and
    /// containers): what `KfuncArg::Module` / `KfuncRet::Module` name, and
    /// what a `__kptr` to a struct of the same name holds (`module_kptr`).
    pub module_types: &'a [crate::module_kptr::ModuleType],
    /// A `tp_btf` program's arguments as the kernel's BTF types them
    /// (`bpfjet_obj::TpBtfProto`): context slot `i` is `tp_args[i]`.
    pub tp_args: &'a [bpfjet_obj::TpArg],
    /// The tracepoint's name, for messages.
    pub tp_name: &'a str,
    /// The kernel structs `tp_args` and their filled pointer fields point
    /// to (`TpBtfProto::structs`).
    pub kernel_structs: &'a [bpfjet_obj::KernelStruct],
    /// Why a `tp_btf` program's tracepoint cannot be attached here (not in
    /// the kernel's BTF, not one bpfjet fires): it is refused whole.
    pub tp_error: Option<&'a str>,
}

impl<'a> VerifyEnv<'a> {
    pub fn new(maps: &'a [MapSpec]) -> Self {
        VerifyEnv {
            prog_type: ProgType::Xdp,
            maps,
            kfuncs: &[],
            spin_locks: &[],
            extra_kfuncs: &[],
            global_funcs: &[],
            xdp_devmap: false,
            policy: Policy::Privileged,
            complexity_limit: COMPLEXITY_LIMIT,
            line_info: None,
            gpl_compatible: true,
            btf: None,
            map_fields: &[],
            module_types: &[],
            tp_args: &[],
            tp_name: "",
            kernel_structs: &[],
            tp_error: None,
        }
    }

    /// The environment for a program of another type than XDP.
    pub fn with_prog_type(mut self, prog_type: ProgType) -> Self {
        self.prog_type = prog_type;
        self
    }

    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    pub fn privileged(&self) -> bool {
        self.policy == Policy::Privileged
    }

    /// The global subprogram starting at slot `entry`, if it is one.
    pub fn global_func(&self, entry: usize) -> Option<&'a bpfjet_obj::GlobalSubprog> {
        self.global_funcs.iter().find(|g| g.slot == entry)
    }
}

/// The maps (indices) whose inner-map templates the verifier numbers after
/// the program's own maps, in that order: template `maps.len() + k` is the
/// inner template of the `k`-th map this yields. Tables indexed by map
/// (special fields, spin locks) extend the same way.
pub(crate) fn template_owners(maps: &[MapSpec]) -> impl Iterator<Item = usize> + '_ {
    maps.iter()
        .enumerate()
        .filter(|(_, m)| m.inner.is_some())
        .map(|(i, _)| i)
}
