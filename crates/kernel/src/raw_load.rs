//! Loading a raw instruction array (not an ELF object) into the kernel, for
//! differential tests of bpfjet's verifier: the kernel's verdict and verifier
//! log for exactly the instructions bpfjet verified.
//!
//! Map references in the program use the object-independent encoding bpfjet
//! uses everywhere: `lddw` with src `BPF_PSEUDO_MAP_IDX` (5) or
//! `BPF_PSEUDO_MAP_IDX_VALUE` (6) whose imm indexes `maps`. A kernel map is
//! created for every spec and the program is loaded with an `fd_array`, so
//! the kernel resolves the same indices.
//!
//! ```no_run
//! use bpfjet_kernel::raw_load::{load_raw, RawLoadOptions};
//! // r0 = 2 (XDP_PASS); exit
//! let bytes = [0xb7, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! match load_raw(&bytes, &[], &RawLoadOptions::default()) {
//!     Ok(prog) => println!("accepted, fd {}", std::os::fd::AsRawFd::as_raw_fd(&prog.fd)),
//!     Err(e) => println!("rejected: {}", e.verifier_log),
//! }
//! ```

use crate::error::Errno;
use crate::sys::check;
use bpfjet_maps::MapSpec;
use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The kernel's `BPF_PROG_TYPE_XDP`.
pub const PROG_TYPE_XDP: u32 = libbpf_sys::BPF_PROG_TYPE_XDP;

/// Verifier log buffer; the kernel keeps the end of the log when it does not fit.
const LOG_BYTES: usize = 4 << 20;

/// How to load a raw program.
#[derive(Clone, Debug)]
pub struct RawLoadOptions {
    /// Kernel program type number (default XDP).
    pub prog_type: u32,
    /// `BPF_F_XDP_HAS_FRAGS` (an `xdp.frags` program).
    pub xdp_frags: bool,
    /// Kernel verifier `log_level` (1 = the usual log, 2 = every state).
    /// The log is requested for accepted programs too.
    pub log_level: u32,
    /// License string (GPL-only helpers need a GPL-compatible one).
    pub license: String,
    /// `expected_attach_type` (e.g. `BPF_TRACE_UPROBE_MULTI`); 0 for most.
    pub expected_attach_type: u32,
    /// Load flags besides `BPF_F_XDP_HAS_FRAGS` (e.g. `BPF_F_SLEEPABLE`).
    pub prog_flags: u32,
    /// `attach_btf_id` in the kernel's BTF (a `tp_btf` program's
    /// `btf_trace_NAME`); 0 for most.
    pub attach_btf_id: u32,
}

impl Default for RawLoadOptions {
    fn default() -> Self {
        RawLoadOptions {
            prog_type: PROG_TYPE_XDP,
            xdp_frags: false,
            log_level: 1,
            license: "GPL".to_string(),
            expected_attach_type: 0,
            prog_flags: 0,
            attach_btf_id: 0,
        }
    }
}

/// An accepted program and the maps created for it (closed when dropped).
#[derive(Debug)]
pub struct RawProgram {
    pub fd: OwnedFd,
    pub maps: Vec<OwnedFd>,
    /// The verifier log of the successful load (may be empty).
    pub verifier_log: String,
}

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawLoadStage {
    /// The byte image is not a whole number of instructions.
    Input,
    /// Creating (or initialising) the map with this index.
    Map(usize),
    /// `BPF_PROG_LOAD`: the verifier (or the syscall) refused the program.
    Load,
}

/// The kernel's refusal.
#[derive(Debug, thiserror::Error)]
#[error("{}: {errno}{}", stage_text(.stage), log_suffix(.verifier_log))]
pub struct RawLoadError {
    pub stage: RawLoadStage,
    pub errno: Errno,
    /// The verifier's log; its last lines say why the program was rejected.
    pub verifier_log: String,
}

fn stage_text(stage: &RawLoadStage) -> String {
    match stage {
        RawLoadStage::Input => "raw program".to_string(),
        RawLoadStage::Map(i) => format!("creating map #{i}"),
        RawLoadStage::Load => "BPF_PROG_LOAD".to_string(),
    }
}

fn log_suffix(log: &str) -> String {
    let tail: Vec<&str> = log.lines().rev().take(4).collect();
    if tail.is_empty() {
        String::new()
    } else {
        let mut tail = tail;
        tail.reverse();
        format!("\nverifier log (end):\n{}", tail.join("\n"))
    }
}

