//! A `BPF_PROG_TYPE_PERF_EVENT` program on a `cpu-clock` event of every
//! process (bpftrace's `interval`) through both backends: the kernel runs
//! it at the timer's overflows, bpfjet on a timer thread in this process
//! (crates/server/src/perf_timers.rs). The same steps on each — created
//! disabled, linked with `PERF_EVENT_IOC_SET_BPF`, enabled, disabled,
//! closed — must count the same way: nothing while disabled, about one
//! run per period while enabled, nothing once the event is gone.

mod common;
use common::insn;
use common::run;

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{Backend, Command, Errno, KernelBackend, MapCreate, MapElem, ProgLoad};
use std::time::Duration;

const PERF_EVENT: u32 = 7;
const ARRAY: u32 = 2;
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_DISABLE: u64 = 0x2401;
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;
/// The timer's period: 10 ms.
const PERIOD_NS: u64 = 10_000_000;

/// `counter[0] += 1` (atomically), and `bpf_get_current_pid_tgid()` first
/// when `observes_task`.
fn count_runs(map_fd: i32, observes_task: bool) -> Vec<u64> {
    let mut p = Vec::new();
    if observes_task {
        p.push(insn(0x85, 0, 0, 0, 14)); // call bpf_get_current_pid_tgid
    }
    p.extend([
        insn(0x62, 10, 0, -4, 0),    // *(u32 *)(r10 - 4) = 0
        insn(0x18, 1, 1, 0, map_fd), // r1 = map (BPF_PSEUDO_MAP_FD)
        insn(0x00, 0, 0, 0, 0),      //
        insn(0xbf, 2, 10, 0, 0),     // r2 = r10
        insn(0x07, 2, 0, 0, -4),     // r2 += -4
        insn(0x85, 0, 0, 0, 1),      // call bpf_map_lookup_elem
        insn(0x15, 0, 0, 2, 0),      // if r0 == 0 goto +2
        insn(0xb7, 1, 0, 0, 1),      // r1 = 1
        insn(0xdb, 0, 1, 0, 0),      // lock *(u64 *)(r0 + 0) += r1
        insn(0xb7, 0, 0, 0, 0),      // r0 = 0
        insn(0x95, 0, 0, 0, 0),      // exit
    ]);
    p
}

/// `struct perf_event_attr` (VER7, 128 bytes) of a cpu-clock event with a
/// period, created disabled.
fn cpu_clock_attr() -> [u8; 128] {
    let mut a = [0u8; 128];
    a[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    a[4..8].copy_from_slice(&128u32.to_ne_bytes());
    a[8..16].copy_from_slice(&0u64.to_ne_bytes()); // PERF_COUNT_SW_CPU_CLOCK
    a[16..24].copy_from_slice(&PERIOD_NS.to_ne_bytes()); // sample_period
    a[40..48].copy_from_slice(&1u64.to_ne_bytes()); // disabled
    a
}

/// How each backend opens, controls and closes the event.
struct Events<'a> {
    open: &'a dyn Fn(&[u8; 128]) -> i32,
    ioctl: &'a dyn Fn(i32, u64, u64) -> Result<i64, Errno>,
    close: &'a dyn Fn(i32),
}

fn counter(backend: &dyn Backend, map: i64) -> u64 {
    let key = 0u32.to_ne_bytes();
    let mut value = [0u8; 8];
    run(
        backend,
        Command::MapLookupElem(MapElem {
            map_fd: map as u32,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            flags: 0,
        }),
    )
    .expect("the counter");
    u64::from_ne_bytes(value)
}

/// The counts at each step: (while disabled, after 400 ms enabled, 300 ms
/// after the disable, 300 ms after the close) and the SET_BPF result of a
/// program that reads the current task.
fn sequence(backend: &dyn Backend, ev: &Events) -> ([u64; 4], Result<i64, Errno>) {
    let map = run(
        backend,
        Command::MapCreate(MapCreate {
            map_type: ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: 1,
            name: "runs".into(),
            ..MapCreate::default()
        }),
    )
    .expect("an array");
    let load = |insns: &[u64]| {
        let license = c"GPL";
        run(
            backend,
            Command::ProgLoad(ProgLoad {
                prog_type: PERF_EVENT,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                name: "tick".into(),
                ..ProgLoad::default()
            }),
        )
        .expect("the perf_event program loads")
    };
    let prog = load(&count_runs(map as i32, false));
    let attr = cpu_clock_attr();
    let fd = (ev.open)(&attr);
    assert!(
        fd >= 0,
        "a cpu-clock event: {}",
        std::io::Error::last_os_error()
    );
    (ev.ioctl)(fd, PERF_EVENT_IOC_SET_BPF, prog as u64).expect("SET_BPF");
    std::thread::sleep(Duration::from_millis(200));
    let disabled = counter(backend, map);
    (ev.ioctl)(fd, PERF_EVENT_IOC_ENABLE, 0).expect("ENABLE");
    std::thread::sleep(Duration::from_millis(400));
    (ev.ioctl)(fd, PERF_EVENT_IOC_DISABLE, 0).expect("DISABLE");
    let enabled = counter(backend, map);
    std::thread::sleep(Duration::from_millis(300));
    let after_disable = counter(backend, map);
    (ev.ioctl)(fd, PERF_EVENT_IOC_ENABLE, 0).expect("ENABLE");
    (ev.close)(fd);
    let closed = counter(backend, map);
    std::thread::sleep(Duration::from_millis(300));
    let after_close = counter(backend, map);

    let task = load(&count_runs(map as i32, true));
    let fd2 = (ev.open)(&attr);
    let set = (ev.ioctl)(fd2, PERF_EVENT_IOC_SET_BPF, task as u64);
    (ev.close)(fd2);
    (
        [
            disabled,
            enabled,
            after_disable - enabled,
            after_close - closed,
        ],
        set,
    )
}

