//! The ring-buffer consumer: a thread of the agent reads every RINGBUF map
//! of the object in batches (woken when a ring is an eighth full, else
//! every millisecond: `RingbufConsumer::poll_batched`; no system call per
//! record). With `Config::consumer_spin` set (default
//! [`crate::config::DEFAULT_CONSUMER_SPIN_US`]: off) it busy-polls while
//! records flow, that long after the last one, unless it finds itself
//! preempted while polling. With `--events FILE` it writes each record as
//! ktrace (examples/trace/ktrace.c) does, so both files compare byte for
//! byte: a u32 length in host byte order, then the record's bytes. At exit
//! the rings are drained and the consumer stops.
//!
//! The same thread reads every PERF_EVENT_ARRAY map (the perf buffers of
//! `bpf_perf_event_output`): every CPU slot's ring at each look, each
//! sample's data written to the events file as one record, like a ring
//! buffer's. Samples of different CPU slots are not ordered with respect
//! to each other (as with the kernel's perf buffer). A perf ring has no
//! wake-up: when idle the consumer looks at them once per linger (the
//! ring-buffer wait, or a sleep when the object has no ring buffer).
//! Lost samples (the kernel's PERF_RECORD_LOST: a full ring) are counted
//! as dropped.

use crate::attach::Agent;
use bpfjet_maps::{PerfEvent, PerfEventConsumer, PerfbufStats, RingbufConsumer, RingbufStats};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a record may wait in its ring before the consumer reads it
/// when the ring stays below its batch watermark.
const LINGER: Duration = Duration::from_millis(1);

/// A gap this long between two looks at the rings while polling means the
/// consumer lost its CPU: the machine has no idle one, and polling takes
/// CPU time from the traced threads while the ring overflows anyway (a
/// thread that used its time slice waits longer for the next than one that
/// slept). The consumer then sleeps between batches for [`NO_SPIN`].
const PREEMPTED: Duration = Duration::from_micros(200);
const NO_SPIN: Duration = Duration::from_millis(100);

/// Each ring buffer's and each perf buffer's counts, by map name.
#[derive(Clone, Default)]
pub struct Counts {
    pub rings: Vec<(String, RingbufStats)>,
    pub perfs: Vec<(String, PerfbufStats)>,
}

