//! Several objects loaded as one deployment (Katran's root/xdp_root
//! pattern: a small root program in one object tail-calls, through a shared
//! PROG_ARRAY, programs loaded from other objects).
//!
//! What libbpf and the kernel do, bpfjet does here: maps declared
//! `LIBBPF_PIN_BY_NAME` in several objects are one map, provided the
//! declarations agree (libbpf's `map_is_reuse_compat`: type, key, value,
//! max_entries, flags, map_extra); a PROG_ARRAY accepts only programs
//! compatible with the ones that tail-call through it (the kernel's
//! `bpf_prog_map_compatible`: program type, frags flag, expected attach
//! type), in every object alike. Naming follows
//! [`bpfjet_maps::deployment`].

use crate::runtime_error::RuntimeError;
use bpfjet_isa::{Insn, LdDwKind};
use bpfjet_maps::spec::{MapSpec, Pinning};
use bpfjet_maps::{Instance, MapError, StateResolver};
use bpfjet_obj::{Object, ProgKind};
use std::collections::HashMap;
use std::sync::Arc;

/// One object of a deployment.
#[derive(Clone, Copy, Debug)]
pub struct DeploymentObject<'a> {
    /// What `OBJECT:NAME` calls it (by default its file stem); unique in
    /// the deployment, without `:`.
    pub label: &'a str,
    pub object: &'a Object,
}

