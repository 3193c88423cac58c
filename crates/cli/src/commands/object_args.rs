//! How to read an object beyond what its ELF says, shared by the commands
//! that load one (`verify`, `test-run`, `run`, `bench`, `compile`) and
//! applied identically to the kernel engine's libbpf load:
//! `--prog-type TYPE` for objects whose section names say nothing libbpf
//! knows (bpftool's `prog load OBJ PATH type xdp`, a loader's
//! `bpf_program__set_type()`), `--max-entries MAP=N` for maps an object
//! leaves for its loader to size (`bpf_map__set_max_entries()`), `--btf FILE`
//! for the CO-RE target (libbpf's `btf_custom_path`).

use anyhow::{anyhow, bail, Result};
use bpfjet_maps::state::MapState;
use bpfjet_obj::{KernelBtf, Object, ProgKind};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ObjectArgs {
    /// Give every program of the object this type, whatever its section name
    /// (bpftool's `prog load ... type TYPE`): xdp, xdp.frags, xdp/devmap,
    /// xdp/cpumap, xdp.frags/devmap, xdp.frags/cpumap.
    #[arg(long = "prog-type", value_name = "TYPE", value_parser = parse_prog_type)]
    pub prog_type: Option<ProgKind>,
    /// Set a map's max_entries before it is created (repeatable), like a
    /// loader's bpf_map__set_max_entries: for maps the object leaves at 0.
    #[arg(long = "max-entries", value_name = "MAP=N", value_parser = parse_max_entries)]
    pub max_entries: Vec<(String, u32)>,
    /// Target BTF for CO-RE relocations instead of the running kernel's
    /// /sys/kernel/btf/vmlinux (libbpf's btf_custom_path): raw BTF, or an
    /// ELF file with a .BTF section. The kernel engine gets it too.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// Backpressure for a RINGBUF map (repeatable, bpfjet engines only):
    /// when the ring is full the producer waits for the consumer instead
    /// of dropping, giving up (and dropping) after the consumer has not
    /// moved for MS milliseconds (default 100). Sets the map's bpfjet
    /// `map_extra` bits (docs/SUPPORT.md, "Ring buffers").
    #[arg(long = "ringbuf-backpressure", value_name = "MAP[=MS]", value_parser = parse_backpressure)]
    pub ringbuf_backpressure: Vec<(String, u32)>,
    /// Set global variable NAME (in `.rodata`, `.data` or `.bss`) to VALUE
    /// before load (repeatable), as a loader's `obj->rodata->NAME = VALUE`:
    /// an integer (decimal, `0x` hex), a bool, an enumerator's name, or a
    /// string for a `char` array. The kernel engine gets the same bytes.
    #[arg(long = "global", value_name = "NAME=VALUE", value_parser = parse_name_value)]
    pub globals: Vec<(String, String)>,
}

/// `NAME=VALUE` of `--global` (and `bpfjet trace --attach`).
pub(crate) fn parse_name_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => {
            Ok((name.to_string(), value.to_string()))
        }
        _ => Err(format!("{text:?}: expected NAME=VALUE")),
    }
}

pub(crate) fn parse_backpressure(text: &str) -> Result<(String, u32), String> {
    let (map, ms) = match text.split_once('=') {
        Some((map, ms)) => (
            map,
            ms.parse::<u32>()
                .ok()
                .filter(|&ms| ms > 0)
                .ok_or_else(|| format!("{text:?}: MS must be a number of milliseconds > 0"))?,
        ),
        None => (text, 0),
    };
    if map.is_empty() {
        return Err(format!("{text:?}: expected MAP or MAP=MS"));
    }
    Ok((map.to_string(), ms))
}

/// `MAP=BYTES` of `bpfjet trace --ringbuf-size` (the size is checked
/// against the object's map later).
pub(crate) fn parse_ringbuf_size(text: &str) -> Result<(String, u64), String> {
    let (map, bytes) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected MAP=BYTES"))?;
    if map.is_empty() {
        return Err(format!("{text:?}: expected MAP=BYTES"));
    }
    let bytes = bytes
        .parse::<u64>()
        .map_err(|_| format!("{text:?}: BYTES must be a number of bytes"))?;
    Ok((map.to_string(), bytes))
}

fn parse_prog_type(name: &str) -> Result<ProgKind, String> {
    ProgKind::from_type_name(name)
}

pub(crate) fn parse_max_entries(text: &str) -> Result<(String, u32), String> {
    let (map, n) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected MAP=N"))?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("{text:?}: N must be a number of entries"))?;
    if map.is_empty() || n == 0 {
        return Err(format!("{text:?}: expected a map name and N > 0"));
    }
    Ok((map.to_string(), n))
}

