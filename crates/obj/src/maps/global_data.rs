//! Global variables: each `.data*`, `.rodata*` and `.bss*` section becomes a
//! one-element ARRAY map whose value is the section image, as in libbpf.
//!
//! libbpf names these maps in the kernel `<object-name-prefix>.<section>`
//! (`myprog.rodata`), truncated to 15 characters; bpfjet has no such limit and
//! uses the section name itself (`.rodata`, `.data.counters`), which is also
//! what skeletons and bpftool show as the variable's section.

use bpfjet_maps::spec::flags;
use bpfjet_maps::{MapSpec, MapType};

use crate::elf::Section;
use crate::error::ObjError;

/// The kernel caps an ARRAY value at `KMALLOC_MAX_SIZE` (a few MiB); this
/// generous bound only stops a corrupt `.bss` size from allocating gigabytes.
const MAX_SIZE: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DataKind {
    Data,
    Rodata,
    Bss,
}

fn has_prefix(name: &str, base: &str) -> bool {
    name == base
        || name
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn kind_of(section: &Section) -> Option<DataKind> {
    if section.executable {
        return None;
    }
    let name = section.name.as_str();
    let progbits = section.sh_type == object::elf::SHT_PROGBITS;
    if progbits && has_prefix(name, ".data") {
        Some(DataKind::Data)
    } else if progbits && has_prefix(name, ".rodata") {
        Some(DataKind::Rodata)
    } else if section.sh_type == object::elf::SHT_NOBITS && has_prefix(name, ".bss") {
        Some(DataKind::Bss)
    } else {
        None
    }
}

/// The map for `section` if it holds global data (empty sections get none).
/// `mmapable`: libbpf's rule, the section's BTF lists a variable that is
/// not static.
pub(crate) fn map_for(section: &Section, mmapable: bool) -> Result<Option<MapSpec>, ObjError> {
    let Some(kind) = kind_of(section) else {
        return Ok(None);
    };
    if section.size == 0 {
        return Ok(None);
    }
    if section.size > MAX_SIZE {
        return Err(ObjError::InvalidMap {
            map: section.name.clone(),
            reason: format!("section is {} bytes, more than {MAX_SIZE}", section.size),
        });
    }
    let size = section.size as u32;
    let mut spec = MapSpec::new(&section.name, MapType::Array, 4, size, 1);
    // libbpf makes a global-data map mmapable, so userspace can reach the
    // variables directly, when some variable in it is not static (string
    // literal sections have no BTF, sections of static variables no
    // variable a skeleton would show); `.rodata` is additionally read-only
    // for programs and frozen once initialised.
    spec.flags = if mmapable { flags::MMAPABLE } else { 0 };
    let image = match kind {
        DataKind::Bss => vec![0; size as usize],
        _ => {
            if section.data.len() != size as usize {
                return Err(crate::error::malformed(format!(
                    "section `{}` has {} bytes of data for size {size}",
                    section.name,
                    section.data.len()
                )));
            }
            section.data.to_vec()
        }
    };
    if kind == DataKind::Rodata {
        spec.flags |= flags::RDONLY_PROG;
        spec.frozen = true;
    }
    spec.initial_data = Some(image);
    Ok(Some(spec))
}
