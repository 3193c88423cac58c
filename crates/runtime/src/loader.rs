//! Loading a whole BPF object: its maps (created in an instance, statically
//! initialised, filled from STATE.json, `.rodata` frozen), and its XDP
//! programs (decoded, context accesses rewritten, helpers bound, linked into
//! one tail-call table).

use crate::env::{map_handle, ObjectMaps};
use crate::helpers::fib::Fib;
use crate::helpers::{kernel_helper_name, tracing_helpers, xdp_helpers, HelperRegistry};
use crate::program::{LoadOptions, MapBinding, MemoryMode, Program};
use crate::region::Region;
use crate::runtime_error::RuntimeError;
use crate::xdp::{find_ctx_accesses, rewrite_ctx_accesses, CtxAccess, CtxError, CtxField};
use bpfjet_isa::{CallTarget, Insn};
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::state::{parse_hex, MapState};
use bpfjet_maps::{Instance, Map, MapOptions, MapType, StateResolver};
use bpfjet_obj::{Object, ProgKind, SlotTarget};
use std::sync::Arc;

/// How to load an object.
#[derive(Clone, Debug)]
pub struct ObjectOptions {
    /// Per-CPU slots of per-CPU maps; the default is the host's possible
    /// CPUs, so per-CPU dumps line up with the kernel's.
    pub ncpus: usize,
    /// Skip bpfjet's verifier and run every program in the bounds-checked
    /// interpreter (`--unverified`). By default each program must be accepted
    /// by the verifier, and then runs on the unchecked fast path.
    pub unverified: bool,
    /// Publish the maps under this instance name (`/dev/shm/bpfjet.<name>.*`)
    /// for `bpfjet map`; None keeps them private.
    pub instance_name: Option<String>,
    /// Initial map contents, applied at load (before `.rodata` is frozen).
    pub state: Option<MapState>,
    /// The routing table `bpf_fib_lookup` answers from.
    pub fib: Option<Arc<Fib>>,
    /// Programs of `SEC("?...")` sections to load anyway, by name (libbpf's
    /// `bpf_program__set_autoload(prog, true)`); the others of those
    /// sections are neither verified nor run.
    pub autoload: Vec<String>,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions {
            ncpus: possible_cpus(),
            unverified: false,
            instance_name: None,
            state: None,
            fib: None,
            autoload: Vec::new(),
        }
    }
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`), the
/// kernel's per-CPU slot count.
pub fn possible_cpus() -> usize {
    let fallback = || std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/possible") else {
        return fallback();
    };
    let highest = text
        .trim()
        .split(',')
        .filter_map(|part| part.rsplit('-').next()?.parse::<usize>().ok())
        .max();
    highest.map_or_else(fallback, |h| h + 1)
}

/// One program of the object.
#[derive(Debug)]
pub(crate) struct LoadedProgram {
    /// Its deployment name: the C name in the primary object,
    /// `OBJECT:PROGRAM` in the others.
    pub name: String,
    /// `OBJECT:PROGRAM` in every object.
    pub qualified: String,
    /// Index of its object in the deployment.
    pub object: usize,
    pub section: String,
    pub kind: ProgKind,
    /// None for programs of types bpfjet does not run, and for those not
    /// loaded (`autoloaded` false).
    pub program: Option<Program>,
    /// False for a `SEC("?...")` program nobody asked to load.
    pub autoloaded: bool,
    /// What the verifier proved, for programs loaded verified.
    pub verified: Option<VerifiedForm>,
}

/// A program as the verifier accepted it, for engines that compile it
/// further (the JIT): the instructions after the context rewrite but before
/// map references are resolved, the verifier's facts and the proof.
#[derive(Debug, Clone)]
pub struct VerifiedForm {
    pub insns: Vec<Insn>,
    pub facts: bpfjet_verifier::Facts,
    pub proof: crate::program::VerifiedProof,
}

/// A BPF object ready to run: maps created and initialised, XDP programs
/// bound to them.
#[derive(Debug)]
pub struct LoadedObject {
    pub(crate) maps: Arc<ObjectMaps>,
    pub(crate) programs: Vec<LoadedProgram>,
    pub(crate) prog_names: Vec<String>,
    /// Every program's `OBJECT:PROGRAM`, by id.
    qualified_names: Vec<String>,
    /// Per object of the deployment: its map index → index in `maps`.
    object_maps: Vec<Vec<usize>>,
    /// Which program class each PROG_ARRAY admits (the kernel's owner rule).
    owners: crate::deployment::ProgArrayOwners,
    pub(crate) fib: Option<Arc<Fib>>,
    ncpus: usize,
    /// The PROG_ARRAY value that names each program, when not its position
    /// (programs loaded one by one through `bpf()`, whose PROG_ARRAY
    /// values are program ids).
    tail_slots: Option<Vec<u32>>,
}

impl LoadedObject {
    pub fn load(obj: &Object, opts: &ObjectOptions) -> Result<LoadedObject, RuntimeError> {
        let ncpus = opts.ncpus.max(1);
        let instance = match &opts.instance_name {
            Some(name) => Instance::create(name, ncpus as u32),
            None => Instance::anonymous(ncpus as u32),
        }
        .map_err(|source| RuntimeError::Map {
            map: "<instance registry>".into(),
            source,
        })?;
        Ok(Self::load_in(obj, opts, instance, &|_| None)?.0)
    }

    /// Loads several objects as one deployment into a new instance (see
    /// [`crate::deployment`]): maps pinned by name are shared, PROG_ARRAY
    /// slots and STATE.json `prog` entries may name programs of any object
    /// (`OBJECT:PROGRAM`), and tail calls cross objects like they stay
    /// within one. The first object is the primary one: its programs and
    /// maps keep their names.
    pub fn load_deployment(
        objects: &[crate::deployment::DeploymentObject<'_>],
        opts: &ObjectOptions,
    ) -> Result<LoadedObject, RuntimeError> {
        let ncpus = opts.ncpus.max(1);
        let instance = match &opts.instance_name {
            Some(name) => Instance::create(name, ncpus as u32),
            None => Instance::anonymous(ncpus as u32),
        }
        .map_err(|source| RuntimeError::Map {
            map: "<instance registry>".into(),
            source,
        })?;
        Ok(Self::load_objects_in(objects, opts, instance, &|_| None)?.0)
    }

    /// Loads `obj` into an existing `instance` (a running data plane's own
    /// instance, opened by name, for a hot replace), taking the map `reuse`
    /// returns for a spec instead of creating one. A reused map keeps its
    /// contents: neither static initialisers nor `opts.state` touch it.
    /// Returns which of the object's maps (by index) were reused.
    pub fn load_in(
        obj: &Object,
        opts: &ObjectOptions,
        instance: Instance,
        reuse: &dyn Fn(&bpfjet_maps::spec::MapSpec) -> Option<Arc<Map>>,
    ) -> Result<(LoadedObject, Vec<bool>), RuntimeError> {
        let only = crate::deployment::DeploymentObject {
            label: "",
            object: obj,
        };
        let (loaded, mut reused) = Self::load_objects_in(&[only], opts, instance, reuse)?;
        Ok((loaded, reused.remove(0)))
    }

    fn load_objects_in(
        objects: &[crate::deployment::DeploymentObject<'_>],
        opts: &ObjectOptions,
        instance: Instance,
        reuse: &dyn Fn(&bpfjet_maps::spec::MapSpec) -> Option<Arc<Map>>,
    ) -> Result<(LoadedObject, Vec<Vec<bool>>), RuntimeError> {
        use crate::deployment as dep;
        dep::check_labels(objects)?;
        let ncpus = opts.ncpus.max(1);
        let names = dep::map_names(objects);
        let mut maps: Vec<Arc<Map>> = Vec::new();
        // Per deployment map: its value's special fields (graph roots,
        // kptrs) when this load created it, to free what they hold.
        let mut fields: Vec<Vec<bpfjet_obj::SpecialField>> = Vec::new();
        // Per deployment map: where its values' `struct bpf_timer` is.
        let mut timer_offs: Vec<Option<u32>> = Vec::new();
        // Per deployment map: the spec that created it (None: reused from
        // outside, left as it is), for freezing.
        let mut created: Vec<Option<&bpfjet_maps::spec::MapSpec>> = Vec::new();
        // Per object: its map index → deployment map index.
        let mut object_maps: Vec<Vec<usize>> = Vec::with_capacity(objects.len());
        // Per object: which of its maps were reused from outside.
        let mut reused_all = Vec::with_capacity(objects.len());
        // Maps pinned by name: deployment index and the object that made it.
        let mut pinned: std::collections::HashMap<&str, (usize, usize)> =
            std::collections::HashMap::new();
        for (k, o) in objects.iter().enumerate() {
            let mut index = Vec::with_capacity(o.object.maps.len());
            let mut reused = Vec::with_capacity(o.object.maps.len());
            for (i, spec) in o.object.maps.iter().enumerate() {
                let by_name = spec.pinning == bpfjet_maps::spec::Pinning::ByName;
                if let Some(&(at, first)) =
                    by_name.then(|| pinned.get(spec.name.as_str())).flatten()
                {
                    let first_spec = objects[first]
                        .object
                        .maps
                        .iter()
                        .find(|m| m.name == spec.name);
                    if let Some(first_spec) = first_spec {
                        dep::check_pin_compatible(objects[first].label, first_spec, o.label, spec)?;
                    }
                    index.push(at);
                    reused.push(false);
                    continue;
                }
                if let Some(map) = reuse(spec) {
                    // Its runtime-owned fields as this object's BTF
                    // describes them (kept if the map already has them).
                    let special = o.object.map_fields.get(i).cloned().unwrap_or_default();
                    map.set_owned_fields(bpfjet_obj::special_fields::runtime_owned_ranges(
                        &special,
                    ));
                    timer_offs.push(timer_off(&special));
                    index.push(maps.len());
                    maps.push(map);
                    fields.push(Vec::new());
                    created.push(None);
                    reused.push(true);
                    continue;
                }
                reused.push(false);
                // Frozen maps are frozen after the initial state is applied,
                // like libbpf writing `.rodata` before it freezes the map.
                let mut unfrozen = spec.clone();
                unfrozen.frozen = false;
                unfrozen.name = names[k][i].clone();
                // libbpf sizes a PERF_EVENT_ARRAY left at 0 entries to the
                // number of possible CPUs (one ring per CPU) before creating it.
                if unfrozen.map_type == bpfjet_maps::MapType::PerfEventArray
                    && unfrozen.max_entries == 0
                {
                    unfrozen.max_entries = ncpus as u32;
                }
                // The value's bpf_spin_lock: BPF_F_LOCK lookups and updates
                // (program and user space) and lock-word-preserving copies.
                let map_opts = MapOptions {
                    spin_lock_off: o.object.spin_locks.get(i).copied().flatten(),
                    ..MapOptions::with_cpus(ncpus as u32)
                };
                let map = instance
                    .create_map(&unfrozen, &map_opts)
                    .map_err(|source| RuntimeError::Map {
                        map: names[k][i].clone(),
                        source,
                    })?;
                if by_name {
                    pinned.insert(spec.name.as_str(), (maps.len(), k));
                }
                let special = o.object.map_fields.get(i).cloned().unwrap_or_default();
                map.set_owned_fields(bpfjet_obj::special_fields::runtime_owned_ranges(&special));
                timer_offs.push(timer_off(&special));
                fields.push(special);
                index.push(maps.len());
                maps.push(map);
                created.push(Some(spec));
            }
            object_maps.push(index);
            reused_all.push(reused);
        }
        let maps = Arc::new(
            ObjectMaps::new(instance, maps)
                .with_special_fields(fields)
                .with_timers(timer_offs),
        );

        let safety = if opts.unverified {
            Safety::BoundsChecked
        } else {
            Safety::Verify
        };
        let xdp = Arc::new(xdp_helpers());
        let tracing = Arc::new(tracing_helpers());
        let owners = dep::ProgArrayOwners::default();
        let mut programs = Vec::new();
        for (k, o) in objects.iter().enumerate() {
            let bindings: Vec<MapBinding> = object_maps[k]
                .iter()
                .map(|&m| binding(&maps.maps[m]))
                .collect();
            for p in &o.object.programs {
                let name = bpfjet_maps::deployment::program_name(k, o.label, &p.name);
                let autoloaded =
                    p.autoload() || opts.autoload.iter().any(|a| *a == name || *a == p.name);
                let (program, verified) = if !autoloaded {
                    (None, None)
                } else if let Some(prog_type) = p.kind.prog_type() {
                    let helpers = if prog_type.is_tracing() {
                        &tracing
                    } else {
                        &xdp
                    };
                    let (program, verified) =
                        build_program(p, prog_type, o.object, helpers, &bindings, safety)?;
                    // The kernel's PROG_ARRAY owner: the first program
                    // loaded that tail-calls through the map.
                    if let Some(insns) = verified.as_ref().map(|v| &v.insns) {
                        for m in dep::prog_arrays_used(insns, &object_maps[k], |m| {
                            maps.maps[m].map_type() == MapType::ProgArray
                        }) {
                            owners.claim(
                                m,
                                maps.maps[m].name(),
                                &name,
                                &p.kind,
                                "loaded: it tail-calls through the map",
                            )?;
                        }
                    }
                    (Some(program), verified)
                } else {
                    (None, None)
                };
                programs.push(LoadedProgram {
                    qualified: bpfjet_maps::deployment::qualified(o.label, &p.name),
                    object: k,
                    name,
                    section: p.section.clone(),
                    kind: p.kind.clone(),
                    program,
                    autoloaded,
                    verified,
                });
            }
        }
        // The maps' kernel views, read by programs as the kernel's map
        // structs, are laid out only when a program reads one (or is not
        // verified, so nobody knows): laying them out reads the running
        // kernel's BTF, most of a small object's load time.
        let reads_views = safety == Safety::BoundsChecked
            || programs.iter().any(|p| {
                p.verified
                    .as_ref()
                    .is_some_and(|v| v.facts.reads_map_struct)
            });
        if reads_views {
            crate::env::lay_out_kernel_views(maps.maps());
        }
        let prog_names = programs.iter().map(|p| p.name.clone()).collect();
        let qualified_names = programs.iter().map(|p| p.qualified.clone()).collect();
        let loaded = LoadedObject {
            maps,
            programs,
            prog_names,
            qualified_names,
            object_maps,
            owners,
            fib: opts.fib.clone(),
            ncpus,
            tail_slots: None,
        };
        for (k, o) in objects.iter().enumerate() {
            loaded.apply_static_inits(k, o.object, &reused_all[k])?;
        }
        if let Some(state) = &opts.state {
            loaded.apply_state(state)?;
        }
        for (map, spec) in loaded.maps.maps.iter().zip(&created) {
            if spec.is_some_and(|s| s.frozen) {
                map.freeze();
            }
        }
        Ok((loaded, reused_all))
    }

    /// Every program of the object, in object order. A program's position
    /// here is its id in PROG_ARRAY values.
    pub fn program_names(&self) -> Vec<&str> {
        self.prog_names.iter().map(String::as_str).collect()
    }

    /// The bound program, for callers that drive runs themselves.
    pub fn program(&self, name: &str) -> Result<&Program, RuntimeError> {
        let p = self.loaded_program(name)?;
        if !p.autoloaded {
            return Err(RuntimeError::NotAutoloaded {
                program: p.name.clone(),
                section: p.section.clone(),
            });
        }
        p.program
            .as_ref()
            .ok_or_else(|| RuntimeError::UnsupportedProgram {
                program: p.name.clone(),
                section: p.section.clone(),
                kind: p.kind.to_string(),
            })
    }

    /// The verified form of a program: `Ok(None)` when the object was loaded
    /// `unverified`.
    pub fn verified(&self, name: &str) -> Result<Option<&VerifiedForm>, RuntimeError> {
        self.program(name)?;
        Ok(self.loaded_program(name)?.verified.as_ref())
    }

    /// The type of program `name` (its section's kind).
    pub fn program_kind(&self, name: &str) -> Result<&ProgKind, RuntimeError> {
        Ok(&self.loaded_program(name)?.kind)
    }

    /// The ELF section of program `name`.
    pub fn program_section(&self, name: &str) -> Result<&str, RuntimeError> {
        Ok(&self.loaded_program(name)?.section)
    }

    pub(crate) fn loaded_program(&self, name: &str) -> Result<&LoadedProgram, RuntimeError> {
        self.programs
            .iter()
            .find(|p| p.name == name)
            .or_else(|| self.programs.iter().find(|p| p.qualified == name))
            .ok_or_else(|| RuntimeError::NoSuchProgram {
                name: name.to_string(),
                available: self.prog_names.join(", "),
            })
    }

    /// Replace helper calls of program `name` after verification: at each
    /// `(slot, from, to)` the instruction must be `call from`; it becomes
    /// `call to` in both the verified form (what the JIT compiles) and the
    /// interpreter's program. The verifier's facts stay those of the
    /// checked calls; the caller guarantees `to` behaves as `from` does on
    /// the programs' arguments (the tracing loader's per-thread maps).
    /// With `apply` false, only checks that every call is where it should
    /// be (so that several programs are rewritten all or none).
    pub(crate) fn rewrite_helper_calls(
        &mut self,
        name: &str,
        calls: &[(usize, u32, u32)],
        apply: bool,
    ) -> Result<(), String> {
        let p = self
            .programs
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("no program {name}"))?;
        let program = p
            .program
            .as_ref()
            .ok_or_else(|| format!("program {name} is not loaded"))?;
        let mut inner = (*program.inner).clone();
        let mut verified = p.verified.as_ref().map(|v| v.insns.clone());
        for &(slot, from, to) in calls {
            let want = Insn::Call(CallTarget::Helper(from as i32));
            let mut forms: Vec<&mut Vec<Insn>> = vec![&mut inner.insns];
            forms.extend(verified.as_mut());
            for insns in forms {
                match insns.get_mut(slot) {
                    Some(insn) if *insn == want => *insn = Insn::Call(CallTarget::Helper(to as i32)),
                    other => {
                        return Err(format!(
                            "program {name}, slot {slot}: expected a call of helper {from}, found {other:?}"
                        ))
                    }
                }
            }
        }
        if !apply {
            return Ok(());
        }
        if let (Some(v), Some(insns)) = (p.verified.as_mut(), verified) {
            v.insns = insns;
        }
        p.program = Some(Program {
            inner: inner.shared(),
        });
        Ok(())
    }

    /// The tail-call table: every program by the PROG_ARRAY value that
    /// names it (its position, or its slot, [`LoadedObject::set_tail_slots`]).
    pub fn program_table(&self) -> Vec<Option<Program>> {
        let Some(slots) = &self.tail_slots else {
            return self.programs.iter().map(|p| p.program.clone()).collect();
        };
        let len = slots.iter().max().map_or(0, |&m| m as usize + 1);
        let mut table = vec![None; len];
        for (p, &slot) in self.programs.iter().zip(slots) {
            table[slot as usize] = p.program.clone();
        }
        table
    }

    /// PROG_ARRAY values name program `i` as `slots[i]` (one per program,
    /// distinct): for programs loaded one by one, whose arrays hold ids.
    pub fn set_tail_slots(&mut self, slots: Vec<u32>) -> Result<(), RuntimeError> {
        let distinct: std::collections::HashSet<u32> = slots.iter().copied().collect();
        if slots.len() != self.programs.len() || distinct.len() != slots.len() {
            return Err(RuntimeError::Deployment(format!(
                "{} tail-call slots for {} programs (one distinct slot each)",
                slots.len(),
                self.programs.len()
            )));
        }
        self.tail_slots = Some(slots);
        Ok(())
    }

    /// Where program `i` (by position) sits in [`LoadedObject::program_table`].
    pub fn tail_slot(&self, i: usize) -> usize {
        self.tail_slots
            .as_ref()
            .and_then(|s| s.get(i))
            .map_or(i, |&s| s as usize)
    }

    /// The object's maps and the inner maps programs reached.
    pub fn object_maps(&self) -> &Arc<ObjectMaps> {
        &self.maps
    }

    /// A map of the object by its STATE.json name.
    pub fn map(&self, name: &str) -> Option<Arc<Map>> {
        self.maps.maps.iter().find(|m| m.name() == name).cloned()
    }

    /// What each map index of the (primary) object's `lddw`s resolves to
    /// (for engines that load the object's programs themselves).
    pub fn map_bindings(&self) -> Vec<MapBinding> {
        self.object_map_list(0).iter().map(binding).collect()
    }

    /// The maps program `name`'s `lddw`s name, by their index in its own
    /// object (in a deployment, objects index maps each their own way).
    pub fn program_maps(&self, name: &str) -> Result<Vec<Arc<Map>>, RuntimeError> {
        let object = self.loaded_program(name)?.object;
        Ok(self.object_map_list(object))
    }

    /// [`LoadedObject::map_bindings`] for program `name`'s object.
    pub fn program_map_bindings(&self, name: &str) -> Result<Vec<MapBinding>, RuntimeError> {
        Ok(self.program_maps(name)?.iter().map(binding).collect())
    }

    /// How many objects were loaded together (1 unless [`LoadedObject::load_deployment`]).
    pub fn object_count(&self) -> usize {
        self.object_maps.len()
    }

    fn object_map_list(&self, object: usize) -> Vec<Arc<Map>> {
        self.object_maps
            .get(object)
            .map(|index| {
                index
                    .iter()
                    .map(|&m| Arc::clone(&self.maps.maps[m]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The routing table `bpf_fib_lookup` answers from (for engines that
    /// build their own run environment).
    pub fn fib(&self) -> Option<&Arc<Fib>> {
        self.fib.as_ref()
    }

    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    /// Whether programs run bounds-checked (always, until the verifier exists).
    pub fn is_bounds_checked(&self) -> bool {
        self.programs
            .iter()
            .filter_map(|p| p.program.as_ref())
            .all(Program::is_bounds_checked)
    }

    fn resolver(&self) -> crate::deployment::DeploymentResolver<'_> {
        crate::deployment::DeploymentResolver {
            instance: &self.maps.instance,
            progs: &self.prog_names,
            qualified: &self.qualified_names,
        }
    }

    /// A PROG_ARRAY slot is about to hold program `id`: the kernel's
    /// compatibility rule against the programs that use the map.
    fn check_tail_target(&self, map: &Map, id: u32) -> Result<(), RuntimeError> {
        let Some(index) = self.maps.maps.iter().position(|m| m.id() == map.id()) else {
            return Ok(());
        };
        let Some(target) = self.programs.get(id as usize) else {
            return Ok(());
        };
        self.owners
            .claim(index, map.name(), &target.name, &target.kind, "put into it")
    }

    /// libbpf's `.values` initialisers: PROG_ARRAY slots name programs,
    /// map-in-map slots name other maps of the object.
    fn apply_static_inits(
        &self,
        object: usize,
        obj: &Object,
        reused: &[bool],
    ) -> Result<(), RuntimeError> {
        let maps = self.object_map_list(object);
        for init in &obj.map_inits {
            if reused.get(init.map).copied().unwrap_or(false) {
                continue;
            }
            let fail = |why: String| RuntimeError::MapInit {
                map: obj
                    .maps
                    .get(init.map)
                    .map_or("?".into(), |m| m.name.clone()),
                slot: init.slot,
                why,
            };
            let outer = maps
                .get(init.map)
                .ok_or_else(|| fail("no such map".into()))?;
            let id = match &init.target {
                SlotTarget::Program(name) => {
                    let id = self
                        .programs
                        .iter()
                        .position(|p| {
                            p.object == object && p.qualified.ends_with(&format!(":{name}"))
                        })
                        .ok_or_else(|| fail(format!("no program {name:?}")))?
                        as u32;
                    self.check_tail_target(outer, id)?;
                    id
                }
                SlotTarget::Map(index) => maps
                    .get(*index)
                    .ok_or_else(|| fail(format!("no map #{index}")))?
                    .id(),
            };
            outer
                .update_elem(&init.slot.to_ne_bytes(), &id.to_ne_bytes(), 0)
                .map_err(|e| fail(e.to_string()))?;
        }
        Ok(())
    }

    /// Apply STATE.json entries. Frozen maps (`.rodata`, after load) accept
    /// only entries equal to their contents, like the kernel engine; pass
    /// state through [`ObjectOptions::state`] to set them.
    pub fn apply_state(&self, state: &MapState) -> Result<(), RuntimeError> {
        for name in state.keys() {
            if self.map(name).is_none() {
                let known: Vec<&str> = self.maps.maps.iter().map(|m| m.name()).collect();
                return Err(RuntimeError::BadState {
                    map: name.clone(),
                    index: 0,
                    why: format!("the object has no such map (maps: {})", known.join(", ")),
                });
            }
        }
        let resolver = self.resolver();
        for (name, entries) in state {
            let Some(map) = self.map(name) else { continue };
            if map.map_type() == MapType::ProgArray {
                for (index, entry) in entries.iter().enumerate() {
                    let Some(program) = &entry.prog else { continue };
                    let Some(id) = resolver.prog_id(program) else {
                        return Err(RuntimeError::BadState {
                            map: name.clone(),
                            index,
                            why: format!(
                                "no program {program:?} in the deployment (programs: {})",
                                self.prog_names.join(", ")
                            ),
                        });
                    };
                    self.check_tail_target(&map, id)?;
                }
            }
            if map.holds_entry_programs() {
                self.check_entry_programs(&map, name, entries)?;
            }
            if map.is_frozen() {
                check_frozen_unchanged(&map, entries)?;
            } else {
                map.apply_state(entries, &resolver)?;
            }
        }
        Ok(())
    }
}

impl LoadedObject {
    /// A DEVMAP (CPUMAP) entry's program must be one loaded for such
    /// entries, `SEC("xdp/devmap")` (`"xdp/cpumap"`): the kernel refuses
    /// any other with EINVAL (`__dev_map_alloc_node`).
    fn check_entry_programs(
        &self,
        map: &Map,
        name: &str,
        entries: &[bpfjet_maps::state::EntryState],
    ) -> Result<(), RuntimeError> {
        let want = if map.map_type() == MapType::Cpumap {
            bpfjet_obj::XdpAttach::Cpumap
        } else {
            bpfjet_obj::XdpAttach::Devmap
        };
        let mut owner_frags = None;
        for (index, e) in entries.iter().enumerate() {
            let Some(program) = &e.prog else { continue };
            let ok = self.loaded_program(program).is_ok_and(|p| {
                matches!(p.kind, bpfjet_obj::ProgKind::XdpMapEntry { attach, .. } if attach == want)
            });
            if !ok {
                return Err(RuntimeError::BadState {
                    map: name.to_string(),
                    index,
                    why: format!(
                        "{program:?} is not a program of the deployment loaded for {} entries \
                         (SEC(\"xdp/{}\")): the kernel refuses it (EINVAL)",
                        map.map_type().name(),
                        if want == bpfjet_obj::XdpAttach::Cpumap {
                            "cpumap"
                        } else {
                            "devmap"
                        }
                    ),
                });
            }
            // bpf_prog_map_compatible: the first entry program owns the
            // map; the others must share its frags flag.
            let frags = self
                .loaded_program(program)
                .is_ok_and(|p| p.kind.has_frags());
            match owner_frags {
                None => owner_frags = Some(frags),
                Some(f) if f != frags => {
                    return Err(RuntimeError::BadState {
                        map: name.to_string(),
                        index,
                        why: format!(
                            "{program:?} {} multi-buffer and the map's first entry program \
                             {}: the kernel refuses it (EINVAL)",
                            if frags { "is" } else { "is not" },
                            if f { "is" } else { "is not" }
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn check_frozen_unchanged(
    map: &Map,
    entries: &[bpfjet_maps::state::EntryState],
) -> Result<(), RuntimeError> {
    for (index, e) in entries.iter().enumerate() {
        let bad = |why: &str| RuntimeError::BadState {
            map: map.name().to_string(),
            index,
            why: why.to_string(),
        };
        let key = parse_hex(&e.key).map_err(|e| bad(&e.to_string()))?;
        let value = e
            .value
            .as_deref()
            .map(parse_hex)
            .transpose()
            .map_err(|e| bad(&e.to_string()))?;
        if value.is_none() || map.lookup_copy(&key).ok() != value {
            return Err(bad(
                "the map is frozen after load; pass the state when loading \
                 (ObjectOptions::state) to change it",
            ));
        }
    }
    Ok(())
}

/// What an `lddw` of the map resolves to: its handle, and for single-element
/// arrays (global data) the value memory for direct access.
fn binding(map: &Arc<Map>) -> MapBinding {
    let value = (map.map_type() == MapType::Array && map.max_entries() == 1)
        .then(|| map.lookup(&0u32.to_ne_bytes(), 0))
        .flatten()
        .map(|ptr| {
            let len = u64::from(map.value_size());
            if map.spec().flags & map_flags::RDONLY_PROG != 0 {
                Region::read_only(ptr as u64, len)
            } else {
                Region::writable(ptr as u64, len)
            }
        });
    let handle = map_handle(map);
    MapBinding {
        handle,
        value,
        view: Some(Region::read_only(
            handle,
            bpfjet_maps::KERNEL_VIEW_BYTES as u64,
        )),
    }
}

/// How a program's memory safety is established.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Safety {
    /// Proven by bpfjet's verifier before it runs; then unchecked.
    Verify,
    /// Not proven: every access is checked at run time (`--unverified`).
    BoundsChecked,
}

/// Run bpfjet's verifier; on acceptance, the context accesses it found and
/// the proof that unlocks the fast path.
fn verify_program(
    p: &bpfjet_obj::Program,
    obj: &Object,
    decoded: &bpfjet_isa::Decoded,
    slots: &[bpfjet_isa::RawInsn],
) -> Result<
    (
        Vec<CtxAccess>,
        bpfjet_verifier::Facts,
        crate::program::VerifiedProof,
    ),
    RuntimeError,
> {
    let inputs = bpfjet_verifier::ObjectProgramEnv::new(obj, p);
    let mut env = inputs.env(obj, bpfjet_verifier::Policy::Privileged);
    env.extra_kfuncs = bpfjet_kfuncs::verifier_protos();
    env.module_types = bpfjet_kfuncs::MODULE_TYPES;
    let facts = bpfjet_verifier::verify_decoded(decoded, slots, &env).map_err(|mut e| {
        // Reaching a poisoned instruction is about its CO-RE relocation,
        // not about the unknown helper the poison calls.
        if let Some(u) = e.pc.and_then(|pc| p.unresolved_core_at(pc)) {
            e.message = u.summary();
            e.rule = "unresolved_core_relo";
        }
        RuntimeError::Rejected {
            program: p.name.clone(),
            report: e.to_string(),
        }
    })?;
    let accesses: Vec<CtxAccess> = facts
        .ctx_accesses
        .iter()
        .map(|(&pc, access)| CtxAccess {
            pc,
            field: ctx_field(access.field),
        })
        .collect();
    // The rewrite turns each of these loads into a load from bpfjet's own
    // context layout; it is only correct if the instruction reads the
    // context on every path (the verifier refuses mixed pointers, this
    // guards the invariant the rewrite depends on).
    if let Some(a) = accesses
        .iter()
        .find(|a| facts.mem_bases.get(&a.pc) != Some(&bpfjet_verifier::MemBase::Ctx))
    {
        return Err(RuntimeError::Context {
            program: p.name.clone(),
            source: CtxError {
                pc: a.pc,
                reason: "the verifier classified this load as a context load on one path \
                         only; it cannot be rewritten"
                    .into(),
            },
        });
    }
    // SAFETY: the verifier accepted this exact instruction sequence against
    // these map specs, helper prototypes and the XDP context rules; the
    // context rewrite below only changes the loads the verifier classified.
    let proof = unsafe { crate::program::VerifiedProof::assume_verified() };
    Ok((accesses, facts, proof))
}

fn ctx_field(field: bpfjet_verifier::XdpMdField) -> CtxField {
    use bpfjet_verifier::XdpMdField as F;
    match field {
        F::Data => CtxField::Data,
        F::DataEnd => CtxField::DataEnd,
        F::DataMeta => CtxField::DataMeta,
        F::IngressIfindex => CtxField::IngressIfindex,
        F::RxQueueIndex => CtxField::RxQueueIndex,
        F::EgressIfindex => CtxField::EgressIfindex,
    }
}

fn build_program(
    p: &bpfjet_obj::Program,
    prog_type: bpfjet_obj::ProgType,
    obj: &Object,
    helpers: &Arc<HelperRegistry>,
    bindings: &[MapBinding],
    safety: Safety,
) -> Result<(Program, Option<VerifiedForm>), RuntimeError> {
    let decode_error = |source| RuntimeError::Decode {
        program: p.name.clone(),
        source,
    };
    // Malformed slots the kernel only checks when its walk reaches them
    // are kept until the verifier proves them dead; without a verifier
    // nothing does, and they are refused as before.
    let insns = crate::kfuncs::resolve_ksym_addresses(p, obj)?;
    let mut decoded = bpfjet_isa::decode_for_load(&insns).map_err(decode_error)?;
    if safety == Safety::BoundsChecked {
        if let Some(e) = decoded.first_invalid() {
            return Err(decode_error(e.clone()));
        }
    }
    // The library's kfuncs this program calls, by their index in the
    // object's kfunc table (the calls' imm).
    let mut kfuncs = HelperRegistry::new();
    // The kernel's graph kfuncs, bound once the verifier told where their
    // roots' nodes are.
    let mut graph_calls = Vec::new();
    // Calls of helpers and kfuncs bpfjet does not provide: refused if the
    // verifier reaches them, dead code otherwise (a call behind frozen
    // `.rodata` configuration, as the kernel's verifier never walks it).
    let mut unprovided = Vec::new();
    for (pc, insn) in decoded.insns.iter().enumerate() {
        if decoded.invalid.contains_key(&pc) {
            continue;
        }
        match *insn {
            // Poison of an unresolved CO-RE relocation: fine if the
            // verifier proves it unreachable, which needs the verifier.
            Insn::Call(CallTarget::Helper(_))
                if p.unresolved_core_at(pc).is_some() && safety == Safety::BoundsChecked =>
            {
                return Err(RuntimeError::UnresolvedCore {
                    program: p.name.clone(),
                    section: p.section.clone(),
                    detail: p
                        .unresolved_core
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                });
            }
            Insn::Call(CallTarget::Helper(_)) if p.unresolved_core_at(pc).is_some() => {}
            Insn::Call(CallTarget::Helper(id))
                if u64::try_from(id).map_or(true, |id| helpers.get(id).is_none()) =>
            {
                let e = RuntimeError::UnsupportedHelper {
                    program: p.name.clone(),
                    section: p.section.clone(),
                    pc,
                    id,
                    name: u32::try_from(id).ok().and_then(kernel_helper_name),
                };
                if safety != Safety::Verify {
                    return Err(e);
                }
                unprovided.push((pc, e));
            }
            Insn::Call(CallTarget::Kfunc(index))
                if usize::try_from(index)
                    .ok()
                    .and_then(|i| obj.kfuncs.get(i))
                    .and_then(|n| bpfjet_verifier::graph::GraphKfunc::from_name(n))
                    .is_some() =>
            {
                let name = &obj.kfuncs[index as usize];
                if let Some(k) = bpfjet_verifier::graph::GraphKfunc::from_name(name) {
                    graph_calls.push((index as u32, k));
                }
            }
            Insn::Call(CallTarget::Kfunc(index))
                if usize::try_from(index)
                    .ok()
                    .and_then(|i| obj.kfuncs.get(i))
                    .and_then(|n| bpfjet_verifier::dynptr_kfunc::DynptrKfunc::from_name(n))
                    .is_some() =>
            {
                let name = &obj.kfuncs[index as usize];
                if let Some(k) = bpfjet_verifier::dynptr_kfunc::DynptrKfunc::from_name(name) {
                    kfuncs.register(crate::helpers::dynptr::kfunc_helper(index as u32, k));
                }
            }
            Insn::Call(CallTarget::Kfunc(index)) => {
                let name = usize::try_from(index).ok().and_then(|i| obj.kfuncs.get(i));
                let unsupported = || RuntimeError::UnsupportedKfunc {
                    program: p.name.clone(),
                    pc,
                    name: name.cloned().unwrap_or_else(|| format!("#{index}")),
                };
                let Some(kfunc) = name.and_then(|n| bpfjet_kfuncs::by_name(n)) else {
                    if safety != Safety::Verify {
                        return Err(unsupported());
                    }
                    unprovided.push((pc, unsupported()));
                    continue;
                };
                if let Some(btf) = &obj.btf {
                    bpfjet_kfuncs::signature::check(kfunc, btf).map_err(|reason| {
                        RuntimeError::KfuncSignature {
                            program: p.name.clone(),
                            pc,
                            name: kfunc.name.to_string(),
                            reason,
                        }
                    })?;
                }
                if !kfunc.callable_from(prog_type) {
                    return Err(RuntimeError::KfuncNotForProgramType {
                        program: p.name.clone(),
                        pc,
                        name: kfunc.name.to_string(),
                        prog_type: prog_type.to_string(),
                    });
                }
                kfuncs.register(crate::kfuncs::kfunc_helper(index as u32, kfunc));
            }
            _ => {}
        }
    }
    let context = |source| RuntimeError::Context {
        program: p.name.clone(),
        source,
    };
    if prog_type.is_tracing() && safety == Safety::BoundsChecked {
        // The context is memory of the traced process that only the
        // verifier's window rules make safe to read.
        return Err(RuntimeError::Context {
            program: p.name.clone(),
            source: CtxError {
                pc: 0,
                reason: format!("{prog_type} programs run only verified (no bounds-checked mode)"),
            },
        });
    }
    let (accesses, proven) = match safety {
        Safety::Verify => {
            let (accesses, facts, proof) = verify_program(p, obj, &decoded, &insns)?;
            for (pc, e) in unprovided {
                if facts.calls_reached.contains(&pc) {
                    return Err(e);
                }
                decoded.insns[pc] = Insn::Exit;
            }
            // The verifier proved the malformed slots unreachable; the
            // engines see the kernel's dead-code filler in their place.
            decoded.trap_invalid();
            // The verifier proved the poisoned instructions unreachable;
            // make them plain dead code for the engines.
            for u in &p.unresolved_core {
                for slot in u.slot..u.slot + u.len {
                    if let Some(insn) = decoded.insns.get_mut(slot) {
                        *insn = Insn::Exit;
                    }
                }
            }
            (accesses, Some((facts, proof)))
        }
        Safety::BoundsChecked => (find_ctx_accesses(&decoded.insns).map_err(context)?, None),
    };
    if !graph_calls.is_empty() {
        let node_offs = Arc::new(
            proven
                .as_ref()
                .map(|(facts, _)| facts.graph_node_offs.clone())
                .unwrap_or_default(),
        );
        let arena = bpfjet_kfuncs::graph::ObjArena::new(
            obj.btf.clone(),
            bpfjet_kfuncs::graph::DEFAULT_ARENA_BYTES,
        );
        graph_calls.sort_by_key(|&(i, _)| i);
        graph_calls.dedup_by_key(|&mut (i, _)| i);
        for (index, k) in graph_calls {
            kfuncs.register(crate::graph_kfuncs::graph_helper(
                index,
                k,
                Arc::clone(&arena),
                Arc::clone(&node_offs),
            ));
        }
        kfuncs.set_graph(crate::graph_kfuncs::GraphBinding { arena, node_offs });
    }
    let mut insns = decoded.insns;
    // The kernel lets only programs attached to a devmap entry read the
    // egress interface (expected attach type BPF_XDP_DEVMAP).
    let devmap_program = p.section.split('/').nth(1) == Some("devmap");
    if let Some(a) = accesses
        .iter()
        .find(|a| a.field == CtxField::EgressIfindex && !devmap_program)
    {
        return Err(context(CtxError {
            pc: a.pc,
            reason: "xdp_md.egress_ifindex is readable only by devmap programs \
                     (SEC(\"xdp/devmap\"))"
                .into(),
        }));
    }
    // Tracing contexts are read in place (`pt_regs`, the tracepoint record,
    // the raw arguments); only `xdp_md` has a layout of bpfjet's own.
    if !prog_type.is_tracing() {
        rewrite_ctx_accesses(&mut insns, &accesses).map_err(context)?;
    }
    let memory = match &proven {
        Some((_, proof)) => MemoryMode::Verified(*proof),
        None => MemoryMode::BoundsChecked,
    };
    let verified = proven.map(|(facts, proof)| VerifiedForm {
        insns: insns.clone(),
        facts,
        proof,
    });
    let options = LoadOptions {
        memory,
        helpers: Arc::clone(helpers),
        kfuncs: Arc::new(kfuncs),
        maps: bindings.to_vec(),
    };
    let program = Program::new(insns, options).map_err(|source| RuntimeError::Load {
        program: p.name.clone(),
        source,
    })?;
    Ok((program, verified))
}

/// Where a value's `struct bpf_timer` is, if it has one.
fn timer_off(fields: &[bpfjet_obj::SpecialField]) -> Option<u32> {
    fields
        .iter()
        .find(|f| f.kind == bpfjet_obj::FieldKind::Timer)
        .map(|f| f.off)
}
