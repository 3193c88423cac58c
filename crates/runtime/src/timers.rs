//! The timer service behind `bpf_timer_*` (helpers/timer.rs): the role of
//! the kernel's hrtimers for BPF programs.
//!
//! A `struct bpf_timer` in a map value is 16 bytes the program never
//! touches. bpfjet keeps its state in this process's table and writes a
//! handle into the value: word 0 = `generation << 32 | slot + 1`, word 1 =
//! the process id (the table is per process; maps may be shared with
//! others, whose handles are not ours).
//!
//! One thread per process (started with the first armed timer) sleeps
//! until the earliest deadline and runs the callbacks one at a time, through
//! the JIT's native code when it compiled the program ([`set_async_runner`])
//! and on the interpreter otherwise, with the CPU slot of the run that armed the timer — the
//! kernel fires a timer on the CPU that started it. A callback runs only
//! while its element still holds the timer: the kernel frees a timer when
//! its element is deleted or updated, and bpfjet checks this lazily at
//! each expiry (the element's key still finds the same value, and the
//! value's timer word is still this timer's handle). An update clears the
//! word (the map's owned fields), a deleted element is not found; such a
//! timer is dropped then, and unarmed ones whose element died are swept
//! when the table grows.

use crate::env::{ObjectMaps, RunEnv};
use crate::interp::{execute_in_mode, Core};
use crate::program::ProgramInner;
use crate::region::Region;
use crate::state::RunState;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

/// Where a timer lives: its map value.
#[derive(Clone)]
pub(crate) struct Home {
    pub maps: Weak<ObjectMaps>,
    /// The map's program-visible handle (the callback's r1).
    pub map: u64,
    /// The value's address (the callback's r3); the timer is inside it.
    pub value: u64,
    /// The timer's address (inside `value`).
    pub timer: u64,
    /// The element's key (an array's index as a u32).
    pub key: Vec<u8>,
}

struct Slot {
    gen: u32,
    home: Option<Home>,
    /// `CLOCK_REALTIME`, `CLOCK_MONOTONIC` or `CLOCK_BOOTTIME`.
    clock: i32,
    callback: Option<(Weak<ProgramInner>, usize)>,
    /// Armed: the expiry on CLOCK_MONOTONIC.
    armed: Option<u64>,
    /// The expiry of this slot's entry in the heap, if it has one. At most
    /// one entry per slot is live: re-arming later than it (a flow's idle
    /// timer pushed back on every packet) pushes nothing, the service
    /// re-queues the slot when the early entry comes up; re-arming earlier
    /// pushes a new entry and the old one goes stale.
    queued: Option<u64>,
    cpu: u32,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
    /// Sweep unarmed timers whose element died when `live` reaches this.
    sweep_at: usize,
    /// (expiry, slot), earliest first; an entry is live when it is its
    /// slot's `queued`.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// What the service thread sleeps until (`u64::MAX`: no timer armed);
    /// only an earlier expiry wakes it.
    sleeps_until: u64,
    /// The slot whose callback the service thread is running.
    running: Option<u32>,
}

pub(crate) struct Timers {
    table: Mutex<Table>,
    /// The service thread waits here for an earlier deadline.
    wake: Condvar,
    /// Cancels wait here for a running callback to finish.
    done: Condvar,
}

static TIMERS: OnceLock<Timers> = OnceLock::new();

thread_local! {
    /// Set on the service thread.
    static SERVICE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What a helper asked of a timer that is not there.
pub(crate) enum TimerError {
    /// Not initialised (or not this process's): -EINVAL.
    Invalid,
    /// `bpf_timer_init` of an initialised timer: -EBUSY.
    Busy,
    /// `bpf_timer_cancel` of the running callback's own timer: -EDEADLK.
    Deadlock,
}

/// How a compiled program's function runs outside any run of it (a
/// timer's callback): set by the JIT, which answers `None` for a program
/// it did not compile (the interpreter runs it then).
pub type AsyncRunner = fn(
    program: &crate::Program,
    state: &mut RunState,
    user: &mut (dyn std::any::Any + 'static),
    entry: usize,
    cpu: u32,
    args: [u64; 5],
) -> Option<Result<u64, crate::Fault>>;

static ASYNC_RUNNER: OnceLock<AsyncRunner> = OnceLock::new();

/// Run timer callbacks of compiled programs with `runner` (the JIT's
/// native code) instead of the interpreter. The first call wins.
pub fn set_async_runner(runner: AsyncRunner) {
    let _ = ASYNC_RUNNER.set(runner);
}

/// The handle a timer's word 0 holds: `generation << 32 | slot + 1`.
fn handle(gen: u32, idx: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(idx + 1)
}

/// This process's id, cached: `getpid` is a system call, and
/// `bpf_timer_start` may run on every packet. A forked child forgets it
/// (and starts its own service thread): the timers of the parent, whose
/// table the child inherits, carry the parent's id and stay the parent's.
static PID: AtomicU32 = AtomicU32::new(0);
static SERVICE_STARTED: AtomicBool = AtomicBool::new(false);

extern "C" fn forked_child() {
    PID.store(0, Ordering::Relaxed);
    SERVICE_STARTED.store(false, Ordering::Relaxed);
}

fn pid() -> u64 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return u64::from(p);
    }
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    u64::from(p)
}

