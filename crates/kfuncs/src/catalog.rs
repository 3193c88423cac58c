//! Every kfunc of the library, declared once: its name, C declaration (the
//! BTF prototype a program's `extern ... __ksym` must match), verifier
//! prototype, the program types that may call it, the native
//! implementation and, where it has one, the form the JIT inlines.
//!
//! All natives share one ABI, `extern "C" fn(r1, r2, r3, r4, r5) -> r0`,
//! so the interpreter and the JIT call any of them the same way. Pointer
//! arguments are addresses the verifier proved readable (or writable) for
//! the sizes the prototype names.

use crate::cpu::features;
use crate::random::{self, GeoPool, GEO_POOL_BYTES};
use crate::search::Simd;
use crate::{bits, bktlist, enetstl, enetstl_ptr, hash, iter_num, multihash};
use bpfjet_verifier::proto::{KfuncArg, KfuncFlags, KfuncProto, KfuncRet};
use bpfjet_verifier::ProgType;

/// The native ABI of every kfunc.
pub type NativeFn = unsafe extern "C" fn(u64, u64, u64, u64, u64) -> u64;

/// Who defined the name and signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// bpfjet's own (`include/bpfjet_kfuncs.h`).
    Bpfjet,
    /// The eNetSTL kernel module's (EuroSys'25), for its NF programs.
    ENetStl,
    /// The kernel's own (its open-coded iterators).
    Kernel,
}

/// Where a search's element count comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// From the byte size in argument register `reg` (inlined only when the
    /// JIT knows it as a constant).
    SizeReg(u8),
    /// A fixed number of elements.
    Fixed(u32),
}

/// What the JIT may compile in place of the call (same result as the native).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inline {
    /// 1 + trailing zeros, 0 for 0 (`bits` wide).
    Ffs {
        bits: u32,
    },
    /// Trailing zeros (the width for 0).
    Ctz {
        bits: u32,
    },
    /// Leading zeros (the width for 0).
    Clz {
        bits: u32,
    },
    Popcount {
        bits: u32,
    },
    /// CRC32C of (r1, r2 bytes) from seed r3.
    Crc32c,
    /// Index of the first element of `lane_bytes` equal to the key in
    /// register `key`, in the bucket at r1 (the count if none).
    FindEq {
        lane_bytes: u32,
        lanes: Lanes,
        key: u8,
    },
    /// Bit mask of equal elements (two bits per element with `byte_mask`).
    MaskEq {
        lane_bytes: u32,
        lanes: Lanes,
        key: u8,
        byte_mask: bool,
    },
    /// Compare `bytes`-byte keys at r1 and r2: 1 when equal (or when they
    /// differ, with `one_if_differ`).
    KeyEq {
        bytes: u32,
        one_if_differ: bool,
    },
    /// The fused count-min of `multihash` (key r1/r2, rows r3/r4, k r5):
    /// inlined when the sizes and k are constants and the target has
    /// SSE4.2 — k CRC32C chains, k counter updates, their minimum.
    CountMin {
        increment: bool,
    },
    /// `bpfjet_geo_should_do(pool)`: the countdown in the pool's first u32
    /// decremented in place while nonzero (result 0); a sampled event
    /// (countdown 0) takes the pool's next count in place (result 1); the
    /// native only to refill a used-up pool or for one never initialised.
    GeoCountdown,
    /// `bpfjet_node_next(pool, pool__sz, node, link)`: the link read and
    /// both generations checked in place (`nodes`); the native only for a
    /// pool header it does not recognise.
    NodeNext,
    /// `bpfjet_node_data(pool, pool__sz, node, size)`: the data address
    /// computed in place after the same checks.
    NodeData,
    /// `bpfjet_node_put(data)`: nothing to do at run time.
    NodePut,
    /// One of eNetSTL's node-pointer kfuncs (`enetstl_ptr`) whose work is
    /// checks, loads, stores and a reference count: compiled in with the
    /// native's checks of handles (a link's or tmp's node found through the
    /// table of space bases, its generation compared), indexes, owners and
    /// data ranges (object arguments are the verifier's); the native only
    /// to free a node whose last reference is dropped.
    EnetPtr(PtrOp),
    /// A list-bucket operation (`bktlist`) with constant memory and
    /// element sizes: the native's checks (every index read from the
    /// memory checked, -EINVAL on corruption) and link updates compiled in.
    BktList(BktOp),
    /// The minimum or maximum (`max`) of the bucket's `lane_bytes`
    /// elements (r1, r2 bytes), or the index of its first occurrence
    /// (`index`): inlined when the size is a constant of 1..=64 elements.
    Reduce {
        lane_bytes: u32,
        max: bool,
        index: bool,
    },
}

/// eNetSTL's node-pointer kfuncs that have an inline form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtrOp {
    /// `ptr_container_get_tmp(c, idx)`.
    GetTmp,
    /// `ptr_get_out(node, idx)`.
    GetOut,
    /// `ptr_container_set_tmp(c, node, idx)`.
    SetTmp,
    /// `ptr_release_node(node)`.
    Release,
    /// `ptr_connect(p1, idx1, p2, idx2)`.
    Connect,
    /// `ptr_unconnect(p1, idx1, p2, idx2)`.
    Unconnect,
    /// `ptr_write_data1(node, off, data, size)`.
    WriteData1,
    /// `ptr_write_data2(node, off, data, size)`.
    WriteData2,
}

/// The list-bucket operations that have an inline form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BktOp {
    /// `bpfjet_bktlist_push(lists, sz, bucket, elem, elem_sz)`.
    Push,
    /// `bpfjet_bktlist_pop(lists, sz, bucket, out, out_sz)`.
    Pop,
    /// `bpfjet_bktlist_peek(lists, sz, bucket, out, out_sz)`.
    Peek,
    /// `bpfjet_bktlist_len(lists, sz, bucket)`.
    Len,
}

