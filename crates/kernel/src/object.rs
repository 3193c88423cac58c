//! An unmodified BPF object loaded into the running kernel by libbpf, which
//! takes care of global data, BTF-defined maps, map-in-map templates and
//! relocations exactly as for any libbpf application.

use crate::error::{Errno, KernelError};
use crate::libbpf_log;
use crate::map_kind::MapKind;
use crate::state;
use crate::sys::{self, MapInfo};
use bpfjet_maps::state::MapState;
use libbpf_rs::{AsRawLibbpf, MapCore, ObjectBuilder, OpenObject};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Verifier log buffer for a program. Rejections are logged in the kernel's
/// rotating mode, so a long log keeps its end, where the reason is; the
/// memory is only touched as far as the kernel writes.
const REJECTION_LOG_BYTES: usize = 16 << 20;
/// With a log level requested for accepted programs too, a log that does not
/// fit makes the load fail (ENOSPC), so leave much more room.
const FULL_LOG_BYTES: usize = 256 << 20;

/// How to load an object.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions<'a> {
    /// Initial map contents. Frozen global data (`.rodata`) can only be set
    /// before the load, so state is best passed here rather than through
    /// [`KernelObject::apply_state`] afterwards.
    pub state: Option<&'a MapState>,
    /// 0: ask the verifier for a log only when it rejects a program.
    /// 1 or 2 (kernel `log_level`): keep the log of accepted programs too,
    /// see [`KernelObject::verifier_log`].
    pub verifier_log_level: u32,
    /// Load every program with this type instead of the one libbpf derives
    /// from its section name, like bpftool's `prog load ... type TYPE`
    /// (`bpf_program__set_type`, `__set_expected_attach_type`, `__set_flags`).
    pub prog_type: Option<ProgTypeOverride>,
    /// `(map, max_entries)`: sizes set before the maps are created, like a
    /// loader's `bpf_map__set_max_entries` (maps by their C name).
    pub max_entries: &'a [(String, u32)],
    /// Target BTF for CO-RE relocations instead of the running kernel's
    /// (libbpf's `btf_custom_path`, bpfjet's `--btf`).
    pub btf_custom_path: Option<&'a Path>,
    /// Pin maps declared `LIBBPF_PIN_BY_NAME` under this bpffs directory
    /// (libbpf's `pin_root_path`), reusing maps already pinned there, as
    /// several objects of one deployment do. Without it an oracle load is
    /// isolated and pins nothing.
    pub pin_root: Option<&'a Path>,
    /// `(variable, value)`: global variables set before the load, as a
    /// skeleton's `obj->rodata->NAME = VALUE` (bpfjet's `--global`),
    /// encoded by bpfjet's reading of the object's BTF
    /// (`bpfjet_obj::Object::set_global`), so both engines get the same
    /// bytes.
    pub globals: &'a [(String, String)],
    /// Programs of `SEC("?...")` sections to load anyway
    /// (`bpf_program__set_autoload(prog, true)`).
    pub autoload: &'a [String],
}

/// A program type forced on every program of an object (kernel values:
/// `enum bpf_prog_type`, `enum bpf_attach_type`, `BPF_F_*` load flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgTypeOverride {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    pub prog_flags: u32,
}

/// A program of the loaded object.
#[derive(Clone, Debug)]
pub struct KernelProgram {
    /// The C function name (what `--prog` names).
    pub name: String,
    /// The ELF section (`xdp`, `xdp.frags`, ...).
    pub section: String,
    /// Valid while the [`KernelObject`] lives.
    pub fd: RawFd,
    /// Kernel program id: PROG_ARRAY lookups return these.
    pub id: u32,
}

/// A map of the loaded object.
#[derive(Clone, Debug)]
pub struct KernelMap {
    /// The STATE.json name: the C name of the map, or for global data the
    /// ELF section (`.rodata`, `.data`, `.bss`, `.data.foo`, ...).
    pub name: String,
    /// libbpf's name (`<obj>.rodata` for standard global data).
    pub libbpf_name: String,
    /// Valid while the [`KernelObject`] lives.
    pub fd: RawFd,
    pub info: MapInfo,
    /// Global data backed by an ELF section.
    pub global_data: bool,
    /// Read-only after load (`.rodata*`, `.kconfig`): libbpf freezes these.
    pub frozen: bool,
    /// Pinned by name under [`LoadOptions::pin_root`] (shared with the
    /// other objects that pin the same name).
    pub pinned: bool,
}

impl KernelMap {
    pub(crate) fn kind(&self) -> MapKind {
        MapKind::of(self.info.map_type)
    }
}

/// A BPF object loaded into the kernel: its programs are verified and JIT
/// compiled, its maps exist.
pub struct KernelObject {
    path: PathBuf,
    programs: Vec<KernelProgram>,
    maps: Vec<KernelMap>,
    verifier_logs: Vec<(String, String)>,
    // Last: dropping it closes every fd above.
    _object: libbpf_rs::Object,
}