pub(crate) fn timers() -> &'static Timers {
    TIMERS.get_or_init(|| {
        // SAFETY: registers a handler that only stores to atomics.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        Timers {
            table: Mutex::new(Table {
                sweep_at: 64,
                sleeps_until: u64::MAX,
                ..Table::default()
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
        }
    })
}

/// The timer's two words.
fn words(timer: u64) -> (&'static AtomicU64, &'static AtomicU64) {
    // SAFETY: the helper checked 16 writable, 8-aligned bytes at `timer`
    // (a map value's timer, which lives as long as the map).
    unsafe {
        (
            AtomicU64::from_ptr(timer as *mut u64),
            AtomicU64::from_ptr((timer + 8) as *mut u64),
        )
    }
}

/// Nanoseconds on `clock` (the helpers' clock reading).
fn now(clock: i32) -> u64 {
    crate::helpers::clock_ns(clock)
}

impl Timers {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot of the timer at `timer`, if it is one of ours.
    fn slot_of(t: &Table, timer: u64) -> Option<u32> {
        let (w0, w1) = words(timer);
        let handle = w0.load(Ordering::Acquire);
        if handle == 0 || w1.load(Ordering::Acquire) != pid() {
            return None;
        }
        let idx = (handle as u32).checked_sub(1)?;
        let s = t.slots.get(idx as usize)?;
        (s.gen == (handle >> 32) as u32 && s.home.as_ref().is_some_and(|h| h.timer == timer))
            .then_some(idx)
    }

    /// `bpf_timer_init`.
    pub(crate) fn init(&self, home: Home, clock: i32) -> Result<(), TimerError> {
        let (w0, w1) = words(home.timer);
        if w0.load(Ordering::Acquire) != 0 {
            return Err(TimerError::Busy);
        }
        let mut t = self.lock();
        if t.live >= t.sweep_at {
            sweep(&mut t);
            t.sweep_at = (t.live * 2).max(64);
        }
        let idx = match t.free.pop() {
            Some(i) => i,
            None => {
                t.slots.push(Slot {
                    gen: 0,
                    home: None,
                    clock,
                    callback: None,
                    armed: None,
                    queued: None,
                    cpu: 0,
                });
                (t.slots.len() - 1) as u32
            }
        };
        let s = &mut t.slots[idx as usize];
        s.gen = s.gen.wrapping_add(1);
        s.home = Some(home);
        s.clock = clock;
        s.callback = None;
        s.armed = None;
        s.queued = None;
        let handle = handle(s.gen, idx);
        // Two CPUs may init the same timer at once: one wins.
        if w0
            .compare_exchange(0, handle, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            t.slots[idx as usize].home = None;
            t.free.push(idx);
            return Err(TimerError::Busy);
        }
        w1.store(pid(), Ordering::Release);
        t.live += 1;
        Ok(())
    }

    /// `bpf_timer_set_callback`.
    pub(crate) fn set_callback(
        &self,
        timer: u64,
        prog: Weak<ProgramInner>,
        entry: usize,
    ) -> Result<(), TimerError> {
        let mut t = self.lock();
        let idx = Self::slot_of(&t, timer).ok_or(TimerError::Invalid)?;
        t.slots[idx as usize].callback = Some((prog, entry));
        Ok(())
    }

