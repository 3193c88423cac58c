#!/bin/sh
# Per-hit uprobe cost, side by side: the same BPF object (a uprobe counting
# hits of a noinline function, crates/cli/tests/trace/bench.bpf.c) on a
# tight loop calling that function, untraced / under the kernel's uprobes
# (libbpf loader) / under `bpfjet trace` (interpreter and JIT). The cost of
# one hit is the loop's ns per call minus the untraced loop's.
#
# Usage: scripts/bench-trace-uprobe.sh [CALLS] (default 2000000; the kernel
# run uses CALLS/10: its hits cost microseconds). Needs root for the kernel
# run, clang-19, libbpf-dev, and a release build of bpfjet and the agent:
#   cargo build --release -p bpfjet-cli -p bpfjet-trace-agent
set -eu
cd "$(dirname "$0")/.."
CALLS=${1:-2000000}
KCALLS=$((CALLS / 10))
BPFJET=${BPFJET:-target/release/bpfjet}
SRC=crates/cli/tests/trace
DIR=$(mktemp -d /tmp/bpfjet-uprobe-bench.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

cc -O2 -o "$DIR/bench" "$SRC/bench_target.c"
clang-19 -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
	-DBENCH_EXE="\"$DIR/bench\"" -c "$SRC/bench.bpf.c" -o "$DIR/bench.o"
cc -O1 -o "$DIR/kernel_loader" "$SRC/kernel_loader.c" -lbpf

ns() { sed -n 's/^ns_per_call //p'; }
base=$("$DIR/bench" "$CALLS" | ns)
kern=$("$DIR/kernel_loader" "$DIR/bench.o" "$DIR/bench" "$KCALLS" 2>/dev/null | ns)
interp=$("$BPFJET" trace "$DIR/bench.o" --engine interp -- "$DIR/bench" "$CALLS" | ns)
jit=$("$BPFJET" trace "$DIR/bench.o" --engine jit -- "$DIR/bench" "$CALLS" | ns)
# A one-byte function (short_hit): bpfjet's int3 (a signal per hit, no
# jump fits), the kernel's uprobe as for any function.
sbase=$("$DIR/bench" "$CALLS" short | ns)
skern=$("$DIR/kernel_loader" "$DIR/bench.o" "$DIR/bench" "$KCALLS" short 2>/dev/null | ns)
sjit=$("$BPFJET" trace "$DIR/bench.o" --engine jit -- "$DIR/bench" "$KCALLS" short | ns)

# Per traced system call: syscount (examples/trace, raw_tracepoint/sys_enter
# counting into a hash map) on a loop of read(/dev/zero, 1 byte) — a libc
# wrapper bpfjet's fast path covers, of getppid() (covered since branch
# morewrap) and of a raw getppid `syscall` instruction — no wrapper
# (Syscall User Dispatch's SIGSYS) — untraced / kernel (ktrace, libbpf) /
# bpfjet (interpreter, JIT). Needs `make -C examples trace`.
TRACE=build/examples/trace
cc -O2 -o "$DIR/sys" "$SRC/syscall_target.c"
sys_row() { # CALL
	sb=$("$DIR/sys" "$CALLS" "$1" | ns)
	sk=$("$TRACE/ktrace" "$TRACE/syscount.o" -- "$DIR/sys" "$KCALLS" "$1" 2>/dev/null | ns)
	si=$("$BPFJET" trace "$TRACE/syscount.o" --engine interp -- "$DIR/sys" "$CALLS" "$1" | ns)
	sj=$("$BPFJET" trace "$TRACE/syscount.o" --engine jit -- "$DIR/sys" "$CALLS" "$1" | ns)
	awk -v c="$1" -v b="$sb" -v k="$sk" -v i="$si" -v j="$sj" 'BEGIN {
		printf "%-10s %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f\n", c, b, k - b, i - b, j - b, k, i, j
	}'
}
SYSROWS=$(sys_row read; sys_row getppid; sys_row rawppid)

echo "calls: $CALLS (kernel: $KCALLS)"
printf '%-26s %14s %14s %12s\n' setup "ns/call" "ns/hit" "vs kernel"
awk -v b="$base" -v k="$kern" -v i="$interp" -v j="$jit" 'BEGIN {
	kh = k - b
	printf "%-26s %14.2f %14s %12s\n", "untraced", b, "-", "-"
	printf "%-26s %14.2f %14.2f %12s\n", "kernel uprobe (libbpf)", k, kh, "1x"
	printf "%-26s %14.2f %14.2f %11.1fx\n", "bpfjet trace (interp)", i, i - b, kh / (i - b)
	printf "%-26s %14.2f %14.2f %11.1fx\n", "bpfjet trace (jit)", j, j - b, kh / (j - b)
}'
awk -v b="$sbase" -v k="$skern" -v j="$sjit" 'BEGIN {
	kh = k - b
	printf "%-26s %14.2f %14s %12s\n", "1-byte fn: untraced", b, "-", "-"
	printf "%-26s %14.2f %14.2f %12s\n", "1-byte fn: kernel uprobe", k, kh, "1x"
	printf "%-26s %14.2f %14.2f %11.1fx\n", "1-byte fn: bpfjet int3", j, j - b, kh / (j - b)
}'
echo
echo "syscount, ns added per system call (thread CPU time; last three columns: ns/call)"
printf '%-10s %12s %12s %12s %12s %12s %12s %12s\n' call untraced "+kernel" "+interp" "+jit" kernel interp jit
echo "$SYSROWS"
