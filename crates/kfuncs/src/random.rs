//! Random pool: pre-generated geometric counts for probabilistic updates
//! (NitroSketch-style sampling). Instead of drawing a random number per
//! event and comparing it with the probability p, a sampler draws, once per
//! *sampled* event, how many events to skip before the next one — a
//! geometric count — so the hot path is a countdown. The counts are
//! generated in batches ([`POOL`] at a time) when a pool runs dry, never per
//! event.
//!
//! Two front ends share the generator:
//! - bpfjet's own kfuncs take a [`GeoPool`] the program keeps in a map value
//!   (a per-CPU array gives one pool per CPU slot; nothing is shared, so no
//!   lock). Its state is plain memory: the interpreter and the JIT give the
//!   same results, and a seed makes a run reproducible.
//! - eNetSTL's `bpf_geo_sampling_*` kfuncs name a pool by its probability
//!   in percent (2, 4, 6, 8, 10, as the module does); those pools live in
//!   the worker thread that runs the program (bpfjet runs one CPU slot per
//!   thread at a time), seeded from the OS or from [`set_enetstl_seed`].
//!
//! The generator is integer-only so that a plain-eBPF program can compute
//! the very same counts (`examples/nf/nitro.c`): a xorshift32 draw u
//! (never 0) and the count `floor(L(u) / scale)`, where `L(u)` is
//! `-log2(u / 2^32)` in Q16 (exponent from the leading bit, fraction from a
//! 256-entry table, [`geo_log2`](crate::geo_log2)) and `scale` is
//! `-log2(1 - p)` in Q16 ([`scale_for`]). Then P(count >= n) =
//! P(u / 2^32 <= (1 - p)^n) = (1 - p)^n, the geometric distribution, up to
//! the table's 8-bit resolution.

use crate::errno::{neg, EINVAL};
use crate::geo_log2::LOG2_FRAC;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counts a pool holds (refilled all at once when used up).
pub const POOL: usize = 64;

/// bpfjet's sampler, as a program keeps it in a map value
/// (`struct bpfjet_geo_pool` in `include/bpfjet_kfuncs.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeoPool {
    /// Events still to skip before the next sampled one.
    pub countdown: u32,
    /// Index of the next unused count in `counts` (`POOL`: refill first).
    pub next: u32,
    /// `-log2(1 - p)` in Q16; 0 for a pool never initialised.
    pub scale: u32,
    /// xorshift32 state (never 0 once initialised).
    pub state: u32,
    pub counts: [u32; POOL],
}

/// Bytes of [`GeoPool`] (the verifier checks the program's pointer for it).
pub const GEO_POOL_BYTES: u32 = std::mem::size_of::<GeoPool>() as u32;

