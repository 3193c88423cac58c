//! Thread-locals of the initial-exec TLS model, declared in assembly.
//!
//! A Rust `thread_local!` in the trace agent, a shared object, is of the
//! general-dynamic model: every access calls `__tls_get_addr`, which a
//! probe hit or a `bpf_get_current_pid_tgid` pays each time. A symbol in
//! `.tbss` read through its GOT `@GOTTPOFF` offset from the thread pointer
//! costs two loads. The agent's TLS segment stays small enough for glibc's
//! static TLS surplus, so a `dlopen` of it (`bpfjet trace --pid`) still
//! works (the CLI test `trace_agent_tls` keeps it under 512 bytes).
//!
//! The storage starts as zero bytes and has no destructor: it is readable
//! for the thread's whole life.

/// Declares `fn NAME() -> &'static TYPE`, this thread's instance of an
/// initial-exec thread-local named by the assembler symbol `SYMBOL`.
/// `unsafe` in the invocation is the caller's promise that all-zero bytes
/// are a valid `TYPE`, that it needs no drop, and that it is only used
/// through `&` by its own thread (interior mutability through `Cell`).
#[macro_export]
macro_rules! initial_exec_thread_local {
    ($(#[$attr:meta])* unsafe $vis:vis fn $name:ident() -> &'static $ty:ty = $sym:literal;) => {
        ::std::arch::global_asm!(
            concat!(".pushsection .tbss.", $sym, ",\"awT\",@nobits"),
            ".p2align 3",
            concat!(".globl ", $sym),
            concat!(".hidden ", $sym),
            concat!(".type ", $sym, ",@object"),
            concat!($sym, ":"),
            ".zero {size}",
            concat!(".size ", $sym, ", {size}"),
            ".popsection",
            size = const ::std::mem::size_of::<$ty>(),
        );

        const _: () = assert!(::std::mem::align_of::<$ty>() <= 8);

        $(#[$attr])*
        #[inline(always)]
        $vis fn $name() -> &'static $ty {
            let p: usize;
            // SAFETY: reads the thread pointer (`fs:0`) and the GOT entry
            // of the symbol's offset; no side effects. The storage is this
            // thread's, alive as long as the thread, and the invocation
            // promised zero bytes are a valid value used by this thread only.
            unsafe {
                ::std::arch::asm!(
                    "mov {p}, qword ptr fs:[0]",
                    concat!("add {p}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                    p = out(reg) p,
                    options(pure, readonly, nostack, preserves_flags),
                );
                &*(p as *const $ty)
            }
        }
    };
}