impl std::fmt::Debug for KernelObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelObject")
            .field("path", &self.path)
            .field("programs", &self.programs)
            .field("maps", &self.maps)
            .finish()
    }
}

impl KernelObject {
    /// Load every program and map of the object at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<KernelObject, KernelError> {
        KernelObject::open_with(path, &LoadOptions::default())
    }

    /// Load with options; with `options.state`, the object's maps hold that
    /// state when this returns (`.rodata` applied before the load, the rest after).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &LoadOptions<'_>,
    ) -> Result<KernelObject, KernelError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        libbpf_log::install();
        libbpf_log::clear();

        let mut builder = ObjectBuilder::default();
        if let Some(btf) = options.btf_custom_path {
            builder
                .btf_custom_path(btf)
                .map_err(|e| KernelError::Open {
                    path: shown.clone(),
                    why: format!("--btf {}: {e}", btf.display()),
                    libbpf_log: String::new(),
                })?;
        }
        if let Some(root) = options.pin_root {
            builder.pin_root_path(root).map_err(|e| KernelError::Open {
                path: shown.clone(),
                why: format!("pin root {}: {e}", root.display()),
                libbpf_log: String::new(),
            })?;
        }
        let mut open = builder.open_file(path).map_err(|e| KernelError::Open {
            path: shown.clone(),
            why: e.to_string(),
            libbpf_log: libbpf_log::take(),
        })?;

        // An oracle load is isolated: maps an object pins by name
        // (`LIBBPF_PIN_BY_NAME`, e.g. xdp-filter's rule maps) would
        // otherwise be pinned under /sys/fs/bpf, outlive the process and be
        // reused, state included, by the next load.
        for map in open.maps_mut().filter(|_| options.pin_root.is_none()) {
            // SAFETY: a valid map of an open, not yet loaded object; a NULL
            // path clears its pin path.
            let ret = unsafe {
                libbpf_sys::bpf_map__set_pin_path(map.as_libbpf_object().as_ptr(), std::ptr::null())
            };
            sys::check(ret).map_err(|errno| load_error(&shown, None, errno, String::new()))?;
        }
        for (name, n) in options.max_entries {
            set_max_entries(&mut open, name, *n)
                .map_err(|errno| load_error(&shown, None, errno, String::new()))?;
        }
        if !options.globals.is_empty() {
            set_globals(&mut open, path, options).map_err(|why| KernelError::Open {
                path: shown.clone(),
                why,
                libbpf_log: String::new(),
            })?;
        }
        if let Some(state) = options.state {
            state::check_names(state, &open_map_names(&open))?;
            state::apply_before_load(&mut open, state)?;
        }

        let log_bytes = if options.verifier_log_level > 0 {
            FULL_LOG_BYTES
        } else {
            REJECTION_LOG_BYTES
        };
        let mut logs: Vec<(String, Vec<u8>)> = Vec::new();
        for mut prog in open.progs_mut() {
            if options
                .autoload
                .iter()
                .any(|a| prog.name().to_str() == Some(a.as_str()))
            {
                prog.set_autoload(true);
            }
            if let Some(forced) = options.prog_type {
                set_prog_type(&mut prog, forced)
                    .map_err(|errno| load_error(&shown, None, errno, String::new()))?;
            }
            let mut buf = vec![0u8; log_bytes];
            prog.set_log_level(options.verifier_log_level);
            // SAFETY: `buf` is heap memory owned by `logs` below, which lives
            // until after the load; moving the Vec does not move its buffer.
            let ret = unsafe {
                libbpf_sys::bpf_program__set_log_buf(
                    prog.as_libbpf_object().as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len() as _,
                )
            };
            sys::check(ret).map_err(|errno| load_error(&shown, None, errno, String::new()))?;
            logs.push((prog.name().to_string_lossy().into_owned(), buf));
        }

        // Loaded by hand rather than by `OpenObject::load` to keep the exact errno.
        // SAFETY: `open` owns a valid, not yet loaded bpf_object.
        let ret = unsafe { libbpf_sys::bpf_object__load(open.as_libbpf_object().as_ptr()) };
        if ret < 0 {
            let failed = logs.iter().rev().find(|(_, buf)| buf[0] != 0);
            let (program, log) = match failed {
                Some((name, buf)) => (Some(name.clone()), c_text(buf)),
                None => (None, String::new()),
            };
            drop(open);
            return Err(load_error(&shown, program, Errno::from_ret(ret), log));
        }
        // SAFETY: the pointer comes from an OpenObject that was just loaded
        // successfully; ownership moves to `Object`, which closes it on drop.
        let object = unsafe { libbpf_rs::Object::from_ptr(open.take_ptr()) };

        let kernel_object = KernelObject {
            path: path.to_path_buf(),
            programs: collect_programs(&object, &shown)?,
            maps: collect_maps(&object, &shown)?,
            verifier_logs: if options.verifier_log_level > 0 {
                logs.iter()
                    .map(|(name, buf)| (name.clone(), c_text(buf)))
                    .collect()
            } else {
                Vec::new()
            },
            _object: object,
        };
        libbpf_log::clear();
        if let Some(state) = options.state {
            kernel_object.apply_state_after_load(state)?;
        }
        Ok(kernel_object)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn programs(&self) -> &[KernelProgram] {
        &self.programs
    }

    pub fn maps(&self) -> &[KernelMap] {
        &self.maps
    }

    /// A program by C function name, or by ELF section when no function has that name.
    pub fn program(&self, name: &str) -> Result<&KernelProgram, KernelError> {
        self.programs
            .iter()
            .find(|p| p.name == name)
            .or_else(|| {
                let mut by_section = self.programs.iter().filter(|p| p.section == name);
                match (by_section.next(), by_section.next()) {
                    (Some(p), None) => Some(p),
                    _ => None,
                }
            })
            .ok_or_else(|| KernelError::ProgramNotFound {
                program: name.to_string(),
                available: join(self.programs.iter().map(|p| p.name.as_str())),
            })
    }

    /// The raw fd of a program, e.g. for repeated `BPF_PROG_TEST_RUN` in benchmarks.
    pub fn prog_fd(&self, name: &str) -> Result<RawFd, KernelError> {
        self.program(name).map(|p| p.fd)
    }

    /// A map by STATE.json name (`vip_map`, `.rodata`) or by libbpf name (`xdp_lb.rodata`).
    pub fn map(&self, name: &str) -> Result<&KernelMap, KernelError> {
        self.maps
            .iter()
            .find(|m| m.name == name)
            .or_else(|| self.maps.iter().find(|m| m.libbpf_name == name))
            .ok_or_else(|| KernelError::MapNotFound {
                map: name.to_string(),
                available: join(self.maps.iter().map(|m| m.name.as_str())),
            })
    }

    /// The verifier log of an accepted program, when loaded with
    /// `verifier_log_level > 0`. Rejections carry theirs in [`KernelError::verifier_log`].
    pub fn verifier_log(&self, program: &str) -> Option<&str> {
        self.verifier_logs
            .iter()
            .find(|(name, _)| name == program)
            .map(|(_, log)| log.as_str())
    }

    /// Name of the object's program with kernel id `id`.
    pub(crate) fn program_name_by_id(&self, id: u32) -> Option<&str> {
        self.programs
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.name.as_str())
    }
}

