//! `load_acquire` and `store_release` (`BPF_STX | BPF_ATOMIC`, imm 0x100 /
//! 0x110, kernel 6.15+) run as the kernel runs them: every size, into and
//! out of a map value and the stack, on the kernel (the oracle), bpfjet's
//! interpreter and its JIT — the same verdicts and the same map bytes.
//!
//! clang 19 has no C spelling for them, so the program is written in BPF
//! assembly with the two instructions as `.8byte` words (encoded here).

mod support;

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{ObjectOptions, TestRunOptions};

/// One instruction as the 64-bit word `.8byte` emits (little-endian slot).
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | u64::from(src << 4 | dst) << 8
        | u64::from(off as u16) << 16
        | u64::from(imm as u32) << 32
}

const STX_ATOMIC: u8 = 0x03 | 0xc0;
const B: u8 = 0x10;
const H: u8 = 0x08;
const W: u8 = 0x00;
const DW: u8 = 0x18;
const LOAD_ACQ: i32 = 0x100;
const STORE_REL: i32 = 0x110;

fn source() -> String {
    let strel = |size, dst, src, off| insn(STX_ATOMIC | size, dst, src, off, STORE_REL);
    let ldacq = |size, dst, src, off| insn(STX_ATOMIC | size, dst, src, off, LOAD_ACQ);
    let words = [
        // The packet's first 16 bytes, released into the map value at
        // every size: q (u64) = r7, w (u32) = r8, h (u16) = r7, b (u8) = r8,
        // and onto the stack.
        strel(DW, 0, 7, 0),
        strel(W, 0, 8, 8),
        strel(H, 0, 7, 12),
        strel(B, 0, 8, 14),
        strel(DW, 10, 8, -16),
        strel(W, 10, 7, -20),
        // Acquired back, zero-extended: r1..r5 and the stack's.
        ldacq(DW, 1, 0, 0),
        ldacq(W, 2, 0, 8),
        ldacq(H, 3, 0, 12),
        ldacq(B, 4, 0, 14),
        ldacq(DW, 5, 10, -16),
        ldacq(W, 9, 10, -20),
        ldacq(H, 6, 10, -20),
    ];
    let asm: String = words
        .iter()
        .map(|w| format!("\t\".8byte {w:#x};\"\n"))
        .collect();
    format!(
        r#"#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct val {{
	__u64 q;
	__u32 w;
	__u16 h;
	__u8 b;
	__u8 pad;
	__u64 sum;
}};

struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct val);
}} vals SEC(".maps");

SEC("xdp")
__attribute__((naked)) int acq_rel(void)
{{
	asm volatile(
	"r6 = r1;"
	"r2 = *(u32 *)(r6 + 0);"
	"r3 = *(u32 *)(r6 + 4);"
	"r4 = r2;"
	"r4 += 16;"
	"if r4 > r3 goto 1f;"
	"r7 = *(u64 *)(r2 + 0);"
	"r8 = *(u64 *)(r2 + 8);"
	"*(u32 *)(r10 - 4) = 0;"
	"r1 = %[vals] ll;"
	"r2 = r10;"
	"r2 += -4;"
	"call %[lookup];"
	"if r0 == 0 goto 1f;"
{asm}	"r1 ^= r2;"
	"r1 += r3;"
	"r1 ^= r4;"
	"r1 += r5;"
	"r1 ^= r9;"
	"r1 += r6;"
	"*(u64 *)(r0 + 16) = r1;"
	"r0 = r1;"
	"r0 &= 3;"
	"exit;"
	"1: r0 = 1;"
	"exit;"
	:
	: [vals] "i"(&vals), [lookup] "i"(BPF_FUNC_map_lookup_elem)
	: "memory");
}}

char _license[] SEC("license") = "GPL";
"#
    )
}

fn frames() -> Vec<Vec<u8>> {
    (0u8..12)
        .map(|i| {
            (0..64)
                .map(|j: u8| j.wrapping_mul(37).wrapping_add(i.wrapping_mul(91)) ^ 0xa5)
                .collect()
        })
        .collect()
}

/// Verdicts, and the map after each frame.
fn run_bpfjet(path: &std::path::Path, engine: XdpEngine) -> Vec<(u32, MapState)> {
    let obj = bpfjet_obj::load_file(path).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("bpfjet load: {e}"));
    frames()
        .iter()
        .map(|f| {
            let r = jit
                .test_run("acq_rel", f, &TestRunOptions::default(), engine)
                .unwrap();
            (r.retval, jit.loaded().dump_state().unwrap())
        })
        .collect()
}

#[test]
fn load_acquire_and_store_release_run_as_the_kernels() {
    let path = bpfjet_testsupport::compile_c("acq_rel", &source());
    let interp = run_bpfjet(&path, XdpEngine::Interp);
    let jit = run_bpfjet(&path, XdpEngine::Jit);
    assert_eq!(interp, jit, "interpreter and JIT");
    // The verdicts spread over the actions: the values reached r0.
    let mut actions: Vec<u32> = interp.iter().map(|r| r.0).collect();
    actions.sort();
    actions.dedup();
    assert!(actions.len() >= 2, "verdicts {actions:?}");
    // The JIT keeps their ordering on shared memory: LLVM sees atomic
    // accesses to the map value, so no later access is hoisted above an
    // acquire or sunk below a release. (The stack's are private to the run;
    // LLVM may forward them like any local.)
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let compiled =
        JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = compiled
        .dump("acq_rel", DumpStage::OptimizedIr, true)
        .unwrap();
    let on_map = |order: &str| {
        ir.lines()
            .filter(|l| l.contains("@bpfjet_map_0_values") && l.contains(order))
            .count()
    };
    assert_eq!(on_map(" acquire, align"), 4, "{ir}");
    assert_eq!(on_map(" release, align"), 4, "{ir}");
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("load-acquire/store-release, kernel column", &why);
        return;
    }
    let k = match bpfjet_kernel::KernelObject::open(&path) {
        Ok(k) => k,
        // A kernel before 6.15 has no such instructions: its verifier says
        // so. That is a missing facility, not a difference.
        Err(e)
            if e.verifier_log()
                .is_some_and(|l| l.contains("invalid atomic opcode")) =>
        {
            support::skip(
                "load-acquire/store-release, kernel column",
                "this kernel predates BPF_LOAD_ACQ/BPF_STORE_REL (6.15)",
            );
            return;
        }
        Err(e) => panic!("kernel load: {e}"),
    };
    let kernel: Vec<(u32, MapState)> = frames()
        .iter()
        .map(|f| {
            (
                k.test_run("acq_rel", f, 1, Some(0)).unwrap().retval,
                k.dump_maps().unwrap(),
            )
        })
        .collect();
    for (i, (k, j)) in kernel.iter().zip(&interp).enumerate() {
        assert_eq!(k.0, j.0, "frame {i}: kernel and bpfjet verdicts");
        assert!(k.1 == j.1, "frame {i}: the map after it differs");
    }
}
