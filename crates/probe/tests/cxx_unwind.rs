//! A C++ exception thrown through a function with a return probe: the
//! unwinder guard puts the return address back before the unwinder walks
//! the stack, so the exception is caught where the program catches it
//! instead of ending in std::terminate.

use bpfjet_probe::symbols::{loaded_objects, resolve, UprobeTarget};
use bpfjet_probe::{attach, unwind, PtRegs};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[test]
fn exception_through_a_hooked_return_is_caught() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("probe-cxx");
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libthrower.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/thrower.cc");
    let out = Command::new("g++")
        .args(["-O1", "-g", "-fPIC", "-shared", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("running g++");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = std::ffi::CString::new(lib.to_str().unwrap()).unwrap();
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
    assert!(!h.is_null());
    let catcher: extern "C" fn(i32) -> i32 =
        unsafe { std::mem::transmute(libc::dlsym(h, c"catcher".as_ptr())) };

    let objects = loaded_objects();
    let _guard = unwind::attach_guard(&objects).unwrap();
    assert_eq!(_guard.len(), 2, "libgcc_s's unwinder entries");
    let t = UprobeTarget::parse(&format!("{}:thrower", lib.display())).unwrap();
    let entries = Arc::new(AtomicU64::new(0));
    let returns = Arc::new(AtomicU64::new(0));
    let (e, r) = (entries.clone(), returns.clone());
    let _probe = attach(
        &resolve(&t, &objects).unwrap(),
        Some(Box::new(move |_: &mut PtRegs| {
            e.fetch_add(1, Ordering::Relaxed);
        })),
        Some(Box::new(move |_: &mut PtRegs| {
            r.fetch_add(1, Ordering::Relaxed);
        })),
    )
    .unwrap();
    for i in 0..100 {
        assert_eq!(catcher(i), 2 * i + 1);
        assert_eq!(catcher(-1 - i), -1);
    }
    assert_eq!(entries.load(Ordering::Relaxed), 200);
    // The throwing calls never return; the others do, each seen once.
    assert_eq!(returns.load(Ordering::Relaxed), 100);
    assert_eq!(bpfjet_probe::uprobe::shadow_depth(), 0);
}
