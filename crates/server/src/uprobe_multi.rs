//! Uprobe-multi links (`BPF_LINK_CREATE` with `BPF_TRACE_UPROBE_MULTI`,
//! Linux 6.6): one link attaching a `uprobe.multi` program at many file
//! offsets of one ELF file, each with its own cookie and USDT semaphore,
//! for every process or for one (libbpf 1.3+ makes them for
//! `uprobe.multi`/`uretprobe.multi` sections and for
//! `bpf_program__attach_uprobe_multi`; bpftrace for wildcard uprobes).
//!
//! The link's record keeps one [`ProbeLink`] per offset, each an ordinary
//! uprobe point: a traced process runs the program at each of them as at
//! the uprobes of perf-event links ([`crate::traced_object`]), with the
//! point's cookie, and drops them all when the link goes.

use crate::backend::BpfjetBackend;
use crate::links::{dword, word};
use crate::objects::{Obj, ProgObj};
use crate::perf_events::ProbePoint;
use crate::probe_links::ProbeLink;
use bpfjet_sys::Errno;
use serde::{Deserialize, Serialize};

/// `BPF_TRACE_UPROBE_MULTI` (enum bpf_attach_type).
pub const BPF_TRACE_UPROBE_MULTI: u32 = 48;
/// `BPF_LINK_TYPE_UPROBE_MULTI` (enum bpf_link_type).
pub const BPF_LINK_TYPE_UPROBE_MULTI: u32 = 12;
/// `BPF_F_UPROBE_MULTI_RETURN`: the programs run at the functions' returns.
pub const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;
/// The kernel's `MAX_UPROBE_MULTI_CNT`.
const MAX_UPROBE_MULTI_CNT: u32 = 1 << 20;
/// The kernel's `PATH_MAX`.
const PATH_MAX: usize = 4096;

/// `link_create.uprobe_multi` fields: offsets in the attr.
const PATH: usize = 16;
const OFFSETS: usize = 24;
const REF_CTR_OFFSETS: usize = 32;
const COOKIES: usize = 40;
const CNT: usize = 48;
const FLAGS: usize = 52;
const PID: usize = 56;

/// What an uprobe-multi link attaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UprobeMulti {
    /// The file, as the kernel's link info reports it (`d_path`: absolute,
    /// symbolic links followed).
    pub path: String,
    /// `BPF_F_UPROBE_MULTI_RETURN` or 0.
    pub flags: u32,
    /// The process it is for (its thread group id), 0: every process.
    pub pid: u32,
    /// One uprobe point per offset, in the order the caller gave them.
    pub points: Vec<ProbeLink>,
}

/// `cnt` u64s from the caller's array at `addr` (0: none given, all 0;
/// `EFAULT` for memory it cannot read, as the kernel's `__get_user`).
fn user_u64s(addr: u64, cnt: usize) -> Result<Vec<u64>, Errno> {
    if addr == 0 {
        return Ok(vec![0; cnt]);
    }
    let b = crate::user::read_checked(addr, cnt * 8)?;
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
        .collect())
}

impl BpfjetBackend {
    /// `BPF_LINK_CREATE` of a uprobe-multi link, with the kernel's checks
    /// in its order (`bpf_uprobe_multi_link_attach`): the program's
    /// expected attach type, the flags, path, offsets, count and pid
    /// (`EINVAL`), the count's bound (`E2BIG`), the path (`ENOENT`, `EBADF`
    /// for a file that is not regular), the process (`ESRCH`), the arrays
    /// (`EFAULT`).
    pub(crate) fn uprobe_multi_link_create(
        &self,
        prog: &ProgObj,
        raw: &[u8],
    ) -> Result<i64, Errno> {
        if prog.rec.expected_attach_type != BPF_TRACE_UPROBE_MULTI {
            return Err(Errno::EINVAL);
        }
        let flags = word(raw, FLAGS);
        if flags & !BPF_F_UPROBE_MULTI_RETURN != 0 {
            return Err(Errno::EINVAL);
        }
        let (upath, uoffsets, cnt, pid) = (
            dword(raw, PATH),
            dword(raw, OFFSETS),
            word(raw, CNT),
            word(raw, PID) as i32,
        );
        if upath == 0 || uoffsets == 0 || cnt == 0 || pid < 0 {
            return Err(Errno::EINVAL);
        }
        if cnt > MAX_UPROBE_MULTI_CNT {
            return Err(Errno::E2BIG);
        }
        let given = crate::user::cstring_checked(upath, PATH_MAX)?;
        // The caller's path, from the caller's directory (this process).
        let path = std::fs::canonicalize(&given)
            .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::ENOENT)))?;
        if !path.is_file() {
            return Err(Errno::EBADF);
        }
        // SAFETY: kill with signal 0 only checks that the process exists.
        if pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        {
            return Err(Errno(libc::ESRCH));
        }
        let cnt = cnt as usize;
        let offsets = user_u64s(uoffsets, cnt)?;
        let ref_ctrs = user_u64s(dword(raw, REF_CTR_OFFSETS), cnt)?;
        let cookies = user_u64s(dword(raw, COOKIES), cnt)?;
        // The kernel's offsets are loff_t: a negative one is EINVAL.
        if offsets.iter().any(|&o| (o as i64) < 0) {
            return Err(Errno::EINVAL);
        }
        let path_str = path.to_string_lossy().into_owned();
        let mut points = Vec::with_capacity(cnt);
        for i in 0..cnt {
            let (symbol, offset) =
                match bpfjet_probe::symbols::symbol_or_raw_at_file_offset(&path, offsets[i]) {
                    Ok(s) => s,
                    Err(e) => {
                        self.warn_once(
                            &format!("uprobe-multi {path_str}:{:#x}", offsets[i]),
                            &e.to_string(),
                        );
                        return Err(Errno::EINVAL);
                    }
                };
            points.push(ProbeLink {
                point: ProbePoint::Uprobe {
                    path: path_str.clone(),
                    symbol,
                    offset,
                    retprobe: flags & BPF_F_UPROBE_MULTI_RETURN != 0,
                    file_offset: offsets[i],
                    ref_ctr_offset: ref_ctrs[i],
                },
                pid: if pid == 0 { -1 } else { pid },
                cookie: cookies[i],
                event: None,
                tracefs: None,
            });
        }
        let multi = UprobeMulti {
            path: path_str,
            flags,
            pid: pid as u32,
            points,
        };
        let file = multi.path.clone();
        let id = self.uprobe_multi_link_record(prog, multi)?;
        // A link for one process: taken there now; for every process,
        // the running ones too when asked (pid_attach.rs).
        if pid > 0 {
            crate::pid_attach::ensure(&self.ns, pid, Some(&file));
        } else {
            crate::pid_attach::ensure_running(&self.ns, &file);
        }
        self.new_fd(Obj::Link(id))
    }
}

