//! The kernel's object and graph kfuncs (`bpf_obj_new`, `bpf_obj_drop`,
//! `bpf_refcount_acquire`, `bpf_list_*`, `bpf_rbtree_*`) bound to a
//! program: objects from the program's arena ([`ObjArena`]), the graphs
//! of `bpfjet_kfuncs::graph`. The interpreter runs them as kfunc
//! "helpers" (`bpf_rbtree_add` calls back into the program, `less`); the
//! JIT compiles them in or calls the same `bpfjet_kfuncs::graph` functions
//! directly, reading the arena and node offsets from the registry's
//! [`GraphBinding`] (`bpfjet_jit`'s `lift::graph`); the trampoline only
//! without helper inlining.
//!
//! The verifier proved every argument (`bpfjet_verifier::graph`): roots
//! under their held lock, nodes of the right type and ownership; the node
//! offset of each call's root comes from its facts (`graph_node_offs`),
//! as the kernel patches it into the call.

use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::helpers::Helper;
use bpfjet_kfuncs::graph::{self, list, rbtree, ObjArena};
use bpfjet_verifier::graph::GraphKfunc;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a program's graph kfuncs are bound to: its object arena and the
/// verifier's node offset of each push/add call (by call slot). The
/// interpreter's helpers close over them; the JIT reads them from the
/// kfunc registry ([`crate::HelperRegistry::graph`]) to call the graph
/// natives directly.
#[derive(Clone)]
pub struct GraphBinding {
    pub arena: Arc<ObjArena>,
    pub node_offs: Arc<BTreeMap<usize, u32>>,
}

impl std::fmt::Debug for GraphBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBinding")
            .field("node_offs", &self.node_offs)
            .finish_non_exhaustive()
    }
}

/// Kfunc number `index` of a program, implemented as `k`.
pub fn graph_helper(
    index: u32,
    k: GraphKfunc,
    arena: Arc<ObjArena>,
    node_offs: Arc<BTreeMap<usize, u32>>,
) -> Helper {
    Helper::new(index, k.name(), move |ctx, a| {
        if ctx.is_bounds_checked() {
            return Err(ctx.fault(format!(
                "{} runs only in verified programs (its ownership rules are the \
                 verifier's proof)",
                k.name()
            )));
        }
        let node_off = || {
            node_offs.get(&ctx.pc()).copied().ok_or_else(|| {
                ctx.fault(format!(
                    "no node offset for the {} call (not verified?)",
                    k.name()
                ))
            })
        };
        // SAFETY (every arm): the verifier proved the arguments are a root
        // under its held lock and live objects of its type (see above).
        unsafe {
            Ok(match k {
                GraphKfunc::ObjNew => arena.obj_new(a[0] as u32),
                GraphKfunc::ObjDrop => {
                    graph::obj_drop(a[0]);
                    0
                }
                GraphKfunc::RefcountAcquire => graph::refcount_acquire(a[0]),
                GraphKfunc::ListPushFront | GraphKfunc::ListPushBack => {
                    graph::list_push_owned(a[0], a[1], node_off()?, k == GraphKfunc::ListPushBack)
                }
                GraphKfunc::ListPopFront | GraphKfunc::ListPopBack => {
                    list::pop(a[0], k == GraphKfunc::ListPopBack)
                }
                GraphKfunc::ListFront | GraphKfunc::ListBack => {
                    list::peek(a[0], k == GraphKfunc::ListBack)
                }
                GraphKfunc::RbAdd => {
                    let less = a[2];
                    graph::rb_add_owned(a[0], a[1], node_off()?, |x, y| -> Result<bool, Fault> {
                        Ok(call_less(ctx, less, x, y)? != 0)
                    })?
                }
                GraphKfunc::RbRemove => rbtree::remove(a[0], a[1]),
                GraphKfunc::RbFirst => rbtree::first(a[0]),
                GraphKfunc::RbRoot => rbtree::root_node(a[0]),
                GraphKfunc::RbLeft => rbtree::child(a[0], a[1], true),
                GraphKfunc::RbRight => rbtree::child(a[0], a[1], false),
            })
        }
    })
}

/// The program's `less(a, b)` callback.
fn call_less(ctx: &mut HelperCtx<'_>, less: u64, a: u64, b: u64) -> Result<u64, Fault> {
    ctx.call_subprog(less, &[a, b])
}

/// `bpf_kptr_xchg` (helper 194): the verifier proved `a[0]` a kptr field
/// of a map value and `a[1]` an owned object of its type or NULL.
pub(crate) fn kptr_xchg_helper() -> Helper {
    Helper::new(194, "kptr_xchg", |ctx, a| {
        if ctx.is_bounds_checked() {
            ctx.check_mem(a[0], 8, crate::error::Access::Write)?;
            return Err(ctx.fault(
                "bpf_kptr_xchg runs only in verified programs (its ownership rules are \
                 the verifier's proof)",
            ));
        }
        // SAFETY: per the verifier's proof.
        Ok(unsafe { graph::kptr_xchg(a[0], a[1]) })
    })
}