/// One kfunc.
#[derive(Clone, Copy, Debug)]
pub struct Kfunc {
    pub name: &'static str,
    pub c_decl: &'static str,
    pub origin: Origin,
    pub proto: KfuncProto,
    pub prog_types: &'static [ProgType],
    pub native: NativeFn,
    pub inline: Option<Inline>,
}

impl Kfunc {
    /// Symbol of the native in generated code.
    pub fn symbol(&self) -> String {
        format!("bpfjet_kfunc_{}", self.name)
    }

    pub fn callable_from(&self, t: ProgType) -> bool {
        self.prog_types.contains(&t)
    }
}

const XDP: &[ProgType] = &[ProgType::Xdp];
/// The kernel's generic kfuncs (its iterators): every program type.
const ANY_PROGRAM: &[ProgType] = &[
    ProgType::Xdp,
    ProgType::Kprobe,
    ProgType::Tracepoint,
    ProgType::RawTracepoint,
    ProgType::PerfEvent,
];
const N: KfuncArg = KfuncArg::None;
const S: KfuncArg = KfuncArg::Scalar;

/// # Safety
/// `p` is readable for `len` bytes (the verifier's proof).
unsafe fn mem<'a>(p: u64, len: u64) -> &'a [u8] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(p as *const u8, len as usize) }
}

/// # Safety
/// `p` is writable for `len` bytes and nothing else refers to them during
/// the call (the program's own memory, one run per CPU slot).
unsafe fn mem_mut<'a>(p: u64, len: u64) -> &'a mut [u8] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len as usize) }
}

macro_rules! native {
    ($name:ident, |$a:ident, $b:ident, $c:ident, $d:ident, $e:ident| $body:expr) => {
        #[allow(unused_variables, unused_unsafe, clippy::unnecessary_cast)]
        unsafe extern "C" fn $name($a: u64, $b: u64, $c: u64, $d: u64, $e: u64) -> u64 {
            // SAFETY: pointer arguments are valid for the sizes the
            // kfunc's prototype names (see the module docs).
            unsafe { $body }
        }
    };
}

native!(n_ffs32, |x, b, c, d, e| bits::ffs32(x as u32));
native!(n_ffs64, |x, b, c, d, e| bits::ffs64(x));
native!(n_ctz32, |x, b, c, d, e| bits::ctz32(x as u32));
native!(n_ctz64, |x, b, c, d, e| bits::ctz64(x));
native!(n_clz32, |x, b, c, d, e| bits::clz32(x as u32));
native!(n_clz64, |x, b, c, d, e| bits::clz64(x));
native!(n_popcount32, |x, b, c, d, e| bits::popcount32(x as u32));
native!(n_popcount64, |x, b, c, d, e| bits::popcount64(x));

native!(n_find_u16, |p, n, k, d, e| Simd::detected()
    .find_eq(mem(p, n), k as u16));
native!(n_find_u32, |p, n, k, d, e| Simd::detected()
    .find_eq(mem(p, n), k as u32));
native!(n_find_u64, |p, n, k, d, e| Simd::detected()
    .find_eq(mem(p, n), k));
native!(n_mask_u16, |p, n, k, d, e| Simd::detected()
    .mask_eq(mem(p, n), k as u16));
native!(n_mask_u32, |p, n, k, d, e| Simd::detected()
    .mask_eq(mem(p, n), k as u32));
native!(n_mask_u64, |p, n, k, d, e| Simd::detected()
    .mask_eq(mem(p, n), k));
native!(n_min_u16, |p, n, c, d, e| u64::from(
    Simd::detected().min::<u16>(mem(p, n))
));
native!(n_min_u32, |p, n, c, d, e| u64::from(
    Simd::detected().min::<u32>(mem(p, n))
));
native!(n_min_u64, |p, n, c, d, e| Simd::detected()
    .min::<u64>(mem(p, n)));
native!(n_max_u16, |p, n, c, d, e| u64::from(
    Simd::detected().max::<u16>(mem(p, n))
));
native!(n_max_u32, |p, n, c, d, e| u64::from(
    Simd::detected().max::<u32>(mem(p, n))
));
native!(n_max_u64, |p, n, c, d, e| Simd::detected()
    .max::<u64>(mem(p, n)));
native!(n_argmin_u16, |p, n, c, d, e| Simd::detected()
    .argmin::<u16>(mem(p, n)));
native!(n_argmin_u32, |p, n, c, d, e| Simd::detected()
    .argmin::<u32>(mem(p, n)));
native!(n_argmin_u64, |p, n, c, d, e| Simd::detected()
    .argmin::<u64>(mem(p, n)));
native!(n_argmax_u16, |p, n, c, d, e| Simd::detected()
    .argmax::<u16>(mem(p, n)));
native!(n_argmax_u32, |p, n, c, d, e| Simd::detected()
    .argmax::<u32>(mem(p, n)));
native!(n_argmax_u64, |p, n, c, d, e| Simd::detected()
    .argmax::<u64>(mem(p, n)));
native!(n_key16_eq, |a, b, c, d, e| u64::from(
    Simd::detected().key_eq(mem(a, 16), mem(b, 16))
));
native!(n_key32_eq, |a, b, c, d, e| u64::from(
    Simd::detected().key_eq(mem(a, 32), mem(b, 32))
));
native!(n_crc32c, |p, n, seed, d, e| u64::from(hash::crc32c(
    mem(p, n),
    seed as u32
)));
native!(n_cm_inc, |key, kn, rows, rn, k| multihash::cm_inc(
    features(),
    mem(key, kn),
    mem_mut(rows, rn),
    k
));
native!(n_cm_min, |key, kn, rows, rn, k| multihash::cm_min(
    features(),
    mem(key, kn),
    mem(rows, rn),
    k
));
native!(n_bloom_set, |key, kn, bitsp, bn, k| multihash::bloom_set(
    features(),
    mem(key, kn),
    mem_mut(bitsp, bn),
    k
));
native!(n_bloom_test, |key, kn, bitsp, bn, k| multihash::bloom_test(
    features(),
    mem(key, kn),
    mem(bitsp, bn),
    k
));

