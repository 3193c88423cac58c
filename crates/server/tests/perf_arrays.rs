//! PERF_EVENT_ARRAY elements through both backends — the kernel's `bpf()`
//! with kernel `PERF_COUNT_SW_BPF_OUTPUT` events, bpfjet's with the perf
//! output events it serves under `bpfjet exec` — compared step by step:
//! the kernel's rules for updates, deletes, lookups and key walks.

mod common;
use common::run;

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{Backend, Command, Errno, KernelBackend, MapCreate, MapElem};

const PERF_EVENT_ARRAY: u32 = 4;

/// `struct perf_event_attr` for a BPF output event (size 128: VER7).
fn bpf_output_attr() -> [u8; 128] {
    let mut a = [0u8; 128];
    a[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    a[4..8].copy_from_slice(&128u32.to_ne_bytes());
    a[8..16].copy_from_slice(&10u64.to_ne_bytes()); // PERF_COUNT_SW_BPF_OUTPUT
    a[24..32].copy_from_slice(&(1u64 << 10).to_ne_bytes()); // PERF_SAMPLE_RAW
    a[48..52].copy_from_slice(&1u32.to_ne_bytes()); // wakeup_events
    a
}

fn elem(
    backend: &dyn Backend,
    make: fn(MapElem) -> Command,
    fd: i64,
    key: u32,
    value: Option<u32>,
    flags: u64,
) -> (Result<i64, Errno>, Vec<u8>) {
    let k = key.to_ne_bytes();
    let mut v = value.unwrap_or(0).to_ne_bytes();
    let lookup = matches!(make(MapElem::default()), Command::MapLookupElem(_));
    let r = run(
        backend,
        make(MapElem {
            map_fd: fd as u32,
            key: k.as_ptr() as u64,
            // A delete has no value (its attr ends at the key).
            value: if value.is_some() || lookup {
                v.as_mut_ptr() as u64
            } else {
                0
            },
            flags,
        }),
    );
    (r, v.to_vec())
}

/// The steps on one backend; `open_event` opens a BPF output event.
fn sequence(backend: &dyn Backend, open_event: &dyn Fn() -> i32) -> Vec<(String, String)> {
    let mut steps = Vec::new();
    let mut note = |what: &str, r: Result<i64, Errno>, out: Option<Vec<u8>>| {
        steps.push((what.to_string(), format!("{:?} {:?}", r.map(|_| ()), out)));
    };
    let fd = run(
        backend,
        Command::MapCreate(MapCreate {
            map_type: PERF_EVENT_ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 4,
            name: "perf_array".into(),
            ..MapCreate::default()
        }),
    )
    .expect("a perf event array");
    let event = open_event();
    assert!(event >= 0, "a BPF output event");
    // SAFETY: opening /dev/null for a non-perf fd.
    let file = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    let ev = event as u32;
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 0, Some(ev), 0);
    note("update 0 = event (BPF_ANY)", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 1, Some(ev), 0);
    note("update 1 = the same event", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 2, Some(ev), 1);
    note("update 2 BPF_NOEXIST", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 2, Some(ev), 2);
    note("update 2 BPF_EXIST", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 4, Some(ev), 0);
    note("update past the end", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 2, Some(9999), 0);
    note("update with a closed fd", r, None);
    let (r, _) = elem(backend, Command::MapUpdateElem, fd, 2, Some(file as u32), 0);
    note("update with a file that is no perf event", r, None);
    let (r, out) = elem(backend, Command::MapLookupElem, fd, 0, None, 0);
    note("lookup 0", r, r.is_ok().then_some(out));
    let mut key = u32::MAX;
    for i in 0..6 {
        let k = key.to_ne_bytes();
        let mut next = [0u8; 4];
        let r = run(
            backend,
            Command::MapGetNextKey(MapElem {
                map_fd: fd as u32,
                key: if i == 0 { 0 } else { k.as_ptr() as u64 },
                value: next.as_mut_ptr() as u64,
                flags: 0,
            }),
        );
        note(&format!("next key {i}"), r, Some(next.to_vec()));
        if r.is_err() {
            break;
        }
        key = u32::from_ne_bytes(next);
    }
    let (r, _) = elem(backend, Command::MapDeleteElem, fd, 0, None, 0);
    note("delete 0", r, None);
    let (r, _) = elem(backend, Command::MapDeleteElem, fd, 0, None, 0);
    note("delete 0 again", r, None);
    let (r, _) = elem(backend, Command::MapDeleteElem, fd, 3, None, 0);
    note("delete an empty element", r, None);
    let (r, _) = elem(backend, Command::MapDeleteElem, fd, 4, None, 0);
    note("delete past the end", r, None);
    // SAFETY: our fds.
    unsafe {
        libc::close(file);
        libc::close(event);
        libc::close(fd as i32);
    }
    steps
}

#[test]
fn perf_event_array_elements_match_the_kernel() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bpfjet_testsupport::report_skip("the kernel backend needs root");
        return;
    }
    let attr = bpf_output_attr();
    let kernel = sequence(&KernelBackend, &|| {
        // SAFETY: a valid attr; pid -1 with cpu 0, as perf buffer readers.
        unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                -1,
                0,
                -1,
                8, // PERF_FLAG_FD_CLOEXEC
            ) as i32
        }
    });
    let run_dir = std::env::temp_dir().join(format!("bpfjet-perf-arrays-{}", std::process::id()));
    let name = format!("perfarrays{}", std::process::id());
    let jet = BpfjetBackend::new(Namespace::open(&name, &run_dir).expect("namespace"));
    let ours = sequence(&jet, &|| {
        jet.perf_event_open(attr.as_ptr() as u64, -1, 0, -1, 0)
            .expect("a BPF output event is bpfjet's")
            .expect("opened") as i32
    });
    jet.release_all();
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = bpfjet_maps::Instance::remove_stale(&name);
    let differences: Vec<String> = kernel
        .iter()
        .zip(&ours)
        .filter(|(k, j)| k != j)
        .map(|(k, j)| format!("{}: kernel {}, bpfjet {}", k.0, k.1, j.1))
        .collect();
    assert_eq!(
        kernel.len(),
        ours.len(),
        "kernel {kernel:?}\nbpfjet {ours:?}"
    );
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}
