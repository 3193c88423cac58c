//! What kernel helpers reach through [`HelperCtx::user_ctx`](crate::HelperCtx):
//! the object's maps (shared by every run), the run environment every
//! helper may use ([`RunEnv`]: CPU slot, open ring-buffer reservations, held
//! spin locks, the trace log, ...) and the XDP context around it
//! ([`XdpEnv`]: frame, FIB, redirect target).

use crate::helpers::fib::Fib;
use crate::xdp::XdpFrame;
use bpfjet_maps::{Instance, Map};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

/// The maps a loaded object's programs can name: the object's own maps and
/// inner maps reached through map-in-map lookups, by program-visible handle.
pub struct ObjectMaps {
    pub(crate) instance: Instance,
    /// By index in `Object::maps`.
    pub(crate) maps: Vec<Arc<Map>>,
    /// Every handle a program may pass to a map helper. A handle is only
    /// ever turned back into a map through this table, so a program cannot
    /// make a helper dereference a forged map pointer.
    known: RwLock<HashMap<u64, Arc<Map>>>,
    /// Parallel to `maps`: the special fields (graph roots, kptrs) of the
    /// values of maps this object created.
    special_fields: Vec<Vec<bpfjet_obj::SpecialField>>,
    /// Parallel to `maps`: where each value's `struct bpf_timer` is, for
    /// maps reused from outside too.
    timers: Vec<Option<u32>>,
}

impl std::fmt::Debug for ObjectMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectMaps")
            .field("maps", &self.maps)
            .finish_non_exhaustive()
    }
}

/// The program-visible handle of a map (what `lddw` of a map loads, what
/// a map-in-map lookup returns): the address of the map's kernel view,
/// laid out — before any program can see it, and only once some program
/// reads one ([`lay_out_kernel_views`]) — like the kernel's struct for the
/// map type, so that a privileged program reading
/// `((struct bpf_map *)&m)->max_entries` finds what it would in the kernel
/// (`bpfjet_verifier::map_struct`).
pub fn map_handle(map: &Arc<Map>) -> u64 {
    if KERNEL_VIEWS.load(std::sync::atomic::Ordering::Acquire) {
        lay_out_kernel_view(map);
    }
    Map::handle(map) as u64
}

/// Set once a loaded program reads a map's kernel view: every map's view
/// is laid out from then on, also those of maps made later (inner maps).
static KERNEL_VIEWS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn lay_out_kernel_view(map: &Arc<Map>) {
    map.init_kernel_view(|view| {
        bpfjet_verifier::map_struct::fill_kernel_view(map.spec(), map.id(), view)
    });
}

/// A program of a load reads maps' kernel views: lay out `maps`' now,
/// before any program runs, and every later map's when its handle is made.
pub(crate) fn lay_out_kernel_views(maps: &[Arc<Map>]) {
    KERNEL_VIEWS.store(true, std::sync::atomic::Ordering::Release);
    for m in maps {
        lay_out_kernel_view(m);
    }
}

impl ObjectMaps {
    pub(crate) fn new(instance: Instance, maps: Vec<Arc<Map>>) -> ObjectMaps {
        let known = maps
            .iter()
            .map(|m| (map_handle(m), Arc::clone(m)))
            .collect();
        ObjectMaps {
            instance,
            maps,
            known: RwLock::new(known),
            special_fields: Vec::new(),
            timers: Vec::new(),
        }
    }

    /// Where each map's values hold a `struct bpf_timer` (parallel to the
    /// maps).
    pub(crate) fn with_timers(mut self, timers: Vec<Option<u32>>) -> ObjectMaps {
        self.timers = timers;
        self
    }

    /// Hold CPU slot `cpu` for a run (or a batch of runs) of a program on
    /// these maps, when their values hold timers whose callbacks may run
    /// on that slot (`crate::cpu_exclusion`); `None`, at no cost, when
    /// they hold none.
    pub fn hold_cpu(&self, cpu: u32) -> Option<crate::cpu_exclusion::CpuHold> {
        self.has_timers().then(|| crate::cpu_exclusion::hold(cpu))
    }

    /// Whether any map's values hold a `struct bpf_timer`.
    pub fn has_timers(&self) -> bool {
        self.timers.iter().any(Option::is_some)
    }

