//! USER_RINGBUF: the kernel-side consumer (`bpf_user_ringbuf_drain`'s
//! peek and release: empty, busy, discarded, wrapping and stopping
//! records, the per-call limit, one drain at a time), libbpf's producer
//! semantics, wake-ups of blocked producers (futex and epoll), and the
//! kernel's mmap rules for a user ring.

use bpfjet_maps::ringbuf::{BPF_MAX_USER_RINGBUF_SAMPLES, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP};
use bpfjet_maps::{Map, MapError, MapOptions, MapSpec, MapType, UserRingbufProducer, WakeupFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn user_ring(size: usize) -> Arc<Map> {
    let spec = MapSpec::new("urb", MapType::UserRingbuf, 0, 0, size as u32);
    Arc::new(Map::create_anonymous(&spec, &MapOptions::default()).expect("create user ringbuf"))
}

/// Drain with a callback that records samples; `stop_after` samples make
/// it return 1.
fn drain(m: &Map, flags: u64, stop_after: Option<usize>) -> (i64, Vec<Vec<u8>>) {
    let mut got = Vec::new();
    let r = m
        .user_ringbuf_drain(flags, |p, n| {
            // SAFETY: the sample is valid during the call.
            got.push(unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec());
            Ok::<u64, ()>(u64::from(stop_after == Some(got.len())))
        })
        .unwrap();
    (r, got)
}

fn sample(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

#[test]
fn create_follows_the_kernel() {
    let p = page() as u32;
    let ok = |n: u32, extra: u64, flags: u32| {
        let mut s = MapSpec::new("u", MapType::UserRingbuf, 0, 0, n);
        s.map_extra = extra;
        s.flags = flags;
        Map::create_anonymous(&s, &MapOptions::default()).map_err(|e| e.errno())
    };
    assert!(ok(p, 0, 0).is_ok());
    assert_eq!(
        ok(3 * p, 0, 0).err(),
        Some(libc::EINVAL),
        "not a power of 2"
    );
    assert_eq!(
        ok(p / 2, 0, 0).err(),
        Some(libc::EINVAL),
        "not a page multiple"
    );
    assert_eq!(ok(p, 1, 0).err(), Some(libc::EINVAL), "map_extra");
    assert_eq!(ok(p, 0, 1).err(), Some(libc::EINVAL), "flags");
    let mut s = MapSpec::new("u", MapType::UserRingbuf, 4, 0, p);
    assert!(
        Map::create_anonymous(&s, &MapOptions::default()).is_err(),
        "key"
    );
    s.key_size = 0;
    s.value_size = 8;
    assert!(
        Map::create_anonymous(&s, &MapOptions::default()).is_err(),
        "value"
    );
}

#[test]
fn empty_ring_drains_nothing() {
    let m = user_ring(page());
    assert_eq!(drain(&m, 0, None), (0, vec![]));
    assert_eq!(drain(&m, BPF_RB_FORCE_WAKEUP, None).0, 0);
}

#[test]
fn samples_of_every_size_in_order() {
    let m = user_ring(page());
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    let sizes = [0usize, 1, 7, 8, 9, 100, 3];
    for (i, &n) in sizes.iter().enumerate() {
        p.push(&sample(i, n)).unwrap();
    }
    let (_, prod) = p.positions();
    let want: u64 = sizes.iter().map(|&n| (n as u64 + 8).div_ceil(8) * 8).sum();
    assert_eq!(prod, want, "8-byte header, 8-aligned records");
    let (r, got) = drain(&m, 0, None);
    assert_eq!(r, sizes.len() as i64);
    let expect: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| sample(i, n))
        .collect();
    assert_eq!(got, expect);
    assert_eq!(
        p.positions(),
        (prod, prod),
        "released with the rounded size"
    );
}

#[test]
fn busy_record_ends_the_drain() {
    let m = user_ring(page());
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    p.push(b"first").unwrap();
    let s = p.reserve(4).unwrap();
    s.copy_from_slice(b"busy");
    let busy = s.as_mut_ptr();
    p.push(b"after").unwrap();
    let (r, got) = drain(&m, 0, None);
    assert_eq!((r, got), (1, vec![b"first".to_vec()]));
    assert_eq!(
        drain(&m, 0, None).0,
        0,
        "still busy: -ENODATA, nothing drained"
    );
    // SAFETY: reserved above, not committed.
    unsafe { p.submit(busy) };
    let (r, got) = drain(&m, 0, None);
    assert_eq!((r, got), (2, vec![b"busy".to_vec(), b"after".to_vec()]));
}

#[test]
fn discarded_records_are_skipped_and_not_counted() {
    let m = user_ring(page());
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    for i in 0..5 {
        let s = p.reserve(10 + i).unwrap();
        s.fill(i as u8);
        let ptr = s.as_mut_ptr();
        // SAFETY: reserved just above.
        unsafe {
            if i % 2 == 1 {
                p.discard(ptr)
            } else {
                p.submit(ptr)
            }
        }
    }
    let (r, got) = drain(&m, 0, None);
    assert_eq!(r, 3);
    assert_eq!(got.iter().map(|g| g[0]).collect::<Vec<_>>(), [0, 2, 4]);
    let (c, pr) = p.positions();
    assert_eq!(c, pr);
    // Only discarded records: released, 0 returned.
    let s = p.reserve(1).unwrap();
    let ptr = s.as_mut_ptr();
    // SAFETY: reserved just above.
    unsafe { p.discard(ptr) };
    assert_eq!(drain(&m, 0, None), (0, vec![]));
    let (c, pr) = p.positions();
    assert_eq!(c, pr, "the discarded record was released");
}

#[test]
fn callback_returning_one_stops_after_its_sample() {
    let m = user_ring(page());
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    for i in 0..4 {
        p.push(&sample(i, 16)).unwrap();
    }
    let (r, got) = drain(&m, 0, Some(2));
    assert_eq!(r, 2, "the stopping sample counts");
    assert_eq!(got, [sample(0, 16), sample(1, 16)]);
    let (r, got) = drain(&m, 0, None);
    assert_eq!((r, got), (2, vec![sample(2, 16), sample(3, 16)]));
}

#[test]
fn records_wrap_around_the_end_contiguously() {
    let size = page();
    let m = user_ring(size);
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    let mut total = 0usize;
    // Round after round of odd sizes: positions go far past the ring size
    // and records straddle its end.
    for round in 0..40 {
        let n = 100 + (round * 37) % 900;
        let mut pushed = Vec::new();
        while p.push(&sample(total, n)).is_ok() {
            pushed.push(sample(total, n));
            total += 1;
        }
        assert!(!pushed.is_empty());
        assert_eq!(
            p.reserve(n as u32).err().map(|e| e.errno()),
            Some(libc::ENOSPC)
        );
        let (r, got) = drain(&m, 0, None);
        assert_eq!(r, pushed.len() as i64);
        assert_eq!(got, pushed, "round {round}");
    }
    let (c, pr) = p.positions();
    assert_eq!(c, pr);
    assert!(pr > 10 * size as u64);
}

#[test]
fn producer_errors_are_libbpfs() {
    let size = page();
    let m = user_ring(size);
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    let e = |r: Result<&mut [u8], MapError>| r.err().map(|e| e.errno());
    assert_eq!(e(p.reserve(1 << 31)), Some(libc::E2BIG), "BUSY bit");
    assert_eq!(e(p.reserve(1 << 30)), Some(libc::E2BIG), "DISCARD bit");
    assert_eq!(
        e(p.reserve(size as u32 - 7)),
        Some(libc::E2BIG),
        "record > ring"
    );
    // A record of exactly the ring size fits an empty ring.
    let s = p.reserve(size as u32 - 8).unwrap();
    let ptr = s.as_mut_ptr();
    assert_eq!(e(p.reserve(0)), Some(libc::ENOSPC));
    // SAFETY: reserved above.
    unsafe { p.submit(ptr) };
    assert_eq!(drain(&m, 0, None).0, 1);
    assert!(UserRingbufProducer::new(Arc::new(
        Map::create_anonymous(
            &MapSpec::new("rb", MapType::Ringbuf, 0, 0, size as u32),
            &MapOptions::default()
        )
        .unwrap()
    ))
    .is_err());
}

#[test]
fn flags_and_one_drain_at_a_time() {
    let m = user_ring(page());
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    p.push(b"x").unwrap();
    assert_eq!(drain(&m, 4, None).0, -libc::EINVAL as i64);
    assert_eq!(
        drain(&m, BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP, None).0,
        1,
        "both wake-up flags are accepted (the kernel since 6.1)"
    );
    p.push(b"y").unwrap();
    let mut inner = 0;
    let r = m
        .user_ringbuf_drain(0, |_, _| {
            inner = m.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(0)).unwrap();
            Ok::<u64, ()>(0)
        })
        .unwrap();
    assert_eq!((r, inner), (1, -libc::EBUSY as i64));
    let ring = Map::create_anonymous(
        &MapSpec::new("rb", MapType::Ringbuf, 0, 0, page() as u32),
        &MapOptions::default(),
    )
    .unwrap();
    assert_eq!(drain(&ring, 0, None).0, -libc::EINVAL as i64, "a RINGBUF");
}

