//! `BPF_TASK_FD_QUERY`: what a perf event fd (or a raw tracepoint link fd)
//! of a process runs. `bpftool perf` walks every process's fds with it to
//! list the attached uprobes and tracepoints.
//!
//! Under `bpfjet exec` a control plane's uprobes and syscall tracepoints
//! are stand-in fds (crates/server/src/perf_events.rs), in whichever
//! process opened them, and their links are records of the instance: each
//! probe link keeps the (pid, fd, inode) of the event it was linked
//! through, so the query of that fd — from any process of the instance —
//! finds it; a raw tracepoint link fd names its record. Every other fd is
//! the kernel's to answer.

use crate::backend::BpfjetBackend;
use crate::links::LinkRecord;
use crate::namespace::Kind;
use crate::perf_events::ProbePoint;
use crate::ObjRef;
use bpfjet_sys::{Backend, Command, Errno, TaskFdQuery};
use std::os::unix::fs::MetadataExt;

/// `enum bpf_task_fd_type`.
const BPF_FD_TYPE_RAW_TRACEPOINT: u32 = 0;
const BPF_FD_TYPE_TRACEPOINT: u32 = 1;
const BPF_FD_TYPE_UPROBE: u32 = 4;
const BPF_FD_TYPE_URETPROBE: u32 = 5;
/// The kernel's `ENOTSUPP`: an fd that is neither a perf event nor a raw
/// tracepoint link.
const ENOTSUPP: i32 = 524;
/// What `/proc/PID/fd/N` of a stand-in perf event reads as.
const STAND_IN: &str = "/memfd:bpfjet-perf-event";

impl BpfjetBackend {
    pub(crate) fn task_fd_query(&self, q: &TaskFdQuery, cmd: &Command) -> Result<i64, Errno> {
        if q.flags != 0 {
            return Err(Errno::EINVAL);
        }
        let proc_fd = format!("/proc/{}/fd/{}", q.pid, q.fd);
        // No such process or fd: the kernel's errno (ESRCH, EBADF).
        let Ok(target) = std::fs::read_link(&proc_fd) else {
            return self.kernel.execute(cmd);
        };
        let target = target.to_string_lossy();
        if let Some(ObjRef::Link(id)) = self.ns.identify(&target) {
            let rec = self.link_record(id).map_err(|_| Errno::ENOENT)?;
            return match rec.probe.as_ref().map(|p| &p.point) {
                Some(ProbePoint::RawTracepoint { name } | ProbePoint::TpBtf { name }) => {
                    answer(q, rec.prog_id, BPF_FD_TYPE_RAW_TRACEPOINT, name, 0)
                }
                // Other links are not perf events (the kernel's answer).
                _ => Err(Errno(ENOTSUPP)),
            };
        }
        if !target.starts_with(STAND_IN) {
            return self.kernel.execute(cmd);
        }
        let ino = std::fs::metadata(&proc_fd).map(|m| m.ino()).unwrap_or(0);
        let linked = self.ns.ids(Kind::Link).into_iter().find_map(|id| {
            let rec: LinkRecord = self.link_record(id).ok()?;
            let probe = rec.probe.as_ref()?;
            (probe.event == Some((q.pid, q.fd as i32, ino)))
                .then(|| (rec.prog_id, probe.point.clone()))
        });
        // An event no program is linked to: the kernel's ENOENT.
        let (prog_id, point) = linked.ok_or(Errno::ENOENT)?;
        match point {
            ProbePoint::Uprobe {
                path,
                retprobe,
                file_offset,
                ..
            } => {
                let ty = if retprobe {
                    BPF_FD_TYPE_URETPROBE
                } else {
                    BPF_FD_TYPE_UPROBE
                };
                answer(q, prog_id, ty, &path, file_offset)
            }
            ProbePoint::Tracepoint { name, .. } => {
                answer(q, prog_id, BPF_FD_TYPE_TRACEPOINT, &name, 0)
            }
            ProbePoint::RawTracepoint { .. }
            | ProbePoint::TpBtf { .. }
            | ProbePoint::XdpTrace { .. }
            | ProbePoint::Timer { .. } => Err(Errno::EINVAL),
        }
    }
}

/// The kernel's `bpf_task_fd_query_copy`: the name's length, the name
/// into the caller's buffer (truncated with its NUL and `ENOSPC` when the
/// buffer is too short; the other fields are written all the same).
fn answer(
    q: &TaskFdQuery,
    prog_id: u32,
    fd_type: u32,
    name: &str,
    offset: u64,
) -> Result<i64, Errno> {
    let input_len = q.buf_len.get() as usize;
    q.buf_len.set(name.len() as u32);
    let mut result = Ok(0);
    if input_len > 0 && q.buf != 0 {
        let mut out = name.as_bytes().to_vec();
        if input_len < out.len() + 1 {
            out.truncate(input_len - 1);
            result = Err(Errno::ENOSPC);
        }
        out.push(0);
        crate::user::write(q.buf, &out)?;
    }
    q.prog_id.set(prog_id);
    q.fd_type.set(fd_type);
    q.probe_offset.set(offset);
    q.probe_addr.set(0);
    result
}