    /// The special fields of each map's values (parallel to the maps).
    pub(crate) fn with_special_fields(
        mut self,
        fields: Vec<Vec<bpfjet_obj::SpecialField>>,
    ) -> ObjectMaps {
        self.special_fields = fields;
        self
    }

    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// The special fields (locks, graph roots and nodes, kptrs, refcounts)
    /// of map `index`'s values, where known.
    pub(crate) fn special_fields_of(&self, index: usize) -> &[bpfjet_obj::SpecialField] {
        self.special_fields.get(index).map_or(&[], Vec::as_slice)
    }

    /// Offset of the `struct bpf_timer` in the values of the map behind
    /// `handle` (one of the object's own maps), if it has one.
    pub(crate) fn timer_off(&self, handle: u64) -> Option<u32> {
        let i = self.maps.iter().position(|m| map_handle(m) == handle)?;
        self.timers.get(i).copied().flatten()
    }

    /// The object's maps, by index in `Object::maps`.
    pub fn maps(&self) -> &[Arc<Map>] {
        &self.maps
    }

    /// The map behind a handle a program passed, if it is one.
    pub fn resolve(&self, handle: u64) -> Option<Arc<Map>> {
        if let Some(m) = self.maps.iter().find(|m| map_handle(m) == handle) {
            return Some(Arc::clone(m));
        }
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&handle)
            .cloned()
    }

    /// [`ObjectMaps::resolve`] without a reference count: the map lives as
    /// long as these maps do. The object's own maps are found by a scan of
    /// a few pointers (no lock, no hashing: this runs on every map helper
    /// call); inner maps of map-in-maps through the table of known handles,
    /// from which nothing is ever removed or replaced.
    pub fn resolve_ref(&self, handle: u64) -> Option<&Map> {
        if let Some(m) = self.maps.iter().find(|m| map_handle(m) == handle) {
            return Some(m);
        }
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        let map = Arc::as_ptr(known.get(&handle)?);
        // SAFETY: `known` keeps this Arc for as long as `self` lives (its
        // entries are only ever inserted, by `inner_map`'s `or_insert_with`),
        // so the map outlives the returned borrow of `self`.
        Some(unsafe { &*map })
    }

    /// The inner map stored under `id` in a map-in-map, made known so the
    /// program can pass its handle to other helpers. Inner maps are created
    /// by STATE.json, static initialisers or a control plane.
    pub fn inner_map(&self, id: u32) -> Option<Arc<Map>> {
        let map = self.instance.map_by_id(id).ok()?;
        self.known
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(map_handle(&map))
            .or_insert_with(|| Arc::clone(&map));
        Some(map)
    }
}

/// What every helper may use, whatever the program type: the maps, the
/// CPU slot, open ring-buffer reservations, held spin locks, the trace log,
/// the random-number state and callback keys. Each program type's per-run
/// context embeds one ([`XdpEnv`], [`TracingEnv`](crate::tracing::TracingEnv))
/// and [`run_env`] finds it behind a helper's opaque per-run context.
pub struct RunEnv {
    /// The CPU slot: per-CPU map values and `bpf_get_smp_processor_id`.
    pub(crate) cpu: u32,
    pub(crate) maps: Arc<ObjectMaps>,
    /// Ring-buffer samples reserved and not yet submitted or discarded:
    /// (address, size).
    pub(crate) reservations: Vec<(u64, u64)>,
    /// Addresses of `bpf_spin_lock`s the program holds.
    pub(crate) held_locks: Vec<u64>,
    /// Lines written by `bpf_trace_printk`, when the run keeps its own.
    pub(crate) trace: Vec<String>,
    /// Where the lines go instead: a tracing object's ring, written
    /// without allocating (tracing/trace_ring.rs).
    pub(crate) trace_ring: Option<Arc<crate::tracing::TraceRing>>,
    pub(crate) prng: u64,
}

impl std::fmt::Debug for RunEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEnv")
            .field("cpu", &self.cpu)
            .finish_non_exhaustive()
    }
}