#[test]
fn at_most_the_kernels_limit_per_call() {
    // Zero-byte samples take 8 bytes each: 1 MiB of ring holds the limit.
    let m = user_ring(2 << 20);
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    let n = BPF_MAX_USER_RINGBUF_SAMPLES + 10;
    for i in 0..n {
        // Every 1000th discarded: they count towards the limit.
        let s = p.reserve(0).unwrap();
        let ptr = s.as_mut_ptr();
        // SAFETY: reserved just above.
        unsafe {
            if i % 1000 == 0 {
                p.discard(ptr)
            } else {
                p.submit(ptr)
            }
        }
    }
    let discarded_in_limit = BPF_MAX_USER_RINGBUF_SAMPLES.div_ceil(1000);
    let r = m.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(0)).unwrap();
    assert_eq!(
        r as u64,
        BPF_MAX_USER_RINGBUF_SAMPLES - discarded_in_limit,
        "BPF_MAX_USER_RINGBUF_SAMPLES records looked at"
    );
    let r = m.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(0)).unwrap();
    assert_eq!(r, 10, "the rest (none discarded: 131072..131082)");
}

#[test]
fn blocking_producer_is_woken_by_a_drain() {
    let size = page();
    let m = user_ring(size);
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    while p.push(&[7; 200]).is_ok() {}
    let t0 = Instant::now();
    assert_eq!(
        p.reserve_blocking(200, Some(Duration::from_millis(50)))
            .err()
            .map(|e| e.errno()),
        Some(libc::ENOSPC),
        "times out on a full ring"
    );
    assert!(t0.elapsed() >= Duration::from_millis(50));
    let m2 = m.clone();
    let drainer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        m2.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(0)).unwrap()
    });
    let t0 = Instant::now();
    let s = p.reserve_blocking(200, None).expect("woken by the drain");
    let ptr = s.as_mut_ptr();
    // SAFETY: reserved just above.
    unsafe { p.submit(ptr) };
    let dn = drainer.join().unwrap();
    assert!(dn > 0);
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(drain(&m, 0, None).0, 1);
}

