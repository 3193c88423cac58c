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
        let (o, t) = find_member(btf, ty, part)?;
        off += o;
        ty = t;
    }
    Some((off, ty))
}

fn find_member(btf: &Btf, id: u32, name: &str) -> Option<(usize, u32)> {
    bpfjet_obj::tp_btf::member(btf, id, name).map(|(o, t)| (o as usize, t))
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

/// Most fields a view fills (each of the three tasks: pid, tgid, comm,
/// four pointers; cred's four ids; two namespace pointers and inodes).
const MAX_FILLED: usize = 40;

/// One thread's objects: the task, its parent's task, its group leader's,
/// the credentials, the namespaces, each zeroed except the fields filled;
/// and the ranges (absolute addresses) that were filled. Nothing here
/// allocates with `malloc` once the layout is known: the helper runs in
/// signal handlers, possibly on top of a `malloc` holding its lock, so the
/// memory is mapped directly, the ranges are a fixed array and `/proc` is
/// read into stack buffers.
struct View {
    ids: (u32, u32),
    blocks: Blocks,
    ppid: u32,
    /// Task, parent task, leader task, cred, nsproxy, mnt_namespace, net:
    /// one anonymous mapping, each object 64-byte aligned.
    mem: *mut u8,
    len: usize,
    filled: [(u64, u64); MAX_FILLED],
    count: usize,
}

thread_local! {
    /// This thread's view (null until its first `bpf_get_current_task`).
    /// No destructor (registering one allocates): a thread's view stays
    /// mapped until the process ends, or is replaced after a fork.
    static VIEW: std::cell::Cell<*mut View> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

fn align(n: usize) -> usize {
    n.div_ceil(64) * 64
}

/// Where each object of a view starts in its mapping (after the `View`
/// itself), 64-byte aligned, and the mapping's length.
#[derive(Clone, Copy)]
struct Blocks {
    parent: usize,
    leader: usize,
    cred: usize,
    nsproxy: usize,
    mnt: usize,
    net: usize,
    len: usize,
}

impl Blocks {
    fn of(l: &Layout) -> Blocks {
        let parent = align(l.task_size);
        let leader = parent + align(l.task_size);
        let cred = leader + align(l.task_size);
        let nsproxy = cred + align(l.cred_size);
        let mnt = nsproxy + align(l.nsproxy_size);
        let net = mnt + align(l.mnt_ns_size);
        Blocks {
            parent,
            leader,
            cred,
            nsproxy,
            mnt,
            net,
            len: net + align(l.net_size),
        }
    }
}

/// Reads the small file at the NUL-terminated `path` into `buf`; the bytes
/// read (0 on any error).
pub(crate) fn read_small(path: &[u8], buf: &mut [u8]) -> usize {
    // SAFETY: `path` is NUL-terminated; `buf` is writable for its length.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        usize::try_from(n).unwrap_or(0)
    }
}

/// `/proc/PID/comm` of process `pid`: 16 bytes, NUL-padded.
fn comm_of(pid: u32) -> [u8; 16] {
    use std::io::Write;
    let mut path = [0u8; 32];
    let mut cursor = std::io::Cursor::new(&mut path[..31]);
    let _ = write!(cursor, "/proc/{pid}/comm");
    let mut buf = [0u8; 16];
    let n = read_small(&path, &mut buf);
    let end = buf[..n]
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(n)
        .min(15);
    buf[end..].fill(0);
    buf
}

/// The inode of `/proc/self/ns/NAME` (`path` NUL-terminated).
fn ns_inum(path: &[u8]) -> Option<u32> {
    // SAFETY: `path` is NUL-terminated; stat writes into `st`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::stat(path.as_ptr().cast(), &mut st) } != 0 {
        return None;
    }
    u32::try_from(st.st_ino).ok()
}

