//! RINGBUF: the kernel's record layout, exact counters, wake-ups (futex and
//! eventfd), many producers at once, backpressure, and the kernel's mmap
//! offsets.

use bpfjet_maps::ringbuf::{
    BPF_RB_AVAIL_DATA, BPF_RB_CONS_POS, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RB_PROD_POS,
    BPF_RB_RING_SIZE, BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT,
};
use bpfjet_maps::{
    Backpressure, Map, MapOptions, MapSpec, MapType, MmapSegment, RingbufConsumer, RingbufStats,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn ring(size: usize, map_extra: u64) -> Arc<Map> {
    let mut spec = MapSpec::new("rb", MapType::Ringbuf, 0, 0, size as u32);
    spec.map_extra = map_extra;
    Arc::new(Map::create_anonymous(&spec, &MapOptions::default()).expect("create ringbuf"))
}

fn submit(map: &Map, bytes: &[u8], flags: u64) -> bool {
    let Some(p) = map.ringbuf_reserve(bytes.len() as u64, 0) else {
        return false;
    };
    // SAFETY: p has bytes.len() reserved bytes, not committed yet.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        Map::ringbuf_submit(p, flags);
    }
    true
}

#[test]
fn records_have_the_kernel_header_alignment_and_page_offset() {
    let size = page();
    let m = ring(size, 0);
    // 5 bytes take 16 (8 header + 5, rounded to 8); a discarded one stays
    // in the ring with its DISCARD bit until consumed.
    assert!(submit(&m, b"hello", 0));
    let d = m.ringbuf_reserve(3, 0).expect("room");
    // SAFETY: live sample.
    unsafe { Map::ringbuf_discard(d, 0) };
    let busy = m.ringbuf_reserve(1, 0).expect("room");
    let snap = m.ringbuf_snapshot().unwrap();
    assert_eq!(snap.ring_size, size as u64);
    assert_eq!((snap.consumer_pos, snap.producer_pos), (0, 16 + 16 + 16));
    let lens: Vec<u32> = snap.records.iter().map(|r| r.header_len).collect();
    assert_eq!(
        lens,
        [5, 3 | BPF_RINGBUF_DISCARD_BIT, 1 | BPF_RINGBUF_BUSY_BIT],
        "len words with DISCARD and BUSY bits"
    );
    // The kernel's pg_off: pages from the start of struct bpf_ringbuf
    // (control page 0, consumer 1, producer 2, data from 3).
    assert!(snap.records.iter().all(|r| r.pg_off == 3));
    assert_eq!(snap.records[0].data, b"hello");
    assert_eq!(m.ringbuf_query(BPF_RB_AVAIL_DATA), 48);
    assert_eq!(m.ringbuf_query(BPF_RB_PROD_POS), 48);
    assert_eq!(m.ringbuf_query(BPF_RB_CONS_POS), 0);
    assert_eq!(m.ringbuf_query(BPF_RB_RING_SIZE), size as u64);
    assert_eq!(m.ringbuf_query(99), 0, "unknown query flag");
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    let mut got = Vec::new();
    assert_eq!(c.poll(|r| got.push(r.to_vec())), 1, "stops at the busy one");
    assert_eq!(got, [b"hello".to_vec()]);
    assert_eq!(
        m.ringbuf_query(BPF_RB_CONS_POS),
        32,
        "past the discarded one"
    );
    // SAFETY: live sample.
    unsafe { Map::ringbuf_submit(busy, 0) };
    assert_eq!(c.poll(|_| {}), 1);
    assert_eq!(
        c.stats(),
        RingbufStats {
            produced: 2,
            consumed: 2,
            dropped: 0,
            discarded: 1,
            in_flight: 0
        }
    );
}

#[test]
fn a_record_wrapping_the_end_is_contiguous() {
    let size = page();
    let m = ring(size, 0);
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    // Move the positions to 64 bytes before the end, then write 200 bytes.
    let filler = vec![0u8; size - 64 - 8];
    assert!(submit(&m, &filler, 0));
    c.poll(|_| {});
    let rec: Vec<u8> = (0..200).map(|i| i as u8).collect();
    assert!(submit(&m, &rec, 0));
    let mut got = Vec::new();
    c.poll(|r| got.push(r.to_vec()));
    assert_eq!(got, [rec]);
}

