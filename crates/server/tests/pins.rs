//! Pins on the bpf filesystem, through both backends: the kernel's `bpf()`
//! and bpfjet's, each in a directory of its own on bpffs, compared step by
//! step — errnos, what a directory listing shows, `rmdir` of a directory
//! holding a pin, a pin renamed with `mv` and removed with `rm`.

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{Backend, Command, Errno, KernelBackend, MapCreate, MapElem, ObjPath};
use std::ffi::CString;
use std::path::Path;

const ARRAY: u32 = 2;

/// How each side removes a pin: the kernel's by `unlink`, bpfjet's as its
/// preload library's `unlink` does.
trait Side {
    fn backend(&self) -> &dyn Backend;
    fn unlink(&self, path: &str) -> Result<(), Errno>;
}

struct Kernel;
impl Side for Kernel {
    fn backend(&self) -> &dyn Backend {
        &KernelBackend
    }
    fn unlink(&self, path: &str) -> Result<(), Errno> {
        std::fs::remove_file(path).map_err(|e| Errno::from_io(&e))
    }
}

struct Jet(BpfjetBackend);
impl Side for Jet {
    fn backend(&self) -> &dyn Backend {
        &self.0
    }
    fn unlink(&self, path: &str) -> Result<(), Errno> {
        if self.0.unpin(path) {
            Ok(())
        } else {
            std::fs::remove_file(path).map_err(|e| Errno::from_io(&e))
        }
    }
}

fn pin_cmd(fd: i64, path: &CString) -> Command {
    Command::ObjPin(ObjPath {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd as u32,
        ..ObjPath::default()
    })
}

fn get_cmd(path: &CString) -> Command {
    Command::ObjGet(ObjPath {
        pathname: path.as_ptr() as u64,
        ..ObjPath::default()
    })
}