fn errno_of(raw: i32) -> Errno {
    Errno(std::io::Error::from_raw_os_error(raw))
}

/// Create one kernel map for `spec` (inner map template included), with its
/// initial data written and frozen as libbpf would do it for global data.
pub fn create_map(spec: &MapSpec) -> Result<OwnedFd, Errno> {
    let inner = match &spec.inner {
        Some(inner) => Some(create_map(inner)?),
        None => None,
    };
    let name = std::ffi::CString::new(
        spec.name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .take(15)
            .collect::<String>(),
    )
    .map_err(|_| errno_of(libc::EINVAL))?;
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: spec.flags,
        map_extra: spec.map_extra,
        inner_map_fd: inner.as_ref().map_or(0, |fd| fd.as_raw_fd() as u32),
        ..Default::default()
    };
    // SAFETY: `name` is NUL-terminated and `opts` is a valid, sized options struct.
    let fd = check(unsafe {
        libbpf_sys::bpf_map_create(
            spec.map_type as u32,
            name.as_ptr(),
            spec.key_size,
            spec.value_size,
            spec.max_entries,
            &opts,
        )
    })?;
    // SAFETY: a fresh descriptor that nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if let Some(data) = &spec.initial_data {
        let mut value = data.clone();
        value.resize(spec.value_size as usize, 0);
        let key = 0u32.to_ne_bytes();
        // SAFETY: key and value buffers are key_size (4) and value_size bytes.
        check(unsafe {
            libbpf_sys::bpf_map_update_elem(
                fd.as_raw_fd(),
                key.as_ptr() as *const c_void,
                value.as_ptr() as *const c_void,
                0,
            )
        })?;
    }
    if spec.frozen {
        // SAFETY: plain syscall wrapper on our own descriptor.
        check(unsafe { libbpf_sys::bpf_map_freeze(fd.as_raw_fd()) })?;
    }
    Ok(fd)
}

/// Load `bytes` (8 bytes per instruction slot, little endian) as a program of
/// `opts.prog_type`, creating a kernel map for every entry of `maps`.
pub fn load_raw(
    bytes: &[u8],
    maps: &[MapSpec],
    opts: &RawLoadOptions,
) -> Result<RawProgram, RawLoadError> {
    let mut fds = Vec::with_capacity(maps.len());
    for (i, spec) in maps.iter().enumerate() {
        let fd = create_map(spec).map_err(|errno| RawLoadError {
            stage: RawLoadStage::Map(i),
            errno,
            verifier_log: String::new(),
        })?;
        fds.push(fd);
    }
    load_raw_with_fds(bytes, fds, opts)
}

