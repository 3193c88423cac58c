//! `BPF_PROG_TEST_RUN` of raw-tracepoint programs, as the kernel's
//! `bpf_prog_test_run_raw_tp`: the program runs once in the caller, on
//! the arguments in `ctx_in`, and its r0 is the result. bpftrace runs its
//! `BEGIN` and `END` probes this way.
//!
//! The program runs on the interpreter in a tracing object of its own,
//! on fresh handles of the instance's maps, its PERF_EVENT_ARRAYs bound to
//! the perf output events a reader put in them (as in a traced process:
//! `bpfjet trace --instance`), so that its output reaches the reader.
//! Kprobe and tracepoint programs have no test run in the kernel
//! (`ENOTSUPP`).

use crate::backend::BpfjetBackend;
use crate::objects::ProgObj;
use crate::user;
use bpfjet_runtime::tracing::ProbeSite;
use bpfjet_sys::{Errno, TestRun};

/// `MAX_BPF_FUNC_ARGS`: a raw tracepoint's arguments are at most 12 u64.
const MAX_ARGS_BYTES: u32 = 12 * 8;
const BPF_F_TEST_RUN_ON_CPU: u32 = 1;
/// The kernel's `ENOTSUPP` (no test run for the program's type).
const ENOTSUPP: i32 = 524;

impl BpfjetBackend {
    pub(crate) fn tracing_test_run(&self, prog: &ProgObj, t: &TestRun) -> Result<i64, Errno> {
        if prog.rec.prog_type != 17 {
            return Err(Errno(ENOTSUPP));
        }
        // The kernel's checks, in its order.
        if t.data_in != 0
            || t.data_out != 0
            || t.ctx_out != 0
            || t.duration.get() != 0
            || t.repeat != 0
            || t.batch_size != 0
        {
            return Err(Errno::EINVAL);
        }
        let (tracing, id, _) = self.caller_object(prog, "raw_tracepoint")?;
        let name = prog.rec.name.clone();
        let needs = tracing.programs()[id].ctx_bytes();
        if u64::from(t.ctx_size_in) < needs || t.ctx_size_in > MAX_ARGS_BYTES {
            return Err(Errno::EINVAL);
        }
        if t.flags & !BPF_F_TEST_RUN_ON_CPU != 0 {
            return Err(Errno::EINVAL);
        }
        if t.flags & BPF_F_TEST_RUN_ON_CPU == 0 && t.cpu != 0 {
            return Err(Errno::EINVAL);
        }
        if t.flags & BPF_F_TEST_RUN_ON_CPU != 0 && t.cpu as usize >= bpfjet_runtime::possible_cpus()
        {
            return Err(Errno(libc::ENXIO));
        }
        let mut args = vec![0u8; MAX_ARGS_BYTES as usize];
        let given = user::read(t.ctx_in, t.ctx_size_in as usize)?;
        args[..given.len()].copy_from_slice(&given);
        // SAFETY: `args` holds the 12 arguments a raw tracepoint program
        // may read (at least its verified context bound), for the run.
        let r0 = unsafe { tracing.run(id, args.as_mut_ptr(), &ProbeSite::default()) };
        if let (_, Some(fault)) = tracing.faults() {
            self.warn_once(&format!("BPF_PROG_TEST_RUN of {name}"), &fault);
        }
        t.retval.set(r0 as u32);
        Ok(0)
    }
}