#[test]
fn a_full_ring_drops_and_counts() {
    let size = page();
    let m = ring(size, 0);
    let rec = [7u8; 56]; // 64 bytes per record
    let fits = size / 64 - 1; // the kernel keeps one record's worth free
    let mut ok = 0;
    for _ in 0..fits + 10 {
        ok += submit(&m, &rec, 0) as usize;
    }
    assert_eq!(ok, fits, "new_prod - cons must stay below the ring size");
    assert!(
        m.ringbuf_reserve(size as u64, 0).is_none(),
        "larger than the ring"
    );
    assert!(m.ringbuf_reserve(8, 1).is_none(), "flags: NULL, not a drop");
    let st = m.ringbuf_stats().unwrap();
    assert_eq!((st.produced, st.consumed, st.dropped), (fits as u64, 0, 11));
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    assert_eq!(c.poll(|_| {}), fits);
    assert_eq!(c.stats().consumed, fits as u64);
    assert!(submit(&m, &rec, 0), "room again after consuming");
}

/// Many threads reserve and submit at once while a consumer reads: every
/// record arrives exactly once, each thread's in its order, and
/// produced + dropped = attempts, consumed = produced.
#[test]
fn many_producers_lose_nothing_they_did_not_count() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 20_000;
    let m = ring(4 * page(), 0);
    let done = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (m, done) = (m.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = RingbufConsumer::new(m).unwrap();
            let mut next = vec![0u64; THREADS as usize];
            let mut seen = 0u64;
            let mut check = |r: &[u8]| {
                let t = u64::from_le_bytes(r[..8].try_into().unwrap());
                let seq = u64::from_le_bytes(r[8..16].try_into().unwrap());
                assert!(
                    seq >= next[t as usize],
                    "thread {t}: {seq} after {}",
                    next[t as usize]
                );
                next[t as usize] = seq + 1;
                let len = 16 + (seq % 40) as usize;
                assert_eq!(r.len(), len);
                assert!(r[16..].iter().all(|&b| b == (seq as u8)));
                seen += 1;
            };
            loop {
                let finished = done.load(Ordering::Acquire);
                c.poll(&mut check);
                if finished {
                    c.poll(&mut check);
                    break;
                }
            }
            (seen, c.stats())
        })
    };
    let producers: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                for seq in 0..PER_THREAD {
                    let len = 16 + (seq % 40) as usize;
                    let Some(p) = m.ringbuf_reserve(len as u64, 0) else {
                        continue;
                    };
                    // SAFETY: p has len reserved bytes.
                    unsafe {
                        let rec = std::slice::from_raw_parts_mut(p, len);
                        rec[..8].copy_from_slice(&t.to_le_bytes());
                        rec[8..16].copy_from_slice(&seq.to_le_bytes());
                        rec[16..].fill(seq as u8);
                        Map::ringbuf_submit(p, 0);
                    }
                    ok += 1;
                }
                ok
            })
        })
        .collect();
    let submitted: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
    done.store(true, Ordering::Release);
    let (seen, st) = consumer.join().unwrap();
    assert_eq!(seen, submitted, "every submitted record consumed once");
    assert_eq!(st.produced, submitted);
    assert_eq!(st.consumed, submitted);
    assert_eq!(st.produced + st.dropped, THREADS * PER_THREAD);
    assert_eq!(st.in_flight, 0);
}

#[test]
fn blocking_consumer_wakes_on_submit_but_not_with_no_wakeup() {
    let m = ring(page(), 0);
    for (flags, woken) in [
        (0, true),
        (BPF_RB_NO_WAKEUP, false),
        (BPF_RB_FORCE_WAKEUP, true),
    ] {
        let producer = {
            let m = m.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                assert!(submit(&m, &[1, 2, 3], flags));
            })
        };
        let mut c = RingbufConsumer::new(m.clone()).unwrap();
        let t = Instant::now();
        let n = c.poll_blocking(
            |r| assert_eq!(r, [1, 2, 3]),
            Some(Duration::from_millis(2000)),
        );
        let waited = t.elapsed();
        producer.join().unwrap();
        if woken {
            assert_eq!(n, 1, "flags {flags}");
            assert!(
                waited < Duration::from_millis(1500),
                "flags {flags}: {waited:?}"
            );
        } else {
            // Not woken: the record is found when the wait times out.
            assert!(
                waited >= Duration::from_millis(1950),
                "NO_WAKEUP woke: {waited:?}"
            );
            assert_eq!(n + c.poll(|_| {}), 1);
        }
    }
    let mut c = RingbufConsumer::new(m).unwrap();
    assert_eq!(
        c.poll_blocking(|_| {}, Some(Duration::from_millis(20))),
        0,
        "timeout"
    );
}

