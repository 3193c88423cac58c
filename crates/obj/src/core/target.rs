//! Target BTFs: where CO-RE relocations look for the types a program was
//! compiled against. libbpf uses the running kernel's BTF, or a file given
//! as `btf_custom_path` instead of it; bpfjet adds its own context layouts,
//! consulted first (see `context.rs`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use object::{Object as _, ObjectSection as _};

use super::context::context_btf;
use super::names::essential_name;
use crate::btf::{Btf, BtfType};
use crate::error::ObjError;

/// Where the running kernel publishes its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A parsed target BTF with its types indexed by essential name (the name
/// without a `___flavor` suffix), the key of libbpf's candidate search.
#[derive(Debug)]
pub struct TargetBtf {
    btf: Btf,
    /// By a hash of the essential name (no string is copied: a kernel's
    /// BTF has ~100k named types, and indexing them by owned names with
    /// SipHash was most of the time every command spent reading it);
    /// [`TargetBtf::candidates`] compares the names themselves.
    by_name: HashMap<u64, Vec<u32>, BuildHasherDefault<NameKeyHasher>>,
    /// The file it came from, for messages.
    origin: String,
}

impl TargetBtf {
    pub fn new(btf: Btf, origin: impl Into<String>) -> TargetBtf {
        let mut by_name: HashMap<u64, Vec<u32>, BuildHasherDefault<NameKeyHasher>> =
            HashMap::with_capacity_and_hasher(btf.types().len(), Default::default());
        for (id, ty) in btf.types().iter().enumerate() {
            let name = essential_name(ty.name());
            if !name.is_empty() {
                by_name.entry(name_key(name)).or_default().push(id as u32);
            }
        }
        TargetBtf {
            btf,
            by_name,
            origin: origin.into(),
        }
    }

    /// Raw BTF (like `/sys/kernel/btf/vmlinux`) or an ELF file with a `.BTF`
    /// section (an object compiled with `-g`, a vmlinux image), as libbpf's
    /// `btf__parse` reads.
    pub fn from_file(path: &Path) -> Result<TargetBtf, ObjError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ObjError::Io {
            path: shown.clone(),
            source,
        })?;
        let bad = |reason: String| ObjError::TargetBtf {
            path: shown.clone(),
            reason,
        };
        let btf = if bytes.starts_with(b"\x7fELF") {
            let file = object::File::parse(&*bytes).map_err(|e| bad(format!("bad ELF: {e}")))?;
            let section = file
                .section_by_name(".BTF")
                .ok_or_else(|| bad("ELF file has no .BTF section (compile with -g)".into()))?;
            let data = section
                .data()
                .map_err(|e| bad(format!("cannot read .BTF: {e}")))?;
            Btf::parse(data)
        } else {
            Btf::parse(&bytes)
        }
        .map_err(|e| bad(e.to_string()))?;
        Ok(TargetBtf::new(btf, shown))
    }

    /// The running kernel's BTF, read once per process.
    pub fn running_kernel() -> Result<Arc<TargetBtf>, String> {
        static KERNEL: OnceLock<Result<Arc<TargetBtf>, String>> = OnceLock::new();
        KERNEL
            .get_or_init(|| {
                TargetBtf::from_file(Path::new(VMLINUX_BTF))
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// bpfjet's context layouts (`struct xdp_md`), built once per process.
    pub fn context() -> Arc<TargetBtf> {
        static CONTEXT: OnceLock<Arc<TargetBtf>> = OnceLock::new();
        CONTEXT
            .get_or_init(|| Arc::new(TargetBtf::new(context_btf(), "bpfjet's context types")))
            .clone()
    }

    pub fn btf(&self) -> &Btf {
        &self.btf
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Types of the same kind as `local` whose essential name is `essential`.
    pub(super) fn candidates<'a>(
        &'a self,
        local: &'a BtfType,
        essential: &'a str,
    ) -> impl Iterator<Item = u32> + 'a {
        self.by_name
            .get(&name_key(essential))
            .into_iter()
            .flatten()
            .copied()
            .filter(move |&id| {
                self.btf.type_by_id(id).is_some_and(|t| {
                    std::mem::discriminant(t) == std::mem::discriminant(local)
                        && essential_name(t.name()) == essential
                })
            })
    }
}

/// A 64-bit FNV-1a hash of a type name: the index's key.
fn name_key(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The index's keys are hashes already: passed through.
#[derive(Default)]
pub(crate) struct NameKeyHasher(u64);

impl Hasher for NameKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// Where kernel types come from: the running kernel, or a file (`--btf`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KernelBtf {
    #[default]
    Running,
    File(PathBuf),
}

impl KernelBtf {
    /// The target, read (once per process for the running kernel); `Err`
    /// says why there is none, reported only if a relocation needs it.
    pub fn load(&self) -> Result<Arc<TargetBtf>, String> {
        match self {
            KernelBtf::Running => TargetBtf::running_kernel()
                .map_err(|e| format!("no kernel BTF ({e}); give the target types with --btf FILE")),
            KernelBtf::File(path) => TargetBtf::from_file(path)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
        }
    }
}

/// The targets of one relocation pass: bpfjet's context types first (a
/// type found there is not looked up further), then the kernel's.
pub struct CoreTargets<'a> {
    pub context: &'a TargetBtf,
    pub kernel: Result<&'a TargetBtf, &'a str>,
}
