//! XDP attachments: attach = deploy.
//!
//! Attaching a bpfjet program to an interface (netlink `IFLA_XDP` or a
//! `BPF_LINK_CREATE` XDP link) starts a data plane on it: a `bpfjet
//! serve-attachment` process (AF_XDP on the interface's queues, `XDP_PASS`
//! re-injected, as `bpfjet run --iface`) that outlives the loader, as a
//! kernel attachment outlives `xdp-loader load`. Its state lives in
//! `<run>/<instance>/attach/`:
//!
//! - `<ifindex>`: the [`Attachment`] record, written by the attaching
//!   process. The data plane polls it: a new `prog_id` is a hot replace,
//!   the record's removal stops it.
//! - `<ifindex>.status`: the data plane's [`DataPlaneStatus`] (its pid,
//!   the program it runs, its counters), rewritten while it runs.
//! - `<ifindex>.log`: its stderr.

use crate::namespace::Namespace;
use bpfjet_sys::Errno;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `XDP_FLAGS_*` (linux/if_link.h).
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
pub const XDP_FLAGS_SKB_MODE: u32 = 2;
pub const XDP_FLAGS_DRV_MODE: u32 = 4;
pub const XDP_FLAGS_HW_MODE: u32 = 8;
pub const XDP_FLAGS_REPLACE: u32 = 16;
pub const XDP_FLAGS_MODES: u32 = XDP_FLAGS_SKB_MODE | XDP_FLAGS_DRV_MODE | XDP_FLAGS_HW_MODE;

/// How long an attach waits for the data plane to run the program.
const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One interface's bpfjet attachment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Attachment {
    pub ifindex: u32,
    pub ifname: String,
    pub prog_id: u32,
    /// `XDP_FLAGS_SKB_MODE` or `XDP_FLAGS_DRV_MODE` (what the caller asked
    /// for; 0 is reported as driver mode, the kernel's default).
    pub mode: u32,
    /// The XDP link that owns the attachment, 0 for a netlink attachment.
    pub link_id: u32,
    /// Bumped when what the program runs changes without a new program id
    /// (an EXT program linked into or unlinked from one of its functions):
    /// the data plane rebuilds it, as a hot replace.
    #[serde(default)]
    pub revision: u64,
}

impl Attachment {
    /// `IFLA_XDP_ATTACHED`'s value: `XDP_ATTACHED_SKB` (2) or `_DRV` (1).
    pub fn attached_mode(&self) -> u8 {
        if self.mode & XDP_FLAGS_SKB_MODE != 0 {
            2
        } else {
            1
        }
    }
}

/// What the data plane of an attachment reports about itself.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DataPlaneStatus {
    pub pid: u32,
    /// `starting`, `running`, `failed` or `stopped`.
    pub state: String,
    /// The program it runs now.
    pub prog_id: u32,
    /// The attachment revision the running program was built for.
    #[serde(default)]
    pub revision: u64,
    pub prog_name: String,
    pub engine: String,
    pub describe: String,
    pub error: String,
    pub replaces: u64,
    pub packets: u64,
    pub pass: u64,
    pub drop: u64,
    pub tx: u64,
    pub redirect: u64,
    pub aborted: u64,
    /// `SECTION: PROGRAM@LINK` of the XDP tracepoint programs it runs
    /// (`tp_btf/xdp_exception`, `tracepoint/xdp/xdp_redirect`, ...).
    #[serde(default)]
    pub tracepoints: Vec<String>,
}

impl Namespace {
    pub fn attach_dir(&self) -> PathBuf {
        self.dir().join("attach")
    }

    fn attach_file(&self, ifindex: u32) -> PathBuf {
        self.attach_dir().join(ifindex.to_string())
    }

    pub fn status_file(&self, ifindex: u32) -> PathBuf {
        self.attach_dir().join(format!("{ifindex}.status"))
    }

    pub fn log_file(&self, ifindex: u32) -> PathBuf {
        self.attach_dir().join(format!("{ifindex}.log"))
    }

    pub fn attachment(&self, ifindex: u32) -> Option<Attachment> {
        serde_json::from_slice(&std::fs::read(self.attach_file(ifindex)).ok()?).ok()
    }

    /// Every attachment of the instance, by ifindex.
    pub fn attachments(&self) -> Vec<Attachment> {
        let mut v: Vec<Attachment> = std::fs::read_dir(self.attach_dir())
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                    .filter_map(|i| self.attachment(i))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_key(|a| a.ifindex);
        v
    }

    /// Write the record atomically (the data plane polls it).
    pub fn write_attachment(&self, a: &Attachment) -> Result<(), Errno> {
        let tmp = self.attach_dir().join(format!(".{}.tmp", a.ifindex));
        let bytes = serde_json::to_vec(a).map_err(|_| Errno::EINVAL)?;
        std::fs::write(&tmp, bytes).map_err(|e| Errno::from_io(&e))?;
        std::fs::rename(&tmp, self.attach_file(a.ifindex)).map_err(|e| Errno::from_io(&e))
    }

    pub fn remove_attachment(&self, ifindex: u32) {
        let _ = std::fs::remove_file(self.attach_file(ifindex));
    }

    /// Whether an attachment runs program `id`.
    pub fn prog_attached(&self, id: u32) -> bool {
        self.attachments().iter().any(|a| a.prog_id == id)
    }