/// Slot 0 of the array map behind `fd`.
fn read_slot(b: &dyn Backend, fd: i64) -> Result<u32, Errno> {
    let key = 0u32.to_ne_bytes();
    let mut value = [0u8; 4];
    b.execute(&Command::MapLookupElem(MapElem {
        map_fd: fd as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    }))?;
    Ok(u32::from_ne_bytes(value))
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The sequence, in `dir` (a fresh directory on bpffs): one line per step.
fn sequence(side: &dyn Side, dir: &Path) -> Vec<String> {
    let b = side.backend();
    let mut log = Vec::new();
    let c = |p: &Path| CString::new(p.to_str().unwrap()).unwrap();
    let fd = b
        .execute(&Command::MapCreate(MapCreate {
            map_type: ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            name: "pinned".into(),
            ..MapCreate::default()
        }))
        .expect("map create");
    let key = 0u32.to_ne_bytes();
    let value = 0x5eedu32.to_ne_bytes();
    b.execute(&Command::MapUpdateElem(MapElem {
        map_fd: fd as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags: 0,
    }))
    .expect("update");
    let sub = dir.join("sub");
    let pin = sub.join("m");
    let moved = sub.join("renamed");
    let mut step = |what: &str, r: Result<String, Errno>| log.push(format!("{what}: {r:?}"));

    step(
        "pin in a missing directory",
        b.execute(&pin_cmd(fd, &c(&pin))).map(|_| String::new()),
    );
    std::fs::create_dir(&sub).expect("mkdir on bpffs");
    step(
        "pin",
        b.execute(&pin_cmd(fd, &c(&pin))).map(|_| String::new()),
    );
    step(
        "pin again at the same path",
        b.execute(&pin_cmd(fd, &c(&pin))).map(|_| String::new()),
    );
    step("listing", Ok(listing(&sub).join(" ")));
    step(
        "rmdir of the directory holding it",
        std::fs::remove_dir(&sub)
            .map(|()| String::new())
            .map_err(|e| Errno::from_io(&e)),
    );
    step(
        "get: slot 0",
        b.execute(&get_cmd(&c(&pin)))
            .and_then(|got| read_slot(b, got))
            .map(|v| format!("{v:#x}")),
    );
    step(
        "mv",
        std::fs::rename(&pin, &moved)
            .map(|()| String::new())
            .map_err(|e| Errno::from_io(&e)),
    );
    step(
        "get at the old path",
        b.execute(&get_cmd(&c(&pin))).map(|_| String::new()),
    );
    step(
        "get at the new path: slot 0",
        b.execute(&get_cmd(&c(&moved)))
            .and_then(|got| read_slot(b, got))
            .map(|v| format!("{v:#x}")),
    );
    step("listing after mv", Ok(listing(&sub).join(" ")));
    step(
        "rm",
        side.unlink(moved.to_str().unwrap()).map(|()| String::new()),
    );
    step(
        "get after rm",
        b.execute(&get_cmd(&c(&moved))).map(|_| String::new()),
    );
    step(
        "pin at the old path again",
        b.execute(&pin_cmd(fd, &c(&pin))).map(|_| String::new()),
    );
    step(
        "mv, then rm at the new path",
        std::fs::rename(&pin, &moved)
            .map_err(|e| Errno::from_io(&e))
            .and_then(|()| side.unlink(moved.to_str().unwrap()))
            .map(|()| String::new()),
    );
    step(
        "get after that rm",
        b.execute(&get_cmd(&c(&moved))).map(|_| String::new()),
    );
    step(
        "pin, then rm by a process outside bpfjet",
        b.execute(&pin_cmd(fd, &c(&pin)))
            .and_then(|_| std::fs::remove_file(&pin).map_err(|e| Errno::from_io(&e)))
            .map(|()| String::new()),
    );
    step(
        "get after the outside rm",
        b.execute(&get_cmd(&c(&pin))).map(|_| String::new()),
    );
    step(
        "pin at that path again",
        b.execute(&pin_cmd(fd, &c(&pin))).map(|_| String::new()),
    );
    step(
        "rm again",
        side.unlink(pin.to_str().unwrap()).map(|()| String::new()),
    );
    step(
        "rmdir",
        std::fs::remove_dir(&sub)
            .map(|()| String::new())
            .map_err(|e| Errno::from_io(&e)),
    );
    log
}

fn on_bpffs(dir: &Path) -> bool {
    let c = CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string and a statfs buffer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == 0xcafe_4a11
}

#[test]
fn pins_on_bpffs_behave_as_the_kernels() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bpfjet_testsupport::report_skip("pins on bpffs: the kernel backend needs root");
        return;
    }
    let bpffs = Path::new("/sys/fs/bpf");
    if !on_bpffs(bpffs) {
        bpfjet_testsupport::report_skip("pins on bpffs: /sys/fs/bpf is not a bpf filesystem");
        return;
    }
    let pid = std::process::id();
    let kdir = bpffs.join(format!("bpfjet_pins_kernel_{pid}"));
    let jdir = bpffs.join(format!("bpfjet_pins_jet_{pid}"));
    std::fs::create_dir(&kdir).unwrap();
    std::fs::create_dir(&jdir).unwrap();
    let run = std::env::temp_dir().join(format!("bpfjet-pins-{pid}"));
    let name = format!("pins{pid}");
    let jet = Jet(BpfjetBackend::new(
        Namespace::open(&name, &run).expect("namespace"),
    ));
    let kernel = sequence(&Kernel, &kdir);
    let ours = sequence(&jet, &jdir);
    for id in jet.0.namespace().instance().list() {
        let _ = jet.0.namespace().instance().remove_map(id.id);
    }
    let _ = std::fs::remove_dir_all(&run);
    let _ = bpfjet_maps::Instance::remove_stale(&name);
    let _ = std::fs::remove_dir_all(&kdir);
    let _ = std::fs::remove_dir_all(&jdir);
    // The steps' own expectations (ENOENT 2, EEXIST 17, ENOTEMPTY 39), so
    // a kernel that changed shows here.
    let expected = [
        "pin in a missing directory: Err(Errno(2))",
        "pin: Ok(\"\")",
        "pin again at the same path: Err(Errno(17))",
        "listing: Ok(\"m\")",
        "rmdir of the directory holding it: Err(Errno(39))",
        "get: slot 0: Ok(\"0x5eed\")",
        "mv: Ok(\"\")",
        "get at the old path: Err(Errno(2))",
        "get at the new path: slot 0: Ok(\"0x5eed\")",
        "listing after mv: Ok(\"renamed\")",
        "rm: Ok(\"\")",
        "get after rm: Err(Errno(2))",
        "pin at the old path again: Ok(\"\")",
        "mv, then rm at the new path: Ok(\"\")",
        "get after that rm: Err(Errno(2))",
        "pin, then rm by a process outside bpfjet: Ok(\"\")",
        "get after the outside rm: Err(Errno(2))",
        "pin at that path again: Ok(\"\")",
        "rm again: Ok(\"\")",
        "rmdir: Ok(\"\")",
    ];
    assert_eq!(kernel, expected, "the kernel's own steps");
    assert_eq!(ours, kernel, "bpfjet's steps against the kernel's");
}

