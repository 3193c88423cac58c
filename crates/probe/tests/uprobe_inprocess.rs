//! Entry and return probes attached in this test process to a C library
//! compiled at test time: direct calls, calls through the PLT, recursion,
//! 8 threads, longjmp. Every count is compared with the library's own count
//! of its calls.

use bpfjet_probe::symbols::{loaded_objects, resolve, UprobeTarget};
use bpfjet_probe::{attach, PtRegs};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

struct Lib {
    path: PathBuf,
    handle: *mut libc::c_void,
}
unsafe impl Send for Lib {}
unsafe impl Sync for Lib {}

/// Builds and dlopens the library once for all tests of this binary.
fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("probe-inprocess");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libprobed.so");
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/probed_lib.c");
        let out = Command::new("cc")
            .args(["-O1", "-g", "-fPIC", "-shared", "-o"])
            .arg(&path)
            .arg(&src)
            .output()
            .expect("running cc");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null());
        Lib { path, handle }
    })
}

fn sym<T: Copy>(name: &str) -> T {
    let c = std::ffi::CString::new(name).unwrap();
    let p = unsafe { libc::dlsym(lib().handle, c.as_ptr()) };
    assert!(!p.is_null(), "{name}");
    unsafe { std::mem::transmute_copy(&p) }
}

fn counter(name: &str) -> i64 {
    let p: *const i64 = sym(name);
    unsafe { std::ptr::read_volatile(p) }
}

fn target(symbol: &str) -> bpfjet_probe::ResolvedSymbol {
    let spec = format!("{}:{symbol}", lib().path.display());
    resolve(&UprobeTarget::parse(&spec).unwrap(), &loaded_objects()).unwrap()
}

// The probes of one test binary share the process: each test attaches to
// its own function, and attaching is serialized.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn direct_plt_and_threads_counted_exactly() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let entries = Arc::new(AtomicU64::new(0));
    let returns = Arc::new(AtomicU64::new(0));
    let arg_sum = Arc::new(AtomicU64::new(0));
    let ret_sum = Arc::new(AtomicU64::new(0));
    let (e, r, a, s) = (
        entries.clone(),
        returns.clone(),
        arg_sum.clone(),
        ret_sum.clone(),
    );
    let probe = attach(
        &target("add_one"),
        Some(Box::new(move |regs: &mut PtRegs| {
            e.fetch_add(1, Ordering::Relaxed);
            a.fetch_add(regs.arg(0) as u32 as u64, Ordering::Relaxed);
        })),
        Some(Box::new(move |regs: &mut PtRegs| {
            r.fetch_add(1, Ordering::Relaxed);
            s.fetch_add(regs.ret() as u32 as u64, Ordering::Relaxed);
        })),
    )
    .unwrap();
    let add_one: extern "C" fn(i32) -> i32 = sym("add_one");
    let via_plt: extern "C" fn(i32) -> i32 = sym("add_one_via_plt");
    let before = counter("add_one_calls");
    for i in 0..100 {
        assert_eq!(add_one(i), i + 1);
        assert_eq!(via_plt(i), 2 * (i + 1));
    }
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let add_one: extern "C" fn(i32) -> i32 = sym("add_one");
                let via_plt: extern "C" fn(i32) -> i32 = sym("add_one_via_plt");
                for i in 0..10_000 {
                    assert_eq!(add_one(i + t), i + t + 1);
                    assert_eq!(via_plt(i), 2 * (i + 1));
                }
                bpfjet_probe::uprobe::shadow_depth()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 0, "shadow stack left non-empty");
    }
    let calls = (counter("add_one_calls") - before) as u64;
    assert_eq!(calls, 200 + 8 * 20_000);
    assert_eq!(entries.load(Ordering::Relaxed), calls);
    assert_eq!(returns.load(Ordering::Relaxed), calls);
    assert_eq!(probe.missed(), 0);
    // Arguments and return values as seen through pt_regs.
    let mut want_args = 0u64;
    for i in 0..100u64 {
        want_args += 2 * i;
    }
    for t in 0..8u64 {
        for i in 0..10_000u64 {
            want_args += i + t + i;
        }
    }
    assert_eq!(arg_sum.load(Ordering::Relaxed), want_args);
    assert_eq!(ret_sum.load(Ordering::Relaxed), want_args + calls);
    probe.detach().unwrap();
    add_one(1);
    assert_eq!(
        entries.load(Ordering::Relaxed),
        calls,
        "detached probe still runs"
    );
}

