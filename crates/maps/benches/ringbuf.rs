//! Ring buffer throughput, one producer thread and one busy-polling
//! consumer thread, 256 KiB ring (the eBPF-libraries study's size), records
//! of 156 bytes (rw-tracer) and 4,252 bytes (rw-tracer-all), in drop mode
//! (the kernel's) and backpressure mode.
//!
//! Criterion times the producer: N records reserved, written and submitted
//! (a drop is a failed reservation, which is fast), until the consumer has
//! read every submitted one. Before that, a fixed burst of 200,000 records
//! per configuration prints the exact loss counts from the ring's counters
//! and both threads' CPU time; after them, drop mode with a producer paced
//! at a steady rate (one second each) prints its losses.
//!
//!   cargo bench -p bpfjet-maps --bench ringbuf

use bpfjet_maps::{Backpressure, Map, MapOptions, MapSpec, MapType, RingbufConsumer};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const RING: u32 = 256 << 10;
const BURST: u64 = 200_000;

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Setup {
    map: Arc<Map>,
    consumed: Arc<AtomicU64>,
    /// The consumer thread's CPU time so far, in ns.
    consumer_cpu_ns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    consumer: Option<JoinHandle<()>>,
}

impl Setup {
    fn new(backpressure: bool) -> Setup {
        let spec = MapSpec::new("events", MapType::Ringbuf, 0, 0, RING);
        let map = Arc::new(Map::create_anonymous(&spec, &MapOptions::default()).unwrap());
        if backpressure {
            map.set_ringbuf_backpressure(Some(Backpressure {
                stall_limit: Duration::from_secs(1),
            }))
            .unwrap();
        }
        let consumed = Arc::new(AtomicU64::new(0));
        let consumer_cpu_ns = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (map, consumed, stop, cpu) = (
                map.clone(),
                consumed.clone(),
                stop.clone(),
                consumer_cpu_ns.clone(),
            );
            std::thread::spawn(move || {
                let mut c = RingbufConsumer::new(map).unwrap();
                let mut sum = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let n = c.poll(|r| {
                        // Read the record as a consumer writing it out would.
                        sum = sum.wrapping_add(r.iter().map(|&b| b as u64).sum::<u64>());
                    });
                    cpu.store(thread_cpu().as_nanos() as u64, Ordering::Relaxed);
                    consumed.fetch_add(n as u64, Ordering::Release);
                    if n == 0 {
                        std::hint::spin_loop();
                    }
                }
                black_box(sum);
            })
        };
        Setup {
            map,
            consumed,
            consumer_cpu_ns,
            stop,
            consumer: Some(consumer),
        }
    }

    /// Produce `n` records of `size` bytes; returns how many were submitted.
    fn produce(&self, n: u64, size: usize) -> u64 {
        let mut ok = 0;
        for i in 0..n {
            let Some(p) = self.map.ringbuf_reserve(size as u64, 0) else {
                continue;
            };
            // SAFETY: p has `size` reserved bytes, not committed yet.
            unsafe {
                std::ptr::write_bytes(p, i as u8, size);
                (p as *mut u64).write_unaligned(i);
                Map::ringbuf_submit(p, 0);
            }
            ok += 1;
        }
        ok
    }

    /// Produce `n` records of `size` bytes at `rate` records/s (a steady
    /// source such as fio's reads); returns how many were submitted.
    fn produce_paced(&self, n: u64, size: usize, rate: u64) -> u64 {
        let start = Instant::now();
        let mut ok = 0;
        for i in 0..n {
            let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
            while Instant::now() < due {
                std::hint::spin_loop();
            }
            ok += self.produce(1, size);
        }
        ok
    }

    fn wait_consumed(&self, target: u64) {
        while self.consumed.load(Ordering::Acquire) < target {
            std::hint::spin_loop();
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.consumer.take() {
            let _ = t.join();
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("ringbuf_1p1c");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for size in [156usize, 4252] {
        for (mode, bp) in [("drop", false), ("backpressure", true)] {
            let setup = Setup::new(bp);
            // Loss counts of one fixed burst, and the CPU time both
            // threads spent on it (the machine is shared: wall time
            // includes waiting for a CPU).
            let t = Instant::now();
            let cpu0 = thread_cpu();
            let ccpu0 = setup.consumer_cpu_ns.load(Ordering::Relaxed);
            let submitted = setup.produce(BURST, size);
            let producer_cpu = thread_cpu() - cpu0;
            setup.wait_consumed(submitted);
            let secs = t.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(20));
            let consumer_cpu =
                Duration::from_nanos(setup.consumer_cpu_ns.load(Ordering::Relaxed) - ccpu0);
            let st = setup.map.ringbuf_stats().unwrap();
            eprintln!(
                "ringbuf {size} B {mode}: burst of {BURST}: produced {} consumed {} dropped {} \
                 ({:.2}% lost) in {:.3} s wall: {:.0} records/s delivered; CPU producer {:.3} s \
                 consumer {:.3} s: {:.0} records delivered per CPU-second",
                st.produced,
                st.consumed,
                st.dropped,
                100.0 * st.dropped as f64 / BURST as f64,
                secs,
                st.consumed as f64 / secs,
                producer_cpu.as_secs_f64(),
                consumer_cpu.as_secs_f64(),
                st.consumed as f64 / (producer_cpu + consumer_cpu).as_secs_f64()
            );
            group.throughput(Throughput::Elements(1));
            group.bench_function(format!("{size}B_{mode}"), |b| {
                b.iter_custom(|iters| {
                    let before = setup.consumed.load(Ordering::Acquire);
                    let t = Instant::now();
                    let ok = setup.produce(iters, size);
                    setup.wait_consumed(before + ok);
                    t.elapsed()
                })
            });
        }
    }
    group.finish();
    // Drop mode with a steady producer: what a consumer that keeps up
    // loses (backpressure loses nothing by construction).
    for (size, rate) in [(156usize, 200_000u64), (4252, 50_000)] {
        let setup = Setup::new(false);
        let n = rate; // one second
        let submitted = setup.produce_paced(n, size, rate);
        setup.wait_consumed(submitted);
        let st = setup.map.ringbuf_stats().unwrap();
        eprintln!(
            "ringbuf {size} B drop, paced at {rate} records/s for 1 s: produced {} consumed {} \
             dropped {} ({:.3}% lost)",
            st.produced,
            st.consumed,
            st.dropped,
            100.0 * st.dropped as f64 / n as f64
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