fn check(side: &str, counts: [u64; 4]) {
    let [disabled, enabled, after_disable, after_close] = counts;
    assert_eq!(disabled, 0, "{side}: runs while the event was disabled");
    // 400 ms at 10 ms: 40 overflows; a loaded 2-CPU machine may delay some.
    assert!(
        (15..=45).contains(&enabled),
        "{side}: {enabled} runs in 400 ms of a 10 ms timer"
    );
    assert!(
        after_disable <= 1,
        "{side}: {after_disable} runs after the disable"
    );
    assert!(
        after_close <= 1,
        "{side}: {after_close} runs after the close"
    );
}

#[test]
fn a_timer_program_runs_while_enabled_as_on_the_kernel() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bpfjet_testsupport::report_skip("a cpu-clock event of every process needs root");
        return;
    }
    let kernel_open = |attr: &[u8; 128]| {
        // SAFETY: a valid attr; every process on CPU 0, as bpftrace's interval.
        unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), -1, 0, -1, 8) as i32 }
    };
    // A machine whose kernel refuses system-wide perf events even to root
    // (perf_event_paranoid with a capability-less root) cannot compare.
    let probe = cpu_clock_attr();
    let fd = kernel_open(&probe);
    if fd < 0 {
        bpfjet_testsupport::report_skip(format!(
            "perf_event_open of a cpu-clock event: {}",
            std::io::Error::last_os_error()
        ));
        return;
    }
    // SAFETY: closing the fd just opened.
    unsafe { libc::close(fd) };
    let kernel_ioctl = |fd: i32, request: u64, arg: u64| {
        // SAFETY: an ioctl of a perf event fd this test opened.
        let r = unsafe { libc::ioctl(fd, request as libc::c_ulong, arg) };
        if r < 0 {
            Err(Errno(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ))
        } else {
            Ok(i64::from(r))
        }
    };
    let kernel_close = |fd: i32| {
        // SAFETY: closing an fd this test opened.
        unsafe { libc::close(fd) };
    };
    let (kernel, kernel_task) = sequence(
        &KernelBackend,
        &Events {
            open: &kernel_open,
            ioctl: &kernel_ioctl,
            close: &kernel_close,
        },
    );
    check("kernel", kernel);
    assert!(
        kernel_task.is_ok(),
        "the kernel links a task-reading program"
    );

    let run_dir = std::env::temp_dir().join(format!("bpfjet-perf-timer-{}", std::process::id()));
    let name = format!("perftimer{}", std::process::id());
    let jet = BpfjetBackend::new(Namespace::open(&name, &run_dir).expect("namespace"));
    let jet_open = |attr: &[u8; 128]| {
        jet.perf_event_open(attr.as_ptr() as u64, -1, 0, -1, 8)
            .expect("a cpu-clock event is kept by bpfjet")
            .expect("opened") as i32
    };
    let jet_ioctl = |fd: i32, request: u64, arg: u64| match jet.perf_event_ioctl(fd, request, arg) {
        Some(r) => r,
        // The kernel's own event: enable and disable reach it.
        None => kernel_ioctl(fd, request, arg),
    };
    let jet_close = |fd: i32| {
        let taken = jet.take_fd(fd);
        kernel_close(fd);
        if let Some(r) = taken {
            jet.release(r);
        }
    };
    let (ours, our_task) = sequence(
        &jet,
        &Events {
            open: &jet_open,
            ioctl: &jet_ioctl,
            close: &jet_close,
        },
    );
    jet.release_all();
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = bpfjet_maps::Instance::remove_stale(&name);
    check("bpfjet", ours);
    // A program that reads the interrupted task is linked as the kernel
    // links it, as a sampling profiler of the traced processes (no timer
    // here: docs/TRACING.md, "Sampling").
    assert!(
        our_task.is_ok(),
        "bpfjet links a task-reading program: {our_task:?}"
    );
    eprintln!("runs in 400 ms: kernel {}, bpfjet {}", kernel[1], ours[1]);
}
