//! Helpers and kfuncs: native functions a program calls by number.
//!
//! Both share one calling convention, so one registry type serves the helper
//! table (keyed by the stable helper id, e.g. 1 = `bpf_map_lookup_elem`) and
//! the kfunc table (keyed by the kfunc's BTF id as the loader assigned it).

mod callbacks;
mod common;
mod csum;
pub(crate) mod dynptr;
pub mod fib;
pub mod ids;
mod maps;
pub mod mtu;
mod perf;
mod printf;
mod ringbuf;
mod spin_lock;
mod stack;
mod strings;
mod syncookie;
mod tail_call;
mod task;
mod thread_maps;
mod time;
mod timer;
mod tracing;
mod user_ringbuf;
mod xdp;

pub(crate) use common::value_region as value_region_of;
pub use common::{check_map_use, map_use};
pub use csum::csum_diff;
pub use dynptr::direct as dynptr_direct;
pub use ids::kernel_helper_name;
pub use strings::strncmp;
pub use time::clock_ns;
pub use xdp::{redirect_target, BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS};

use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use std::fmt;
use std::sync::Arc;

/// The native side of a helper. Receives r1–r5 and returns r0.
///
/// A failure the program is expected to handle is `Ok(errno::neg(..))`, as in
/// the kernel. `Err(Fault)` aborts the whole run; it is for what the kernel's
/// verifier would have ruled out (a bad pointer argument in bounds-checked
/// mode), and it lets faults inside callbacks (`HelperCtx::call_subprog`)
/// propagate with `?`.
pub type HelperFn = dyn Fn(&mut HelperCtx<'_>, [u64; 5]) -> Result<u64, Fault> + Send + Sync;

/// A named native function callable from programs.
#[derive(Clone)]
pub struct Helper {
    id: u32,
    name: &'static str,
    func: Arc<HelperFn>,
}

impl Helper {
    pub fn new(
        id: u32,
        name: &'static str,
        func: impl Fn(&mut HelperCtx<'_>, [u64; 5]) -> Result<u64, Fault> + Send + Sync + 'static,
    ) -> Self {
        Helper {
            id,
            name,
            func: Arc::new(func),
        }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    #[inline]
    pub(crate) fn call(&self, ctx: &mut HelperCtx<'_>, args: [u64; 5]) -> Result<u64, Fault> {
        (self.func)(ctx, args)
    }
}

impl fmt::Debug for Helper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Helper")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Ids below this are stored in a directly indexed table: helper ids are small
/// and dense (the kernel has a few hundred), and a call is then one index.
const DENSE_IDS: u32 = 1024;

/// Helpers (or kfuncs) by id.
#[derive(Clone, Debug, Default)]
pub struct HelperRegistry {
    dense: Vec<Option<Helper>>,
    /// Large ids (kfunc BTF ids), sorted by id for binary search.
    sparse: Vec<Helper>,
    /// A kfunc registry's object arena and graph node offsets, for
    /// engines that call the graph kfuncs without the registry (the JIT).
    graph: Option<crate::graph_kfuncs::GraphBinding>,
}

impl HelperRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add or replace the function registered under `helper.id()`.
    pub fn register(&mut self, helper: Helper) {
        let id = helper.id;
        if id < DENSE_IDS {
            let index = id as usize;
            if self.dense.len() <= index {
                self.dense.resize(index + 1, None);
            }
            self.dense[index] = Some(helper);
        } else {
            match self.sparse.binary_search_by_key(&id, |h| h.id) {
                Ok(i) => self.sparse[i] = helper,
                Err(i) => self.sparse.insert(i, helper),
            }
        }
    }

    /// Bind the graph kfuncs' arena and node offsets (the loader, with
    /// the kfuncs it registers from `graph_kfuncs`).
    pub fn set_graph(&mut self, graph: crate::graph_kfuncs::GraphBinding) {
        self.graph = Some(graph);
    }

    /// What the graph kfuncs of this registry are bound to, if any.
    pub fn graph(&self) -> Option<&crate::graph_kfuncs::GraphBinding> {
        self.graph.as_ref()
    }

    /// Builder form of [`HelperRegistry::register`].
    pub fn with(mut self, helper: Helper) -> Self {
        self.register(helper);
        self
    }

    #[inline]
    pub fn get(&self, id: u64) -> Option<&Helper> {
        if id < DENSE_IDS as u64 {
            self.dense.get(id as usize).and_then(Option::as_ref)
        } else {
            let id = u32::try_from(id).ok()?;
            let i = self.sparse.binary_search_by_key(&id, |h| h.id).ok()?;
            self.sparse.get(i)
        }
    }

    /// Lookup by the signed id an instruction carries; negative ids are unknown.
    pub(crate) fn get_signed(&self, id: i32) -> Option<&Helper> {
        u64::try_from(id).ok().and_then(|id| self.get(id))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Helper> {
        self.dense.iter().flatten().chain(self.sparse.iter())
    }
}

/// The helpers every program type has (the kernel's `bpf_base_func_proto`
/// as far as bpfjet implements it): maps, clocks, random numbers, CPU id,
/// tail calls, ring buffers, `trace_printk`/`snprintf`, callbacks,
/// `strncmp`, the current task's pid/tgid and uid/gid. They reach the run's CPU slot and maps through the
/// [`RunEnv`](crate::env::RunEnv) inside the run's per-run context
/// ([`crate::env::run_env`]).
fn base_helpers() -> HelperRegistry {
    let mut r = HelperRegistry::new();
    maps::register(&mut r);
    time::register(&mut r);
    tail_call::register(&mut r);
    ringbuf::register(&mut r);
    printf::register(&mut r);
    callbacks::register(&mut r);
    user_ringbuf::register(&mut r);
    dynptr::register(&mut r);
    strings::register(&mut r);
    task::register(&mut r);
    timer::register(&mut r);
    r.register(crate::graph_kfuncs::kptr_xchg_helper());
    r
}

/// Every kernel helper bpfjet implements for XDP programs, by kernel id:
/// the base set plus the XDP ones, which reach the run's frame through an
/// [`XdpEnv`](crate::env::XdpEnv) passed as the run's user context.
pub fn xdp_helpers() -> HelperRegistry {
    let mut r = base_helpers();
    xdp::register(&mut r);
    csum::register(&mut r);
    perf::register_xdp(&mut r);
    spin_lock::register(&mut r);
    fib::register(&mut r);
    mtu::register(&mut r);
    syncookie::register(&mut r);
    r
}

/// Every kernel helper bpfjet implements for a tracing program type
/// (kprobe, tracepoint, raw tracepoint), by kernel id: the base set plus
/// the kernel's `bpf_tracing_func_proto` helpers bpfjet runs (current
/// task identity, `probe_read*`, stacks, `perf_event_output` on a tracing
/// context, `get_func_ip`, `get_attach_cookie`). Which of them a given type
/// may call is the verifier's per-type set
/// (`bpfjet_verifier::proto::unavailable_reason`). They expect a
/// [`TracingEnv`](crate::tracing::TracingEnv) as the run's user context.
pub fn tracing_helpers() -> HelperRegistry {
    let mut r = base_helpers();
    tracing::register(&mut r);
    thread_maps::register(&mut r);
    stack::register(&mut r);
    perf::register_tracing(&mut r);
    perf::register_xdp_trace(&mut r);
    r
}

/// The helper registry of a program type.
pub fn helpers_for(prog_type: bpfjet_obj::ProgType) -> HelperRegistry {
    if prog_type.is_tracing() {
        tracing_helpers()
    } else {
        xdp_helpers()
    }
}