/// Instances share bpffs as processes share the kernel's: a path another
/// live instance pinned is taken (`EEXIST`), and its object is not this
/// instance's to open (`ENOENT`, never the placeholder map). A placeholder
/// left by an instance that was removed without unpinning is no pin: the
/// next pin at its path takes it.
#[test]
fn placeholders_of_other_and_removed_instances() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bpfjet_testsupport::report_skip("placeholders across instances: needs root");
        return;
    }
    let bpffs = Path::new("/sys/fs/bpf");
    if !on_bpffs(bpffs) {
        bpfjet_testsupport::report_skip(
            "placeholders across instances: /sys/fs/bpf is not a bpf filesystem",
        );
        return;
    }
    let pid = std::process::id();
    let dir = bpffs.join(format!("bpfjet_pins_shared_{pid}"));
    std::fs::create_dir(&dir).unwrap();
    let run = std::env::temp_dir().join(format!("bpfjet-pins-shared-{pid}"));
    let open = |name: &str| BpfjetBackend::new(Namespace::open(name, &run).expect("namespace"));
    let (a_name, b_name) = (format!("pinsa{pid}"), format!("pinsb{pid}"));
    let a = open(&a_name);
    let b = open(&b_name);
    let map = |be: &BpfjetBackend| {
        be.execute(&Command::MapCreate(MapCreate {
            map_type: ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            name: "shared".into(),
            ..MapCreate::default()
        }))
        .expect("map create")
    };
    let path = CString::new(dir.join("m").to_str().unwrap()).unwrap();
    let (fa, fb) = (map(&a), map(&b));
    let mut log = Vec::new();
    log.push(format!(
        "b pins: {:?}",
        b.execute(&pin_cmd(fb, &path)).map(|_| ())
    ));
    log.push(format!(
        "a pins the same path: {:?}",
        a.execute(&pin_cmd(fa, &path)).map(|_| ())
    ));
    log.push(format!(
        "a opens it: {:?}",
        a.execute(&get_cmd(&path)).map(|_| ())
    ));
    log.push(format!(
        "b opens it: {:?}",
        b.execute(&get_cmd(&path)).map(|_| ())
    ));
    // b goes away without unpinning: its records with it.
    for id in b.namespace().instance().list() {
        let _ = b.namespace().instance().remove_map(id.id);
    }
    drop(b);
    let _ = std::fs::remove_dir_all(run.join(&b_name));
    log.push(format!(
        "a pins after b's removal: {:?}",
        a.execute(&pin_cmd(fa, &path)).map(|_| ())
    ));
    let got = a.execute(&get_cmd(&path)).and_then(|fd| read_slot(&a, fd));
    log.push(format!("a opens its own: {got:?}"));
    log.push(format!("a unpins: {}", a.unpin(path.to_str().unwrap())));
    log.push(format!("left in the directory: {:?}", listing(&dir)));
    for id in a.namespace().instance().list() {
        let _ = a.namespace().instance().remove_map(id.id);
    }
    let _ = std::fs::remove_dir_all(&run);
    let _ = bpfjet_maps::Instance::remove_stale(&a_name);
    let _ = bpfjet_maps::Instance::remove_stale(&b_name);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        log,
        [
            "b pins: Ok(())",
            "a pins the same path: Err(Errno(17))",
            "a opens it: Err(Errno(2))",
            "b opens it: Ok(())",
            "a pins after b's removal: Ok(())",
            "a opens its own: Ok(0)",
            "a unpins: true",
            "left in the directory: []",
        ]
    );
}
