//! The objects every process of one bpfjet instance shares.
//!
//! - maps: the instance's shared-memory maps (`/dev/shm/bpfjet.<name>.<id>`,
//!   listed by `bpfjet map --name <name>`), with their `bpf()` metadata
//!   (BTF type ids, flags) in `<run>/<name>/maps/<id>`;
//! - programs: `<run>/<name>/progs/<id>`, the record a process needs to
//!   verify and load the program again;
//! - BTF: `<run>/<name>/btf/<id>`, the raw BTF blob;
//! - XDP links: `<run>/<name>/links/<id>` (see [`crate::links`]);
//! - attachments: `<run>/<name>/attach/` (see [`crate::attach`]);
//! - pins: `<run>/<name>/pins/<escaped bpffs path>`, naming an object.
//!
//! `<run>` is `$BPFJET_RUN_DIR` or `/run/bpfjet`; `<name>` is
//! `$BPFJET_INSTANCE` or `exec`.

use crate::pin_files::FileId;
use bpfjet_maps::Instance;
use bpfjet_sys::Errno;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::IntoRawFd;
use std::path::{Path, PathBuf};

/// bpfjet's BTF ids start here: the ids below are the kernel's BTF objects
/// (vmlinux, modules), which tools find by walking the BTF ids and which
/// `BPF_BTF_GET_NEXT_ID`/`GET_FD_BY_ID` pass to the kernel.
pub const BTF_ID_BASE: u32 = 1 << 28;

/// What an id or a pin names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjRef {
    Map(u32),
    Prog(u32),
    Btf(u32),
    Link(u32),
}

impl ObjRef {
    pub fn new(kind: Kind, id: u32) -> ObjRef {
        match kind {
            Kind::Map => ObjRef::Map(id),
            Kind::Prog => ObjRef::Prog(id),
            Kind::Btf => ObjRef::Btf(id),
            Kind::Link => ObjRef::Link(id),
        }
    }

    pub fn kind_id(self) -> (Kind, u32) {
        match self {
            ObjRef::Map(id) => (Kind::Map, id),
            ObjRef::Prog(id) => (Kind::Prog, id),
            ObjRef::Btf(id) => (Kind::Btf, id),
            ObjRef::Link(id) => (Kind::Link, id),
        }
    }
}

/// The record directories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Map,
    Prog,
    Btf,
    Link,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Map => "maps",
            Kind::Prog => "progs",
            Kind::Btf => "btf",
            Kind::Link => "links",
        }
    }
}

pub struct Namespace {
    name: String,
    run: PathBuf,
    dir: PathBuf,
    instance: Instance,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespace")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish()
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from_io(&e)
}

impl Namespace {
    /// The namespace named by the environment (`BPFJET_INSTANCE`,
    /// `BPFJET_RUN_DIR`).
    pub fn from_env() -> Result<Namespace, String> {
        let name = std::env::var("BPFJET_INSTANCE").unwrap_or_else(|_| "exec".into());
        let run = std::env::var("BPFJET_RUN_DIR").unwrap_or_else(|_| "/run/bpfjet".into());
        Namespace::open(&name, Path::new(&run))
    }

