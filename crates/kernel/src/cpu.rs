//! Running the calling thread on one CPU, so that the kernel's per-CPU map
//! slots and `bpf_get_smp_processor_id` during a test run are the ones the
//! userspace engine is told to use (`--cpu N`).

use crate::error::KernelError;
use std::marker::PhantomData;
use std::mem;

/// Pins the calling thread to one CPU; dropping it restores the previous
/// affinity mask.
pub struct CpuPin {
    previous: libc::cpu_set_t,
    /// Affinity is per thread: restoring it from another thread would be wrong.
    _not_send: PhantomData<*const ()>,
}

impl CpuPin {
    /// `sched_setaffinity` moves the thread before returning, so everything
    /// after this call runs on `cpu`.
    pub fn pin(cpu: usize) -> Result<CpuPin, KernelError> {
        let fail = |why: String| KernelError::Cpu { cpu, why };
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(fail(format!("beyond CPU_SETSIZE ({})", libc::CPU_SETSIZE)));
        }
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut previous: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; the set is sized correctly.
        if unsafe { libc::sched_getaffinity(0, mem::size_of_val(&previous), &mut previous) } != 0 {
            return Err(fail(std::io::Error::last_os_error().to_string()));
        }
        // SAFETY: as above.
        let mut only: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: `cpu` < CPU_SETSIZE was checked.
        unsafe { libc::CPU_SET(cpu, &mut only) };
        // SAFETY: pid 0 is the calling thread; the set is sized correctly.
        if unsafe { libc::sched_setaffinity(0, mem::size_of_val(&only), &only) } != 0 {
            let err = std::io::Error::last_os_error();
            return Err(fail(format!(
                "{err} (is CPU {cpu} online and allowed for this process?)"
            )));
        }
        Ok(CpuPin {
            previous,
            _not_send: PhantomData,
        })
    }
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        // SAFETY: restores the mask read in `pin`, on the same thread (the
        // guard is not Send).
        unsafe {
            libc::sched_setaffinity(0, mem::size_of_val(&self.previous), &self.previous);
        }
    }
}

/// The CPU the calling thread runs on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: plain libc call without arguments.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}