/// Like [`load_raw`], with maps the caller created (e.g. with [`create_map`]
/// in a more privileged thread); `fd_array[i]` is `maps[i]`.
pub fn load_raw_with_fds(
    bytes: &[u8],
    maps: Vec<OwnedFd>,
    opts: &RawLoadOptions,
) -> Result<RawProgram, RawLoadError> {
    if bytes.is_empty() || bytes.len() & 7 != 0 {
        return Err(RawLoadError {
            stage: RawLoadStage::Input,
            errno: errno_of(libc::EINVAL),
            verifier_log: format!(
                "{} bytes is not a whole number of instructions",
                bytes.len()
            ),
        });
    }
    // Copy into 8-byte aligned storage laid out like `struct bpf_insn`.
    let insns: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    let fd_array: Vec<i32> = maps.iter().map(|fd| fd.as_raw_fd()).collect();
    // Callbacks (function pointers) need BTF func_info: describe every
    // subprogram with a minimal BTF.
    let entries = subprog_entries(&insns);
    let needs_btf = insns
        .iter()
        .any(|&i| i as u8 == 0x18 && ((i >> 12) & 0xf) == 4);
    let btf_fd = if needs_btf {
        Some(
            load_minimal_btf(entries.len()).map_err(|errno| RawLoadError {
                stage: RawLoadStage::Load,
                errno,
                verifier_log: "loading the BTF that describes the subprograms failed".to_string(),
            })?,
        )
    } else {
        None
    };
    let func_info: Vec<[u32; 2]> = entries
        .iter()
        .enumerate()
        .map(|(i, &e)| [e, FIRST_FUNC_TYPE + i as u32])
        .collect();
    let mut log = vec![0u8; LOG_BYTES];
    let license = std::ffi::CString::new(opts.license.clone()).map_err(|_| RawLoadError {
        stage: RawLoadStage::Input,
        errno: errno_of(libc::EINVAL),
        verifier_log: "license contains NUL".to_string(),
    })?;
    let mut lopts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        prog_flags: opts.prog_flags
            | if opts.xdp_frags {
                libbpf_sys::BPF_F_XDP_HAS_FRAGS
            } else {
                0
            },
        expected_attach_type: opts.expected_attach_type,
        attach_btf_id: opts.attach_btf_id,
        fd_array: if fd_array.is_empty() {
            std::ptr::null()
        } else {
            fd_array.as_ptr()
        },
        prog_btf_fd: btf_fd.as_ref().map_or(0, |f| f.as_raw_fd() as u32),
        func_info: if btf_fd.is_some() {
            func_info.as_ptr().cast()
        } else {
            std::ptr::null()
        },
        func_info_cnt: if btf_fd.is_some() {
            func_info.len() as u32
        } else {
            0
        },
        func_info_rec_size: if btf_fd.is_some() { 8 } else { 0 },
        log_level: opts.log_level,
        log_size: if opts.log_level == 0 {
            0
        } else {
            LOG_BYTES as u32
        },
        log_buf: if opts.log_level == 0 {
            std::ptr::null_mut()
        } else {
            log.as_mut_ptr().cast()
        },
        ..Default::default()
    };
    let name = c"bpfjet_raw";
    // SAFETY: `insns` holds `insns.len()` 8-byte instructions; `fd_array`,
    // `log` and the strings outlive the call; `lopts` is a sized options struct.
    let ret = unsafe {
        libbpf_sys::bpf_prog_load(
            opts.prog_type,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            insns.len() as _,
            &mut lopts,
        )
    };
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let verifier_log = String::from_utf8_lossy(&log[..end]).into_owned();
    if ret < 0 {
        return Err(RawLoadError {
            stage: RawLoadStage::Load,
            errno: Errno::from_ret(ret),
            verifier_log,
        });
    }
    // SAFETY: a fresh descriptor that nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(ret) };
    Ok(RawProgram {
        fd,
        maps,
        verifier_log,
    })
}

/// Slots where subprograms start: 0, targets of `call` with src
/// `BPF_PSEUDO_CALL` and of `lddw` with src `BPF_PSEUDO_FUNC`.
fn subprog_entries(insns: &[u64]) -> Vec<u32> {
    let mut out = vec![0u32];
    for (i, &raw) in insns.iter().enumerate() {
        let code = raw as u8;
        let src = ((raw >> 12) & 0xf) as u8;
        let imm = (raw >> 32) as u32 as i32 as i64;
        if (code == 0x85 && src == 1) || (code == 0x18 && src == 4) {
            let t = i as i64 + 1 + imm;
            if t >= 0 && (t as usize) < insns.len() {
                out.push(t as u32);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// BTF type id of the first `FUNC` in [`load_minimal_btf`].
const FIRST_FUNC_TYPE: u32 = 3;

/// BTF with `int`, one `int (void)` prototype and `funcs` static functions
/// named f0, f1, ... using it.
fn load_minimal_btf(funcs: usize) -> Result<OwnedFd, Errno> {
    let mut strings = b"\0int\0".to_vec();
    let mut types: Vec<u32> = vec![
        // [1] int: name "int", INT kind, 4 bytes, signed 32 bits.
        1,
        1 << 24,
        4,
        (1 << 24) | 32,
        // [2] FUNC_PROTO returning [1], no parameters.
        0,
        13 << 24,
        1,
    ];
    for i in 0..funcs {
        let name_off = strings.len() as u32;
        strings.extend_from_slice(format!("f{i}").as_bytes());
        strings.push(0);
        // FUNC, static linkage, of type [2].
        types.extend_from_slice(&[name_off, 12 << 24, 2]);
    }
    let type_len = (types.len() * 4) as u32;
    let mut blob = Vec::new();
    blob.extend_from_slice(&0xeb9fu16.to_le_bytes());
    blob.push(1);
    blob.push(0);
    for v in [24u32, 0, type_len, type_len, strings.len() as u32] {
        blob.extend_from_slice(&v.to_le_bytes());
    }
    for t in types {
        blob.extend_from_slice(&t.to_le_bytes());
    }
    blob.extend_from_slice(&strings);
    // SAFETY: `blob` is a complete BTF image of `blob.len()` bytes; NULL opts.
    let fd = check(unsafe {
        libbpf_sys::bpf_btf_load(blob.as_ptr().cast(), blob.len() as _, std::ptr::null_mut())
    })?;
    // SAFETY: a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
