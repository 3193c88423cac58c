//! Shared by the integration tests: the negative corpus format, kernel
//! loading with and without CAP_PERFMON, and locating the NF corpus.
#![allow(dead_code)]

use bpfjet_maps::spec::flags;
use bpfjet_maps::{MapSpec, MapType};
use std::path::{Path, PathBuf};

/// Deterministic xorshift generator for the mutation tests (reproducible
/// from a seed, no dependency).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-enough in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One program of the negative corpus: a variant (`bad` or `good`) of a case.
#[derive(Clone, Debug)]
pub struct Variant {
    pub case: String,
    pub name: String,
    pub bytes: Vec<u8>,
    pub maps: Vec<MapSpec>,
    /// Parallel to `maps`: offset of the `struct bpf_spin_lock` in the value
    /// (`lock=N` in the case's map list); such maps get BTF in the kernel.
    pub locks: Vec<Option<u32>>,
    /// Expected verdicts: (privileged, unprivileged), true = accepted.
    pub expect: (bool, bool),
}

/// `type key value entries [lock=OFF]`.
fn parse_map(text: &str) -> (MapSpec, Option<u32>) {
    let mut lock = None;
    let f: Vec<&str> = text
        .split_whitespace()
        .filter(|w| match w.strip_prefix("lock=") {
            Some(off) => {
                lock = Some(off.parse::<u32>().expect("lock=<byte offset>"));
                false
            }
            None => true,
        })
        .collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
    let (ty, rodata) = match f[0] {
        "rodata" => (MapType::Array, true),
        t => (
            MapType::from_name(t).unwrap_or_else(|| panic!("unknown map type {t}")),
            false,
        ),
    };
    let mut spec = MapSpec::new(&format!("m{}", f[0]), ty, num(1), num(2), num(3));
    if rodata {
        spec.flags |= flags::RDONLY_PROG;
        spec.frozen = true;
        spec.initial_data = Some(vec![0; spec.value_size as usize]);
    }
    (spec, lock)
}

fn verdict(word: &str) -> bool {
    match word {
        "accept" => true,
        "reject" => false,
        w => panic!("verdict must be accept or reject, not {w}"),
    }
}

/// Parse one corpus file:
///
/// ```text
/// # what the case isolates
/// # maps: array 4 8 1, prog_array 4 4 2
/// # expect: bad=reject good=accept            (privileged)
/// # expect-unpriv: bad=reject good=reject     (defaults to the privileged line)
/// --- bad
/// <assembly>
/// --- good [hex]
/// <assembly, or 8 hex bytes per line>
/// --- @reserve
/// <assembly a variant includes with a line `@reserve`>
/// ```
///
/// Sections named `@NAME` are not programs but shared instruction runs:
/// a variant's line `@NAME` stands for the run's lines. A header line
/// `# include: FILE` (next to the case, e.g. `dynptr.inc`) adds that
/// file's `@NAME` sections.
pub fn parse_case(path: &Path) -> Vec<Variant> {
    let text = std::fs::read_to_string(path).unwrap();
    let case = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut maps: Vec<(MapSpec, Option<u32>)> = Vec::new();
    let mut priv_: Vec<(String, bool)> = Vec::new();
    let mut unpriv: Option<Vec<(String, bool)>> = None;
    let mut sections: Vec<(String, bool, String)> = Vec::new();
    let parse_expect = |rest: &str| -> Vec<(String, bool)> {
        rest.split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("name=verdict");
                (k.to_string(), verdict(v))
            })
            .collect()
    };
    let mut included = String::new();
    for line in text.lines() {
        if let Some(file) = line.strip_prefix("# include:").map(str::trim) {
            let inc = path.with_file_name(file);
            included.push_str(
                &std::fs::read_to_string(&inc)
                    .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), inc.display())),
            );
            included.push('\n');
            continue;
        }
    }
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("--- ") {
            let mut w = rest.split_whitespace();
            let name = w.next().unwrap().to_string();
            let hex = w.next() == Some("hex");
            sections.push((name, hex, String::new()));
            continue;
        }
        if let Some((_, _, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# maps:") {
            maps = rest
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(parse_map)
                .collect();
        } else if let Some(rest) = line.strip_prefix("# expect-unpriv:") {
            unpriv = Some(parse_expect(rest));
        } else if let Some(rest) = line.strip_prefix("# expect:") {
            priv_ = parse_expect(rest);
        }
    }
    let unpriv = unpriv.unwrap_or_else(|| priv_.clone());
    for line in included.lines() {
        if let Some(name) = line.strip_prefix("--- ") {
            sections.push((name.trim().to_string(), false, String::new()));
        } else if let Some((_, _, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    let (macros, sections): (Vec<_>, Vec<_>) = sections
        .into_iter()
        .partition(|(name, _, _)| name.starts_with('@'));
    let expand = |body: &str| -> String {
        body.lines()
            .map(|line| {
                let t = line.trim();
                match macros.iter().find(|(name, _, _)| name == t) {
                    Some((_, _, run)) => run.clone(),
                    None => format!("{line}\n"),
                }
            })
            .collect()
    };
    let find = |list: &[(String, bool)], name: &str| {
        list.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{}: no expectation for {name}", path.display()))
    };
    sections
        .into_iter()
        .map(|(name, hex, body)| {
            let bytes = if hex {
                body.split_whitespace()
                    .filter(|t| !t.starts_with('#'))
                    .map(|t| u8::from_str_radix(t, 16).expect("hex byte"))
                    .collect()
            } else {
                bpfjet_isa::assemble_bytes(&expand(&body))
                    .unwrap_or_else(|e| panic!("{} {name}: {e}", path.display()))
            };
            Variant {
                case: case.clone(),
                expect: (find(&priv_, &name), find(&unpriv, &name)),
                name,
                bytes,
                maps: maps.iter().map(|(m, _)| m.clone()).collect(),
                locks: maps.iter().map(|(_, l)| *l).collect(),
            }
        })
        .collect()
}

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

pub fn load_corpus() -> Vec<Variant> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "s"))
        .collect();
    files.sort();
    files.iter().flat_map(|p| parse_case(p)).collect()
}