struct Running {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Counts>,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// What the command's earlier consumers counted: the one before a failed
/// `exec` of this image, or the one of the image an `exec` replaced
/// (`exec_note::carry_counts`). A ring buffer's counts live in the ring
/// and are whole in every image; a perf buffer's consumed and lost
/// samples are the consumer's own, so they add up.
static CARRIED: Mutex<Option<Counts>> = Mutex::new(None);
/// The events file was opened once already in this command: later
/// consumers append to it.
static OPENED: AtomicBool = AtomicBool::new(false);

/// Counts of earlier consumers of this command, taken over from the image
/// an `exec` replaced.
pub fn carry(counts: Counts) {
    *CARRIED.lock().unwrap_or_else(|e| e.into_inner()) = Some(counts);
}

fn with_carried(mut now: Counts) -> Counts {
    let carried = CARRIED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(before) = carried.as_ref() {
        for (name, s) in &mut now.perfs {
            if let Some((_, b)) = before.perfs.iter().find(|(n, _)| n == name) {
                s.consumed += b.consumed;
                s.dropped += b.dropped;
            }
        }
    }
    now
}

pub fn start(agent: &'static Agent) -> Result<(), String> {
    if agent.ringbufs.is_empty() && agent.perfbufs.is_empty() {
        return Ok(());
    }
    let mut consumers = Vec::new();
    for name in &agent.ringbufs {
        let map = agent
            .object
            .loaded()
            .map(name)
            .ok_or_else(|| format!("ring buffer {name}: not loaded"))?;
        let c = RingbufConsumer::new(map).map_err(|e| format!("ring buffer {name}: {e}"))?;
        consumers.push((name.clone(), c));
    }
    let mut perfs = Vec::new();
    for name in &agent.perfbufs {
        let map = agent
            .object
            .loaded()
            .map(name)
            .ok_or_else(|| format!("perf buffer {name}: not loaded"))?;
        let c = PerfEventConsumer::new(map).map_err(|e| format!("perf buffer {name}: {e}"))?;
        perfs.push((name.clone(), c));
    }
    let mut out: Option<Box<dyn Write + Send>> = match &agent.cfg.events {
        Some(path) => {
            // The command's first consumer starts the file; a later one
            // (after an `exec` of the command's process) goes on with it.
            let append = agent.cfg.joined || OPENED.swap(true, Ordering::SeqCst);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .append(append)
                .truncate(!append)
                .open(path)
                .map_err(|e| format!("--events {}: {e}", path.display()))?;
            Some(Box::new(std::io::BufWriter::with_capacity(1 << 20, file)))
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    // How long the consumer keeps polling after the last record it read
    // before it sleeps. Polling reads each record as it is committed, on a
    // CPU the consumer already holds (a sleeping consumer needs a wake-up
    // and a CPU first); but on a machine with no idle CPU a polling thread
    // takes CPU time from the traced threads, so the window is short and
    // settable (the ring's size, `--ringbuf-size`, is what absorbs the
    // consumer's absences).
    let spin = agent.cfg.consumer_spin;
    let thread = crate::alive::spawn(
        std::thread::Builder::new().name("bpfjet-ringbuf".into()),
        move || {
            {
                let mut write = |data: &[u8]| {
                    if let Some(w) = out.as_mut() {
                        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                        let _ = w.write_all(&len.to_ne_bytes());
                        let _ = w.write_all(data);
                    }
                };
                // Batches: each ring wakes the consumer when it is an
                // eighth full (or after the linger), not at every record as
                // the kernel's rule would: the consumer shares the traced
                // process's CPUs, and a wake-up per record costs the
                // producer a futex call and the process a context switch
                // per event. Several rings share the linger.
                let linger =
                    (LINGER / consumers.len().max(1) as u32).max(Duration::from_micros(100));
                // When did the consumer last read a record, last look at
                // the rings, and until when does it not poll (it was
                // preempted while polling: the machine has no idle CPU).
                let mut last = Instant::now();
                let mut prev = last;
                let mut no_spin_until = last;
                loop {
                    let stopping = stop2.load(Ordering::Acquire);
                    let mut got = 0;
                    for (_, c) in consumers.iter_mut() {
                        got += c.poll(&mut write);
                    }
                    for (_, c) in perfs.iter_mut() {
                        // Losses are counted by the consumer (`stats`).
                        got += c.poll(|e| {
                            if let PerfEvent::Sample { data, .. } = e {
                                write(data)
                            }
                        });
                    }
                    let now = Instant::now();
                    if now.duration_since(prev) > PREEMPTED {
                        no_spin_until = now + NO_SPIN;
                    }
                    prev = now;
                    if got > 0 {
                        last = now;
                        continue;
                    }
                    if stopping {
                        break;
                    }
                    if now < last + spin && now >= no_spin_until {
                        std::hint::spin_loop();
                        continue;
                    }
                    // Idle (or no CPU to spare): sleep until a ring fills
                    // to its batch mark or the linger passes, then poll
                    // (perf rings: at the next look).
                    if consumers.is_empty() {
                        std::thread::sleep(linger);
                    }
                    for (_, c) in consumers.iter_mut() {
                        got += c.poll_batched(&mut write, linger);
                    }
                    prev = Instant::now();
                    if got > 0 {
                        last = prev;
                    }
                }
                if let Some(w) = out.as_mut() {
                    let _ = w.flush();
                }
                Counts {
                    rings: consumers
                        .iter()
                        .map(|(n, c)| (n.clone(), c.stats()))
                        .collect(),
                    perfs: perfs.iter().map(|(n, c)| (n.clone(), c.stats())).collect(),
                }
            }
        },
    )
    .map_err(|e| format!("ring-buffer consumer thread: {e}"))?;
    *RUNNING.lock().unwrap() = Some(Running { stop, thread });
    Ok(())
}

/// Drains the rings, stops the consumer, and returns each ring's and
/// each perf buffer's counts.
pub fn stop() -> Counts {
    let Some(r) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return CARRIED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default();
    };
    r.stop.store(true, Ordering::Release);
    with_carried(r.thread.join().unwrap_or_default())
}

/// [`stop`], keeping the counts for a consumer started again later in
/// this image (an `exec` that fails).
pub fn pause() -> Counts {
    let counts = stop();
    carry(counts.clone());
    counts
}
