//! `bpf_get_current_task` in a process: the calling thread's view of the
//! kernel objects libbpf tools read through it with `BPF_CORE_READ`
//! (`bpf_probe_read_kernel`), laid out as the running kernel lays them out
//! (offsets from its BTF, `/sys/kernel/btf/vmlinux`, the same BTF the
//! object's CO-RE relocations were resolved against).
//!
//! Only fields a process can know are filled, with what the kernel would
//! hold for the thread: `task_struct.pid` (thread id), `tgid`, `comm`,
//! `real_parent`/`parent` (a view of the parent process: its `pid`,
//! `tgid`, `comm`), `group_leader` (the task itself in the main thread,
//! else a view of the main thread: `pid` = `tgid`, the process's `comm`), `cred`/`real_cred` (`uid`, `gid`, `euid`, `egid`),
//! `nsproxy->mnt_ns->ns.inum` and `nsproxy->net_ns->ns.inum` (the inode
//! numbers of `/proc/self/ns/mnt` and `net`). A read of any other byte of
//! these objects faults (`-EFAULT`, buffer zeroed), as a read of kernel
//! memory bpfjet has no counterpart for: never a made-up value.

use bpfjet_obj::{Btf, BtfType};
use std::cell::RefCell;
use std::sync::OnceLock;

/// Byte offsets of the fields filled, from the kernel's BTF.
#[derive(Debug)]
struct Layout {
    task_size: usize,
    pid: usize,
    tgid: usize,
    comm: usize,
    real_parent: usize,
    parent: usize,
    group_leader: usize,
    real_cred: usize,
    cred: usize,
    nsproxy: usize,
    cred_size: usize,
    uid: usize,
    gid: usize,
    euid: usize,
    egid: usize,
    nsproxy_size: usize,
    mnt_ns: usize,
    net_ns: usize,
    mnt_ns_size: usize,
    mnt_inum: usize,
    net_size: usize,
    net_inum: usize,
}

/// The struct named `name` (the first with members, not a forward one).
fn find_struct(btf: &Btf, name: &str) -> Option<u32> {
    btf.types().iter().position(|t| {
        matches!(t, BtfType::Struct { name: n, members, .. } if n == name && !members.is_empty())
    })
    .map(|i| i as u32)
}

/// Byte offset and type of member `path` (dot-separated, through
/// anonymous structs and unions as C sees them) of struct `id`.
fn member(btf: &Btf, id: u32, path: &str) -> Option<(usize, u32)> {
    let mut off = 0usize;
    let mut ty = id;
    for part in path.split('.') {
        let (o, t) = find_member(btf, ty, part, 0)?;
        off += o;
        ty = t;
    }
    Some((off, ty))
}

fn find_member(btf: &Btf, id: u32, name: &str, depth: u32) -> Option<(usize, u32)> {
    if depth > 8 {
        return None;
    }
    let members = match btf.type_by_id(btf.resolve(id)?)? {
        BtfType::Struct { members, .. } | BtfType::Union { members, .. } => members,
        _ => return None,
    };
    for m in members {
        if m.bitfield_size != 0 || m.bit_offset % 8 != 0 {
            continue;
        }
        let at = (m.bit_offset / 8) as usize;
        if m.name == name {
            return Some((at, m.type_id));
        }
        if m.name.is_empty() {
            if let Some((o, t)) = find_member(btf, m.type_id, name, depth + 1) {
                return Some((at + o, t));
            }
        }
    }
    None
}

fn size(btf: &Btf, id: u32) -> Option<usize> {
    btf.size_of(id).map(|s| s as usize)
}

impl Layout {
    fn from_btf(btf: &Btf) -> Option<Layout> {
        let task = find_struct(btf, "task_struct")?;
        let cred = find_struct(btf, "cred")?;
        let nsproxy = find_struct(btf, "nsproxy")?;
        let mnt_ns = find_struct(btf, "mnt_namespace")?;
        let net = find_struct(btf, "net")?;
        let f = |id: u32, path: &str| member(btf, id, path).map(|(o, _)| o);
        Some(Layout {
            task_size: size(btf, task)?,
            pid: f(task, "pid")?,
            tgid: f(task, "tgid")?,
            comm: f(task, "comm")?,
            real_parent: f(task, "real_parent")?,
            parent: f(task, "parent")?,
            group_leader: f(task, "group_leader")?,
            real_cred: f(task, "real_cred")?,
            cred: f(task, "cred")?,
            nsproxy: f(task, "nsproxy")?,
            cred_size: size(btf, cred)?,
            // kuid_t / kgid_t: a struct around one u32 `val`.
            uid: f(cred, "uid.val")?,
            gid: f(cred, "gid.val")?,
            euid: f(cred, "euid.val")?,
            egid: f(cred, "egid.val")?,
            nsproxy_size: size(btf, nsproxy)?,
            mnt_ns: f(nsproxy, "mnt_ns")?,
            net_ns: f(nsproxy, "net_ns")?,
            mnt_ns_size: size(btf, mnt_ns)?,
            mnt_inum: f(mnt_ns, "ns.inum")?,
            net_size: size(btf, net)?,
            net_inum: f(net, "ns.inum")?,
        })
    }
}