/// Labels must tell objects apart and not be confused with a qualified name.
pub(crate) fn check_labels(objects: &[DeploymentObject<'_>]) -> Result<(), RuntimeError> {
    for (i, o) in objects.iter().enumerate() {
        if o.label.contains(bpfjet_maps::deployment::QUALIFIER) {
            return Err(RuntimeError::Deployment(format!(
                "object label {:?} contains ':', which separates object and program names",
                o.label
            )));
        }
        if objects[..i].iter().any(|p| p.label == o.label) {
            return Err(RuntimeError::Deployment(format!(
                "two objects are labelled {:?}: rename one file, program and map names \
                 are qualified by it",
                o.label
            )));
        }
    }
    Ok(())
}

/// The deployment name of every map of every object.
pub(crate) fn map_names(objects: &[DeploymentObject<'_>]) -> Vec<Vec<String>> {
    let named: Vec<(&str, Vec<bpfjet_maps::deployment::NamedMap>)> = objects
        .iter()
        .map(|o| {
            (
                o.label,
                o.object
                    .maps
                    .iter()
                    .map(|m| bpfjet_maps::deployment::NamedMap {
                        name: m.name.clone(),
                        pinned: m.pinning == Pinning::ByName,
                    })
                    .collect(),
            )
        })
        .collect();
    bpfjet_maps::deployment::map_names(&named)
}

/// libbpf's `map_is_reuse_compat`: a map pinned by name is reused by a
/// later object only if that object declares the same map.
pub(crate) fn check_pin_compatible(
    first_label: &str,
    first: &MapSpec,
    label: &str,
    spec: &MapSpec,
) -> Result<(), RuntimeError> {
    let differs = [
        ("type", first.map_type != spec.map_type),
        ("key_size", first.key_size != spec.key_size),
        ("value_size", first.value_size != spec.value_size),
        ("max_entries", first.max_entries != spec.max_entries),
        ("flags", first.flags != spec.flags),
        ("map_extra", first.map_extra != spec.map_extra),
    ];
    let fields: Vec<&str> = differs.iter().filter(|d| d.1).map(|d| d.0).collect();
    if fields.is_empty() {
        return Ok(());
    }
    Err(RuntimeError::Deployment(format!(
        "map {:?} is pinned by name (LIBBPF_PIN_BY_NAME) in objects {first_label} and {label}, \
         but they declare it differently ({}): {first_label} has {}, {label} has {} \
         (libbpf refuses to reuse the pinned map)",
        spec.name,
        fields.join(", "),
        describe(first),
        describe(spec)
    )))
}

fn describe(spec: &MapSpec) -> String {
    format!(
        "{} key {} value {} max_entries {} flags {:#x}",
        spec.map_type.name(),
        spec.key_size,
        spec.value_size,
        spec.max_entries,
        spec.flags
    )
}

/// What the kernel compares before letting a program into a PROG_ARRAY
/// (`bpf_prog_map_compatible`): the program type (always XDP here), the
/// frags flag and the expected attach type.
pub(crate) fn tail_call_class(kind: &ProgKind) -> (bool, Option<bpfjet_obj::XdpAttach>) {
    (kind.has_frags(), kind.xdp_attach())
}

/// Deployment indices of the PROG_ARRAY maps `insns` loads (the maps its
/// tail calls go through): the kernel makes the first program loaded that
/// uses a PROG_ARRAY its owner.
pub(crate) fn prog_arrays_used(
    insns: &[Insn],
    object_maps: &[usize],
    is_prog_array: impl Fn(usize) -> bool,
) -> Vec<usize> {
    insns
        .iter()
        .filter_map(|insn| match insn {
            Insn::LdDw {
                kind: LdDwKind::MapIdx,
                imm,
                ..
            } => object_maps.get(*imm as u32 as usize).copied(),
            _ => None,
        })
        .filter(|&m| is_prog_array(m))
        .collect()
}

/// The kernel's PROG_ARRAY owner rule over a deployment: one class per map.
#[derive(Debug, Default)]
pub(crate) struct ProgArrayOwners {
    /// Deployment map index → (class, the program that set it).
    owners: std::sync::Mutex<HashMap<usize, (TailClass, String)>>,
}

type TailClass = (bool, Option<bpfjet_obj::XdpAttach>);

impl ProgArrayOwners {
    /// Program `program` of kind `kind` uses or enters PROG_ARRAY `map`:
    /// the first one owns it, later ones must match.
    pub(crate) fn claim(
        &self,
        map: usize,
        map_name: &str,
        program: &str,
        kind: &ProgKind,
        role: &str,
    ) -> Result<(), RuntimeError> {
        let class = tail_call_class(kind);
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        match owners.get(&map) {
            None => {
                owners.insert(map, (class, program.to_string()));
                Ok(())
            }
            Some((owner, _)) if *owner == class => Ok(()),
            Some((owner, by)) => Err(RuntimeError::Deployment(format!(
                "PROG_ARRAY {map_name:?}: program {program} ({}) cannot be {role}: the map \
                 belongs to programs of {} since {by} used it; the kernel allows tail calls \
                 only between programs of the same type, frags flag (xdp vs xdp.frags) and \
                 attach type (EINVAL)",
                class_name(class),
                class_name(*owner)
            ))),
        }
    }
}

fn class_name((frags, attach): TailClass) -> String {
    let base = if frags { "xdp.frags" } else { "xdp" };
    match attach {
        Some(bpfjet_obj::XdpAttach::Devmap) => format!("{base}/devmap"),
        Some(bpfjet_obj::XdpAttach::Cpumap) => format!("{base}/cpumap"),
        _ => base.to_string(),
    }
}

/// STATE.json's view of a deployment: maps of its instance, programs by
/// deployment name or, for the primary object's programs, also
/// `OBJECT:PROGRAM`.
pub(crate) struct DeploymentResolver<'a> {
    pub instance: &'a Instance,
    pub progs: &'a [String],
    /// Every program's `OBJECT:PROGRAM` name, by id.
    pub qualified: &'a [String],
}

impl StateResolver for DeploymentResolver<'_> {
    fn create_inner_map(&self, spec: &MapSpec) -> Result<Arc<bpfjet_maps::Map>, MapError> {
        self.instance.create_inner_map(spec)
    }
    fn map_by_id(&self, id: u32) -> Option<Arc<bpfjet_maps::Map>> {
        self.instance.map_by_id(id).ok()
    }
    fn prog_id(&self, name: &str) -> Option<u32> {
        self.progs
            .iter()
            .position(|p| p == name)
            .or_else(|| self.qualified.iter().position(|p| p == name))
            .map(|i| i as u32)
    }
    fn prog_name(&self, id: u32) -> Option<String> {
        self.progs.get(id as usize).cloned()
    }
}
