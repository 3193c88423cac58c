//! `--prog-type TYPE`, shared by the commands that load an object
//! (`verify`, `test-run`, `run`, `bench`, `compile`): the program type for
//! objects whose section names say nothing libbpf knows, like bpftool's
//! `prog load OBJ PATH type xdp` or a loader's `bpf_program__set_type()`.

use anyhow::{anyhow, Result};
use bpfjet_obj::{Object, ProgKind};
use std::path::Path;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ProgTypeArg {
    /// Give every program of the object this type, whatever its section name
    /// (bpftool's `prog load ... type TYPE`): xdp, xdp.frags, xdp/devmap,
    /// xdp/cpumap, xdp.frags/devmap, xdp.frags/cpumap. The kernel engine
    /// loads the object with the same type.
    #[arg(long = "prog-type", value_name = "TYPE", value_parser = parse_prog_type)]
    pub prog_type: Option<ProgKind>,
}

fn parse_prog_type(name: &str) -> Result<ProgKind, String> {
    ProgKind::from_type_name(name)
}

impl ProgTypeArg {
    /// Loads the object at `path` and applies the override.
    pub fn load(&self, path: &Path) -> Result<Object> {
        let mut object =
            bpfjet_obj::load_file(path).map_err(|e| anyhow!("object {}: {e}", path.display()))?;
        self.apply(&mut object);
        Ok(object)
    }

    pub fn apply(&self, object: &mut Object) {
        if let Some(kind) = &self.prog_type {
            object.override_prog_kind(kind);
        }
    }

    /// The same override for the kernel engine's libbpf load.
    pub fn kernel(&self) -> Option<bpfjet_kernel::ProgTypeOverride> {
        let t = self.prog_type.as_ref()?.kernel_load_type()?;
        Some(bpfjet_kernel::ProgTypeOverride {
            prog_type: t.prog_type,
            expected_attach_type: t.expected_attach_type,
            prog_flags: t.prog_flags,
        })
    }
}