/// The running kernel's layout, read once (None without kernel BTF or
/// with a kernel whose types lack one of the fields).
fn layout() -> Option<&'static Layout> {
    static LAYOUT: OnceLock<Option<Layout>> = OnceLock::new();
    LAYOUT
        .get_or_init(|| {
            let target = bpfjet_obj::TargetBtf::running_kernel().ok()?;
            Layout::from_btf(target.btf())
        })
        .as_ref()
}

/// One thread's objects: the task, its parent's task, the credentials,
/// the namespaces, each zeroed except the fields filled; and the ranges
/// (absolute addresses) that were filled.
struct View {
    ids: (u32, u32),
    ppid: u32,
    /// Task, parent task, leader task, cred, nsproxy, mnt_namespace, net:
    /// one buffer,
    /// each object 64-byte aligned.
    mem: Vec<u64>,
    filled: Vec<(u64, u64)>,
}

thread_local! {
    static VIEW: RefCell<Option<View>> = const { RefCell::new(None) };
}

fn align(n: usize) -> usize {
    n.div_ceil(64) * 64
}

/// The comm of process `pid` (`/proc/PID/comm`, at most 15 bytes).
fn comm_of(pid: u32) -> Vec<u8> {
    let mut c = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    if c.last() == Some(&b'\n') {
        c.pop();
    }
    c.truncate(15);
    c
}

fn ns_inum(name: &str) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/self/ns/{name}"))
        .ok()
        .and_then(|m| u32::try_from(m.ino()).ok())
}

impl View {
    fn build(l: &Layout, ids: (u32, u32)) -> View {
        let task = 0;
        let parent = align(l.task_size);
        let leader = parent + align(l.task_size);
        let cred = leader + align(l.task_size);
        let nsproxy = cred + align(l.cred_size);
        let mnt = nsproxy + align(l.nsproxy_size);
        let net = mnt + align(l.mnt_ns_size);
        let total = net + align(l.net_size);
        let mut v = View {
            ids,
            ppid: 0,
            mem: vec![0u64; total.div_ceil(8)],
            filled: Vec::new(),
        };
        let base = v.mem.as_ptr() as u64;
        let addr = |off: usize| base + off as u64;
        let (tgid, tid) = ids;
        v.put(task + l.pid, &tid.to_ne_bytes());
        v.put(task + l.tgid, &tgid.to_ne_bytes());
        let mut comm = crate::tracing::current::comm();
        comm.resize(16, 0);
        v.put(task + l.comm, &comm);
        // The thread group's leader: the task itself in the main thread,
        // else the main thread's task (pid = tgid, the process's name).
        let leads = tgid == tid;
        let leader_at = if leads { task } else { leader };
        v.put(task + l.group_leader, &addr(leader_at).to_ne_bytes());
        if !leads {
            v.put(leader + l.pid, &tgid.to_ne_bytes());
            v.put(leader + l.tgid, &tgid.to_ne_bytes());
            v.put(leader + l.group_leader, &addr(leader).to_ne_bytes());
            v.put(leader + l.real_parent, &addr(parent).to_ne_bytes());
            v.put(leader + l.parent, &addr(parent).to_ne_bytes());
            let mut lcomm = comm_of(tgid);
            lcomm.resize(16, 0);
            v.put(leader + l.comm, &lcomm);
        }
        v.put(task + l.real_parent, &addr(parent).to_ne_bytes());
        v.put(task + l.parent, &addr(parent).to_ne_bytes());
        v.put(task + l.real_cred, &addr(cred).to_ne_bytes());
        v.put(task + l.cred, &addr(cred).to_ne_bytes());
        v.put(task + l.nsproxy, &addr(nsproxy).to_ne_bytes());
        if let Some(inum) = ns_inum("mnt") {
            v.put(nsproxy + l.mnt_ns, &addr(mnt).to_ne_bytes());
            v.put(mnt + l.mnt_inum, &inum.to_ne_bytes());
        }
        if let Some(inum) = ns_inum("net") {
            v.put(nsproxy + l.net_ns, &addr(net).to_ne_bytes());
            v.put(net + l.net_inum, &inum.to_ne_bytes());
        }
        v
    }

