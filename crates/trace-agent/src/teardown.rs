//! LLVM's exit-time destructors are not registered in a traced process.
//!
//! The JIT links LLVM, whose static objects (thousands of command-line
//! options, the pass registry) register destructors with `__cxa_atexit`
//! when the library is initialized. In the traced process they would run
//! at its exit, on its main thread, after its own exit handlers: a
//! thousand calls to `free` and more that a probe on libc's allocator
//! would count, which the kernel's probes never see (the tracer is another
//! process there). Freeing memory the kernel reclaims anyway is all they
//! do, so the agent (preloaded, its definition wins) drops registrations
//! whose object is LLVM's library or one only it needs (its dependency
//! closure, less the C and C++ runtimes and whatever the program's
//! executable needs itself: Debian's LLVM brings Z3, whose initialisers
//! register 767 destructors); every other registration goes to libc. A
//! library in that set that the program `dlopen`s later was initialised
//! for LLVM already: its exit handlers are the ones dropped.
//! Loaded into a running process (`bpfjet trace --pid`), the agent is not
//! first in the lookup order and LLVM registers with libc as usual.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

type CxaAtexit = unsafe extern "C" fn(
    Option<unsafe extern "C" fn(*mut c_void)>,
    *mut c_void,
    *mut c_void,
) -> c_int;

/// The runtimes a program shares with the agent: their registrations stay
/// (libstdc++'s flush `std::cout` for any C++ code the program runs).
const SHARED_RUNTIMES: &[&[u8]] = &[
    b"libc.so",
    b"libm.so",
    b"libstdc++.so",
    b"libgcc_s.so",
    b"ld-linux",
    b"libpthread.so",
    b"libdl.so",
    b"librt.so",
];

/// An ELF64 dynamic-section entry.
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

/// Loaded objects: (file name, the sonames it needs).
fn loaded_needs() -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
    unsafe extern "C" fn one(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> c_int {
        // SAFETY: the loader's record of one object, and our vector.
        let (info, out) = unsafe { (&*info, &mut *(out as *mut Vec<(Vec<u8>, Vec<Vec<u8>>)>)) };
        let name = if info.dlpi_name.is_null() {
            Vec::new()
        } else {
            // SAFETY: a NUL-terminated name owned by the loader.
            unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_bytes()
                .to_vec()
        };
        // SAFETY: the object's program headers, as the loader gives them.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let mut needed = Vec::new();
        if let Some(d) = phdrs.iter().find(|p| p.p_type == libc::PT_DYNAMIC) {
            let dynamic = (info.dlpi_addr + d.p_vaddr) as *const Dyn;
            let (mut strtab, mut offsets) = (0u64, Vec::new());
            let mut i = 0;
            loop {
                // SAFETY: the dynamic section ends with DT_NULL.
                let e = unsafe { &*dynamic.add(i) };
                match e.tag {
                    0 => break,
                    1 => offsets.push(e.val), // DT_NEEDED
                    5 => strtab = e.val,      // DT_STRTAB
                    _ => {}
                }
                i += 1;
            }
            // The loader relocates DT_STRTAB in place; an object it did
            // not (the vDSO) holds the unrelocated address.
            if strtab != 0 && strtab < info.dlpi_addr {
                strtab += info.dlpi_addr;
            }
            if strtab != 0 {
                for off in offsets {
                    // SAFETY: a NUL-terminated name in the string table.
                    let s = unsafe { CStr::from_ptr((strtab + off) as *const libc::c_char) };
                    needed.push(s.to_bytes().to_vec());
                }
            }
        }
        out.push((name, needed));
        0
    }
    let mut out: Vec<(Vec<u8>, Vec<Vec<u8>>)> = Vec::new();
    // SAFETY: the callback only reads the loader's records.
    unsafe { libc::dl_iterate_phdr(Some(one), &mut out as *mut _ as *mut c_void) };
    out
}

fn base(name: &[u8]) -> &[u8] {
    name.rsplit(|&b| b == b'/').next().unwrap_or(name)
}