/// A batching consumer asleep in its linger is woken by the record that
/// fills the ring to an eighth (not by the first record, as a blocking
/// consumer is), and at once by `BPF_RB_FORCE_WAKEUP`.
#[test]
fn batching_consumer_wakes_at_the_watermark_or_when_forced() {
    let size = page() * 4;
    // 120-byte records take 128 bytes: an eighth of the ring is size/1024
    // of them.
    let per_eighth = size / 8 / 128;
    for (records, flags, woken) in [
        (per_eighth - 1, 0, false),
        (per_eighth, 0, true),
        (1, BPF_RB_FORCE_WAKEUP, true),
        (per_eighth, BPF_RB_NO_WAKEUP, false),
    ] {
        let m = ring(size, 0);
        let mut c = RingbufConsumer::new(m.clone()).unwrap();
        let producer = {
            let m = m.clone();
            std::thread::spawn(move || {
                // Let the consumer fall asleep first.
                std::thread::sleep(Duration::from_millis(100));
                for i in 0..records {
                    assert!(submit(&m, &[i as u8; 120], flags));
                }
            })
        };
        let linger = Duration::from_millis(3000);
        let t = Instant::now();
        let mut got = 0usize;
        got += c.poll_batched(|r| assert_eq!(r.len(), 120), linger);
        let waited = t.elapsed();
        producer.join().unwrap();
        if woken {
            assert!(
                waited < Duration::from_millis(2000),
                "{records} records, flags {flags}: not woken ({waited:?})"
            );
        } else {
            assert!(
                waited >= Duration::from_millis(2900),
                "{records} records, flags {flags}: woken early ({waited:?})"
            );
        }
        got += c.poll(|_| {});
        assert_eq!(got, records, "flags {flags}: every record consumed");
        let s = c.stats();
        assert_eq!(
            (s.produced, s.consumed, s.dropped),
            (records as u64, records as u64, 0)
        );
    }
}

/// A stream of records through a small ring, consumed in batches, with
/// backpressure: nothing lost, every record in order, and far fewer
/// consumer wake-ups than records.
#[test]
fn batching_consumer_keeps_every_record_of_a_stream() {
    // Backpressure with a generous stall limit: a loaded machine may keep
    // the consumer off a CPU for a while.
    let m = ring(
        page() * 4,
        bpfjet_maps::ringbuf::BPFJET_RINGBUF_BACKPRESSURE | (10_000 << 32),
    );
    let total = 200_000u32;
    let producer = {
        let m = m.clone();
        std::thread::spawn(move || {
            for i in 0..total {
                assert!(submit(&m, &i.to_le_bytes(), 0), "record {i} dropped");
            }
        })
    };
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    let (mut next, mut polls) = (0u32, 0u32);
    while next < total {
        c.poll_batched(
            |r| {
                assert_eq!(u32::from_le_bytes(r.try_into().unwrap()), next);
                next += 1;
            },
            Duration::from_millis(1),
        );
        polls += 1;
    }
    producer.join().unwrap();
    let s = c.stats();
    assert_eq!(
        (s.produced, s.consumed, s.dropped),
        (total as u64, total as u64, 0)
    );
    assert!(polls < total / 10, "{polls} batches for {total} records");
}

#[test]
fn wakeup_fd_is_epollable_and_level_like() {
    let m = ring(page(), 0);
    let c = RingbufConsumer::new(m.clone()).unwrap();
    let w = c.wakeup_fd().unwrap();
    // SAFETY: plain epoll calls on fds we own.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 7,
        };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, w.fd(), &mut ev), 0);
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 1];
        w.rearm();
        assert_eq!(
            libc::epoll_wait(ep, out.as_mut_ptr(), 1, 20),
            0,
            "empty ring"
        );
        let producer = {
            let m = m.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                assert!(submit(&m, b"x", 0));
            })
        };
        assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 1, 5000), 1, "woken");
        assert_eq!({ out[0].u64 }, 7);
        producer.join().unwrap();
        // Not consumed yet: still ready after a rearm (level semantics).
        w.rearm();
        assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 1, 0), 1);
        let mut c = RingbufConsumer::new(m.clone()).unwrap();
        assert_eq!(c.poll(|_| {}), 1);
        w.rearm();
        assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 1, 0), 0, "drained");
        libc::close(ep);
    }
}