    pub fn data_plane_status(&self, ifindex: u32) -> Option<DataPlaneStatus> {
        serde_json::from_slice(&std::fs::read(self.status_file(ifindex)).ok()?).ok()
    }

    /// Written by the data plane (atomically: `bpfjet status` reads it).
    pub fn write_data_plane_status(
        &self,
        ifindex: u32,
        s: &DataPlaneStatus,
    ) -> std::io::Result<()> {
        let tmp = self.attach_dir().join(format!(".{ifindex}.status.tmp"));
        std::fs::write(&tmp, serde_json::to_vec(s)?)?;
        std::fs::rename(&tmp, self.status_file(ifindex))
    }
}

/// The bpfjet binary that runs data planes: `$BPFJET_BIN` (set by `bpfjet
/// exec`), else `bpfjet` on `PATH`.
pub(crate) fn bpfjet_binary() -> PathBuf {
    std::env::var_os("BPFJET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("bpfjet"))
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid != 0 && unsafe { libc::kill(pid as i32, 0) } == 0
}

/// The last line of the data plane's log, for an error message.
fn last_log_line(ns: &Namespace, ifindex: u32) -> String {
    std::fs::read_to_string(ns.log_file(ifindex))
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| "no output".into())
}

/// Start the data plane of `a` (its record is written) and wait until it
/// runs the program. On failure the record is removed and the data plane's
/// last words go to stderr.
pub fn deploy(ns: &Namespace, a: &Attachment) -> Result<(), Errno> {
    use std::os::unix::process::CommandExt;
    let _ = std::fs::remove_file(ns.status_file(a.ifindex));
    let log = std::fs::File::create(ns.log_file(a.ifindex)).map_err(|e| Errno::from_io(&e))?;
    let mut cmd = std::process::Command::new(bpfjet_binary());
    cmd.arg("serve-attachment")
        .arg("--instance")
        .arg(ns.name())
        .arg("--ifindex")
        .arg(a.ifindex.to_string())
        .env_remove("LD_PRELOAD")
        .env("BPFJET_RUN_DIR", ns.run_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // Its own session: the loader's terminal and process group going away
    // (xdp-loader exits at once) must not stop it. None of the loader's
    // other fds: an inherited pipe end would keep the loader's reader (a
    // shell's `$(...)`) waiting for the data plane to end.
    // SAFETY: setsid and close_range are async-signal-safe system calls;
    // stdio is already in place when pre_exec runs.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            // CLOSE_RANGE_CLOEXEC: closed at exec, so the spawn's own
            // error pipe still reports a failed exec.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 4u32);
            Ok(())
        })
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            ns.remove_attachment(a.ifindex);
            eprintln!(
                "bpfjet: cannot start the data plane ({}): {e}; set BPFJET_BIN",
                bpfjet_binary().display()
            );
            return Err(Errno::from_io(&e));
        }
    };
    let pid = child.id();
    // Reaped by a thread, so no zombie remains if this process outlives it.
    std::thread::spawn(move || child.wait());
    let started = Instant::now();
    loop {
        if let Some(s) = ns.data_plane_status(a.ifindex) {
            if s.state == "running" && s.prog_id == a.prog_id && s.revision == a.revision {
                return Ok(());
            }
            if s.state == "failed" {
                break;
            }
        }
        if !alive(pid) || started.elapsed() > START_TIMEOUT {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ns.remove_attachment(a.ifindex);
    // SAFETY: the pid of the child this call started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    eprintln!(
        "bpfjet: the data plane on {} did not start: {}",
        a.ifname,
        last_log_line(ns, a.ifindex)
    );
    Err(Errno::EINVAL)
}

/// Point a running attachment at another program (hot replace) and wait
/// until its data plane runs it.
pub fn replace(ns: &Namespace, a: &Attachment) -> Result<(), Errno> {
    ns.write_attachment(a)?;
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        match ns.data_plane_status(a.ifindex) {
            Some(s)
                if s.state == "running" && s.prog_id == a.prog_id && s.revision == a.revision =>
            {
                return Ok(())
            }
            Some(s) if s.state == "failed" || !alive(s.pid) => break,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "bpfjet: the data plane on {} did not take program {}: {}",
        a.ifname,
        a.prog_id,
        last_log_line(ns, a.ifindex)
    );
    Err(Errno::EINVAL)
}

/// Remove the attachment and wait for its data plane to stop (its kernel
/// steering program detached), as a detach returns once the program is off.
pub fn undeploy(ns: &Namespace, ifindex: u32) {
    ns.remove_attachment(ifindex);
    let Some(s) = ns.data_plane_status(ifindex) else {
        return;
    };
    if s.pid == std::process::id() {
        // The data plane itself (its sweep detached a dead holder's link):
        // its loop sees the attachment gone and stops.
        return;
    }
    if alive(s.pid) {
        // SAFETY: the data plane's pid, from its own status file.
        unsafe { libc::kill(s.pid as i32, libc::SIGTERM) };
    }
    let started = Instant::now();
    while alive(s.pid) && started.elapsed() < STOP_TIMEOUT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(ns.status_file(ifindex));
}

/// An interface's name from its index, in this process's network namespace.
pub fn ifname(ifindex: u32) -> Result<String, Errno> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: a buffer of IF_NAMESIZE bytes.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(Errno(libc::ENODEV));
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}