/// The file names of LLVM's library and of the libraries only it needs:
/// its DT_NEEDED closure, less [`SHARED_RUNTIMES`] and less the closure
/// of the program's executable (a library the program needs itself keeps
/// its handlers).
fn llvm_closure() -> &'static [Vec<u8>] {
    static CLOSURE: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    CLOSURE.get_or_init(|| {
        let loaded = loaded_needs();
        // A soname names the loaded file whose base name starts with it.
        let file_of = |soname: &[u8]| {
            loaded
                .iter()
                .find(|(f, _)| !f.is_empty() && base(f).starts_with(soname))
                .map(|(f, _)| f.clone())
        };
        let closure_of = |roots: Vec<Vec<u8>>| {
            let mut todo = roots;
            let mut seen: Vec<Vec<u8>> = Vec::new();
            while let Some(f) = todo.pop() {
                if seen.contains(&f) {
                    continue;
                }
                if let Some((_, needs)) = loaded.iter().find(|(g, _)| *g == f) {
                    todo.extend(needs.iter().filter_map(|n| file_of(n)));
                }
                seen.push(f);
            }
            seen
        };
        // The executable is the loader's first object, named "".
        let program = closure_of(vec![Vec::new()]);
        closure_of(
            loaded
                .iter()
                .filter(|(f, _)| base(f).starts_with(b"libLLVM"))
                .map(|(f, _)| f.clone())
                .collect(),
        )
        .into_iter()
        .filter(|f| !program.contains(f))
        .filter(|f| !SHARED_RUNTIMES.iter().any(|r| base(f).starts_with(r)))
        .collect()
    })
}

/// The address ranges (loaded segments) of the objects of
/// [`llvm_closure`], computed once. A registration names its object by
/// its `__dso_handle`, an address inside it; `dladdr` would say which
/// object too, but it also looks for the nearest symbol through the
/// object's whole symbol table, and LLVM's has tens of thousands: with
/// several thousand registrations that was 1.5 s of CPU at every traced
/// process's start.
fn llvm_ranges() -> &'static [(u64, u64)] {
    static RANGES: std::sync::OnceLock<Vec<(u64, u64)>> = std::sync::OnceLock::new();
    RANGES.get_or_init(|| {
        struct Walk<'a> {
            closure: &'a [Vec<u8>],
            ranges: Vec<(u64, u64)>,
        }
        unsafe extern "C" fn one(
            info: *mut libc::dl_phdr_info,
            _: usize,
            out: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader's record of one object, and our walk.
            let (info, walk) = unsafe { (&*info, &mut *(out as *mut Walk)) };
            if info.dlpi_name.is_null() {
                return 0;
            }
            // SAFETY: a NUL-terminated name owned by the loader.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
            if !walk.closure.iter().any(|f| f == name) {
                return 0;
            }
            // SAFETY: the object's program headers, as the loader gives them.
            let phdrs =
                unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
            for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
                let start = info.dlpi_addr + p.p_vaddr;
                walk.ranges.push((start, start + p.p_memsz));
            }
            0
        }
        let mut walk = Walk {
            closure: llvm_closure(),
            ranges: Vec::new(),
        };
        // SAFETY: the callback only reads the loader's records.
        unsafe { libc::dl_iterate_phdr(Some(one), &mut walk as *mut Walk as *mut c_void) };
        walk.ranges
    })
}

/// Whether `dso` (a `__dso_handle`) lies in LLVM's library or one only it
/// needs.
fn in_llvm_closure(dso: *mut c_void) -> bool {
    let addr = dso as u64;
    addr != 0
        && llvm_ranges()
            .iter()
            .any(|&(start, end)| (start..end).contains(&addr))
}

/// # Safety
/// The C++ ABI's `__cxa_atexit` contract.
#[no_mangle]
pub unsafe extern "C" fn __cxa_atexit(
    func: Option<unsafe extern "C" fn(*mut c_void)>,
    arg: *mut c_void,
    dso: *mut c_void,
) -> c_int {
    if in_llvm_closure(dso) {
        return 0;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let mut real = REAL.load(Ordering::Relaxed);
    if real.is_null() {
        // SAFETY: looking up libc's definition.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__cxa_atexit".as_ptr()) };
        if real.is_null() {
            return -1;
        }
        REAL.store(real, Ordering::Relaxed);
    }
    // SAFETY: see above; the caller's arguments.
    unsafe { std::mem::transmute::<*mut c_void, CxaAtexit>(real)(func, arg, dso) }
}