/// Runs `f` on the `GeoPool` at `p`, copied in and out: the program's
/// pointer need not be aligned.
///
/// # Safety
/// `p` is writable for `GEO_POOL_BYTES` (the verifier's proof for the
/// prototype's `OutMem`), in the calling CPU slot's own memory.
unsafe fn with_geo_pool(p: u64, f: impl FnOnce(&mut GeoPool) -> u64) -> u64 {
    let p = p as *mut GeoPool;
    // SAFETY: per the contract; `GeoPool` is plain u32s, any bytes are valid.
    let mut pool = unsafe { p.read_unaligned() };
    let r = f(&mut pool);
    // SAFETY: as above.
    unsafe { p.write_unaligned(pool) };
    r
}

native!(n_geo_init, |p, scale, seed, d, e| with_geo_pool(p, |g| g
    .init(scale as u32, seed as u32)));
native!(n_geo_should_do, |p, b, c, d, e| with_geo_pool(
    p,
    GeoPool::should_do
));
native!(n_geo_next, |p, b, c, d, e| with_geo_pool(
    p,
    GeoPool::next_count
));
native!(n_enet_geo_new, |percent, b, c, d, e| random::enetstl_ctx(
    percent
)
.map_or(0, |ctx| ctx as u64));
native!(n_enet_geo_free, |ctx, b, c, d, e| 0);
native!(n_enet_geo_should_do, |percent, b, c, d, e| {
    random::enetstl_ctx(percent).map_or(0, |ctx| (*ctx).should_do())
});
native!(n_enet_geo_gen, |percent, b, c, d, e| random::enetstl_ctx(
    percent
)
.map_or(0, |ctx| (*ctx).gen_geo_cnt()));

/// Elements pass through a stack copy: the element or output buffer may
/// lie inside the list-buckets' own memory (the program chooses), and the
/// native never holds two views of one byte.
const ELEM_MAX: usize = bktlist::MAX_ELEM as usize;

native!(n_bkt_init, |m, mn, nb, es, e| bktlist::init(
    mem_mut(m, mn),
    nb,
    es
));
native!(n_bkt_push, |m, mn, b, elem, en| {
    if en as usize > ELEM_MAX {
        return neg_einval();
    }
    let mut tmp = [0u8; ELEM_MAX];
    tmp[..en as usize].copy_from_slice(mem(elem, en));
    bktlist::push(mem_mut(m, mn), b, &tmp[..en as usize])
});
native!(n_bkt_pop, |m, mn, b, out, on| {
    if on as usize > ELEM_MAX {
        return neg_einval();
    }
    let mut tmp = [0u8; ELEM_MAX];
    let r = bktlist::pop(mem_mut(m, mn), b, &mut tmp[..on as usize]);
    if r == 0 {
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), out as *mut u8, on as usize);
    }
    r
});
native!(n_bkt_peek, |m, mn, b, out, on| {
    if on as usize > ELEM_MAX {
        return neg_einval();
    }
    let mut tmp = [0u8; ELEM_MAX];
    let r = bktlist::peek(mem(m, mn), b, &mut tmp[..on as usize]);
    if r == 0 {
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), out as *mut u8, on as usize);
    }
    r
});
native!(n_bkt_len, |m, mn, b, d, e| bktlist::len(mem(m, mn), b));
native!(n_enet_bkt_new, |a, b, c, d, e| enetstl::bktlist_handle());
native!(n_enet_bkt_free, |h, b, c, d, e| 0);
native!(n_enet_bkt_push, |fd, val, size, slot, e| {
    enetstl::bktlist_push_back(fd, mem(val, size), slot)
});
native!(n_enet_bkt_pop, |fd, val, size, slot, e| {
    enetstl::bktlist_pop_front(fd, mem_mut(val, size), slot)
});

// eNetSTL's node-pointer library (`enetstl_ptr`): the verifier proved each
// object argument a live reference of its type (the natives check again).
native!(n_ptr_create, |n, b, c, d, e| enetstl_ptr::create_container(
));
native!(n_ptr_destroy, |cont, b, c, d, e| {
    enetstl_ptr::destroy_container(cont);
    0
});
native!(n_ptr_alloc, |a, b, c, d, e| enetstl_ptr::alloc_node());
native!(n_ptr_release, |node, b, c, d, e| {
    enetstl_ptr::release_node(node);
    0
});
native!(n_ptr_set_owner, |cont, node, c, d, e| {
    enetstl_ptr::set_owner(cont, node);
    0
});
native!(n_ptr_unset_owner, |node, b, c, d, e| {
    enetstl_ptr::unset_owner(node);
    0
});
native!(n_ptr_set_tmp, |cont, node, idx, d, e| {
    enetstl_ptr::container_set_tmp(cont, node, idx as u32 as u64);
    0
});
native!(n_ptr_get_tmp, |cont, idx, c, d, e| {
    enetstl_ptr::container_get_tmp(cont, idx as u32 as u64)
});
native!(n_ptr_get_out, |node, idx, c, d, e| enetstl_ptr::get_out(
    node,
    idx as u32 as u64
));
native!(n_ptr_connect, |p1, i1, p2, i2, e| enetstl_ptr::connect(
    p1,
    i1 as u32 as u64,
    p2,
    i2 as u32 as u64
));
native!(n_ptr_unconnect, |p1, i1, p2, i2, e| enetstl_ptr::unconnect(
    p1,
    i1 as u32 as u64,
    p2,
    i2 as u32 as u64
));
native!(n_ptr_write1, |node, off, data, size, e| {
    enetstl_ptr::write_data(node, off, data, size, false)
});
native!(n_ptr_write2, |node, off, data, size, e| {
    enetstl_ptr::write_data(node, off, data, size, true)
});

fn neg_einval() -> u64 {
    crate::errno::neg(crate::errno::EINVAL)
}

