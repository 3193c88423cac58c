#!/bin/sh
# Per-hit USDT probe cost, side by side: crates/cli/tests/trace/usdt_bench.c
# fires a <sys/sdt.h> probe in a tight loop; the same object
# (usdt_bench.bpf.c: a count and bpf_usdt_arg through libbpf's usdt.bpf.h)
# runs under the kernel's USDT uprobes (libbpf loader) and under
# `bpfjet trace --engine jit`, for the two patches bpfjet uses: "plain" (the
# nop replaced by a jump to a trampoline) and "guarded" (a semaphore-guarded
# probe, where bpfjet uses an int3 and a SIGTRAP handler). The cost of a hit
# is the loop's ns per iteration minus the untraced loop's. ROUNDS rounds,
# setups interleaved; median and min..max of each.
#
# Usage: scripts/bench-trace-usdt.sh [CALLS] [ROUNDS] (default 1000000, 5;
# the kernel runs CALLS/10). Needs root for the kernel, clang-19, libbpf-dev,
# systemtap-sdt-dev and a release build of bpfjet and the agent:
#   cargo build --release -p bpfjet-cli -p bpfjet-trace-agent
set -eu
cd "$(dirname "$0")/.."
CALLS=${1:-1000000}
ROUNDS=${2:-5}
KCALLS=$((CALLS / 10))
BPFJET=${BPFJET:-target/release/bpfjet}
SRC=crates/cli/tests/trace
DIR=$(mktemp -d /tmp/bpfjet-usdt-bench.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

cc -O2 -o "$DIR/bench" "$SRC/usdt_bench.c"
clang-19 -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
	-DBENCH_EXE="\"$DIR/bench\"" -c "$SRC/usdt_bench.bpf.c" -o "$DIR/bench.o"
cc -O1 -o "$DIR/kernel_loader" "$SRC/kernel_loader.c" -lbpf

ns() { sed -n 's/^ns_per_call //p'; }
: >"$DIR/results"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	for mode in plain guarded; do
		echo "$mode untraced $("$DIR/bench" "$CALLS" "$mode" | ns)" >>"$DIR/results"
		echo "$mode kernel $("$DIR/kernel_loader" "$DIR/bench.o" "$DIR/bench" "$KCALLS" "$mode" 2>/dev/null | ns)" >>"$DIR/results"
		echo "$mode bpfjet $("$BPFJET" trace "$DIR/bench.o" --engine jit -- "$DIR/bench" "$CALLS" "$mode" | ns)" >>"$DIR/results"
	done
	r=$((r + 1))
done

echo "calls: $CALLS (kernel: $KCALLS), rounds: $ROUNDS; ns per iteration (thread CPU time)"
printf '%-8s %-10s %10s %20s %12s\n' probe setup median min..max "ns/hit"
for mode in plain guarded; do
	base=$(awk -v m="$mode" '$1 == m && $2 == "untraced" {print $3}' "$DIR/results" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	for setup in untraced kernel bpfjet; do
		awk -v m="$mode" -v s="$setup" '$1 == m && $2 == s {print $3}' "$DIR/results" | sort -g |
			awk -v m="$mode" -v s="$setup" -v b="$base" '{a[NR]=$1} END {
				med = a[int((NR+1)/2)]
				hit = (s == "untraced") ? "-" : sprintf("%.1f", med - b)
				printf "%-8s %-10s %10.2f %9.2f..%-9.2f %12s\n", m, s, med, a[1], a[NR], hit
			}'
	done
done