#[test]
fn backpressure_loses_nothing_with_a_slow_consumer() {
    let bp = bpfjet_maps::ringbuf::BPFJET_RINGBUF_BACKPRESSURE | (2000 << 32);
    let m = ring(page(), bp);
    assert_eq!(
        m.ringbuf_backpressure(),
        Some(Backpressure {
            stall_limit: Duration::from_secs(2)
        })
    );
    const N: u64 = 5_000;
    let consumer = {
        let m = m.clone();
        std::thread::spawn(move || {
            let mut c = RingbufConsumer::new(m).unwrap();
            let mut next = 0u64;
            while next < N {
                c.poll_blocking(
                    |r| {
                        assert_eq!(u64::from_le_bytes(r[..8].try_into().unwrap()), next);
                        next += 1;
                        if next.is_multiple_of(500) {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    },
                    Some(Duration::from_millis(100)),
                );
            }
        })
    };
    for i in 0..N {
        let mut rec = [0u8; 100];
        rec[..8].copy_from_slice(&i.to_le_bytes());
        assert!(
            submit(&m, &rec, 0),
            "record {i} dropped in backpressure mode"
        );
    }
    consumer.join().unwrap();
    let st = m.ringbuf_stats().unwrap();
    assert_eq!((st.produced, st.consumed, st.dropped), (N, N, 0));
}

#[test]
fn backpressure_without_a_consumer_waits_once_then_drops() {
    let m = ring(page(), 0);
    m.set_ringbuf_backpressure(Some(Backpressure {
        stall_limit: Duration::from_secs(1),
    }))
    .unwrap();
    let rec = [0u8; 56];
    let t = Instant::now();
    while submit(&m, &rec, 0) {}
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "waited the stall limit"
    );
    // The ring is now marked stalled, so the next ones fail at once (were
    // they to wait, 100 of them would take 100 s).
    let t = Instant::now();
    for _ in 0..100 {
        assert!(!submit(&m, &rec, 0));
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(m.ringbuf_stats().unwrap().dropped, 101);
    // A consumer moving again lifts the mark.
    let mut c = RingbufConsumer::new(m.clone()).unwrap();
    c.poll(|_| {});
    assert!(submit(&m, &rec, 0));
}

#[test]
fn map_extra_bits_bpfjet_does_not_know_are_refused() {
    let mut spec = MapSpec::new("rb", MapType::Ringbuf, 0, 0, page() as u32);
    spec.map_extra = 2;
    assert!(Map::create_anonymous(&spec, &MapOptions::default()).is_err());
}

#[test]
fn kernel_mmap_offsets_map_to_the_object() {
    let p = page();
    let size = 4 * p;
    let m = ring(size, 0);
    // libbpf: consumer page RW at 0, then producer page + data twice RO.
    let cons = m.ringbuf_mmap_segments(0, p, true).unwrap();
    assert_eq!(cons.len(), 1);
    let rest = m
        .ringbuf_mmap_segments(p as u64, p + 2 * size, false)
        .unwrap();
    assert_eq!(
        rest,
        [
            MmapSegment {
                file_off: cons[0].file_off + p as u64,
                len: p + size
            },
            MmapSegment {
                file_off: cons[0].file_off + 2 * p as u64,
                len: size
            }
        ]
    );
    assert!(
        m.ringbuf_mmap_segments(p as u64, p, true).is_err(),
        "producer page RW"
    );
    assert!(
        m.ringbuf_mmap_segments(0, 2 * p, true).is_err(),
        "RW past consumer page"
    );
    assert!(
        m.ringbuf_mmap_segments(0, 3 * p + 2 * size, false).is_err(),
        "past the end"
    );
}

const CHILD_ENV: &str = "BPFJET_RINGBUF_TEST_CHILD";

/// The child's half of `a_consumer_in_another_process_is_woken`: block on
/// the ring of the parent's instance until its record arrives.
#[test]
fn child_blocking_consumer() {
    let Ok(instance) = std::env::var(CHILD_ENV) else {
        return;
    };
    let inst = bpfjet_maps::Instance::open(&instance).expect("open instance");
    let mut c = RingbufConsumer::new(inst.map_by_name("events").expect("ring")).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    c.poll_blocking(|r| got.push(r.to_vec()), Some(Duration::from_secs(20)));
    assert_eq!(got, [b"from the parent".to_vec()]);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "not woken: {:?}",
        t.elapsed()
    );
}

/// Producer and consumer in different processes: the futex wake-up in the
/// shared control page crosses the process boundary.
#[test]
fn a_consumer_in_another_process_is_woken() {
    let name = format!("t{}-rbwake", std::process::id());
    let inst = bpfjet_maps::Instance::create(&name, 1).expect("instance");
    let rb = inst
        .create_map(
            &MapSpec::new("events", MapType::Ringbuf, 0, 0, page() as u32),
            &MapOptions::default(),
        )
        .expect("ring");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_blocking_consumer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &name)
        .spawn()
        .expect("spawn child");
    // Give the child time to start and go to sleep on the ring: if the
    // wake-up did not cross processes it would sleep its full 20 s.
    std::thread::sleep(Duration::from_millis(500));
    assert!(submit(&rb, b"from the parent", 0));
    assert!(child.wait().unwrap().success(), "child consumer failed");
}