// eNetSTL: 16 u16 elements (one 32-byte AVX2 vector) per bucket.
native!(n_enet_find_u16, |p, k, c, d, e| Simd::detected()
    .find_eq(mem(p, 32), k as u16));
native!(n_enet_mask_u16, |p, k, c, d, e| enetstl::byte_mask_u16(
    Simd::detected().mask_eq(mem(p, 32), k as u16)
));
native!(n_enet_k16_cmp, |a, b, c, d, e| u64::from(
    !Simd::detected().key_eq(mem(a, 16), mem(b, 16))
));
native!(n_enet_hash_cnt, |tuple, table, size, shift, e| {
    enetstl::hash_simd_cnt_u32(
        mem(tuple, enetstl::PKT_5TUPLE_BYTES as u64),
        mem_mut(table, size),
        shift as u32,
    );
    0
});

/// eNetSTL's counter kfuncs: the input is hashed before the table is
/// borrowed (both may lie in one map value).
unsafe fn enet_cnt32(hash: enetstl::CntHash, input: &[u8], table: u64, size: u64, shift: u64) {
    let mut hashes = [0u32; enetstl::CNT_ROWS];
    let rows = enetstl::cnt32_hashes(
        features(),
        hash,
        input,
        size as usize,
        shift as u32,
        &mut hashes,
    );
    // SAFETY: the verifier proved `table` writable for `size` bytes.
    enetstl::cnt32_apply(
        unsafe { mem_mut(table, size) },
        shift as u32,
        &hashes[..rows],
    );
}
native!(n_enet_fh_cnt, |input, n, table, size, shift| {
    enet_cnt32(
        enetstl::CntHash::Fasthash32,
        mem(input, n),
        table,
        size,
        shift,
    );
    0
});
native!(n_enet_fh_pkt_cnt, |input, table, size, shift, e| {
    enet_cnt32(
        enetstl::CntHash::Fasthash32,
        mem(input, enetstl::PKT_5TUPLE_BYTES as u64),
        table,
        size,
        shift,
    );
    0
});
native!(n_enet_xxh_cnt, |input, n, table, size, shift| {
    enet_cnt32(enetstl::CntHash::Xxh32, mem(input, n), table, size, shift);
    0
});
native!(n_enet_xxh_pkt_cnt, |input, table, size, shift, e| {
    enet_cnt32(
        enetstl::CntHash::Xxh32,
        mem(input, enetstl::PKT_5TUPLE_BYTES as u64),
        table,
        size,
        shift,
    );
    0
});
native!(n_enet_htss, |p, n, sig, d, e| enetstl::htss_sig_cmp_with(
    features(),
    mem(p, n),
    sig as u16
));

const fn proto(name: &'static str, args: [KfuncArg; 5], ret: KfuncRet) -> KfuncProto {
    KfuncProto {
        name,
        args,
        ret,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    }
}

const fn kfunc(
    origin: Origin,
    name: &'static str,
    c_decl: &'static str,
    args: [KfuncArg; 5],
    ret: KfuncRet,
    native: NativeFn,
    inline: Option<Inline>,
) -> Kfunc {
    Kfunc {
        name,
        c_decl,
        origin,
        proto: proto(name, args, ret),
        prog_types: XDP,
        native,
        inline,
    }
}

const INT: KfuncRet = KfuncRet::Integer;
const NODE: &str = enetstl_ptr::NODE_TYPE;
const CONT: &str = enetstl_ptr::CONTAINER_TYPE;

/// An argument that is an object of library type `ty` (released by the
/// call with `release`).
const fn module(ty: &'static str, release: bool) -> KfuncArg {
    KfuncArg::Module { ty, release }
}

/// An eNetSTL kfunc returning a new reference to a `ty` object, or NULL
/// (`KF_ACQUIRE | KF_RET_NULL`).
const fn acquiring(
    name: &'static str,
    c_decl: &'static str,
    args: [KfuncArg; 5],
    ty: &'static str,
    native: NativeFn,
    inline: Option<Inline>,
) -> Kfunc {
    Kfunc {
        name,
        c_decl,
        origin: Origin::ENetStl,
        proto: KfuncProto {
            name,
            args,
            ret: KfuncRet::Module(ty),
            flags: KfuncFlags {
                acquire: true,
                ret_null: true,
                dev_bound: false,
            },
        },
        prog_types: XDP,
        native,
        inline,
    }
}
const POOL: KfuncArg = KfuncArg::OutMem(GEO_POOL_BYTES);
const MEM: KfuncArg = KfuncArg::Mem;
const SZ: KfuncArg = KfuncArg::Size;
const MUT: KfuncArg = KfuncArg::MutMem;
use Origin::{Bpfjet as B, ENetStl as E};

macro_rules! unary {
    ($name:literal, $decl:literal, $native:ident, $inline:expr) => {
        kfunc(
            B,
            $name,
            $decl,
            [S, N, N, N, N],
            INT,
            $native,
            Some($inline),
        )
    };
}

macro_rules! search {
    ($name:literal, $decl:literal, $native:ident, $inline:expr) => {
        kfunc(B, $name, $decl, [MEM, SZ, S, N, N], INT, $native, $inline)
    };
}

macro_rules! reduce {
    ($name:literal, $decl:literal, $native:ident, $inline:expr) => {
        kfunc(B, $name, $decl, [MEM, SZ, N, N, N], INT, $native, $inline)
    };
}

const fn reduction(lane_bytes: u32, max: bool, index: bool) -> Option<Inline> {
    Some(Inline::Reduce {
        lane_bytes,
        max,
        index,
    })
}

macro_rules! fused {
    ($name:literal, $decl:literal, $table:expr, $native:ident, $inline:expr) => {
        kfunc(
            B,
            $name,
            $decl,
            [MEM, SZ, $table, SZ, S],
            INT,
            $native,
            $inline,
        )
    };
}