    /// Join (or start) the instance `name` with its records under `run`.
    pub fn open(name: &str, run: &Path) -> Result<Namespace, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(format!(
                "instance name {name:?}: use letters, digits, '-' and '_'"
            ));
        }
        let dir = run.join(name);
        for k in ["maps", "progs", "btf", "pins", "links", "attach"] {
            fs::create_dir_all(dir.join(k))
                .map_err(|e| format!("{}: {e}", dir.join(k).display()))?;
        }
        let ncpus = bpfjet_runtime::possible_cpus() as u32;
        let instance = match Instance::open(name) {
            Ok(i) => i,
            Err(_) => match Instance::create(name, ncpus) {
                Ok(i) => i,
                // Another process created it in between.
                Err(_) => Instance::open(name).map_err(|e| format!("instance {name}: {e}"))?,
            },
        };
        Ok(Namespace {
            name: name.to_string(),
            run: run.to_path_buf(),
            dir,
            instance,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `<run>/<name>`: the instance's records.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<run>`.
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    pub fn record_path(&self, kind: Kind, id: u32) -> PathBuf {
        self.dir.join(kind.dir()).join(id.to_string())
    }

    /// Allocate the next id of `kind` and write its record. Ids are never
    /// reused within an instance, like the kernel's: a counter file, locked
    /// while it is advanced, remembers the last one. The record is returned
    /// open and holding its object (a shared lock, see `holders`) until the
    /// caller has handed out the object's first fd: however long that takes
    /// (an attach starts a data plane), no sweep frees the new object.
    pub fn create_record(
        &self,
        kind: Kind,
        contents: impl Fn(u32) -> Vec<u8>,
    ) -> Result<(u32, File), Errno> {
        use std::io::{Read, Seek};
        use std::os::unix::io::AsRawFd;
        let mut counter = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.dir.join(format!("{}.last-id", kind.dir())))
            .map_err(io_errno)?;
        // SAFETY: flock on an fd we own; released when `counter` closes.
        if unsafe { libc::flock(counter.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io_errno(std::io::Error::last_os_error()));
        }
        let mut text = String::new();
        counter.read_to_string(&mut text).map_err(io_errno)?;
        let last: u32 = text.trim().parse().unwrap_or(0);
        let floor = if kind == Kind::Btf {
            BTF_ID_BASE - 1
        } else {
            0
        };
        let mut id = last
            .max(self.ids(kind).last().copied().unwrap_or(0))
            .max(floor)
            + 1;
        let mut file = loop {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(self.record_path(kind, id))
            {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => id += 1,
                Err(e) => return Err(io_errno(e)),
            }
        };
        counter.set_len(0).map_err(io_errno)?;
        counter.rewind().map_err(io_errno)?;
        counter
            .write_all(id.to_string().as_bytes())
            .map_err(io_errno)?;
        crate::holders::hold(file.as_raw_fd());
        file.write_all(&contents(id)).map_err(io_errno)?;
        Ok((id, file))
    }

    /// Write the record of an id allocated elsewhere (a map's metadata).
    pub fn write_record(&self, kind: Kind, id: u32, contents: &[u8]) -> Result<(), Errno> {
        fs::write(self.record_path(kind, id), contents).map_err(io_errno)
    }

    pub fn read_record(&self, kind: Kind, id: u32) -> Result<Vec<u8>, Errno> {
        fs::read(self.record_path(kind, id)).map_err(|_| Errno::ENOENT)
    }

    /// A new fd on the record file of a program or BTF object.
    pub fn open_record(&self, kind: Kind, id: u32) -> Result<i32, Errno> {
        let f = File::options()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(self.record_path(kind, id))
            .map_err(|_| Errno::ENOENT)?;
        Ok(f.into_raw_fd())
    }

    /// Ids of `kind`, ascending. Map ids come from the instance registry.
    pub fn ids(&self, kind: Kind) -> Vec<u32> {
        let mut ids: Vec<u32> = if kind == Kind::Map {
            self.instance.list().iter().map(|m| m.id).collect()
        } else {
            fs::read_dir(self.dir.join(kind.dir()))
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        ids.sort_unstable();
        ids
    }

    /// Kernel objects the instance's processes made under `bpfjet exec`
    /// (programs of types bpfjet does not run, maps it lacks or moved,
    /// their links), listed with the instance's own (`kernel_objects.rs`).
    fn kernel_dir(&self, kind: Kind) -> PathBuf {
        self.dir.join(format!("kernel-{}", kind.dir()))
    }

    pub fn register_kernel_id(&self, kind: Kind, id: u32) {
        let dir = self.kernel_dir(kind);
        let _ = fs::create_dir_all(&dir);
        let _ = fs::write(dir.join(id.to_string()), b"");
    }

    pub fn forget_kernel_id(&self, kind: Kind, id: u32) {
        let _ = fs::remove_file(self.kernel_dir(kind).join(id.to_string()));
    }

    /// The registered kernel ids of `kind`, ascending.
    pub fn kernel_ids(&self, kind: Kind) -> Vec<u32> {
        let mut ids: Vec<u32> = fs::read_dir(self.kernel_dir(kind))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    /// The shared-memory file of map `id` (what a map fd is opened on).
    pub fn map_file(&self, id: u32) -> PathBuf {
        PathBuf::from(format!("{}{id}", self.map_file_prefix()))
    }

    fn map_file_prefix(&self) -> String {
        format!("/dev/shm/bpfjet.{}.", self.name)
    }

    /// What an fd's file is, from its path (`/proc/self/fd/N`): a map's
    /// shared-memory object or a record of this instance.
    pub fn identify(&self, path: &str) -> Option<ObjRef> {
        if let Some(id) = path.strip_prefix(&self.map_file_prefix()) {
            return id.parse().ok().map(ObjRef::Map);
        }
        let rest = Path::new(path).strip_prefix(&self.dir).ok()?;
        let mut parts = rest.iter().map(|p| p.to_str());
        let (Some(Some(dir)), Some(Some(id)), None) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let id = id.parse().ok()?;
        match dir {
            "progs" => Some(ObjRef::Prog(id)),
            "btf" => Some(ObjRef::Btf(id)),
            "links" => Some(ObjRef::Link(id)),
            _ => None,
        }
    }

    fn pin_file(&self, path: &str) -> Result<PathBuf, Errno> {
        // bpffs paths are absolute; the kernel resolves them like any path.
        if !path.starts_with('/') || path.contains("/../") || path.ends_with("/..") {
            return Err(Errno::EINVAL);
        }
        let parent = Path::new(path).parent().ok_or(Errno::EINVAL)?;
        if !parent.is_dir() {
            return Err(Errno::ENOENT);
        }
        let escaped: String = path
            .bytes()
            .map(|b| match b {
                b'/' => "%2F".to_string(),
                b'%' => "%25".to_string(),
                b => (b as char).to_string(),
            })
            .collect();
        Ok(self.dir.join("pins").join(escaped))
    }

    /// `BPF_OBJ_PIN`: EEXIST if the path is taken. `file` is the
    /// placeholder on bpffs (see [`crate::pin_files`]), if there is one.
    pub fn pin(&self, path: &str, obj: ObjRef, file: Option<FileId>) -> Result<(), Errno> {
        let target = self.pin_file(path)?;
        let mut text = match obj {
            ObjRef::Map(id) => format!("map {id}"),
            ObjRef::Prog(id) => format!("prog {id}"),
            ObjRef::Btf(id) => format!("btf {id}"),
            ObjRef::Link(id) => format!("link {id}"),
        };
        if let Some(f) = file {
            text += &format!(" file {} {} {}", f.dev, f.ino, f.map_id);
        }
        text.push('\n');
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(target)
            .map_err(io_errno)?;
        f.write_all(text.as_bytes()).map_err(io_errno)
    }

    /// Every pin: its path, what it names, its placeholder.
    pub fn pins(&self) -> Vec<Pin> {
        let Ok(dir) = fs::read_dir(self.dir.join("pins")) else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok())
            .filter_map(|e| {
                let path = unescape(e.file_name().to_str()?);
                let (obj, file) = parse_pin(&fs::read_to_string(e.path()).ok()?).ok()?;
                Some(Pin { path, obj, file })
            })
            .collect()
    }

    /// Whether any pin names `obj` (one whose placeholder was removed from
    /// bpffs behind bpfjet's back is no pin; one renamed still is).
    pub fn is_pinned(&self, obj: ObjRef) -> bool {
        self.pins().iter().any(|p| p.obj == obj && !p.gone())
    }

    pub fn remove_record(&self, kind: Kind, id: u32) {
        let _ = fs::remove_file(self.record_path(kind, id));
    }

    /// Remove the pin record at `path`: what it named, or None when bpfjet
    /// has no pin there. Its placeholder is the caller's.
    pub fn unpin(&self, path: &str) -> Option<Pin> {
        let file = self.pin_file(path).ok()?;
        let (obj, placeholder) = parse_pin(&fs::read_to_string(&file).ok()?).ok()?;
        fs::remove_file(&file).ok()?;
        Some(Pin {
            path: path.to_string(),
            obj,
            file: placeholder,
        })
    }

    /// The pin record at `path` (`BPF_OBJ_GET`), live or not.
    pub fn pinned(&self, path: &str) -> Result<Pin, Errno> {
        let text = fs::read_to_string(self.pin_file(path)?).map_err(|_| Errno::ENOENT)?;
        let (obj, file) = parse_pin(&text)?;
        Ok(Pin {
            path: path.to_string(),
            obj,
            file,
        })
    }

    /// A pin's placeholder was renamed (`mv` on bpffs): its record follows.
    pub fn move_pin(&self, pin: &Pin, to: &str) -> Result<(), Errno> {
        let from = self.pin_file(&pin.path)?;
        fs::rename(from, self.pin_file(to)?).map_err(io_errno)
    }

    /// Whether some instance under the run directory has a pin record
    /// whose placeholder is `id` (its own path or parked after a rename).
    /// A placeholder no instance claims was left by an instance since
    /// removed: garbage, not a pin.
    pub fn placeholder_claimed(&self, path: &str, id: FileId) -> bool {
        // The record names as every instance files them.
        let names: Vec<PathBuf> = [path, &parked_path(id.map_id)]
            .iter()
            .filter_map(|p| Some(self.pin_file(p).ok()?.file_name()?.into()))
            .collect();
        let Ok(instances) = fs::read_dir(&self.run) else {
            return false;
        };
        instances.filter_map(|e| e.ok()).any(|inst| {
            names
                .iter()
                .filter_map(|n| fs::read_to_string(inst.path().join("pins").join(n)).ok())
                .filter_map(|t| parse_pin(&t).ok())
                .any(|(_, file)| file.is_some_and(|f| f.is_file((id.dev, id.ino))))
        })
    }

    /// A pin whose placeholder left its path for one bpfjet does not know
    /// yet: its record leaves the path too (another pin may take it) and
    /// waits under its placeholder's map id until an `OBJ_GET` of the new
    /// path finds it by the file's identity.
    pub fn park_pin(&self, pin: &Pin) -> Result<(), Errno> {
        let Some(f) = pin.file else {
            return Ok(());
        };
        self.move_pin(pin, &parked_path(f.map_id))
    }
}

/// Where a renamed pin's record waits: a path no bpffs pin has, keyed by
/// its placeholder map's id.
fn parked_path(map_id: u32) -> String {
    format!("/.bpfjet-moved-pin-{map_id}")
}

/// A pin record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub path: String,
    pub obj: ObjRef,
    pub file: Option<FileId>,
}