fn epoll_ready(epfd: i32, w: &WakeupFd, timeout_ms: i32) -> Vec<u32> {
    w.rearm();
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
    // SAFETY: a valid epoll fd and event buffer.
    let n = unsafe { libc::epoll_wait(epfd, ev.as_mut_ptr(), 4, timeout_ms) };
    assert!(n >= 0);
    ev[..n as usize].iter().map(|e| e.events).collect()
}

#[test]
fn epoll_reports_writable_while_there_is_room() {
    let size = page();
    let m = user_ring(size);
    let mut p = UserRingbufProducer::new(m.clone()).unwrap();
    let w = WakeupFd::new(m.clone()).unwrap();
    assert!(w.signals_writable());
    // SAFETY: plain epoll calls on fds we own.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLOUT as u32,
        u64: 42,
    };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, w.fd(), &mut ev) },
        0
    );
    assert_eq!(epoll_ready(epfd, &w, 0), [libc::EPOLLOUT as u32], "empty");
    // Fill to the last byte: 4096 / 16-byte records.
    while p.push(&[1; 8]).is_ok() {}
    assert_eq!(p.positions().1, size as u64);
    assert_eq!(epoll_ready(epfd, &w, 0), Vec::<u32>::new(), "full");
    // A drain in another thread makes it writable while epoll_wait sleeps.
    let m2 = m.clone();
    let drainer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        m2.user_ringbuf_drain(0, |_, _| Ok::<u64, ()>(1)).unwrap()
    });
    let t0 = Instant::now();
    assert_eq!(epoll_ready(epfd, &w, 5000), [libc::EPOLLOUT as u32]);
    assert!(t0.elapsed() >= Duration::from_millis(50));
    assert_eq!(drainer.join().unwrap(), 1);
    // NO_WAKEUP: room made, no wake-up; a level-triggered re-check sees it.
    while p.push(&[1; 8]).is_ok() {}
    assert_eq!(epoll_ready(epfd, &w, 0), Vec::<u32>::new());
    assert_eq!(
        m.user_ringbuf_drain(BPF_RB_NO_WAKEUP, |_, _| Ok::<u64, ()>(1))
            .unwrap(),
        1
    );
    assert_eq!(epoll_ready(epfd, &w, 0), [libc::EPOLLOUT as u32]);
    // SAFETY: our epoll fd.
    unsafe { libc::close(epfd) };
}

#[test]
fn kernel_mmap_rules_of_a_user_ring() {
    let p = page();
    let size = 4 * p;
    let m = user_ring(size);
    let errno = |r: Result<_, MapError>| r.err().map(|e| e.errno());
    // libbpf: consumer page read-only at 0, producer page + data twice
    // read-write at one page.
    assert_eq!(
        errno(m.ringbuf_mmap_segments(0, p, true)),
        Some(libc::EPERM),
        "consumer page writable"
    );
    assert_eq!(
        errno(m.ringbuf_mmap_segments(0, 2 * p, true)),
        Some(libc::EPERM)
    );
    let cons = m.ringbuf_mmap_segments(0, p, false).unwrap();
    let rest = m
        .ringbuf_mmap_segments(p as u64, p + 2 * size, true)
        .unwrap();
    assert_eq!(rest.len(), 2);
    assert_eq!(rest[0].file_off, cons[0].file_off + p as u64);
    assert_eq!(rest[1].file_off, rest[0].file_off + p as u64, "data again");
    assert!(m.ringbuf_mmap_segments(0, 2 * p + 2 * size, false).is_ok());
    assert_eq!(
        errno(m.ringbuf_mmap_segments(p as u64, p + 2 * size + p, true)),
        Some(libc::EINVAL),
        "beyond the mirror"
    );
}
