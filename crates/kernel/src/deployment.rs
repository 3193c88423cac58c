//! Several objects loaded into the kernel as one deployment, the way a
//! libbpf control plane sets up Katran's root/xdp_root pattern: every
//! object opened with the same `pin_root_path` (a fresh directory on bpffs,
//! removed afterwards), so maps declared `LIBBPF_PIN_BY_NAME` are created
//! once and reused by the later objects (libbpf checks that they agree);
//! PROG_ARRAY slots filled with program fds of any object.
//!
//! Maps and programs are named as bpfjet names them
//! ([`bpfjet_maps::deployment`]), so dumps of both compare as text.

use crate::error::KernelError;
use crate::object::{KernelObject, KernelProgram, LoadOptions};
use crate::sys;
use bpfjet_maps::deployment::{map_names, program_name, qualified, NamedMap};
use bpfjet_maps::state::{parse_hex, EntryState, MapState};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the temporary pin roots go: the kernel's bpffs.
const BPFFS: &str = "/sys/fs/bpf";

/// A bpffs directory for one deployment's pins, removed with its pins on drop.
struct PinRoot {
    dir: PathBuf,
}

impl PinRoot {
    fn create() -> Result<PinRoot, KernelError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = Path::new(BPFFS).join(format!(
            "bpfjet-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| {
            KernelError::Unavailable(format!(
                "creating the pin root {} on bpffs: {e}",
                dir.display()
            ))
        })?;
        Ok(PinRoot { dir })
    }
}

impl Drop for PinRoot {
    fn drop(&mut self) {
        // Pins are files on bpffs; unlinking them drops the kernel's
        // reference once the objects' fds are closed too.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Objects loaded into the kernel together.
pub struct KernelDeployment {
    /// (label, object), the primary object first.
    objects: Vec<(String, KernelObject)>,
    /// Per object, per map of `KernelObject::maps`: the deployment name.
    names: Vec<Vec<String>>,
    // Last: the pins go after the objects' fds are closed.
    _pins: PinRoot,
}

impl std::fmt::Debug for KernelDeployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDeployment")
            .field("objects", &self.objects)
            .finish_non_exhaustive()
    }
}

impl KernelDeployment {
    /// Load `objects` (label, path) in order with one pin root, then apply
    /// `state` by deployment names (after the load: frozen `.rodata` cannot
    /// be changed here). `options.state` and `options.pin_root` are ignored.
    pub fn open(
        objects: &[(String, PathBuf)],
        options: &LoadOptions<'_>,
        state: Option<&MapState>,
    ) -> Result<KernelDeployment, KernelError> {
        let pins = PinRoot::create()?;
        let mut loaded = Vec::with_capacity(objects.len());
        for (label, path) in objects {
            let object = KernelObject::open_with(
                path,
                &LoadOptions {
                    state: None,
                    pin_root: Some(&pins.dir),
                    ..options.clone()
                },
            )?;
            loaded.push((label.clone(), object));
        }
        let named: Vec<(&str, Vec<NamedMap>)> = loaded
            .iter()
            .map(|(label, o)| {
                (
                    label.as_str(),
                    o.maps()
                        .iter()
                        .map(|m| NamedMap {
                            name: m.name.clone(),
                            pinned: m.pinned,
                        })
                        .collect(),
                )
            })
            .collect();
        let names = map_names(&named);
        let deployment = KernelDeployment {
            objects: loaded,
            names,
            _pins: pins,
        };
        if let Some(state) = state {
            deployment.apply_state(state)?;
        }
        Ok(deployment)
    }

    /// The loaded objects, primary first, with their labels.
    pub fn objects(&self) -> impl Iterator<Item = (&str, &KernelObject)> {
        self.objects.iter().map(|(l, o)| (l.as_str(), o))
    }

    /// A program by deployment name (`PROG` of the primary object,
    /// `OBJECT:PROG` of any).
    pub fn program(&self, name: &str) -> Result<&KernelProgram, KernelError> {
        for (k, (label, object)) in self.objects.iter().enumerate() {
            for p in object.programs() {
                if name == program_name(k, label, &p.name) || name == qualified(label, &p.name) {
                    return Ok(p);
                }
            }
        }
        Err(KernelError::ProgramNotFound {
            program: name.to_string(),
            available: self.program_names().join(", "),
        })
    }

    fn program_names(&self) -> Vec<String> {
        self.objects
            .iter()
            .enumerate()
            .flat_map(|(k, (label, o))| {
                o.programs()
                    .iter()
                    .map(move |p| program_name(k, label, &p.name))
            })
            .collect()
    }

