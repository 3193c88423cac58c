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
    /// unknown (the walk then starts at the caller of the run; a uprobe's
    /// context is its registers). For a kernel probe on a system call's
    /// entry point, the user registers its context points to.
    pub regs: u64,
    /// The hit is at a function's first instruction and that instruction
    /// is `push %rbp` or `endbr64`: the caller's return address is at the
    /// stack pointer, not yet in a frame. A user stack then lists it after
    /// the probed address, as the kernel's `is_uprobe_at_func_entry` fixup
    /// does (a frame-pointer walk from `rbp` would skip the caller).
    pub ret_at_sp: bool,
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
    /// Bytes of the context record the attach point provides
    /// ([`crate::tracing::TracingProgram::attach_ctx_size`]).
    pub(crate) ctx_len: u64,
    /// The context is a `pt_regs` (kprobe-type programs).
    pub(crate) ctx_is_regs: bool,
    /// This thread's slots of the maps kept per thread (pairwise fusion).
    pub(crate) thread_maps: Vec<super::thread_maps::ThreadMapRef>,
    /// The slots of `thread_maps`, in the object's order of maps kept per
    /// thread ([`crate::tracing::TracingObject::thread_maps`]): native code
    /// indexes it ([`TracingEnv::thread_slot_table`]).
    pub(crate) slot_table: Vec<*const u8>,
}

impl TracingEnv {
    pub fn new(run: RunEnv) -> TracingEnv {
        TracingEnv {
            run,
            site: ProbeSite::default(),
            ctx: 0,
            ctx_len: 0,
            ctx_is_regs: false,
            thread_maps: Vec::new(),
            slot_table: Vec::new(),
        }
    }

    /// This thread's slots of the maps kept per thread, indexed as
    /// [`crate::tracing::TracingObject::thread_maps`]: each a pointer to a
    /// slot laid out as [`crate::tracing::slot_layout`] says, valid while
    /// this context lives. Null when the object keeps no map per thread.
    pub fn thread_slot_table(&self) -> *const *const u8 {
        if self.slot_table.is_empty() {
            std::ptr::null()
        } else {
            self.slot_table.as_ptr()
        }
    }

    /// Set the hit this run serves.
    pub fn begin(&mut self, ctx: u64, ctx_len: u64, ctx_is_regs: bool, site: &ProbeSite) {
        self.ctx = ctx;
        self.ctx_len = ctx_len;
        self.ctx_is_regs = ctx_is_regs;
        self.site = *site;
    }

    /// Whether `[addr, addr + len)` lies in memory that is the kernel's in
    /// the kernel's model of this hit: the context record, and the user
    /// registers of the hit (`raw_tracepoint/sys_enter|sys_exit` get their
    /// address as `args[0]`). `bpf_probe_read_kernel*` read these and
    /// nothing else.
    pub fn is_kernel_memory(&self, addr: u64, len: u64) -> bool {
        let within = |start: u64, size: u64| {
            start != 0
                && addr >= start
                && addr
                    .checked_add(len)
                    .is_some_and(|end| end <= start.saturating_add(size))
        };
        within(self.ctx, self.ctx_len)
            || within(self.site.regs, std::mem::size_of::<super::PtRegs>() as u64)
            || super::task_view::is_filled(addr, len)
            || super::xdp_events::is_filled(addr, len)
    }

    /// Whether `[addr, addr + len)` lies in the context record the run was
    /// entered with: memory the caller of the run guarantees readable for
    /// the whole run (`TracingObject::run`'s contract), so helpers may copy
    /// it directly, without the fault-safe (and system-call) path.
    pub fn is_context_record(&self, addr: u64, len: u64) -> bool {
        self.ctx != 0
            && addr >= self.ctx
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.ctx.saturating_add(self.ctx_len))
    }

    /// Bytes of kernel memory ([`TracingEnv::is_kernel_memory`]) from
    /// `addr` to the end of the object holding it (0 if none does).
    pub fn kernel_memory_left(&self, addr: u64) -> u64 {
        let regs = std::mem::size_of::<super::PtRegs>() as u64;
        [(self.ctx, self.ctx_len), (self.site.regs, regs)]
            .into_iter()
            .filter(|&(start, size)| {
                start != 0 && addr >= start && addr < start.saturating_add(size)
            })
            .map(|(start, size)| start + size - addr)
            .max()
            .unwrap_or(0)
            .max(super::task_view::filled_left(addr))
            .max(super::xdp_events::filled_left(addr))
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
