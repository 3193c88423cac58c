//! Safe wrappers over the few `bpf()` commands this crate issues on raw map
//! and program file descriptors (through libbpf's low-level `bpf.h` API).
//! They work the same on the object's own maps and on inner maps this crate
//! creates or reaches by id, which keeps state and dump code uniform.

use crate::error::Errno;
use std::ffi::c_void;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The subset of `struct bpf_map_info` this crate uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    pub name: String,
}

pub(crate) fn check(ret: i32) -> Result<i32, Errno> {
    if ret < 0 {
        Err(Errno::from_ret(ret))
    } else {
        Ok(ret)
    }
}

pub(crate) fn map_info(fd: RawFd) -> Result<MapInfo, Errno> {
    let mut info = libbpf_sys::bpf_map_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a valid, writable bpf_map_info of `len` bytes.
    check(unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) })?;
    Ok(MapInfo {
        map_type: info.type_,
        id: info.id,
        key_size: info.key_size,
        value_size: info.value_size,
        max_entries: info.max_entries,
        flags: info.map_flags,
        name: c_name(&info.name),
    })
}

pub(crate) fn prog_id(fd: RawFd) -> Result<u32, Errno> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a valid, writable bpf_prog_info of `len` bytes; all
    // its pointer fields are zero, so the kernel copies out no arrays.
    check(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) })?;
    Ok(info.id)
}