#[test]
fn recursion_keeps_every_return() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let entries = Arc::new(AtomicU64::new(0));
    let returns = Arc::new(AtomicU64::new(0));
    let (e, r) = (entries.clone(), returns.clone());
    let probe = attach(
        &target("fib"),
        Some(Box::new(move |_: &mut PtRegs| {
            e.fetch_add(1, Ordering::Relaxed);
        })),
        Some(Box::new(move |_: &mut PtRegs| {
            r.fetch_add(1, Ordering::Relaxed);
        })),
    )
    .unwrap();
    let fib: extern "C" fn(i32) -> i64 = sym("fib");
    let before = counter("fib_calls");
    assert_eq!(fib(20), 6765);
    let calls = (counter("fib_calls") - before) as u64;
    assert_eq!(calls, 21891);
    assert_eq!(entries.load(Ordering::Relaxed), calls);
    assert_eq!(returns.load(Ordering::Relaxed), calls);
    assert_eq!(bpfjet_probe::uprobe::shadow_depth(), 0);
    probe.detach().unwrap();
}

#[test]
fn longjmp_out_of_hooked_frames() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let entries = Arc::new(AtomicU64::new(0));
    let returns = Arc::new(AtomicU64::new(0));
    let (e, r) = (entries.clone(), returns.clone());
    let probe = attach(
        &target("dive"),
        Some(Box::new(move |_: &mut PtRegs| {
            e.fetch_add(1, Ordering::Relaxed);
        })),
        Some(Box::new(move |_: &mut PtRegs| {
            r.fetch_add(1, Ordering::Relaxed);
        })),
    )
    .unwrap();
    let escape: extern "C" fn(i32) -> i32 = sym("dive_and_escape");
    let dive: extern "C" fn(i32) -> i32 = sym("dive");
    let before = counter("dive_calls");
    for round in 0..50 {
        assert_eq!(escape(10 + round % 7), -1);
        // Frames abandoned by longjmp are still recorded...
        assert!(bpfjet_probe::uprobe::shadow_depth() > 0);
        // ...until a later hooked call from a higher frame drops them.
    }
    let calls = (counter("dive_calls") - before) as u64;
    assert_eq!(entries.load(Ordering::Relaxed), calls);
    assert_eq!(
        returns.load(Ordering::Relaxed),
        0,
        "no frame returned normally"
    );
    // A normal call after the escapes: its return is seen, nothing stale
    // is left under it.
    let depth_0_calls = counter("dive_calls");
    std::thread::spawn(move || {
        // On a fresh thread: returns normally (depth 0 longjmps, so call
        // the C wrapper again there).
        assert_eq!(escape(3), -1);
    })
    .join()
    .unwrap();
    assert!(counter("dive_calls") > depth_0_calls);
    let _ = dive; // dive(0) would longjmp without a setjmp: not called directly
    probe.detach().unwrap();
}

#[test]
fn float_arguments_and_results_survive() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    let h2 = hits.clone();
    let probe = attach(
        &target("scale"),
        Some(Box::new(move |regs: &mut PtRegs| {
            // Rust floating-point work in the handler clobbers xmm registers.
            let x = (regs.rdi as f64).sqrt() * 3.5;
            h.fetch_add((x >= 0.0) as u64, Ordering::Relaxed);
        })),
        Some(Box::new(move |_: &mut PtRegs| {
            let y = std::hint::black_box(2.75f64).powf(1.5);
            h2.fetch_add((y > 4.0) as u64, Ordering::Relaxed);
        })),
    )
    .unwrap();
    let scale: extern "C" fn(f64, i32) -> f64 = sym("scale");
    for i in 0..1000 {
        assert_eq!(scale(1.5 + i as f64, 3), (1.5 + i as f64) * 3.0);
    }
    assert_eq!(hits.load(Ordering::Relaxed), 2000);
    probe.detach().unwrap();
}

#[test]
fn missing_symbol_is_a_clear_error() {
    let spec = format!("{}:no_such_fn", lib().path.display());
    let e = resolve(&UprobeTarget::parse(&spec).unwrap(), &loaded_objects()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("no_such_fn") && msg.contains("libprobed.so"),
        "{msg}"
    );
}
