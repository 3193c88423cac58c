//! The node-memory kfuncs ([`crate::nodes`]) as catalog entries: natives
//! on the library's ABI and their prototypes. `catalog::KFUNCS` lists them.
//!
//! Every kfunc takes the pool as writable memory and its size (`pool,
//! pool__sz`): the verifier proves the program may write those bytes,
//! and the natives check every index inside them. `bpfjet_node_data` is
//! the one that hands out memory: an acquired reference, possibly null, of
//! the constant size the program asks for; `bpfjet_node_put` releases it.

use crate::catalog::{Inline, Kfunc, Origin};
use crate::nodes;
use bpfjet_verifier::proto::{KfuncArg, KfuncFlags, KfuncProto, KfuncRet};
use bpfjet_verifier::ProgType;

const XDP: &[ProgType] = &[ProgType::Xdp];
const N: KfuncArg = KfuncArg::None;
const S: KfuncArg = KfuncArg::Scalar;
const POOL: KfuncArg = KfuncArg::MutMem;
const SZ: KfuncArg = KfuncArg::Size;
const INT: KfuncRet = KfuncRet::Integer;

/// # Safety
/// `p` is writable for `len` bytes and nothing else refers to them during
/// the call (the verifier's proof for `MutMem`; one run per CPU slot).
unsafe fn pool<'a>(p: u64, len: u64) -> &'a mut [u8] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len as usize) }
}

macro_rules! native {
    ($name:ident, |$a:ident, $b:ident, $c:ident, $d:ident, $e:ident| $body:expr) => {
        #[allow(unused_variables, unused_unsafe, clippy::unnecessary_cast)]
        unsafe extern "C" fn $name($a: u64, $b: u64, $c: u64, $d: u64, $e: u64) -> u64 {
            // SAFETY: the pool arguments are valid for their sizes (the
            // prototype's `MutMem, Size`, proven by the verifier or checked
            // by the bounds-checked interpreter).
            unsafe { $body }
        }
    };
}

native!(n_pool_init, |m, mn, size, links, e| nodes::pool_init(
    pool(m, mn),
    size,
    links
));
native!(n_alloc, |m, mn, c, d, e| nodes::alloc(pool(m, mn)));
native!(n_free, |m, mn, h, d, e| nodes::free(pool(m, mn), h));
native!(n_connect, |m, mn, from, link, to| nodes::connect(
    pool(m, mn),
    from,
    link,
    to
));
native!(n_disconnect, |m, mn, from, link, e| nodes::disconnect(
    pool(m, mn),
    from,
    link
));
native!(n_next, |m, mn, node, link, e| nodes::next(
    pool(m, mn),
    node,
    link
));
native!(n_data, |m, mn, node, size, e| nodes::data(
    pool(m, mn),
    node,
    size
)
.map_or(0, |off| m + off as u64));
// Giving a reference back changes nothing in the pool: the verifier's
// bookkeeping is what the call is for.
native!(n_put, |p, b, c, d, e| 0);

const fn entry(
    name: &'static str,
    c_decl: &'static str,
    args: [KfuncArg; 5],
    ret: KfuncRet,
    flags: KfuncFlags,
    native: crate::catalog::NativeFn,
    inline: Option<Inline>,
) -> Kfunc {
    Kfunc {
        name,
        c_decl,
        origin: Origin::Bpfjet,
        proto: KfuncProto {
            name,
            args,
            ret,
            flags,
        },
        prog_types: XDP,
        native,
        inline,
    }
}

const PLAIN: KfuncFlags = KfuncFlags {
    acquire: false,
    ret_null: false,
    dev_bound: false,
};

pub(crate) const POOL_INIT: Kfunc = entry(
    "bpfjet_node_pool_init",
    "__s64 bpfjet_node_pool_init(void *pool, __u32 pool__sz, __u32 data_size, __u32 nlinks)",
    [POOL, SZ, S, S, N],
    INT,
    PLAIN,
    n_pool_init,
    None,
);
pub(crate) const ALLOC: Kfunc = entry(
    "bpfjet_node_alloc",
    "__u64 bpfjet_node_alloc(void *pool, __u32 pool__sz)",
    [POOL, SZ, N, N, N],
    INT,
    PLAIN,
    n_alloc,
    None,
);
pub(crate) const FREE: Kfunc = entry(
    "bpfjet_node_free",
    "__s64 bpfjet_node_free(void *pool, __u32 pool__sz, __u64 node)",
    [POOL, SZ, S, N, N],
    INT,
    PLAIN,
    n_free,
    None,
);
pub(crate) const CONNECT: Kfunc = entry(
    "bpfjet_node_connect",
    "__s64 bpfjet_node_connect(void *pool, __u32 pool__sz, __u64 from, __u32 link, __u64 to)",
    [POOL, SZ, S, S, S],
    INT,
    PLAIN,
    n_connect,
    None,
);
pub(crate) const DISCONNECT: Kfunc = entry(
    "bpfjet_node_disconnect",
    "__s64 bpfjet_node_disconnect(void *pool, __u32 pool__sz, __u64 from, __u32 link)",
    [POOL, SZ, S, S, N],
    INT,
    PLAIN,
    n_disconnect,
    None,
);
pub(crate) const NEXT: Kfunc = entry(
    "bpfjet_node_next",
    "__u64 bpfjet_node_next(void *pool, __u32 pool__sz, __u64 node, __u32 link)",
    [POOL, SZ, S, S, N],
    INT,
    PLAIN,
    n_next,
    Some(Inline::NodeNext),
);
pub(crate) const DATA: Kfunc = entry(
    "bpfjet_node_data",
    "void *bpfjet_node_data(void *pool, __u32 pool__sz, __u64 node, __u32 data__szk)",
    [POOL, SZ, S, KfuncArg::KnownSize, N],
    KfuncRet::MemOfArgSize(4),
    KfuncFlags {
        acquire: true,
        ret_null: true,
        dev_bound: false,
    },
    n_data,
    Some(Inline::NodeData),
);
pub(crate) const PUT: Kfunc = entry(
    "bpfjet_node_put",
    "void bpfjet_node_put(void *data)",
    [KfuncArg::Release, N, N, N, N],
    KfuncRet::Void,
    PLAIN,
    n_put,
    Some(Inline::NodePut),
);