impl Pin {
    /// Whether the pin is at its path: a record without a placeholder (not
    /// on bpffs) always is; one with a placeholder while that file is.
    pub fn live(&self) -> bool {
        self.file.is_none_or(|f| f.is_at(&self.path))
    }

    /// Whether the pin is gone: its placeholder was removed (its map freed).
    pub fn gone(&self) -> bool {
        self.file.is_some_and(|f| !f.exists())
    }
}

/// The bpffs path a pin record's file name escapes (`%2F` for `/`, `%25`
/// for `%`), read left to right.
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("%2F") => out.push('/'),
            Some("%25") => out.push('%'),
            _ => {
                out.push('%');
                rest = &rest[i + 1..];
                continue;
            }
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    out
}

fn parse_pin(text: &str) -> Result<(ObjRef, Option<FileId>), Errno> {
    let mut words = text.split_whitespace();
    let kind = words.next();
    let id: u32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or(Errno::EINVAL)?;
    let obj = match kind {
        Some("map") => ObjRef::Map(id),
        Some("prog") => ObjRef::Prog(id),
        Some("btf") => ObjRef::Btf(id),
        Some("link") => ObjRef::Link(id),
        _ => return Err(Errno::EINVAL),
    };
    let file = match words.next() {
        Some("file") => {
            let mut n = || words.next().and_then(|w| w.parse::<u64>().ok());
            let (dev, ino, map_id) = (n(), n(), n());
            Some(FileId {
                dev: dev.ok_or(Errno::EINVAL)?,
                ino: ino.ok_or(Errno::EINVAL)?,
                map_id: map_id
                    .and_then(|m| u32::try_from(m).ok())
                    .ok_or(Errno::EINVAL)?,
            })
        }
        _ => None,
    };
    Ok((obj, file))
}