pub fn slots(bytes: &[u8]) -> Vec<bpfjet_isa::RawInsn> {
    bytes
        .chunks_exact(8)
        .map(|c| bpfjet_isa::RawInsn::from_bytes(c.try_into().unwrap()))
        .collect()
}

/// The kernel's verdict and the last line of its log. Maps with a lock
/// offset are created with a BTF value type holding a `bpf_spin_lock` there.
pub fn kernel_verdict(bytes: &[u8], maps: &[MapSpec], locks: &[Option<u32>]) -> (bool, String) {
    use bpfjet_kernel::raw_load::{create_map, load_raw_with_fds, RawLoadOptions};
    let mut fds = Vec::new();
    for (i, spec) in maps.iter().enumerate() {
        let fd = match locks.get(i).copied().flatten() {
            Some(off) => create_locked_map(spec, off),
            None => create_map(spec).map_err(|e| e.to_string()),
        };
        match fd {
            Ok(fd) => fds.push(fd),
            Err(e) => return (false, format!("creating map #{i}: {e}")),
        }
    }
    match load_raw_with_fds(bytes, fds, &RawLoadOptions::default()) {
        Ok(_) => (true, String::new()),
        Err(e) => {
            let last = e
                .verifier_log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with("processed"))
                .unwrap_or("")
                .to_string();
            (false, format!("{}: {last}", e.errno))
        }
    }
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

/// Drop CAP_SYS_ADMIN and CAP_PERFMON from this thread's effective set
/// (capabilities are per thread; CAP_BPF and CAP_NET_ADMIN stay, which is
/// what loading XDP needs). The kernel then verifies with its unprivileged
/// rules (no pointer leaks, no uninitialised stack, Spectre v1 checks).
pub fn drop_perfmon_in_this_thread() -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget with a v3 header and room for two data structs.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    if r != 0 {
        return Err(format!("capget: {}", std::io::Error::last_os_error()));
    }
    for cap in [CAP_SYS_ADMIN, CAP_PERFMON] {
        let (i, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
        d[i].effective &= !bit;
    }
    // SAFETY: capset on the calling thread (pid 0) with the data just read.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) };
    if r != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Run `f` in a thread without CAP_PERFMON/CAP_SYS_ADMIN.
pub fn unprivileged<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    std::thread::spawn(move || {
        drop_perfmon_in_this_thread()?;
        Ok(f())
    })
    .join()
    .map_err(|_| "unprivileged thread panicked".to_string())?
}

/// Build examples/verifier (`make -C examples verifier`) and return the
/// object `build/examples/verifier/<name>.o`.
pub fn verifier_example(name: &str) -> PathBuf {
    make_examples("verifier").join(format!("build/examples/verifier/{name}.o"))
}

