//! `--object OBJ` (repeatable): more objects loaded into the same
//! deployment as the command's main object, for `test-run`, `run` and
//! `bench` (Katran's root/xdp_root pattern: the main object's root program
//! tail-calls programs of the others through a shared pinned PROG_ARRAY).
//! The main object's programs and maps keep their names; the others' are
//! `OBJECT:NAME` (OBJECT = file stem), see `bpfjet_maps::deployment`.

use super::object_args::ObjectArgs;
use anyhow::{anyhow, bail, Result};
use bpfjet_obj::Object;
use bpfjet_runtime::{DeploymentObject, LoadedObject, ObjectOptions};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct DeploymentArgs {
    /// Load this object into the same deployment too (repeatable): maps
    /// pinned by name (LIBBPF_PIN_BY_NAME) are shared, and PROG_ARRAY
    /// entries of STATE.json may name its programs as OBJECT:PROGRAM
    /// (OBJECT = its file stem).
    #[arg(long = "object", value_name = "OBJ")]
    pub objects: Vec<PathBuf>,
}

/// The objects of one run, the main one first.
pub struct Deployment {
    pub paths: Vec<PathBuf>,
    pub labels: Vec<String>,
    pub objects: Vec<Object>,
}

impl Deployment {
    /// Loads the main object and the `--object`s, with `--prog-type`,
    /// `--btf` for all and each per-map override (`--max-entries`,
    /// `--ringbuf-backpressure`) for the objects that have the map.
    pub fn load(main: &Path, extra: &DeploymentArgs, args: &ObjectArgs) -> Result<Deployment> {
        if extra.objects.is_empty() {
            let object = args.load(main)?;
            return Ok(Deployment {
                paths: vec![main.to_path_buf()],
                labels: vec![bpfjet_maps::deployment::object_label(main)],
                objects: vec![object],
            });
        }
        let paths: Vec<PathBuf> = std::iter::once(main.to_path_buf())
            .chain(extra.objects.iter().cloned())
            .collect();
        let mut objects = Vec::with_capacity(paths.len());
        for path in &paths {
            let object = bpfjet_obj::load_file_with(path, &args.kernel_btf())
                .map_err(|e| anyhow!("object {}: {e}", path.display()))?;
            objects.push(object);
        }
        args.apply_all(&mut objects)?;
        let labels: Vec<String> = paths
            .iter()
            .map(|p| bpfjet_maps::deployment::object_label(p))
            .collect();
        for (i, label) in labels.iter().enumerate() {
            if labels[..i].contains(label) {
                bail!(
                    "two objects are named {label:?} ({} and {}): program and map names are \
                     qualified by the file stem, rename one",
                    paths[labels.iter().position(|l| l == label).unwrap_or(0)].display(),
                    paths[i].display()
                );
            }
        }
        Ok(Deployment {
            paths,
            labels,
            objects,
        })
    }

    pub fn main(&self) -> &Object {
        &self.objects[0]
    }

    pub fn is_single(&self) -> bool {
        self.objects.len() == 1
    }

    fn parts(&self) -> Vec<DeploymentObject<'_>> {
        self.labels
            .iter()
            .zip(&self.objects)
            .map(|(label, object)| DeploymentObject { label, object })
            .collect()
    }

    /// bpfjet's load of every object into one instance.
    pub fn load_bpfjet(&self, opts: &ObjectOptions) -> Result<LoadedObject> {
        let loaded = if self.is_single() {
            LoadedObject::load(self.main(), opts)
        } else {
            LoadedObject::load_deployment(&self.parts(), opts)
        };
        loaded.map_err(|e| anyhow!("loading {}: {e}", self.shown()))
    }

    /// The kernel's load of every object with one pin root.
    pub fn load_kernel(
        &self,
        args: &ObjectArgs,
        state: Option<&bpfjet_maps::state::MapState>,
    ) -> Result<bpfjet_kernel::KernelDeployment> {
        let objects: Vec<(String, PathBuf)> = self
            .labels
            .iter()
            .cloned()
            .zip(self.paths.iter().cloned())
            .collect();
        Ok(bpfjet_kernel::KernelDeployment::open(
            &objects,
            &args.kernel_load_options(None),
            state,
        )?)
    }

    /// The objects' paths, for messages.
    pub fn shown(&self) -> String {
        self.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// Every map's deployment name.
    pub fn map_names(&self) -> Vec<String> {
        let named: Vec<(&str, Vec<bpfjet_maps::deployment::NamedMap>)> = self
            .labels
            .iter()
            .zip(&self.objects)
            .map(|(label, o)| {
                (
                    label.as_str(),
                    o.maps
                        .iter()
                        .map(|m| bpfjet_maps::deployment::NamedMap {
                            name: m.name.clone(),
                            pinned: m.pinning == bpfjet_maps::spec::Pinning::ByName,
                        })
                        .collect(),
                )
            })
            .collect();
        let mut names: Vec<String> = Vec::new();
        for name in bpfjet_maps::deployment::map_names(&named).concat() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// The object a `--prog` names and the name within it: `OBJECT:PROG`
    /// for any object, a plain name for the main one.
    pub fn object_of<'a>(&self, wanted: &'a str) -> Result<(usize, &'a str)> {
        match wanted.split_once(bpfjet_maps::deployment::QUALIFIER) {
            Some((label, name)) => self
                .labels
                .iter()
                .position(|l| l == label)
                .map(|k| (k, name))
                .ok_or_else(|| {
                    anyhow!(
                        "--prog {wanted}: no object {label:?} in the deployment (objects: {})",
                        self.labels.join(", ")
                    )
                }),
            None => Ok((0, wanted)),
        }
    }
}
