//! Options every command that loads an object shares, and the one place
//! objects are loaded with them.

use anyhow::{anyhow, Result};
use bpfjet_obj::{KernelBtf, Object};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct CoreArgs {
    /// Target BTF for CO-RE relocations instead of the running kernel's
    /// /sys/kernel/btf/vmlinux (libbpf's btf_custom_path): raw BTF, or an
    /// ELF file with a .BTF section. The kernel engine gets it too.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
}

impl CoreArgs {
    pub fn kernel_btf(&self) -> KernelBtf {
        match &self.btf {
            Some(path) => KernelBtf::File(path.clone()),
            None => KernelBtf::Running,
        }
    }

    /// Loads `path`, linked and CO-RE relocated.
    pub fn load(&self, path: &Path) -> Result<Object> {
        bpfjet_obj::load_file_with(path, &self.kernel_btf())
            .map_err(|e| anyhow!("object {}: {e}", path.display()))
    }

    /// The path to hand libbpf, for the kernel engine.
    pub fn btf_custom_path(&self) -> Option<&Path> {
        self.btf.as_deref()
    }
}
