//! `BPF_PROG_TEST_RUN` for XDP, the way the kernel's `bpf_prog_test_run_xdp`
//! does it: the packet is copied into a fresh page-sized frame after 256
//! bytes of headroom (a packet longer than the linear part continues in
//! page-sized fragments: a multi-buffer frame, for every XDP program, frags
//! or not, as the kernel does it), the program runs `repeat` times on that
//! same frame (never reset: from the second run on it sees its own output),
//! and the result is the last return value, the frame from `data_meta` to
//! `data_end` followed by the fragments, and the mean time per run.

use crate::env::XdpEnv;
use crate::loader::LoadedObject;
use crate::runtime_error::RuntimeError;
use crate::state::RunState;
use crate::xdp::context::XDP_MD_SIZE;
use crate::xdp::XdpFrame;
use crate::Region;
use std::time::Instant;

/// The loopback device: the interface a test run's frame appears to arrive
/// on when no ingress interface is given (the kernel uses the loopback
/// device's queue 0 for test runs).
pub const LOOPBACK_IFINDEX: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRunOptions {
    /// Runs on the same frame; 0 and 1 both mean one run.
    pub repeat: u32,
    /// The CPU slot: per-CPU map values and `bpf_get_smp_processor_id`.
    pub cpu: usize,
    /// `xdp_md.ingress_ifindex`; 0 means the loopback device (what the
    /// kernel reports without a context). A non-zero index must name an
    /// interface of this host, as the kernel checks.
    pub ingress_ifindex: u32,
    /// `xdp_md.rx_queue_index`: must be 0 without an ingress interface, and
    /// below the interface's receive queue count with one.
    pub rx_queue_index: u32,
    /// The input context's `data_end` (6.18): the linear part holds the
    /// first `min(data_end, 3520)` bytes, the rest goes to fragments. None:
    /// the whole packet, as without a context.
    pub linear_size: Option<u32>,
    /// The input context's `data`: the packet's first `meta_len` bytes are
    /// metadata (`data_meta..data`), and `linear_size` counts from them.
    pub meta_len: u32,
}

impl Default for TestRunOptions {
    fn default() -> Self {
        TestRunOptions {
            repeat: 1,
            cpu: 0,
            ingress_ifindex: 0,
            rx_queue_index: 0,
            linear_size: None,
            meta_len: 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRunResult {
    /// The program's return value (the XDP action) of the last run.
    pub retval: u32,
    /// `data_meta..data_end` after the last run, then the fragments' bytes
    /// of a multi-buffer frame (what the kernel copies out).
    pub data_out: Vec<u8>,
    /// Mean wall-clock time per run.
    pub duration_ns: u64,
    /// The context after the run (`xdp_md.data`, `xdp_md.data_end`),
    /// offsets from `data_meta` as the kernel writes them back.
    pub md_offsets: (u32, u32),
    /// Lines from `bpf_trace_printk`, in order, over all runs.
    pub trace_log: Vec<String>,
    /// What bpfjet had to clean up after the program (a ring-buffer sample
    /// never submitted, a spin lock still held): things the kernel verifier
    /// would have refused to load.
    pub notes: Vec<String>,
}

impl LoadedObject {
    pub fn test_run(
        &self,
        prog: &str,
        data: &[u8],
        opts: &TestRunOptions,
    ) -> Result<TestRunResult, RuntimeError> {
        let program = self.program(prog)?.clone();
        if opts.cpu >= self.ncpus() {
            return Err(RuntimeError::Options(format!(
                "CPU {} does not exist: the object has {} CPU slots",
                opts.cpu,
                self.ncpus()
            )));
        }
        let ingress = check_ingress(opts.ingress_ifindex, opts.rx_queue_index)?;
        let linear = opts.linear_size.map_or(data.len(), |l| l as usize);
        let frame = XdpFrame::for_test_run(
            data,
            opts.meta_len as usize,
            linear,
            ingress,
            opts.rx_queue_index,
        )?;
        let mut env = XdpEnv::new(frame, opts.cpu as u32, self.maps.clone(), self.fib.clone());
        let mut state = RunState::new();
        state.set_program_table(self.program_table());
        let md = env.frame.md_addr();
        state.add_region(Region::read_only(md, XDP_MD_SIZE as u64));
        let (start, len) = env.frame.packet_span();
        state.add_region(Region::writable(start, len));

        let runs = opts.repeat.max(1);
        let mut retval = 0;
        let mut notes = Vec::new();
        // No timer callback on this CPU slot during the runs.
        let _hold = self.maps.hold_cpu(opts.cpu as u32);
        let started = Instant::now();
        for _ in 0..runs {
            let result = program.run(&mut state, &mut env, &[md]);
            notes.extend(env.release_leftovers());
            match result {
                Ok(r0) => retval = r0 as u32,
                Err(fault) => {
                    return Err(RuntimeError::Fault {
                        program: prog.to_string(),
                        fault,
                    })
                }
            }
        }
        let elapsed = started.elapsed().as_nanos() as u64;
        Ok(TestRunResult {
            retval,
            data_out: env.frame.output(),
            duration_ns: elapsed / u64::from(runs),
            md_offsets: env.frame.md_offsets(),
            trace_log: std::mem::take(&mut env.trace),
            notes,
        })
    }
}

/// The kernel's checks of `xdp_md.ingress_ifindex` / `rx_queue_index`
/// (`xdp_convert_md_to_buff`); returns the ifindex the program will see.
fn check_ingress(ifindex: u32, rx_queue: u32) -> Result<u32, RuntimeError> {
    if ifindex == 0 {
        if rx_queue != 0 {
            return Err(RuntimeError::Options(
                "rx_queue_index needs an ingress interface (EINVAL)".into(),
            ));
        }
        return Ok(LOOPBACK_IFINDEX);
    }
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has IF_NAMESIZE bytes, as if_indextoname requires.
    let found = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    if found.is_null() {
        return Err(RuntimeError::Options(format!(
            "no interface with ifindex {ifindex} (ENODEV)"
        )));
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let queues = std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1);
    if rx_queue as usize >= queues.max(1) {
        return Err(RuntimeError::Options(format!(
            "interface {name} has {queues} receive queues; rx_queue_index {rx_queue} is out of range (EINVAL)"
        )));
    }
    Ok(ifindex)
}
