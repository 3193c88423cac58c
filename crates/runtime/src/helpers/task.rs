//! Who is running: the current task's ids and name. The kernel answers from
//! `current`, the task that runs the program — the traced thread for a
//! tracing program, the `BPF_PROG_TEST_RUN` caller (or whatever task the
//! softirq interrupted) for XDP. In bpfjet the program runs on the calling
//! thread of the process, so its ids are the answer for every program type.

use super::ids;
use crate::helpers::{Helper, HelperRegistry};
use crate::tracing::current;

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(
        ids::GET_CURRENT_PID_TGID,
        "get_current_pid_tgid",
        |_, _| {
            let (tgid, tid) = current::tgid_tid();
            Ok((u64::from(tgid) << 32) | u64::from(tid))
        },
    ));
    r.register(Helper::new(
        ids::GET_CURRENT_UID_GID,
        "get_current_uid_gid",
        |_, _| {
            // The real ids, as the kernel's `current_uid_gid()` (not the
            // effective ones). SAFETY: getuid/getgid cannot fail.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            Ok((u64::from(gid) << 32) | u64::from(uid))
        },
    ));
    // The name of the thread running the program (`comm`). For XDP the
    // kernel offers it to a CAP_PERFMON loader (the verifier refuses it
    // otherwise).
    r.register(Helper::new(
        ids::GET_CURRENT_COMM,
        "get_current_comm",
        |ctx, a| {
            let comm = current::comm();
            let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            let buf = ctx.write_mem(a[0], a[1])?;
            // strscpy_pad: at most size-1 bytes, NUL-padded.
            buf.fill(0);
            let n = len.min(buf.len().saturating_sub(1));
            buf[..n].copy_from_slice(&comm[..n]);
            Ok(0)
        },
    ));
}