fn c_name(raw: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `value` must be the size the kernel expects for this map's userspace
/// value (for per-CPU maps: every possible CPU, each slot rounded up to 8).
pub(crate) fn update(fd: RawFd, key: &[u8], value: &[u8]) -> Result<(), Errno> {
    // SAFETY: the kernel reads key_size/value-sized buffers; callers size
    // `key` and `value` from the map's info.
    check(unsafe {
        libbpf_sys::bpf_map_update_elem(
            fd,
            key.as_ptr() as *const c_void,
            value.as_ptr() as *const c_void,
            libbpf_sys::BPF_ANY as u64,
        )
    })
    .map(drop)
}

/// `Ok(None)` when the key is absent (`ENOENT`).
pub(crate) fn lookup(fd: RawFd, key: &[u8], value_len: usize) -> Result<Option<Vec<u8>>, Errno> {
    let mut value = vec![0u8; value_len];
    // SAFETY: `value` has room for what the kernel writes (sized by the caller
    // from the map's info).
    let ret = unsafe {
        libbpf_sys::bpf_map_lookup_elem(
            fd,
            key.as_ptr() as *const c_void,
            value.as_mut_ptr() as *mut c_void,
        )
    };
    match check(ret) {
        Ok(_) => Ok(Some(value)),
        Err(e) if e.raw() == libc::ENOENT => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every key of a map, in the kernel's iteration order.
pub(crate) fn keys(fd: RawFd, key_size: usize) -> Result<Vec<Vec<u8>>, Errno> {
    let mut out = Vec::new();
    let mut next = vec![0u8; key_size];
    let mut prev: Option<Vec<u8>> = None;
    loop {
        let prev_ptr = prev
            .as_ref()
            .map_or(std::ptr::null(), |k| k.as_ptr() as *const c_void);
        // SAFETY: `prev` (or NULL for the first key) and `next` are key-sized.
        let ret = unsafe {
            libbpf_sys::bpf_map_get_next_key(fd, prev_ptr, next.as_mut_ptr() as *mut c_void)
        };
        match check(ret) {
            Ok(_) => {
                out.push(next.clone());
                prev = Some(next.clone());
            }
            Err(e) if e.raw() == libc::ENOENT => return Ok(out),
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn create_map(
    map_type: u32,
    name: &str,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> Result<OwnedFd, Errno> {
    let name = std::ffi::CString::new(name).expect("map names have no NUL");
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: flags,
        ..Default::default()
    };
    // SAFETY: `name` is NUL-terminated and `opts` is a valid, sized options struct.
    let fd = check(unsafe {
        libbpf_sys::bpf_map_create(
            map_type,
            name.as_ptr(),
            key_size,
            value_size,
            max_entries,
            &opts,
        )
    })?;
    // SAFETY: bpf_map_create returned a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn map_fd_by_id(id: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: plain syscall wrapper.
    let fd = check(unsafe { libbpf_sys::bpf_map_get_fd_by_id(id) })?;
    // SAFETY: a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// CPUs the kernel may ever bring up; per-CPU maps have one slot for each.
pub fn possible_cpus() -> usize {
    // SAFETY: reads and caches /sys/devices/system/cpu/possible.
    let n = unsafe { libbpf_sys::libbpf_num_possible_cpus() };
    n.max(1) as usize
}

/// Per-CPU values cross the syscall boundary with each CPU's slot padded to 8 bytes.
pub(crate) fn percpu_stride(value_size: u32) -> usize {
    (value_size as usize).div_ceil(8) * 8
}

/// What one `BPF_MAP_LOOKUP_BATCH` call returned.
pub(crate) struct BatchRead {
    /// Elements written to the key and value buffers.
    pub count: usize,
    /// The map has no elements after these (the kernel said `ENOENT`).
    pub done: bool,
}

/// Room for the batch position token: the key for generic (array) batches,
/// a `u32` bucket index for hash maps.
pub(crate) fn batch_token_len(key_size: u32) -> usize {
    (key_size as usize).max(4)
}

fn batch_opts(elem_flags: u64) -> libbpf_sys::bpf_map_batch_opts {
    libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags,
        flags: 0,
    }
}

/// One `BPF_MAP_LOOKUP_BATCH`: up to `max` elements after the position
/// `in_batch` (None: from the start); the next position is written to
/// `out_batch`. `keys` and `values` must hold `max` keys and `max` values
/// (per-CPU values in the syscall's padded layout). `ENOENT` from the
/// kernel means the end of the map and is `done`, not an error.
pub(crate) fn lookup_batch(
    fd: RawFd,
    in_batch: Option<&mut [u8]>,
    out_batch: &mut [u8],
    keys: &mut [u8],
    values: &mut [u8],
    max: usize,
) -> Result<BatchRead, Errno> {
    let mut count = u32::try_from(max).unwrap_or(u32::MAX);
    let opts = batch_opts(0);
    let in_ptr = in_batch.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr() as *mut c_void);
    // SAFETY: `keys`/`values` have room for `count` elements (callers size
    // them from the map's info), the batch tokens for a key or a u32, and
    // `opts` is a valid, sized options struct.
    let ret = unsafe {
        libbpf_sys::bpf_map_lookup_batch(
            fd,
            in_ptr,
            out_batch.as_mut_ptr() as *mut c_void,
            keys.as_mut_ptr() as *mut c_void,
            values.as_mut_ptr() as *mut c_void,
            &mut count,
            &opts,
        )
    };
    match check(ret) {
        Ok(_) => Ok(BatchRead {
            count: count as usize,
            done: false,
        }),
        Err(e) if e.raw() == libc::ENOENT => Ok(BatchRead {
            count: count as usize,
            done: true,
        }),
        Err(e) => Err(e),
    }
}

/// One `BPF_MAP_UPDATE_BATCH` with `BPF_ANY`: `keys` and `values` hold
/// `count` packed keys and values. On failure, the error comes with the
/// number of leading elements the kernel applied before it stopped.
pub(crate) fn update_batch(
    fd: RawFd,
    keys: &[u8],
    values: &[u8],
    count: usize,
) -> Result<(), (usize, Errno)> {
    let mut done = u32::try_from(count).expect("batch sizes fit in u32");
    let opts = batch_opts(libbpf_sys::BPF_ANY as u64);
    // SAFETY: `keys` and `values` hold `count` elements of the map's key and
    // (syscall) value size; `opts` is a valid, sized options struct.
    let ret = unsafe {
        libbpf_sys::bpf_map_update_batch(
            fd,
            keys.as_ptr() as *const c_void,
            values.as_ptr() as *const c_void,
            &mut done,
            &opts,
        )
    };
    check(ret)
        .map(drop)
        .map_err(|e| ((done as usize).min(count), e))
}

/// Whether a batch error means "this kernel or map type has no batch
/// operation" (`ENOTSUPP`, `EOPNOTSUPP`, `EINVAL` from an older kernel),
/// rather than a problem with an element.
pub(crate) fn batch_unsupported(errno: &Errno) -> bool {
    const ENOTSUPP: i32 = 524; // the kernel's internal code, leaked by bpf()
    matches!(errno.raw(), ENOTSUPP | libc::EOPNOTSUPP | libc::EINVAL)
}

/// Say once per process and operation why a batch operation was not used,
/// so a slow dump or load is explained rather than mysterious.
pub(crate) fn note_batch_fallback(op: &'static str, map: &str, why: &dyn std::fmt::Display) {
    use std::sync::Mutex;
    static SAID: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.contains(&op) {
        said.push(op);
        eprintln!(
            "bpfjet-kernel: {op} not usable on map {map:?} ({why}); \
             falling back to one syscall per element"
        );
    }
}