/// Runs `make -C examples TARGET`; returns the repository's root.
#[allow(dead_code)]
pub fn make_examples(target: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = std::process::Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("examples"))
        .arg(target)
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "building examples failed: run `make -C examples {target}`"
    );
    root
}

/// The NF corpus objects (build/examples/xdp/*.o), building them if needed.
pub fn nf_objects() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("build/examples/xdp");
    let list = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|r| {
                r.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "o"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let sources = std::fs::read_dir(root.join("examples/xdp"))
        .map(|r| {
            r.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "c"))
                .count()
        })
        .unwrap_or(0);
    if list(&dir).len() < sources {
        let status = std::process::Command::new("make")
            .arg("-C")
            .arg(root.join("examples"))
            .arg("objs")
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "building the NF corpus failed: run `make -C examples`"
        );
    }
    let v = list(&dir);
    assert!(
        v.len() >= sources && !v.is_empty(),
        "NF corpus missing in {}: run `make -C examples`",
        dir.display()
    );
    v
}

/// BTF for a map whose value is `struct v { int w0; ...; struct bpf_spin_lock
/// wN; ... }` (4-byte words, the lock at byte `lock_off`) and whose key is an
/// integer of the key size. Type ids: [1] key int, [2] int, [3] bpf_spin_lock, [4] v.
fn lock_btf(key_size: u32, value_size: u32, lock_off: u32) -> Vec<u8> {
    let mut strings = b"\0k\0int\0bpf_spin_lock\0val\0v\0".to_vec();
    let (k, int, lock, val, v) = (1u32, 3, 7, 21, 25);
    let int_info = |size: u32| (size * 8) & 0xff;
    let mut types: Vec<u32> = vec![
        k,
        1 << 24,
        key_size,
        int_info(key_size),
        int,
        1 << 24,
        4,
        32,
        lock,
        (4 << 24) | 1,
        4,
        val,
        2,
        0,
    ];
    let words = value_size / 4;
    types.extend_from_slice(&[v, (4 << 24) | words, value_size]);
    for w in 0..words {
        let name = strings.len() as u32;
        strings.extend_from_slice(format!("w{w}").as_bytes());
        strings.push(0);
        let ty = if w * 4 == lock_off { 3 } else { 2 };
        types.extend_from_slice(&[name, ty, w * 32]);
    }
    let type_len = (types.len() * 4) as u32;
    let mut blob = Vec::new();
    blob.extend_from_slice(&0xeb9fu16.to_le_bytes());
    blob.extend_from_slice(&[1, 0]);
    for x in [24u32, 0, type_len, type_len, strings.len() as u32] {
        blob.extend_from_slice(&x.to_le_bytes());
    }
    for t in types {
        blob.extend_from_slice(&t.to_le_bytes());
    }
    blob.extend_from_slice(&strings);
    blob
}

fn create_locked_map(spec: &MapSpec, lock_off: u32) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    assert!(
        lock_off.is_multiple_of(4)
            && spec.value_size.is_multiple_of(4)
            && lock_off < spec.value_size,
        "lock={lock_off} must be a 4-byte word inside the {}-byte value",
        spec.value_size
    );
    let blob = lock_btf(spec.key_size, spec.value_size, lock_off);
    // SAFETY: `blob` is a complete BTF image of `blob.len()` bytes; NULL opts.
    let btf = unsafe {
        libbpf_sys::bpf_btf_load(blob.as_ptr().cast(), blob.len() as _, std::ptr::null_mut())
    };
    if btf < 0 {
        return Err(format!("BTF load: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor that nobody else owns.
    let btf = unsafe { OwnedFd::from_raw_fd(btf) };
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: spec.flags,
        btf_fd: btf.as_raw_fd() as u32,
        btf_key_type_id: 1,
        btf_value_type_id: 4,
        ..Default::default()
    };
    let name = std::ffi::CString::new("locked").unwrap();
    // SAFETY: `name` is NUL-terminated and `opts` is a valid, sized options struct.
    let fd = unsafe {
        libbpf_sys::bpf_map_create(
            spec.map_type as u32,
            name.as_ptr(),
            spec.key_size,
            spec.value_size,
            spec.max_entries,
            &opts,
        )
    };
    if fd < 0 {
        return Err(format!("map create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