    /// The object and its own name of the map the deployment calls `name`
    /// (a shared pinned map: the object that declared it first).
    fn map_owner(&self, name: &str) -> Option<(usize, &str)> {
        self.names.iter().enumerate().find_map(|(k, names)| {
            names
                .iter()
                .position(|n| n == name)
                .map(|i| (k, self.objects[k].1.maps()[i].name.as_str()))
        })
    }

    /// `BPF_PROG_TEST_RUN` of the program the deployment calls `program`.
    pub fn test_run_with(
        &self,
        program: &str,
        data: &[u8],
        options: &crate::TestRunOptions,
    ) -> Result<crate::TestRunResult, KernelError> {
        let fd = self.program(program)?.fd;
        crate::test_run_fd(fd, data, options)
    }

    /// Write `state` (deployment names; `prog` entries may name programs of
    /// any object) into the maps.
    pub fn apply_state(&self, state: &MapState) -> Result<(), KernelError> {
        for (name, entries) in state {
            let (k, own) = self
                .map_owner(name)
                .ok_or_else(|| KernelError::MapNotFound {
                    map: name.clone(),
                    available: self.names.concat().join(", "),
                })?;
            let object = &self.objects[k].1;
            let map = object.map(own)?;
            let (progs, others): (Vec<&EntryState>, Vec<&EntryState>) =
                entries.iter().partition(|e| e.prog.is_some());
            if !others.is_empty() {
                let mut one = MapState::new();
                one.insert(own.to_string(), others.into_iter().cloned().collect());
                object.apply_state(&one)?;
            }
            for (i, entry) in progs.into_iter().enumerate() {
                let bad = |why: String| KernelError::BadEntry {
                    map: name.clone(),
                    entry: i,
                    why,
                };
                let program = entry.prog.as_deref().unwrap_or_default();
                let key = parse_hex(&entry.key).map_err(|e| bad(e.to_string()))?;
                let fd = self.program(program)?.fd;
                let value = if crate::map_kind::holds_entry_programs(
                    map.info.map_type,
                    map.info.value_size,
                ) {
                    crate::state::entry_program_value(name, i, entry, fd)?
                } else {
                    (fd as u32).to_ne_bytes().to_vec()
                };
                sys::update(map.fd, &key, &value).map_err(|errno| KernelError::Update {
                    map: name.clone(),
                    entry: i,
                    errno,
                })?;
            }
        }
        Ok(())
    }

    /// Every map of the deployment as STATE.json, by deployment names;
    /// PROG_ARRAY entries name programs by deployment name.
    pub fn dump_maps(&self) -> Result<MapState, KernelError> {
        let mut state = MapState::new();
        for (k, (_, object)) in self.objects.iter().enumerate() {
            let dump = object.dump_maps()?;
            for (i, map) in object.maps().iter().enumerate() {
                let name = &self.names[k][i];
                if state.contains_key(name) {
                    continue; // a shared pinned map, dumped with its first object
                }
                let Some(entries) = dump.get(&map.name) else {
                    continue;
                };
                let entries = entries
                    .iter()
                    .cloned()
                    .map(|mut e| {
                        if let Some(p) = &e.prog {
                            e.prog = Some(self.program_by_dumped_name(k, p));
                        }
                        e
                    })
                    .collect();
                state.insert(name.clone(), entries);
            }
        }
        Ok(state)
    }

    /// A dumped `prog` name of object `k` (its own program's name, or
    /// `#id:N` for another object's) as a deployment name.
    fn program_by_dumped_name(&self, k: usize, dumped: &str) -> String {
        if let Some(id) = dumped
            .strip_prefix(crate::FOREIGN_PROGRAM_PREFIX)
            .and_then(|id| id.parse::<u32>().ok())
        {
            for (j, (label, object)) in self.objects.iter().enumerate() {
                if let Some(p) = object.programs().iter().find(|p| p.id == id) {
                    return program_name(j, label, &p.name);
                }
            }
            return dumped.to_string();
        }
        program_name(k, &self.objects[k].0, dumped)
    }
}

/// Whether a kernel error is the kernel refusing a program in a PROG_ARRAY
/// (`EINVAL` from the update).
pub fn is_incompatible_tail_target(e: &KernelError) -> bool {
    matches!(e, KernelError::Update { errno, .. } if errno.0.raw_os_error() == Some(22))
}