    /// Writes `bytes` at `off` and marks them filled (a field rewritten
    /// later keeps its one entry).
    fn put(&mut self, off: usize, bytes: &[u8]) {
        // SAFETY: `mem` has room for every object's fields (offsets come
        // from the sizes that laid the buffer out).
        let dst = unsafe {
            std::slice::from_raw_parts_mut((self.mem.as_mut_ptr() as *mut u8).add(off), bytes.len())
        };
        dst.copy_from_slice(bytes);
        let range = (self.mem.as_ptr() as u64 + off as u64, bytes.len() as u64);
        if !self.filled.contains(&range) {
            self.filled.push(range);
        }
    }

    /// The fields that may change while the thread lives: its name, its
    /// credentials, its parent (re-parenting when the parent exits).
    fn refresh(&mut self, l: &Layout) {
        let parent = align(l.task_size);
        let cred = parent + 2 * align(l.task_size);
        let mut comm = crate::tracing::current::comm();
        comm.resize(16, 0);
        self.put(l.comm, &comm);
        // SAFETY: these calls cannot fail.
        let (uid, gid, euid, egid, ppid) = unsafe {
            (
                libc::getuid(),
                libc::getgid(),
                libc::geteuid(),
                libc::getegid(),
                libc::getppid() as u32,
            )
        };
        self.put(cred + l.uid, &uid.to_ne_bytes());
        self.put(cred + l.gid, &gid.to_ne_bytes());
        self.put(cred + l.euid, &euid.to_ne_bytes());
        self.put(cred + l.egid, &egid.to_ne_bytes());
        if ppid != self.ppid {
            self.ppid = ppid;
            // The parent process's task as seen from here: its main
            // thread (pid = tgid) and its name.
            self.put(parent + l.pid, &ppid.to_ne_bytes());
            self.put(parent + l.tgid, &ppid.to_ne_bytes());
            let mut pcomm = comm_of(ppid);
            pcomm.resize(16, 0);
            self.put(parent + l.comm, &pcomm);
        }
    }
}

/// `bpf_get_current_task`: the address of the calling thread's task view,
/// refreshed; 0 when the running kernel's BTF does not describe the fields.
pub fn current_task() -> u64 {
    let Some(l) = layout() else {
        return 0;
    };
    let ids = crate::tracing::current::tgid_tid();
    VIEW.with(|v| {
        let mut v = v.borrow_mut();
        if v.as_ref().is_none_or(|view| view.ids != ids) {
            *v = Some(View::build(l, ids));
        }
        let view = v.as_mut().expect("built above");
        view.refresh(l);
        view.mem.as_ptr() as u64
    })
}

/// Bytes from `addr` to the end of the filled field holding it (0 if
/// none): what `bpf_probe_read_kernel*` may read there.
pub fn filled_left(addr: u64) -> u64 {
    VIEW.with(|v| {
        v.borrow().as_ref().map_or(0, |view| {
            view.filled
                .iter()
                .filter(|&&(start, len)| addr >= start && addr < start + len)
                .map(|&(start, len)| start + len - addr)
                .max()
                .unwrap_or(0)
        })
    })
}

/// Whether `[addr, addr + len)` lies inside one filled field of this
/// thread's view.
pub fn is_filled(addr: u64, len: u64) -> bool {
    len > 0 && filled_left(addr) >= len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_kernels_layout_is_found() {
        if std::fs::metadata("/sys/kernel/btf/vmlinux").is_err() {
            eprintln!("SKIPPED: no kernel BTF");
            return;
        }
        let l = layout().expect("task_struct, cred, nsproxy, mnt_namespace, net in vmlinux BTF");
        assert!(
            l.task_size > l.comm && l.comm > 0 && l.tgid == l.pid + 4,
            "{l:?}"
        );
        let task = current_task();
        let read = |off: usize, n: usize| -> Vec<u8> {
            assert!(is_filled(task + off as u64, n as u64), "off {off}");
            // SAFETY: the view is this thread's, alive, and holds the range.
            unsafe { std::slice::from_raw_parts((task + off as u64) as *const u8, n).to_vec() }
        };
        let (tgid, tid) = crate::tracing::current::tgid_tid();
        assert_eq!(read(l.tgid, 4), tgid.to_ne_bytes());
        assert_eq!(read(l.pid, 4), tid.to_ne_bytes());
        let parent = u64::from_ne_bytes(read(l.real_parent, 8).try_into().unwrap());
        let ppid = unsafe { libc::getppid() } as u32;
        assert!(is_filled(parent + l.tgid as u64, 4));
        // SAFETY: checked filled just above.
        assert_eq!(unsafe { *((parent + l.tgid as u64) as *const u32) }, ppid);
        // Unfilled bytes fault.
        assert!(!is_filled(task + l.task_size as u64 - 8, 8));
        assert!(!is_filled(task + l.tgid as u64, 8), "a read past the field");
    }
}
