//! The per-run context of a tracing program.

use crate::env::RunEnv;

/// Where and why a tracing program runs: what the attach layer knows about
/// the hit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeSite {
    /// The probed function's address (`bpf_get_func_ip`): for a uprobe the
    /// address the probe was placed at, for a uretprobe the function's
    /// entry.
    pub func_ip: u64,
    /// The attach cookie (`bpf_get_attach_cookie`), as libbpf's
    /// `bpf_uprobe_opts.bpf_cookie`.
    pub cookie: u64,
    /// Address of the user registers at the hit (a `PtRegs`), for stack
    /// walks (`bpf_get_stack`, `bpf_get_stackid`) by programs whose context
    /// is not `pt_regs` (tracepoints: the system call's registers); 0 when
    /// unknown (the walk then starts at the caller of the run). Ignored for
    /// kprobe-type programs, whose context is the registers.
    pub regs: u64,
}

/// The per-run context of a tracing program: the run environment every
/// helper uses plus the probe site and the context address. One per thread
/// and object (see [`crate::tracing::TracingObject::run`]); dereferences to
/// its [`RunEnv`].
#[derive(Debug)]
pub struct TracingEnv {
    pub(crate) run: RunEnv,
    pub(crate) site: ProbeSite,
    /// The context the program was entered with.
    pub(crate) ctx: u64,
    /// The context is a `pt_regs` (kprobe-type programs).
    pub(crate) ctx_is_regs: bool,
}

impl TracingEnv {
    pub fn new(run: RunEnv) -> TracingEnv {
        TracingEnv {
            run,
            site: ProbeSite::default(),
            ctx: 0,
            ctx_is_regs: false,
        }
    }

    /// Set the hit this run serves.
    pub fn begin(&mut self, ctx: u64, ctx_is_regs: bool, site: &ProbeSite) {
        self.ctx = ctx;
        self.ctx_is_regs = ctx_is_regs;
        self.site = *site;
    }

    pub fn site(&self) -> &ProbeSite {
        &self.site
    }

    /// The run environment every helper uses.
    pub fn run_env(&mut self) -> &mut RunEnv {
        &mut self.run
    }
}

impl std::ops::Deref for TracingEnv {
    type Target = RunEnv;
    fn deref(&self) -> &RunEnv {
        &self.run
    }
}

impl std::ops::DerefMut for TracingEnv {
    fn deref_mut(&mut self) -> &mut RunEnv {
        &mut self.run
    }
}