/// One xorshift32 step (Marsaglia's 13/17/5): never 0 from a nonzero state.
pub fn xorshift32(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

/// `-log2(u / 2^32)` in Q16, for `u > 0`.
pub fn neg_log2_q16(u: u32) -> u32 {
    let e = 31 - u.leading_zeros();
    let frac = if e >= 8 { u >> (e - 8) } else { u << (8 - e) } & 0xff;
    ((32 - e) << 16) - u32::from(LOG2_FRAC[frac as usize])
}

/// The geometric count of draw `u` for `scale`.
pub fn geo_count(u: u32, scale: u32) -> u32 {
    neg_log2_q16(u) / scale.max(1)
}

/// `-log2(1 - p)` in Q16 for a sampling probability `p` in (0, 1]
/// (`u32::MAX` for p = 1: every count is 0), for control planes.
pub fn scale_for(p: f64) -> u32 {
    if p >= 1.0 {
        return u32::MAX;
    }
    (-(1.0 - p).log2() * 65536.0)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// A seed for pools asked to seed themselves (`seed` 0): from the OS's
/// randomness (std's hasher keys), never 0.
fn os_seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(0x6765_6f73);
    let v = h.finish();
    ((v ^ (v >> 32)) as u32).max(1)
}

impl GeoPool {
    fn refill(&mut self) {
        let mut s = self.state;
        for c in &mut self.counts {
            s = xorshift32(s);
            *c = geo_count(s, self.scale);
        }
        self.state = s;
        self.next = 0;
    }

    /// The next count, refilling the pool when it is used up.
    fn take(&mut self) -> u32 {
        if self.next as usize >= POOL {
            self.refill();
        }
        let c = self.counts[self.next as usize];
        self.next += 1;
        c
    }

    /// `bpfjet_geo_init`: start the sampler for `scale` from `seed` (0: from
    /// the OS), the first count already drawn. -EINVAL for scale 0.
    pub fn init(&mut self, scale: u32, seed: u32) -> u64 {
        if scale == 0 {
            return neg(EINVAL);
        }
        self.scale = scale;
        self.state = if seed == 0 { os_seed() } else { seed };
        self.next = POOL as u32;
        self.countdown = self.take();
        0
    }

    /// `bpfjet_geo_should_do`: 1 when this event is sampled (and the next
    /// count drawn), 0 when it is skipped; 0 always before `init`.
    pub fn should_do(&mut self) -> u64 {
        if self.scale == 0 {
            return 0;
        }
        if self.countdown > 0 {
            self.countdown -= 1;
            return 0;
        }
        self.countdown = self.take();
        1
    }

    /// `bpfjet_geo_next`: the next count itself, for programs that keep
    /// their own countdown; 0 before `init`.
    pub fn next_count(&mut self) -> u64 {
        if self.scale == 0 {
            return 0;
        }
        u64::from(self.take())
    }
}

/// eNetSTL's `struct geo_sampling_ctx` (its module's `geo_sampling.c`):
/// the handle `fd` (the probability in percent, which the sampling kfuncs
/// take), the countdown, the pool index on the next cache line, then the
/// pool from the line after. Programs see it as a read-only library object
/// (`GEO_CTX_TYPE`); eNetSTL's BPF header declares the pool inline, as it is
/// here. bpfjet keeps one per percentage per worker thread, as the module
/// keeps one per CPU.
#[repr(C, align(64))]
pub struct ENetGeoCtx {
    pub fd: i32,
    pub cnt: u32,
    _pad0: [u8; 56],
    pub idx: u32,
    _pad1: [u8; 60],
    pub pool: [u32; ENET_POOL],
    /// Not part of eNetSTL's layout (after its 4224 bytes): the generator.
    state: u32,
    scale: u32,
    generation: u64,
}

/// The C struct name of eNetSTL's sampler, a library type to the verifier.
pub const GEO_CTX_TYPE: &str = "geo_sampling_ctx";

/// Counts in an eNetSTL pool.
pub const ENET_POOL: usize = 1024;

/// Bytes of eNetSTL's `struct geo_sampling_ctx` a program may access.
pub const ENET_CTX_BYTES: u32 = 128 + 4 * ENET_POOL as u32;

const _: () = assert!(
    std::mem::offset_of!(ENetGeoCtx, cnt) == 4
        && std::mem::offset_of!(ENetGeoCtx, idx) == 64
        && std::mem::offset_of!(ENetGeoCtx, pool) == 128
        && std::mem::offset_of!(ENetGeoCtx, state) == ENET_CTX_BYTES as usize
);

/// The probabilities (percent) eNetSTL's module provides pools for.
pub const ENET_PERCENTS: [u32; 5] = [2, 4, 6, 8, 10];

static ENET_SEED: AtomicU64 = AtomicU64::new(0);
static ENET_GENERATION: AtomicU64 = AtomicU64::new(1);

/// Seed every thread's eNetSTL pools with `seed` from their next use
/// (`None`: from the OS, the default). Each thread's pool for a percentage
/// then replays the same counts: for tests comparing engines.
pub fn set_enetstl_seed(seed: Option<u32>) {
    ENET_SEED.store(seed.map_or(0, |s| u64::from(s.max(1))), Ordering::SeqCst);
    ENET_GENERATION.fetch_add(1, Ordering::SeqCst);
}

impl ENetGeoCtx {
    fn refill(&mut self) {
        let mut s = self.state;
        for c in &mut self.pool {
            s = xorshift32(s);
            // eNetSTL's counts are at least 1 (0 is its error value): the
            // events up to and including the next sampled one.
            *c = geo_count(s, self.scale) + 1;
        }
        self.state = s;
    }

    fn start(&mut self, percent: u32, generation: u64) {
        self.scale = scale_for(f64::from(percent) / 100.0);
        let seed = ENET_SEED.load(Ordering::SeqCst) as u32;
        // Distinct streams per percentage, also with one test seed.
        self.state = if seed == 0 {
            os_seed()
        } else {
            xorshift32(seed ^ percent.wrapping_mul(0x9e37_79b9)).max(1)
        };
        self.generation = generation;
        self.refill();
        self.idx = 0;
        self.cnt = self.pool[0];
    }

    /// The module's step: the next count of the pool (a fresh batch once
    /// the pool is used up, where the module's fixed pool wraps around).
    fn take(&mut self) -> u32 {
        self.idx += 1;
        if self.idx as usize >= ENET_POOL {
            self.refill();
            self.idx = 0;
        }
        self.pool[self.idx as usize]
    }

    /// `bpf_geo_sampling_should_do`, as the module counts: while the
    /// countdown is above 0 it drops by one and the answer is no; at 0 the
    /// answer is yes and the countdown restarts at the next count.
    pub fn should_do(&mut self) -> u64 {
        if self.cnt > 0 {
            self.cnt -= 1;
            return 0;
        }
        self.cnt = self.take();
        1
    }

    /// `bpf_geo_sampling_gen_geo_cnt`: the next count (at least 1; 0 is the
    /// module's error value), which also becomes the countdown.
    pub fn gen_geo_cnt(&mut self) -> u64 {
        self.cnt = self.take();
        u64::from(self.cnt)
    }
}

thread_local! {
    /// This thread's eNetSTL pools, one per percentage, allocated at first
    /// use and kept for the thread's life (the address handed to programs
    /// by `bpf_geo_sampling_ctx_new` stays valid).
    static ENET_CTXS: Cell<*mut ENetGeoCtx> = const { Cell::new(std::ptr::null_mut()) };
}

/// Every thread's block of contexts (their base addresses): a map's
/// `__kptr` may hold one, and its destructor must know it.
static ENET_CTX_BLOCKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Whether `addr` is a sampler `bpf_geo_sampling_ctx_new` handed out (of
/// any thread). Its destructor, like the module's `bpf_geo_sampling_ctx_free`,
/// does nothing: the samplers live as long as their thread's pools.
pub fn is_enetstl_ctx(addr: u64) -> bool {
    let size = std::mem::size_of::<ENetGeoCtx>() as u64;
    let span = size * ENET_PERCENTS.len() as u64;
    ENET_CTX_BLOCKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|&b| {
            addr >= b as u64 && addr < b as u64 + span && (addr - b as u64).is_multiple_of(size)
        })
}

/// This thread's pool for `percent` (started or restarted as the seed
/// generation asks), or `None` for a percentage eNetSTL has no pool for.
pub fn enetstl_ctx(percent: u64) -> Option<*mut ENetGeoCtx> {
    let slot = ENET_PERCENTS
        .iter()
        .position(|&p| u64::from(p) == percent)?;
    let base = ENET_CTXS.with(|c| {
        if c.get().is_null() {
            let ctxs: Vec<ENetGeoCtx> = ENET_PERCENTS
                .iter()
                .map(|&percent| ENetGeoCtx {
                    fd: percent as i32,
                    cnt: 0,
                    _pad0: [0; 56],
                    idx: 0,
                    _pad1: [0; 60],
                    pool: [0; ENET_POOL],
                    state: 0,
                    scale: 0,
                    generation: 0,
                })
                .collect();
            let leaked = Box::leak(ctxs.into_boxed_slice()).as_mut_ptr();
            ENET_CTX_BLOCKS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(leaked as usize);
            c.set(leaked);
        }
        c.get()
    });
    // SAFETY: `base` points to ENET_PERCENTS.len() contexts leaked for this
    // thread; only this thread reaches them, one kfunc call at a time.
    let ctx = unsafe { &mut *base.add(slot) };
    let generation = ENET_GENERATION.load(Ordering::SeqCst);
    if ctx.generation != generation {
        ctx.start(ENET_PERCENTS[slot], generation);
    }
    Some(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_table_matches_floating_point() {
        for (i, &v) in LOG2_FRAC.iter().enumerate() {
            let exact = 65536.0 * (1.0 + (i as f64 + 0.5) / 256.0).log2();
            assert!((f64::from(v) - exact).abs() <= 0.5, "entry {i}");
        }
        assert_eq!(neg_log2_q16(1 << 31), (1 << 16) - u32::from(LOG2_FRAC[0]));
        assert!(neg_log2_q16(u32::MAX) > 0);
    }

    #[test]
    fn sampling_rate_follows_the_probability() {
        for n in [2u32, 4, 16, 64] {
            let mut pool = GeoPool {
                countdown: 0,
                next: 0,
                scale: 0,
                state: 0,
                counts: [0; POOL],
            };
            assert_eq!(pool.init(scale_for(1.0 / f64::from(n)), 12345), 0);
            let events = 400_000u32;
            let sampled: u64 = (0..events).map(|_| pool.should_do()).sum();
            let expected = f64::from(events) / f64::from(n);
            let err = (sampled as f64 - expected).abs() / expected;
            assert!(err < 0.05, "1/{n}: {sampled} sampled of {events}");
        }
    }

    #[test]
    fn uninitialised_and_invalid_pools() {
        let mut pool = GeoPool {
            countdown: 0,
            next: 0,
            scale: 0,
            state: 0,
            counts: [0; POOL],
        };
        assert_eq!(pool.should_do(), 0);
        assert_eq!(pool.next_count(), 0);
        assert_eq!(pool.init(0, 1), neg(EINVAL));
        assert_eq!(pool.init(u32::MAX, 7), 0);
        assert!((0..100).all(|_| pool.should_do() == 1), "p = 1 samples all");
    }

    #[test]
    fn enetstl_pools_replay_with_a_seed() {
        set_enetstl_seed(Some(99));
        let a: Vec<u64> = (0..3000)
            .map(|_| unsafe { (*enetstl_ctx(10).unwrap()).should_do() })
            .collect();
        set_enetstl_seed(Some(99));
        let b: Vec<u64> = (0..3000)
            .map(|_| unsafe { (*enetstl_ctx(10).unwrap()).should_do() })
            .collect();
        assert_eq!(a, b);
        let rate = a.iter().sum::<u64>() as f64 / 3000.0;
        assert!((0.07..0.13).contains(&rate), "10%: {rate}");
        assert!(enetstl_ctx(3).is_none());
        assert_eq!(std::mem::offset_of!(ENetGeoCtx, idx), 64);
        assert_eq!(std::mem::offset_of!(ENetGeoCtx, pool), 128);
        set_enetstl_seed(None);
    }
}