/// The run environment inside a helper's per-run context: an [`XdpEnv`],
/// a [`TracingEnv`](crate::tracing::TracingEnv) or a bare [`RunEnv`]. A new
/// program type's context is added here.
pub fn run_env<'a>(user: &'a mut (dyn Any + 'static)) -> Option<&'a mut RunEnv> {
    if user.is::<XdpEnv>() {
        return user.downcast_mut::<XdpEnv>().map(|e| &mut e.run);
    }
    if user.is::<crate::tracing::TracingEnv>() {
        return user
            .downcast_mut::<crate::tracing::TracingEnv>()
            .map(|e| &mut e.run);
    }
    user.downcast_mut::<RunEnv>()
}

/// [`run_env`] for reading.
pub fn run_env_ref<'a>(user: &'a (dyn Any + 'static)) -> Option<&'a RunEnv> {
    if let Some(e) = user.downcast_ref::<XdpEnv>() {
        return Some(&e.run);
    }
    if let Some(e) = user.downcast_ref::<crate::tracing::TracingEnv>() {
        return Some(&e.run);
    }
    user.downcast_ref::<RunEnv>()
}

impl RunEnv {
    pub fn new(cpu: u32, maps: Arc<ObjectMaps>) -> RunEnv {
        RunEnv {
            cpu,
            maps,
            reservations: Vec::new(),
            held_locks: Vec::new(),
            trace: Vec::new(),
            trace_ring: None,
            prng: seed(cpu),
        }
    }

    #[inline]
    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    /// Change the CPU slot (a tracing run takes a slot per run).
    #[inline]
    pub fn set_cpu(&mut self, cpu: u32) {
        self.cpu = cpu;
    }

    /// Hold this run's CPU slot against timer callbacks for a series of
    /// runs ([`ObjectMaps::hold_cpu`]).
    pub fn hold_cpu(&self) -> Option<crate::cpu_exclusion::CpuHold> {
        self.maps.hold_cpu(self.cpu)
    }

    /// The maps the run's program may name.
    pub fn object_maps(&self) -> &Arc<ObjectMaps> {
        &self.maps
    }

    /// Record a ring-buffer sample the program reserved (for engines that
    /// call `Map::ringbuf_reserve` themselves, as `bpf_ringbuf_reserve`
    /// does): submit and discard accept only live samples, and one left
    /// over is discarded by [`RunEnv::release_leftovers`].
    pub fn track_reservation(&mut self, addr: u64, size: u64) {
        self.reservations.push((addr, size));
    }

    /// Forget a live reservation before submitting or discarding it: its
    /// size, or None when `addr` is no live sample.
    pub fn untrack_reservation(&mut self, addr: u64) -> Option<u64> {
        let i = self.reservations.iter().position(|&(a, _)| a == addr)?;
        Some(self.reservations.swap_remove(i).1)
    }

    /// Lines `bpf_trace_printk` wrote so far.
    pub fn trace_log(&self) -> &[String] {
        &self.trace
    }

    /// Release what a program left behind. The kernel verifier rejects a
    /// program that can exit holding a reservation or a lock; an unverified
    /// program may still do it, and the ring or the lock must not stay
    /// wedged for the next run. Returns a note per released object.
    #[inline]
    pub fn release_leftovers(&mut self) -> Vec<String> {
        // The common case, checked inline: benchmarks call this after every
        // run.
        if self.reservations.is_empty() && self.held_locks.is_empty() {
            return Vec::new();
        }
        self.release_held()
    }

    fn release_held(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        for (addr, size) in self.reservations.drain(..) {
            // SAFETY: the address came from `Map::ringbuf_reserve` and was
            // neither submitted nor discarded (it is removed on both).
            unsafe { Map::ringbuf_discard(addr as *mut u8, 0) };
            notes.push(format!(
                "discarded a {size}-byte ring-buffer sample the program did not submit"
            ));
        }
        for addr in self.held_locks.drain(..) {
            // SAFETY: the lock was taken by `bpf_spin_lock` on this address
            // (checked to be writable program memory) and not released.
            unsafe { bpf_maps_unlock(addr) };
            notes.push(format!("released spin lock at {addr:#x} held at exit"));
        }
        notes
    }

    /// `bpf_get_prandom_u32`: the run's next pseudo-random number (for
    /// engines that call it directly too).
    pub fn next_random(&mut self) -> u32 {
        // xorshift64*: helpers need cheap, well-spread numbers, not secrecy.
        let mut x = self.prng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.prng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// The per-run context of an XDP program: the run environment every helper
/// uses plus what only XDP helpers use (the frame, the FIB, the redirect
/// target). Dereferences to its [`RunEnv`].
pub struct XdpEnv {
    pub(crate) run: RunEnv,
    pub(crate) frame: XdpFrame,
    pub(crate) fib: Option<Arc<Fib>>,
    /// Where the last redirect helper call of the run sent the frame (the
    /// kernel's per-CPU redirect info): set on success, cleared on a miss,
    /// read by data-plane runners when the program returns XDP_REDIRECT.
    pub(crate) redirect: Option<crate::worker::RedirectTo>,
    /// The call that set `redirect` (for the `xdp_redirect` tracepoints).
    pub(crate) redirect_via: Option<crate::worker::RedirectVia>,
}

impl std::ops::Deref for XdpEnv {
    type Target = RunEnv;
    #[inline]
    fn deref(&self) -> &RunEnv {
        &self.run
    }
}

impl std::ops::DerefMut for XdpEnv {
    #[inline]
    fn deref_mut(&mut self) -> &mut RunEnv {
        &mut self.run
    }
}

impl XdpEnv {
    /// The run's frame, if `md` is the run's context (the address a
    /// program passes as its `struct xdp_md *`).
    pub fn frame_of(&mut self, md: u64) -> Option<&mut XdpFrame> {
        (self.frame.md_addr() == md).then_some(&mut self.frame)
    }
}

impl std::fmt::Debug for XdpEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpEnv")
            .field("frame", &self.frame)
            .field("cpu", &self.run.cpu)
            .finish_non_exhaustive()
    }
}

impl XdpEnv {
    /// Record the target of a redirect helper call (`None`: the call missed).
    /// Engines that compile the redirect helpers in call this exactly where
    /// the runtime's helpers do.
    pub fn record_redirect(
        &mut self,
        to: Option<crate::worker::RedirectTo>,
        via: crate::worker::RedirectVia,
    ) {
        self.redirect = to;
        self.redirect_via = to.map(|_| via);
    }

    /// The target the run's last redirect helper call recorded, cleared.
    pub fn take_redirect(
        &mut self,
    ) -> (
        Option<crate::worker::RedirectTo>,
        Option<crate::worker::RedirectVia>,
    ) {
        (self.redirect.take(), self.redirect_via.take())
    }

    pub fn new(frame: XdpFrame, cpu: u32, maps: Arc<ObjectMaps>, fib: Option<Arc<Fib>>) -> XdpEnv {
        XdpEnv {
            run: RunEnv::new(cpu, maps),
            frame,
            fib,
            redirect: None,
            redirect_via: None,
        }
    }

    #[inline]
    pub fn frame(&self) -> &XdpFrame {
        &self.frame
    }

    /// The frame, for harnesses that reset it between runs
    /// ([`XdpFrame::reset`]).
    #[inline]
    pub fn frame_mut(&mut self) -> &mut XdpFrame {
        &mut self.frame
    }

    /// The run environment every helper uses.
    #[inline]
    pub fn run_env(&mut self) -> &mut RunEnv {
        &mut self.run
    }
}

/// # Safety
/// `addr` must be a `bpf_spin_lock` the caller holds.
unsafe fn bpf_maps_unlock(addr: u64) {
    bpfjet_maps::sync::bpf_spin_unlock(addr as *mut u8)
}

fn seed(cpu: u32) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let s = (ts.tv_sec as u64).wrapping_mul(1_000_000_007)
        ^ (ts.tv_nsec as u64)
        ^ (u64::from(cpu) << 48);
    s | 1
}

/// A map freed with its object frees the objects its values' kptrs and
/// graph roots hold (the kernel's `bpf_obj_free_fields` at map free).
/// Maps still shared (pinned, reused by another object) keep them.
impl Drop for ObjectMaps {
    fn drop(&mut self) {
        let known = self.known.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (map, fields) in self.maps.iter().zip(&self.special_fields) {
            if fields.is_empty() {
                continue;
            }
            let copies = 1 + known.values().filter(|m| Arc::ptr_eq(m, map)).count();

            if Arc::strong_count(map) > copies || map.map_type().is_per_cpu() {
                continue;
            }
            let keys: Vec<Vec<u8>> = match map.map_type() {
                bpfjet_maps::MapType::Array => (0..map.max_entries())
                    .map(|i| i.to_ne_bytes().to_vec())
                    .collect(),
                _ => map
                    .entries()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| e.key)
                    .collect(),
            };
            for key in keys {
                if let Some(value) = map.lookup(&key, 0) {
                    // SAFETY: the value is valid for the fields' offsets
                    // (the map's own BTF) and no program runs any more.
                    unsafe { bpfjet_kfuncs::graph::free_fields(value as u64, fields) };
                }
            }
        }
    }
}
