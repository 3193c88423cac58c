//! The bpf_conformance runner's ELF mode (`--elf true`): the program arrives
//! as a relocatable BPF object holding one function, `main`, in `.text`
//! (or in `xdp` with `--xdp_prolog true`, which is meant for the kernel's
//! libbpf plugin only). Programs in `.text` are subprograms to bpfjet's
//! object loader, so the entry function is taken from the ELF directly.

use anyhow::{anyhow, bail, Result};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// The function the runner's ELF writer names the program.
const ENTRY: &str = "main";

/// The code of the program in the ELF `bytes`: its entry function to the end
/// of its section (so that calls to functions after it stay in range).
pub fn program_code(bytes: &[u8]) -> Result<Vec<u8>> {
    let file = object::File::parse(bytes).map_err(|e| anyhow!("invalid ELF object: {e}"))?;
    if file.architecture() != object::Architecture::Bpf {
        bail!("ELF object is for {:?}, not BPF", file.architecture());
    }
    let functions: Vec<_> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.section_index().is_some())
        .collect();
    let entry = match functions.iter().find(|s| s.name() == Ok(ENTRY)) {
        Some(s) => s,
        None => match functions.as_slice() {
            [only] => only,
            [] => bail!("ELF object has no function symbol"),
            _ => bail!("ELF object has several functions and none named `{ENTRY}`"),
        },
    };
    let name = entry.name().unwrap_or("?").to_string();
    let index = entry
        .section_index()
        .ok_or_else(|| anyhow!("function `{name}` has no section"))?;
    let section = file
        .section_by_index(index)
        .map_err(|e| anyhow!("function `{name}`: {e}"))?;
    let section_name = section.name().unwrap_or("?").to_string();
    if section_name == "xdp" || section_name.starts_with("xdp/") {
        bail!(
            "function `{name}` is in section `{section_name}`: the runner's --xdp_prolog reads \
             an xdp_md context and is meant for its libbpf plugin; run without it"
        );
    }
    if section.relocations().next().is_some() {
        bail!(
            "section `{section_name}` has relocations (maps or calls to other sections), \
             which conformance programs do not use"
        );
    }
    let data = section
        .data()
        .map_err(|e| anyhow!("section `{section_name}`: {e}"))?;
    let start = usize::try_from(entry.address())
        .ok()
        .filter(|&s| s <= data.len() && s % 8 == 0)
        .ok_or_else(|| {
            anyhow!(
                "function `{name}` starts at {:#x}, outside section `{section_name}` \
                 ({} bytes) or not on an instruction",
                entry.address(),
                data.len()
            )
        })?;
    Ok(data[start..].to_vec())
}