/// The global-data images with `globals` applied, written into the open
/// object's internal maps before the load.
fn set_globals(
    open: &mut OpenObject,
    path: &Path,
    options: &LoadOptions<'_>,
) -> Result<(), String> {
    // Read with the CO-RE target libbpf gets, as bpfjet's own load reads it.
    let target = options
        .btf_custom_path
        .map_or(bpfjet_obj::KernelBtf::Running, |p| {
            bpfjet_obj::KernelBtf::File(p.to_path_buf())
        });
    let mut obj = bpfjet_obj::load_file_with(path, &target).map_err(|e| e.to_string())?;
    for (name, value) in options.globals {
        obj.set_global(name, value)
            .map_err(|e| format!("--global {name}={value}: {e}"))?;
    }
    for mut map in open.maps_mut() {
        let libbpf_name = map.name().to_string_lossy().into_owned();
        // SAFETY: the map pointer is valid while `open` lives.
        let global = unsafe { libbpf_sys::bpf_map__is_internal(map.as_libbpf_object().as_ptr()) };
        if !global {
            continue;
        }
        let name = state_name(&libbpf_name, global);
        let Some(image) = obj
            .maps
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.initial_data.as_ref())
        else {
            continue;
        };
        map.set_initial_value(image)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

fn set_max_entries(open: &mut OpenObject, name: &str, n: u32) -> Result<(), Errno> {
    let Some(map) = open.maps_mut().find(|m| m.name().to_str() == Some(name)) else {
        // ENOENT: no map of that name in the object.
        return Err(Errno::from_ret(-2));
    };
    // SAFETY: a valid map of an open, not yet loaded object.
    let ret = unsafe { libbpf_sys::bpf_map__set_max_entries(map.as_libbpf_object().as_ptr(), n) };
    sys::check(ret).map(|_| ())
}

fn set_prog_type(
    prog: &mut libbpf_rs::OpenProgramMut<'_>,
    forced: ProgTypeOverride,
) -> Result<(), Errno> {
    let ptr = prog.as_libbpf_object().as_ptr();
    // SAFETY: `ptr` is a valid, not yet loaded bpf_program of an open object.
    unsafe {
        sys::check(libbpf_sys::bpf_program__set_type(ptr, forced.prog_type))?;
        sys::check(libbpf_sys::bpf_program__set_expected_attach_type(
            ptr,
            forced.expected_attach_type,
        ))?;
        let flags = libbpf_sys::bpf_program__flags(ptr) | forced.prog_flags;
        sys::check(libbpf_sys::bpf_program__set_flags(ptr, flags))?;
    }
    Ok(())
}

fn load_error(path: &str, program: Option<String>, errno: Errno, log: String) -> KernelError {
    KernelError::Load {
        path: path.to_string(),
        program,
        errno,
        verifier_log: log,
        libbpf_log: libbpf_log::take(),
    }
}

pub(crate) fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

fn c_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// STATE.json name of a map. libbpf calls standard global data maps
/// `<first chars of object name>.rodata` (the kernel's 15-character limit)
/// but custom sections (`.data.foo`) by their section name; the section name
/// is what is stable across object file names, so that is what STATE.json uses.
pub(crate) fn state_name(libbpf_name: &str, global_data: bool) -> String {
    if !global_data || libbpf_name.starts_with('.') {
        return libbpf_name.to_string();
    }
    for section in [".rodata", ".data", ".bss", ".kconfig"] {
        if libbpf_name.ends_with(section) {
            return section.to_string();
        }
    }
    libbpf_name.to_string()
}

/// Read-only global data: libbpf freezes `.rodata*` and `.kconfig` after
/// writing their initial image, and marks them read-only for programs.
pub(crate) fn is_frozen(name: &str, global_data: bool) -> bool {
    global_data && (name.starts_with(".rodata") || name == ".kconfig")
}

/// (state name, libbpf name) of every map of an opened, not yet loaded object.
fn open_map_names(open: &OpenObject) -> Vec<(String, String)> {
    open.maps()
        .map(|m| {
            let libbpf_name = m.name().to_string_lossy().into_owned();
            // SAFETY: the map pointer is valid while `open` lives.
            let global = unsafe { libbpf_sys::bpf_map__is_internal(m.as_libbpf_object().as_ptr()) };
            (state_name(&libbpf_name, global), libbpf_name)
        })
        .collect()
}

fn collect_programs(
    object: &libbpf_rs::Object,
    path: &str,
) -> Result<Vec<KernelProgram>, KernelError> {
    object
        .progs()
        // libbpf's `SEC("?...")` programs are not loaded (no fd).
        .filter(|p| p.autoload())
        .map(|p| {
            let fd = p.as_fd().as_raw_fd();
            let name = p.name().to_string_lossy().into_owned();
            let id = sys::prog_id(fd).map_err(|errno| KernelError::Load {
                path: path.to_string(),
                program: Some(name.clone()),
                errno,
                verifier_log: String::new(),
                libbpf_log: String::new(),
            })?;
            Ok(KernelProgram {
                section: p.section().to_string_lossy().into_owned(),
                name,
                fd,
                id,
            })
        })
        .collect()
}

fn collect_maps(object: &libbpf_rs::Object, path: &str) -> Result<Vec<KernelMap>, KernelError> {
    let mut maps = Vec::new();
    for m in object.maps() {
        let libbpf_name = m.name().to_string_lossy().into_owned();
        // SAFETY: the map pointer is valid while `object` lives.
        let (global_data, fd, pinned) = unsafe {
            let ptr = m.as_libbpf_object().as_ptr();
            (
                libbpf_sys::bpf_map__is_internal(ptr),
                libbpf_sys::bpf_map__fd(ptr),
                !libbpf_sys::bpf_map__pin_path(ptr).is_null(),
            )
        };
        if fd < 0 {
            // Not created (autocreate off, e.g. struct_ops): nothing to fill or dump.
            continue;
        }
        let info = sys::map_info(fd).map_err(|errno| KernelError::MapAccess {
            map: format!("{libbpf_name} (in {path})"),
            what: "reading map info",
            errno,
        })?;
        let name = state_name(&libbpf_name, global_data);
        maps.push(KernelMap {
            frozen: is_frozen(&name, global_data),
            name,
            libbpf_name,
            fd,
            info,
            global_data,
            pinned,
        });
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_data_is_named_by_section() {
        assert_eq!(state_name("xdp_pass.rodata", true), ".rodata");
        assert_eq!(state_name("xdp.v2.bss", true), ".bss");
        assert_eq!(state_name("my_obje.kconfig", true), ".kconfig");
        assert_eq!(state_name(".data.counters", true), ".data.counters");
        assert_eq!(state_name("vip_map", false), "vip_map");
        assert!(is_frozen(".rodata.str1.1", true));
        assert!(!is_frozen(".data", true));
        assert!(!is_frozen(".rodata", false));
    }
}