const fn find(lane_bytes: u32) -> Option<Inline> {
    Some(Inline::FindEq {
        lane_bytes,
        lanes: Lanes::SizeReg(2),
        key: 3,
    })
}

const fn mask(lane_bytes: u32) -> Option<Inline> {
    Some(Inline::MaskEq {
        lane_bytes,
        lanes: Lanes::SizeReg(2),
        key: 3,
        byte_mask: false,
    })
}

/// The library.
pub static KFUNCS: &[Kfunc] = &[
    unary!("bpfjet_ffs32", "__u64 bpfjet_ffs32(__u32 x)", n_ffs32, Inline::Ffs { bits: 32 }),
    unary!("bpfjet_ffs64", "__u64 bpfjet_ffs64(__u64 x)", n_ffs64, Inline::Ffs { bits: 64 }),
    unary!("bpfjet_ctz32", "__u64 bpfjet_ctz32(__u32 x)", n_ctz32, Inline::Ctz { bits: 32 }),
    unary!("bpfjet_ctz64", "__u64 bpfjet_ctz64(__u64 x)", n_ctz64, Inline::Ctz { bits: 64 }),
    unary!("bpfjet_clz32", "__u64 bpfjet_clz32(__u32 x)", n_clz32, Inline::Clz { bits: 32 }),
    unary!("bpfjet_clz64", "__u64 bpfjet_clz64(__u64 x)", n_clz64, Inline::Clz { bits: 64 }),
    unary!(
        "bpfjet_popcount32",
        "__u64 bpfjet_popcount32(__u32 x)",
        n_popcount32,
        Inline::Popcount { bits: 32 }
    ),
    unary!(
        "bpfjet_popcount64",
        "__u64 bpfjet_popcount64(__u64 x)",
        n_popcount64,
        Inline::Popcount { bits: 64 }
    ),
    search!(
        "bpfjet_find_u16",
        "__u64 bpfjet_find_u16(const void *bucket, __u32 bucket__sz, __u16 key)",
        n_find_u16,
        find(2)
    ),
    search!(
        "bpfjet_find_u32",
        "__u64 bpfjet_find_u32(const void *bucket, __u32 bucket__sz, __u32 key)",
        n_find_u32,
        find(4)
    ),
    search!(
        "bpfjet_find_u64",
        "__u64 bpfjet_find_u64(const void *bucket, __u32 bucket__sz, __u64 key)",
        n_find_u64,
        find(8)
    ),
    search!(
        "bpfjet_mask_u16",
        "__u64 bpfjet_mask_u16(const void *bucket, __u32 bucket__sz, __u16 key)",
        n_mask_u16,
        mask(2)
    ),
    search!(
        "bpfjet_mask_u32",
        "__u64 bpfjet_mask_u32(const void *bucket, __u32 bucket__sz, __u32 key)",
        n_mask_u32,
        mask(4)
    ),
    search!(
        "bpfjet_mask_u64",
        "__u64 bpfjet_mask_u64(const void *bucket, __u32 bucket__sz, __u64 key)",
        n_mask_u64,
        mask(8)
    ),
    reduce!("bpfjet_min_u16", "__u64 bpfjet_min_u16(const void *bucket, __u32 bucket__sz)", n_min_u16, reduction(2, false, false)),
    reduce!("bpfjet_min_u32", "__u64 bpfjet_min_u32(const void *bucket, __u32 bucket__sz)", n_min_u32, reduction(4, false, false)),
    reduce!("bpfjet_min_u64", "__u64 bpfjet_min_u64(const void *bucket, __u32 bucket__sz)", n_min_u64, reduction(8, false, false)),
    reduce!("bpfjet_max_u16", "__u64 bpfjet_max_u16(const void *bucket, __u32 bucket__sz)", n_max_u16, reduction(2, true, false)),
    reduce!("bpfjet_max_u32", "__u64 bpfjet_max_u32(const void *bucket, __u32 bucket__sz)", n_max_u32, reduction(4, true, false)),
    reduce!("bpfjet_max_u64", "__u64 bpfjet_max_u64(const void *bucket, __u32 bucket__sz)", n_max_u64, reduction(8, true, false)),
    reduce!(
        "bpfjet_argmin_u16",
        "__u64 bpfjet_argmin_u16(const void *bucket, __u32 bucket__sz)",
        n_argmin_u16,
        reduction(2, false, true)
    ),
    reduce!(
        "bpfjet_argmin_u32",
        "__u64 bpfjet_argmin_u32(const void *bucket, __u32 bucket__sz)",
        n_argmin_u32,
        reduction(4, false, true)
    ),
    reduce!(
        "bpfjet_argmin_u64",
        "__u64 bpfjet_argmin_u64(const void *bucket, __u32 bucket__sz)",
        n_argmin_u64,
        reduction(8, false, true)
    ),
    reduce!(
        "bpfjet_argmax_u16",
        "__u64 bpfjet_argmax_u16(const void *bucket, __u32 bucket__sz)",
        n_argmax_u16,
        reduction(2, true, true)
    ),
    reduce!(
        "bpfjet_argmax_u32",
        "__u64 bpfjet_argmax_u32(const void *bucket, __u32 bucket__sz)",
        n_argmax_u32,
        reduction(4, true, true)
    ),
    reduce!(
        "bpfjet_argmax_u64",
        "__u64 bpfjet_argmax_u64(const void *bucket, __u32 bucket__sz)",
        n_argmax_u64,
        reduction(8, true, true)
    ),
    kfunc(
        B,
        "bpfjet_key16_eq",
        "__u64 bpfjet_key16_eq(const struct bpfjet_key16 *a, const struct bpfjet_key16 *b)",
        [KfuncArg::InMem(16), KfuncArg::InMem(16), N, N, N],
        INT,
        n_key16_eq,
        Some(Inline::KeyEq {
            bytes: 16,
            one_if_differ: false,
        }),
    ),
    kfunc(
        B,
        "bpfjet_key32_eq",
        "__u64 bpfjet_key32_eq(const struct bpfjet_key32 *a, const struct bpfjet_key32 *b)",
        [KfuncArg::InMem(32), KfuncArg::InMem(32), N, N, N],
        INT,
        n_key32_eq,
        Some(Inline::KeyEq {
            bytes: 32,
            one_if_differ: false,
        }),
    ),
    kfunc(
        B,
        "bpfjet_crc32c",
        "__u64 bpfjet_crc32c(const void *data, __u32 data__sz, __u32 seed)",
        [MEM, SZ, S, N, N],
        INT,
        n_crc32c,
        Some(Inline::Crc32c),
    ),
    fused!(
        "bpfjet_cm_inc",
        "__u64 bpfjet_cm_inc(const void *key, __u32 key__sz, void *rows, __u32 rows__sz, __u32 k)",
        MUT,
        n_cm_inc,
        Some(Inline::CountMin { increment: true })
    ),
    fused!(
        "bpfjet_cm_min",
        "__u64 bpfjet_cm_min(const void *key, __u32 key__sz, const void *rows, __u32 rows__sz, __u32 k)",
        MEM,
        n_cm_min,
        Some(Inline::CountMin { increment: false })
    ),
    fused!(
        "bpfjet_bloom_set",
        "__u64 bpfjet_bloom_set(const void *key, __u32 key__sz, void *bits, __u32 bits__sz, __u32 k)",
        MUT,
        n_bloom_set,
        None
    ),
    fused!(
        "bpfjet_bloom_test",
        "__u64 bpfjet_bloom_test(const void *key, __u32 key__sz, const void *bits, __u32 bits__sz, __u32 k)",
        MEM,
        n_bloom_test,
        None
    ),
    kfunc(
        B,
        "bpfjet_geo_init",
        "__u64 bpfjet_geo_init(struct bpfjet_geo_pool *pool, __u32 scale, __u32 seed)",
        [POOL, S, S, N, N],
        INT,
        n_geo_init,
        None,
    ),
    kfunc(
        B,
        "bpfjet_geo_should_do",
        "__u64 bpfjet_geo_should_do(struct bpfjet_geo_pool *pool)",
        [POOL, N, N, N, N],
        INT,
        n_geo_should_do,
        Some(Inline::GeoCountdown),
    ),
    kfunc(
        B,
        "bpfjet_geo_next",
        "__u64 bpfjet_geo_next(struct bpfjet_geo_pool *pool)",
        [POOL, N, N, N, N],
        INT,
        n_geo_next,
        None,
    ),
    kfunc(
        B,
        "bpfjet_bktlist_init",
        "__s64 bpfjet_bktlist_init(void *lists, __u32 lists__sz, __u32 nbuckets, __u32 elem_size)",
        [MUT, SZ, S, S, N],
        INT,
        n_bkt_init,
        None,
    ),
    kfunc(
        B,
        "bpfjet_bktlist_push",
        "__s64 bpfjet_bktlist_push(void *lists, __u32 lists__sz, __u32 bucket, const void *elem, __u32 elem__sz)",
        [MUT, SZ, S, MEM, SZ],
        INT,
        n_bkt_push,
        Some(Inline::BktList(BktOp::Push)),
    ),
    kfunc(
        B,
        "bpfjet_bktlist_pop",
        "__s64 bpfjet_bktlist_pop(void *lists, __u32 lists__sz, __u32 bucket, void *out, __u32 out__sz)",
        [MUT, SZ, S, MUT, SZ],
        INT,
        n_bkt_pop,
        Some(Inline::BktList(BktOp::Pop)),
    ),
    kfunc(
        B,
        "bpfjet_bktlist_peek",
        "__s64 bpfjet_bktlist_peek(const void *lists, __u32 lists__sz, __u32 bucket, void *out, __u32 out__sz)",
        [MEM, SZ, S, MUT, SZ],
        INT,
        n_bkt_peek,
        Some(Inline::BktList(BktOp::Peek)),
    ),
    kfunc(
        B,
        "bpfjet_bktlist_len",
        "__s64 bpfjet_bktlist_len(const void *lists, __u32 lists__sz, __u32 bucket)",
        [MEM, SZ, S, N, N],
        INT,
        n_bkt_len,
        Some(Inline::BktList(BktOp::Len)),
    ),
    crate::node_kfuncs::POOL_INIT,
    crate::node_kfuncs::ALLOC,
    crate::node_kfuncs::FREE,
    crate::node_kfuncs::CONNECT,
    crate::node_kfuncs::DISCONNECT,
    crate::node_kfuncs::NEXT,
    crate::node_kfuncs::DATA,
    crate::node_kfuncs::PUT,
    // eNetSTL's names and signatures.
    kfunc(E, "bpf_ffs", "u64 bpf_ffs(u64 val)", [S, N, N, N, N], INT, n_ctz64, Some(Inline::Ctz { bits: 64 })),
    kfunc(E, "bpf_tzcnt_u32", "u32 bpf_tzcnt_u32(u32 val)", [S, N, N, N, N], INT, n_ctz32, Some(Inline::Ctz { bits: 32 })),
    kfunc(
        E,
        "bpf_find_u16_avx",
        "u32 bpf_find_u16_avx(const u16 *arr, u16 val)",
        [KfuncArg::InMem(32), S, N, N, N],
        INT,
        n_enet_find_u16,
        Some(Inline::FindEq {
            lane_bytes: 2,
            lanes: Lanes::Fixed(16),
            key: 2,
        }),
    ),
    kfunc(
        E,
        "bpf__find_mask_u16_avx",
        "u32 bpf__find_mask_u16_avx(const u16 *arr, u16 val)",
        [KfuncArg::InMem(32), S, N, N, N],
        INT,
        n_enet_mask_u16,
        Some(Inline::MaskEq {
            lane_bytes: 2,
            lanes: Lanes::Fixed(16),
            key: 2,
            byte_mask: true,
        }),
    ),
    kfunc(
        E,
        "bpf_k16_cmp_eq",
        "int bpf_k16_cmp_eq(const struct key_type_16 *key1, const struct key_type_16 *key2)",
        [KfuncArg::InMem(16), KfuncArg::InMem(16), N, N, N],
        INT,
        n_enet_k16_cmp,
        Some(Inline::KeyEq {
            bytes: 16,
            one_if_differ: true,
        }),
    ),
    kfunc(
        E,
        "bpf_crc32c_sse",
        "uint32_t bpf_crc32c_sse(const void *data, uint32_t data__sz, uint32_t init_val)",
        [MEM, SZ, S, N, N],
        INT,
        n_crc32c,
        Some(Inline::Crc32c),
    ),
    kfunc(
        E,
        "bpf_crc32_hash",
        "u32 bpf_crc32_hash(const void *key, u32 key__sz, u32 seed)",
        [MEM, SZ, S, N, N],
        INT,
        n_crc32c,
        Some(Inline::Crc32c),
    ),
    kfunc(
        E,
        "bpf_hash_smid_cnt_u32",
        "void bpf_hash_smid_cnt_u32(const struct pkt_5tuple *buf, void *mem, u64 size__sz, u32 column_shift)",
        [KfuncArg::InMem(13), MUT, SZ, S, N],
        KfuncRet::Void,
        n_enet_hash_cnt,
        None,
    ),
    kfunc(
        E,
        "bpf_fasthash32_cnt32",
        "void bpf_fasthash32_cnt32(const void *input, size_t input__sz, void *table, size_t table__sz, uint32_t column_shift)",
        [MEM, SZ, MUT, SZ, S],
        KfuncRet::Void,
        n_enet_fh_cnt,
        None,
    ),
    kfunc(
        E,
        "bpf_fasthash32_pkt_cnt32",
        "void bpf_fasthash32_pkt_cnt32(const struct pkt_5tuple *input, void *table, size_t table__sz, uint32_t column_shift)",
        [KfuncArg::InMem(13), MUT, SZ, S, N],
        KfuncRet::Void,
        n_enet_fh_pkt_cnt,
        None,
    ),
    kfunc(
        E,
        "bpf_xxh32_cnt32",
        "void bpf_xxh32_cnt32(const void *input, size_t input__sz, void *table, size_t table__sz, uint32_t column_shift)",
        [MEM, SZ, MUT, SZ, S],
        KfuncRet::Void,
        n_enet_xxh_cnt,
        None,
    ),
    kfunc(
        E,
        "bpf_xxh32_pkt_cnt32",
        "void bpf_xxh32_pkt_cnt32(const struct pkt_5tuple *input, void *table, size_t table__sz, uint32_t column_shift)",
        [KfuncArg::InMem(13), MUT, SZ, S, N],
        KfuncRet::Void,
        n_enet_xxh_pkt_cnt,
        None,
    ),
    kfunc(
        E,
        "bpf_htss_sig_cmp",
        "uint32_t bpf_htss_sig_cmp(const void *sigs, size_t sigs__sz, __u16 tmp_sig)",
        [MEM, SZ, S, N, N],
        INT,
        n_enet_htss,
        None,
    ),
    Kfunc {
        name: "bpf_geo_sampling_ctx_new",
        c_decl: "struct geo_sampling_ctx *bpf_geo_sampling_ctx_new(int prob_percent)",
        origin: E,
        proto: KfuncProto {
            name: "bpf_geo_sampling_ctx_new",
            args: [S, N, N, N, N],
            ret: KfuncRet::Module(random::GEO_CTX_TYPE),
            flags: KfuncFlags {
                acquire: true,
                ret_null: true,
                dev_bound: false,
            },
        },
        prog_types: XDP,
        native: n_enet_geo_new,
        inline: None,
    },
    kfunc(
        E,
        "bpf_geo_sampling_ctx_free",
        "void bpf_geo_sampling_ctx_free(struct geo_sampling_ctx *ctx)",
        [module(random::GEO_CTX_TYPE, true), N, N, N, N],
        KfuncRet::Void,
        n_enet_geo_free,
        None,
    ),
    kfunc(
        E,
        "bpf_geo_sampling_should_do",
        "bool bpf_geo_sampling_should_do(int fd)",
        [S, N, N, N, N],
        INT,
        n_enet_geo_should_do,
        None,
    ),
    kfunc(
        E,
        "bpf_geo_sampling_gen_geo_cnt",
        "geo_cnt_t bpf_geo_sampling_gen_geo_cnt(int fd)",
        [S, N, N, N, N],
        INT,
        n_enet_geo_gen,
        None,
    ),
    acquiring(
        "bpf_bktlist_new",
        "struct bpf_bkt_list *bpf_bktlist_new(void)",
        [N, N, N, N, N],
        enetstl_ptr::BKT_LIST_TYPE,
        n_enet_bkt_new,
        None,
    ),
    kfunc(
        E,
        "bpf_bktlist_free",
        "void bpf_bktlist_free(struct bpf_bkt_list *bktlist)",
        [module(enetstl_ptr::BKT_LIST_TYPE, true), N, N, N, N],
        KfuncRet::Void,
        n_enet_bkt_free,
        None,
    ),
    kfunc(
        E,
        "bpf_bktlist_push_back",
        "int bpf_bktlist_push_back(int fd, const void *val, size_t size__szk, size_t slot)",
        [S, MEM, SZ, S, N],
        INT,
        n_enet_bkt_push,
        None,
    ),
    kfunc(
        E,
        "bpf_bktlist_pop_front",
        "int bpf_bktlist_pop_front(int fd, void *val, size_t size__szk, size_t slot)",
        [S, MUT, SZ, S, N],
        INT,
        n_enet_bkt_pop,
        None,
    ),
    // eNetSTL's node-pointer library.
    acquiring(
        "ptr_create_node_container",
        "struct ptr_node_container *ptr_create_node_container(u32 tmp_num)",
        [S, N, N, N, N],
        CONT,
        n_ptr_create,
        None,
    ),
    kfunc(
        E,
        "ptr_destory_node_container",
        "void ptr_destory_node_container(struct ptr_node_container *c)",
        [module(CONT, true), N, N, N, N],
        KfuncRet::Void,
        n_ptr_destroy,
        None,
    ),
    acquiring(
        "ptr_alloc_node",
        "ptr_node *ptr_alloc_node(void)",
        [N, N, N, N, N],
        NODE,
        n_ptr_alloc,
        None,
    ),
    kfunc(
        E,
        "ptr_release_node",
        "void ptr_release_node(ptr_node *node)",
        [module(NODE, true), N, N, N, N],
        KfuncRet::Void,
        n_ptr_release,
        Some(Inline::EnetPtr(PtrOp::Release)),
    ),
    kfunc(
        E,
        "ptr_set_owner",
        "void ptr_set_owner(struct ptr_node_container *c, ptr_node *node)",
        [module(CONT, false), module(NODE, false), N, N, N],
        KfuncRet::Void,
        n_ptr_set_owner,
        None,
    ),
    kfunc(
        E,
        "ptr_unset_owner",
        "void ptr_unset_owner(ptr_node *node)",
        [module(NODE, false), N, N, N, N],
        KfuncRet::Void,
        n_ptr_unset_owner,
        None,
    ),
    kfunc(
        E,
        "ptr_container_set_tmp",
        "void ptr_container_set_tmp(struct ptr_node_container *c, ptr_node *node, u32 idx)",
        [module(CONT, false), module(NODE, false), S, N, N],
        KfuncRet::Void,
        n_ptr_set_tmp,
        Some(Inline::EnetPtr(PtrOp::SetTmp)),
    ),
    acquiring(
        "ptr_container_get_tmp",
        "ptr_node *ptr_container_get_tmp(struct ptr_node_container *c, u32 idx)",
        [module(CONT, false), S, N, N, N],
        NODE,
        n_ptr_get_tmp,
        Some(Inline::EnetPtr(PtrOp::GetTmp)),
    ),
    acquiring(
        "ptr_get_out",
        "ptr_node *ptr_get_out(ptr_node *parent, u32 idx)",
        [module(NODE, false), S, N, N, N],
        NODE,
        n_ptr_get_out,
        Some(Inline::EnetPtr(PtrOp::GetOut)),
    ),
    kfunc(
        E,
        "ptr_connect",
        "int ptr_connect(ptr_node *p1, u32 idx1, ptr_node *p2, u32 idx2)",
        [module(NODE, false), S, module(NODE, false), S, N],
        INT,
        n_ptr_connect,
        Some(Inline::EnetPtr(PtrOp::Connect)),
    ),
    kfunc(
        E,
        "ptr_unconnect",
        "int ptr_unconnect(ptr_node *p1, u32 idx1, ptr_node *p2, u32 idx2)",
        [module(NODE, false), S, module(NODE, false), S, N],
        INT,
        n_ptr_unconnect,
        Some(Inline::EnetPtr(PtrOp::Unconnect)),
    ),
    kfunc(
        E,
        "ptr_write_data1",
        "int ptr_write_data1(ptr_node *node, size_t off, void *data__buf, size_t size__sz)",
        [module(NODE, false), S, MEM, SZ, N],
        INT,
        n_ptr_write1,
        Some(Inline::EnetPtr(PtrOp::WriteData1)),
    ),
    kfunc(
        E,
        "ptr_write_data2",
        "int ptr_write_data2(ptr_node *node, size_t off, void *data__buf, size_t size__sz)",
        [module(NODE, false), S, MEM, SZ, N],
        INT,
        n_ptr_write2,
        Some(Inline::EnetPtr(PtrOp::WriteData2)),
    ),
    // The kernel's open-coded number iterator (its names and signatures;
    // the verifier checks these three itself, `bpfjet_verifier::iter`).
    iter_kfunc(
        "bpf_iter_num_new",
        "int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end)",
        [KfuncArg::OutMem(8), S, S, N, N],
        INT,
        iter_num::new,
    ),
    iter_kfunc(
        "bpf_iter_num_next",
        "int *bpf_iter_num_next(struct bpf_iter_num *it)",
        [KfuncArg::OutMem(8), N, N, N, N],
        KfuncRet::Mem(4),
        iter_num::next,
    ),
    iter_kfunc(
        "bpf_iter_num_destroy",
        "void bpf_iter_num_destroy(struct bpf_iter_num *it)",
        [KfuncArg::OutMem(8), N, N, N, N],
        KfuncRet::Void,
        iter_num::destroy,
    ),
];

/// One of the kernel's iterator kfuncs: callable from every program type.
const fn iter_kfunc(
    name: &'static str,
    c_decl: &'static str,
    args: [KfuncArg; 5],
    ret: KfuncRet,
    native: NativeFn,
) -> Kfunc {
    Kfunc {
        name,
        c_decl,
        origin: Origin::Kernel,
        proto: proto(name, args, ret),
        prog_types: ANY_PROGRAM,
        native,
        inline: None,
    }
}

/// The kfunc called `name`.
pub fn by_name(name: &str) -> Option<&'static Kfunc> {
    KFUNCS.iter().find(|k| k.name == name)
}

/// The kfunc whose native has symbol `symbol` in generated code.
pub fn by_symbol(symbol: &str) -> Option<&'static Kfunc> {
    let name = symbol.strip_prefix("bpfjet_kfunc_")?;
    by_name(name)
}

/// Every prototype, for `VerifyEnv::extra_kfuncs`.
pub fn verifier_protos() -> &'static [KfuncProto] {
    static PROTOS: std::sync::OnceLock<Vec<KfuncProto>> = std::sync::OnceLock::new();
    PROTOS.get_or_init(|| KFUNCS.iter().map(|k| k.proto).collect())
}
