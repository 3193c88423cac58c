//! `BPF_PROG_TEST_RUN`: the kernel runs a loaded program once (or `repeat`
//! times on the same buffer) on a packet we give it and hands back the
//! return value, the packet as the program left it, and the time per run.

use crate::cpu::CpuPin;
use crate::error::{Errno, KernelError};
use crate::object::KernelObject;
use std::os::fd::RawFd;

/// Room for the packet to grow: `bpf_xdp_adjust_head` takes up to the
/// 256-byte XDP headroom and `bpf_xdp_adjust_tail` up to the tailroom of the
/// kernel's page, so the packet never outgrows its input by more than a page.
const GROWTH_ROOM: usize = 4096 + 256;

/// The receive-side fields of `struct xdp_md` a test run may set. The kernel
/// checks them: the interface must exist and the queue must be one of its
/// receive queues (`lo`, ifindex 1, queue 0 always qualifies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpContext {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    /// `xdp_md.data_end`: the linear part's length (6.18: the first
    /// `min(data_end, 3520)` bytes are linear, the rest fragments; more
    /// than the packet is EINVAL). None: the packet's length.
    pub data_end: Option<u32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TestRunOptions {
    /// Runs on the same buffer; 0 and 1 both mean one run. Note that from
    /// the second run on the program sees its own output.
    pub repeat: u32,
    /// Pin the calling thread to this CPU for the run (restored afterwards).
    pub cpu: Option<usize>,
    /// Pass a `struct xdp_md` context; without it the kernel uses zeros.
    pub xdp_context: Option<XdpContext>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRunResult {
    /// The program's return value (the XDP action).
    pub retval: u32,
    /// Exactly the bytes of the packet after the run.
    pub data_out: Vec<u8>,
    /// Mean time per run, as the kernel measured it.
    pub duration_ns: u32,
}

impl KernelObject {
    /// Run program `program` on `data`, `repeat` times, optionally as CPU `cpu`.
    pub fn test_run(
        &self,
        program: &str,
        data: &[u8],
        repeat: u32,
        cpu: Option<usize>,
    ) -> Result<TestRunResult, KernelError> {
        self.test_run_with(
            program,
            data,
            &TestRunOptions {
                repeat,
                cpu,
                xdp_context: None,
            },
        )
    }

    pub fn test_run_with(
        &self,
        program: &str,
        data: &[u8],
        options: &TestRunOptions,
    ) -> Result<TestRunResult, KernelError> {
        let fd = self.program(program)?.fd;
        test_run_fd(fd, data, options).map_err(|e| match e {
            KernelError::TestRun { errno, .. } => KernelError::TestRun {
                program: program.to_string(),
                errno,
            },
            other => other,
        })
    }
}

/// `BPF_PROG_TEST_RUN` on a raw program fd (for benchmark harnesses that
/// keep the fd and call this in a loop).
pub fn test_run_fd(
    prog_fd: RawFd,
    data: &[u8],
    options: &TestRunOptions,
) -> Result<TestRunResult, KernelError> {
    let _pin = options.cpu.map(CpuPin::pin).transpose()?;

    let mut data_out = vec![0u8; data.len() + GROWTH_ROOM];
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
    // rx_queue_index, egress_ifindex. `data` = metadata length (none) and
    // `data_end` = packet length are what the kernel requires of an input context.
    let ctx: Option<[u32; 6]> = options.xdp_context.map(|c| {
        [
            0,
            c.data_end.unwrap_or(data.len() as u32),
            0,
            c.ingress_ifindex,
            c.rx_queue_index,
            0,
        ]
    });
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data.as_ptr().cast(),
        data_size_in: data.len() as u32,
        data_out: data_out.as_mut_ptr().cast(),
        data_size_out: data_out.len() as u32,
        repeat: options.repeat as i32,
        ..Default::default()
    };
    if let Some(ctx) = &ctx {
        opts.ctx_in = ctx.as_ptr().cast();
        opts.ctx_size_in = std::mem::size_of_val(ctx) as u32;
    }
    // SAFETY: every pointer in `opts` refers to a live buffer of the stated
    // size; the kernel writes at most `data_size_out` bytes to `data_out`.
    let ret = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog_fd, &mut opts) };
    if ret < 0 {
        return Err(KernelError::TestRun {
            program: format!("fd {prog_fd}"),
            errno: Errno::from_ret(ret),
        });
    }
    data_out.truncate(opts.data_size_out as usize);
    Ok(TestRunResult {
        retval: opts.retval,
        data_out,
        duration_ns: opts.duration,
    })
}
