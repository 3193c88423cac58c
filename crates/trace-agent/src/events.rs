//! The ring-buffer consumer: a thread of the agent reads every RINGBUF map
//! of the object as records are committed, like a libbpf tool's
//! `ring_buffer__poll` loop, and with `--events FILE` writes each record as
//! ktrace (examples/trace/ktrace.c) does, so both files compare byte for
//! byte: a u32 length in host byte order, then the record's bytes. At exit
//! the rings are drained and the consumer stops.

use crate::attach::Agent;
use bpfjet_maps::{RingbufConsumer, RingbufStats};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Running {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(String, RingbufStats)>>,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

pub fn start(agent: &'static Agent) -> Result<(), String> {
    if agent.ringbufs.is_empty() {
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
    let mut out: Option<Box<dyn Write + Send>> = match &agent.cfg.events {
        Some(path) => Some(Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path).map_err(|e| format!("--events {}: {e}", path.display()))?,
        ))),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("bpfjet-ringbuf".into())
        .spawn(move || {
            crate::alive::agent_work(move || {
                let mut write = |data: &[u8]| {
                    if let Some(w) = out.as_mut() {
                        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                        let _ = w.write_all(&len.to_ne_bytes());
                        let _ = w.write_all(data);
                    }
                };
                // One ring: block on it; several: poll each with a short wait.
                let wait = if consumers.len() == 1 {
                    Duration::from_millis(50)
                } else {
                    Duration::from_millis(2)
                };
                loop {
                    let stopping = stop2.load(Ordering::Acquire);
                    let mut got = 0;
                    for (_, c) in consumers.iter_mut() {
                        got += c.poll_blocking(&mut write, Some(wait));
                    }
                    if stopping && got == 0 {
                        break;
                    }
                }
                if let Some(w) = out.as_mut() {
                    let _ = w.flush();
                }
                consumers
                    .iter()
                    .map(|(n, c)| (n.clone(), c.stats()))
                    .collect()
            })
        })
        .map_err(|e| format!("ring-buffer consumer thread: {e}"))?;
    *RUNNING.lock().unwrap() = Some(Running { stop, thread });
    Ok(())
}

/// Drains the rings, stops the consumer, and returns each ring's counts.
pub fn stop() -> Vec<(String, RingbufStats)> {
    let Some(r) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return Vec::new();
    };
    r.stop.store(true, Ordering::Release);
    r.thread.join().unwrap_or_default()
}