impl View {
    /// A new view in its own mapping (None if the mapping fails).
    fn build(l: &Layout, ids: (u32, u32)) -> Option<*mut View> {
        let blocks = Blocks::of(l);
        let Blocks {
            parent,
            leader,
            cred,
            nsproxy,
            mnt,
            net,
            ..
        } = blocks;
        let task = 0;
        let header = align(std::mem::size_of::<View>());
        let len = header + blocks.len;
        // SAFETY: a fresh private anonymous mapping, zeroed by the kernel.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let view = map as *mut View;
        // SAFETY: the mapping starts with room for a View, then the objects.
        let v = unsafe {
            view.write(View {
                ids,
                blocks,
                ppid: 0,
                mem: (map as *mut u8).add(header),
                len,
                filled: [(0, 0); MAX_FILLED],
                count: 0,
            });
            &mut *view
        };
        let base = v.mem as u64;
        let addr = |off: usize| base + off as u64;
        let (tgid, tid) = ids;
        v.put(task + l.pid, &tid.to_ne_bytes());
        v.put(task + l.tgid, &tgid.to_ne_bytes());
        v.put(task + l.comm, &crate::tracing::current::comm());
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
            v.put(leader + l.comm, &comm_of(tgid));
        }
        v.put(task + l.real_parent, &addr(parent).to_ne_bytes());
        v.put(task + l.parent, &addr(parent).to_ne_bytes());
        v.put(task + l.real_cred, &addr(cred).to_ne_bytes());
        v.put(task + l.cred, &addr(cred).to_ne_bytes());
        v.put(task + l.nsproxy, &addr(nsproxy).to_ne_bytes());
        if let Some(inum) = ns_inum(b"/proc/self/ns/mnt\0") {
            v.put(nsproxy + l.mnt_ns, &addr(mnt).to_ne_bytes());
            v.put(mnt + l.mnt_inum, &inum.to_ne_bytes());
        }
        if let Some(inum) = ns_inum(b"/proc/self/ns/net\0") {
            v.put(nsproxy + l.net_ns, &addr(net).to_ne_bytes());
            v.put(net + l.net_inum, &inum.to_ne_bytes());
        }
        Some(view)
    }

    /// Writes `bytes` at `off` and marks them filled (a field rewritten
    /// later keeps its one entry).
    fn put(&mut self, off: usize, bytes: &[u8]) {
        // SAFETY: the mapping has room for every object's fields (offsets
        // come from the sizes that laid it out).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.mem.add(off), bytes.len()) };
        let range = (self.mem as u64 + off as u64, bytes.len() as u64);
        if !self.filled[..self.count].contains(&range) && self.count < MAX_FILLED {
            self.filled[self.count] = range;
            self.count += 1;
        }
    }

    /// The fields that may change while the thread lives: its name, its
    /// credentials, its parent (re-parenting when the parent exits).
    fn refresh(&mut self, l: &Layout) {
        let Blocks { parent, cred, .. } = self.blocks;
        self.put(l.comm, &crate::tracing::current::comm());
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
            self.put(parent + l.comm, &comm_of(ppid));
        }
    }
}

/// Reads the running kernel's layout now, outside any signal handler
/// (the first read parses its BTF, which allocates): the agent calls it
/// before it attaches anything.
pub fn prepare() {
    let _ = layout();
}

/// `bpf_get_current_task`: the address of the calling thread's task view,
/// refreshed; 0 when the running kernel's BTF does not describe the fields
/// (or the view cannot be mapped).
pub fn current_task() -> u64 {
    let Some(l) = layout() else {
        return 0;
    };
    let ids = crate::tracing::current::tgid_tid();
    VIEW.with(|cell| {
        let mut view = cell.get();
        // SAFETY: a non-null pointer is this thread's view, mapped by
        // `build` and only ever touched by this thread.
        if view.is_null() || unsafe { (*view).ids } != ids {
            if !view.is_null() {
                // A fork's child: the parent's view, copied; replace it.
                // SAFETY: the mapping `build` made, of `len` bytes.
                unsafe { libc::munmap(view.cast(), (*view).len) };
            }
            view = View::build(l, ids).unwrap_or(std::ptr::null_mut());
            cell.set(view);
        }
        if view.is_null() {
            return 0;
        }
        // SAFETY: as above.
        let v = unsafe { &mut *view };
        v.refresh(l);
        v.mem as u64
    })
}

/// Bytes from `addr` to the end of the filled field holding it (0 if
/// none): what `bpf_probe_read_kernel*` may read there.
pub fn filled_left(addr: u64) -> u64 {
    VIEW.with(|cell| {
        let view = cell.get();
        if view.is_null() {
            return 0;
        }
        // SAFETY: this thread's view (see `current_task`).
        let v = unsafe { &*view };
        v.filled[..v.count]
            .iter()
            .filter(|&&(start, len)| addr >= start && addr < start + len)
            .map(|&(start, len)| start + len - addr)
            .max()
            .unwrap_or(0)
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
