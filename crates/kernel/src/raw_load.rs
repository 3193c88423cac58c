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
}

impl Default for RawLoadOptions {
    fn default() -> Self {
        RawLoadOptions {
            prog_type: PROG_TYPE_XDP,
            xdp_frags: false,
            log_level: 1,
            license: "GPL".to_string(),
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
    if bytes.is_empty() || bytes.len() % 8 != 0 {
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
    let mut log = vec![0u8; LOG_BYTES];
    let license = std::ffi::CString::new(opts.license.clone()).map_err(|_| RawLoadError {
        stage: RawLoadStage::Input,
        errno: errno_of(libc::EINVAL),
        verifier_log: "license contains NUL".to_string(),
    })?;
    let mut lopts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        prog_flags: if opts.xdp_frags {
            libbpf_sys::BPF_F_XDP_HAS_FRAGS
        } else {
            0
        },
        fd_array: if fd_array.is_empty() {
            std::ptr::null()
        } else {
            fd_array.as_ptr()
        },
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