/// `struct bpf_link_info` of an uprobe-multi link, as the kernel's
/// `bpf_uprobe_multi_link_fill_link_info` fills it (`user`: the info as
/// the caller passed it): count, flags and pid always; the path into the
/// caller's buffer with its size (`EINVAL` for a buffer without a size or
/// a size without a buffer, `E2BIG` for a size over `PATH_MAX`,
/// `ENAMETOOLONG` when it does not fit); the
/// offsets, semaphore offsets and cookies into the arrays given (`EINVAL`
/// with a count of 0, `ENOSPC` when the count is short: as many as fit).
pub(crate) fn link_info(
    id: u32,
    prog_id: u32,
    multi: &UprobeMulti,
    size: usize,
    user: &[u8],
) -> Result<(Vec<u8>, usize), Errno> {
    let mut b = vec![0u8; size];
    b[0..4].copy_from_slice(&BPF_LINK_TYPE_UPROBE_MULTI.to_ne_bytes());
    b[4..8].copy_from_slice(&id.to_ne_bytes());
    b[8..12].copy_from_slice(&prog_id.to_ne_bytes());
    // uprobe_multi { path; offsets; ref_ctr_offsets; cookies; path_size;
    // count; flags; pid; }
    let (upath, uoffsets, uref, ucookies) = (
        dword(user, 16),
        dword(user, 24),
        dword(user, 32),
        dword(user, 40),
    );
    let (upath_size, ucount) = (word(user, 48) as usize, word(user, 52) as usize);
    if (upath == 0) != (upath_size == 0) {
        return Err(Errno::EINVAL);
    }
    if (uoffsets != 0 || uref != 0 || ucookies != 0) && ucount == 0 {
        return Err(Errno::EINVAL);
    }
    b[16..48].copy_from_slice(&user[16..48]);
    let cnt = multi.points.len();
    b[52..56].copy_from_slice(&(cnt as u32).to_ne_bytes());
    b[56..60].copy_from_slice(&multi.flags.to_ne_bytes());
    b[60..64].copy_from_slice(&multi.pid.to_ne_bytes());
    if upath != 0 {
        if upath_size > PATH_MAX {
            return Err(Errno::E2BIG);
        }
        let mut path = multi.path.as_bytes().to_vec();
        path.push(0);
        if path.len() > upath_size {
            return Err(Errno(libc::ENAMETOOLONG));
        }
        crate::user::write_checked(upath, &path)?;
        b[48..52].copy_from_slice(&(path.len() as u32).to_ne_bytes());
    }
    if uoffsets == 0 && uref == 0 && ucookies == 0 {
        return Ok((b, size));
    }
    let n = ucount.min(cnt);
    let column = |addr: u64, f: &dyn Fn(&ProbeLink) -> u64| -> Result<(), Errno> {
        if addr == 0 {
            return Ok(());
        }
        let bytes: Vec<u8> = multi.points[..n]
            .iter()
            .flat_map(|p| f(p).to_ne_bytes())
            .collect();
        crate::user::write_checked(addr, &bytes)
    };
    let file_offset = |p: &ProbeLink| match p.point {
        ProbePoint::Uprobe { file_offset, .. } => file_offset,
        _ => 0,
    };
    let ref_ctr = |p: &ProbeLink| match p.point {
        ProbePoint::Uprobe { ref_ctr_offset, .. } => ref_ctr_offset,
        _ => 0,
    };
    column(uoffsets, &file_offset)?;
    column(uref, &ref_ctr)?;
    column(ucookies, &|p: &ProbeLink| p.cookie)?;
    if ucount < cnt {
        return Err(Errno::ENOSPC);
    }
    Ok((b, size))
}