    /// `bpf_timer_start`: `nsecs` from now, or at `nsecs` of the timer's
    /// clock when `absolute`.
    pub(crate) fn start(
        &self,
        timer: u64,
        nsecs: u64,
        absolute: bool,
        cpu: u32,
    ) -> Result<(), TimerError> {
        let mut t = self.lock();
        let idx = Self::slot_of(&t, timer).ok_or(TimerError::Invalid)?;
        let s = &t.slots[idx as usize];
        if s.callback.is_none() {
            return Err(TimerError::Invalid);
        }
        let mono = now(libc::CLOCK_MONOTONIC);
        let expiry = if absolute {
            let clock_now = now(s.clock);
            mono.saturating_add(nsecs.saturating_sub(clock_now))
        } else {
            mono.saturating_add(nsecs)
        };
        let s = &mut t.slots[idx as usize];
        s.armed = Some(expiry);
        s.cpu = cpu;
        if s.queued.is_none_or(|q| q > expiry) {
            s.queued = Some(expiry);
            t.heap.push(Reverse((expiry, idx)));
        }
        if !SERVICE_STARTED.swap(true, Ordering::AcqRel) {
            let spawned = std::thread::Builder::new()
                .name("bpfjet-timers".into())
                .spawn(|| timers().serve());
            if spawned.is_err() {
                SERVICE_STARTED.store(false, Ordering::Release);
                eprintln!(
                    "bpfjet: could not start the timer thread; bpf_timer callbacks will not run"
                );
            }
        }
        if expiry < t.sleeps_until {
            t.sleeps_until = expiry;
            self.wake.notify_one();
        }
        Ok(())
    }

    /// `bpf_timer_cancel`: 1 when the timer was armed, else 0; waits for
    /// its callback when another thread runs it.
    pub(crate) fn cancel(&self, timer: u64) -> Result<u64, TimerError> {
        let mut t = self.lock();
        let idx = Self::slot_of(&t, timer).ok_or(TimerError::Invalid)?;
        if t.running == Some(idx) {
            if SERVICE.with(|s| s.get()) {
                return Err(TimerError::Deadlock);
            }
            while t.running == Some(idx) {
                t = self.done.wait(t).unwrap_or_else(PoisonError::into_inner);
            }
            // The timer may have died meanwhile (its callback deleted the
            // element, ...).
            if Self::slot_of(&t, timer) != Some(idx) {
                return Ok(0);
            }
        }
        Ok(u64::from(t.slots[idx as usize].armed.take().is_some()))
    }