impl ObjectArgs {
    /// The CO-RE target: `--btf FILE`, else the running kernel's BTF.
    pub fn kernel_btf(&self) -> KernelBtf {
        match &self.btf {
            Some(path) => KernelBtf::File(path.clone()),
            None => KernelBtf::Running,
        }
    }

    /// The path to hand libbpf, for the kernel engine.
    pub fn btf_custom_path(&self) -> Option<&Path> {
        self.btf.as_deref()
    }

    /// Loads the object at `path` (linked and CO-RE relocated) and applies
    /// the overrides.
    pub fn load(&self, path: &Path) -> Result<Object> {
        let mut object = bpfjet_obj::load_file_with(path, &self.kernel_btf())
            .map_err(|e| anyhow!("object {}: {e}", path.display()))?;
        self.apply(&mut object)
            .map_err(|e| anyhow!("object {}: {e}", path.display()))?;
        Ok(object)
    }

    pub fn apply(&self, object: &mut Object) -> Result<()> {
        self.apply_all(std::slice::from_mut(object))
    }

    /// The overrides for the objects of one deployment: `--prog-type` for
    /// every object, each named map override for every object that has the
    /// map, and an error for a name no object has.
    pub fn apply_all(&self, objects: &mut [Object]) -> Result<()> {
        use bpfjet_maps::{MapSpec, MapType};
        if let Some(kind) = &self.prog_type {
            for object in objects.iter_mut() {
                object.override_prog_kind(kind);
            }
        }
        // Applies `set` to every map `wanted` selects; false if none.
        let mut each = |wanted: &dyn Fn(&MapSpec) -> bool, set: &dyn Fn(&mut MapSpec)| {
            let mut found = false;
            for spec in objects.iter_mut().flat_map(|o| o.maps.iter_mut()) {
                if wanted(spec) {
                    set(spec);
                    found = true;
                }
            }
            found
        };
        for (name, n) in &self.max_entries {
            if !each(&|m| &m.name == name, &|m| m.max_entries = *n) {
                bail!(
                    "--max-entries {name}={n}: no map {name:?}; maps: {}",
                    map_names(objects, |_| true)
                );
            }
        }
        for (name, ms) in &self.ringbuf_backpressure {
            let extra = bpfjet_maps::ringbuf::BPFJET_RINGBUF_BACKPRESSURE
                | (u64::from(*ms) << bpfjet_maps::ringbuf::BPFJET_RINGBUF_STALL_MS_SHIFT);
            let ring = |m: &MapSpec| &m.name == name && m.map_type == MapType::Ringbuf;
            if !each(&ring, &|m| m.map_extra = extra) {
                bail!(
                    "--ringbuf-backpressure {name}: no RINGBUF map {name:?}; ring buffers: {}",
                    map_names(objects, |m| m.map_type == MapType::Ringbuf)
                );
            }
        }
        for (name, value) in &self.globals {
            // The object of the deployment that has the variable.
            let object = objects
                .iter_mut()
                .find(|o| o.has_global(name))
                .ok_or_else(|| {
                    anyhow!("--global {name}={value}: no object has a global variable {name:?}")
                })?;
            object
                .set_global(name, value)
                .map_err(|e| anyhow!("--global {name}={value}: {e}"))?;
        }
        Ok(())
    }

    /// The same overrides for the kernel engine's libbpf load.
    pub fn kernel_load_options<'a>(
        &'a self,
        state: Option<&'a MapState>,
    ) -> bpfjet_kernel::LoadOptions<'a> {
        let prog_type = self
            .prog_type
            .as_ref()
            .and_then(ProgKind::kernel_load_type)
            .map(|t| bpfjet_kernel::ProgTypeOverride {
                prog_type: t.prog_type,
                expected_attach_type: t.expected_attach_type,
                prog_flags: t.prog_flags,
            });
        bpfjet_kernel::LoadOptions {
            state,
            prog_type,
            max_entries: &self.max_entries,
            btf_custom_path: self.btf_custom_path(),
            globals: &self.globals,
            ..Default::default()
        }
    }
}

/// The names of the maps `which` selects, for error messages ("none").
fn map_names(objects: &[Object], which: impl Fn(&bpfjet_maps::MapSpec) -> bool) -> String {
    let names: Vec<&str> = objects
        .iter()
        .flat_map(|o| o.maps.iter())
        .filter(|m| which(m))
        .map(|m| m.name.as_str())
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