    /// The service thread.
    fn serve(&self) {
        SERVICE.with(|s| s.set(true));
        let mut state = RunState::new();
        // A CPU slot taken while no timer of it could run (see below).
        let mut reserved: Option<(u32, crate::cpu_exclusion::CpuHold)> = None;
        let mut t = self.lock();
        loop {
            let mono = now(libc::CLOCK_MONOTONIC);
            // The earliest live entry whose slot is due; slots armed later
            // than their entry are queued again at their expiry.
            let mut due = None;
            while let Some(&Reverse((at, idx))) = t.heap.peek() {
                if at > mono {
                    break;
                }
                t.heap.pop();
                let s = &mut t.slots[idx as usize];
                if s.queued != Some(at) {
                    continue;
                }
                s.queued = None;
                match s.armed {
                    Some(expiry) if expiry > mono => {
                        s.queued = Some(expiry);
                        t.heap.push(Reverse((expiry, idx)));
                    }
                    Some(_) => {
                        due = Some(idx);
                        break;
                    }
                    None => {}
                }
            }
            let Some(idx) = due else {
                reserved = None;
                let next = t.heap.peek().map_or(u64::MAX, |&Reverse((at, _))| at);
                t.sleeps_until = next;
                t = if next == u64::MAX {
                    self.wake.wait(t).unwrap_or_else(PoisonError::into_inner)
                } else {
                    let wait = std::time::Duration::from_nanos(next.saturating_sub(mono));
                    self.wake
                        .wait_timeout(t, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                };
                continue;
            };
            // The callback runs on the arming run's CPU slot, never while
            // a runner holds that slot (cpu_exclusion.rs). A busy slot puts
            // the expiry back (the timer stays armed: a cancel meanwhile
            // disarms it, as before its expiry) and the service waits for
            // the slot without the table lock and before `running` is set,
            // which a program on that slot may wait for in
            // bpf_timer_cancel; then it looks for due timers again.
            let cpu = t.slots[idx as usize].cpu;
            if reserved.as_ref().is_some_and(|(c, _)| *c != cpu) {
                reserved = None;
            }
            let _hold = match reserved.take() {
                Some((_, hold)) => hold,
                None => match crate::cpu_exclusion::try_hold(cpu) {
                    Some(hold) => hold,
                    None => {
                        let s = &mut t.slots[idx as usize];
                        if let Some(expiry) = s.armed {
                            s.queued = Some(expiry);
                            t.heap.push(Reverse((expiry, idx)));
                        }
                        drop(t);
                        reserved = Some((cpu, crate::cpu_exclusion::hold(cpu)));
                        t = self.lock();
                        continue;
                    }
                },
            };
            let s = &mut t.slots[idx as usize];
            s.armed = None;
            let (Some(home), Some((prog, entry))) = (s.home.clone(), s.callback.clone()) else {
                continue;
            };
            let handle = handle(s.gen, idx);
            t.running = Some(idx);
            drop(t);
            let alive = fire(&mut state, &home, handle, &prog, entry, cpu);
            t = self.lock();
            t.running = None;
            if !alive {
                drop_slot(&mut t, idx);
            }
            self.done.notify_all();
        }
    }
}

/// Forget a timer whose element or program died.
fn drop_slot(t: &mut Table, idx: u32) {
    let s = &mut t.slots[idx as usize];
    if s.home.take().is_some() {
        s.callback = None;
        s.armed = None;
        s.queued = None;
        t.free.push(idx);
        t.live -= 1;
    }
}

/// Whether the timer's element still holds it: the key finds the same
/// value and the value's timer word is this timer's handle.
fn element_holds(maps: &ObjectMaps, home: &Home, handle: u64) -> bool {
    let Some(map) = maps.resolve_ref(home.map) else {
        return false;
    };
    let (w0, w1) = words(home.timer);
    map.lookup(&home.key, 0) == Some(home.value as *mut u8)
        && w0.load(Ordering::Acquire) == handle
        && w1.load(Ordering::Acquire) == pid()
}

/// Drop every timer whose element died (the kernel frees them at the
/// delete or update).
fn sweep(t: &mut Table) {
    for idx in 0..t.slots.len() as u32 {
        let s = &t.slots[idx as usize];
        if t.running == Some(idx) {
            continue;
        }
        let Some(home) = &s.home else { continue };
        let handle = handle(s.gen, idx);
        let alive = home
            .maps
            .upgrade()
            .is_some_and(|maps| element_holds(&maps, home, handle));
        if !alive {
            drop_slot(t, idx);
        }
    }
}

/// Run one expiry's callback: `callback(map, key, value)` on the
/// interpreter. False when the timer is dead (element, map or program
/// gone) and its slot is to be freed.
fn fire(
    state: &mut RunState,
    home: &Home,
    handle: u64,
    prog: &Weak<ProgramInner>,
    entry: usize,
    cpu: u32,
) -> bool {
    let (Some(maps), Some(prog)) = (home.maps.upgrade(), prog.upgrade()) else {
        return false;
    };
    if !element_holds(&maps, home, handle) {
        return false;
    }
    let Some(map) = maps.resolve_ref(home.map) else {
        return false;
    };
    // The kernel's key: an array's index in a local, a hash map's key in
    // the element.
    let mut index = [0u8; 4];
    let key = if map.map_type() == bpfjet_maps::MapType::Array {
        index.copy_from_slice(&home.key[..4]);
        index.as_ptr() as u64
    } else {
        match map.element_key_ptr(home.value as *const u8) {
            Some(k) => k as u64,
            None => return false,
        }
    };
    let value_region = crate::helpers::value_region_of(map, home.value as *mut u8);
    let key_len = home.key.len() as u64;
    let mut env = RunEnv::new(cpu, Arc::clone(&maps));
    state.begin_run();
    state.add_run_region(value_region);
    state.add_run_region(Region::read_only(key, key_len));
    let mut core = Core {
        state,
        user: &mut env,
    };
    let args = [home.map, key, home.value, 0, 0];
    let native = ASYNC_RUNNER.get().and_then(|run| {
        let program = crate::Program {
            inner: Arc::clone(&prog),
        };
        run(
            &program,
            &mut *core.state,
            &mut *core.user,
            entry,
            cpu,
            args,
        )
    });
    let result = native
        .unwrap_or_else(|| execute_in_mode(&mut core, &prog, entry, args, 0, prog.bounds_checked));
    state.end_run();
    if let Err(fault) = result {
        eprintln!("bpfjet: a bpf_timer callback (insn {entry}) faulted: {fault}");
    }
    for note in env.release_leftovers() {
        eprintln!("bpfjet: after a bpf_timer callback: {note}");
    }
    for line in env.trace_log() {
        eprintln!("bpf_trace_printk (timer callback): {line}");
    }
    true
}
