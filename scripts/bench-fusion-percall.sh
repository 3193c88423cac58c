#!/bin/bash
# Per-call cost of a traced read(2)+write(2) pair of system calls under
# fsdist (examples/trace/fsdist.bpf.c), without fio: a C loop (built here)
# reads 64 bytes from /dev/zero and writes them to /dev/null N times and
# prints the wall-clock ns per system call. Setups run in interleaved
# rounds (untraced; bpfjet --no-fuse / --fuse=all on the JIT and the
# interpreter); the median of R rounds is printed. Overhead per call =
# traced - untraced.
#   scripts/bench-fusion-percall.sh [N=200000] [R=7]   (BPFJET=target/release/bpfjet)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
N=${1:-200000}
R=${2:-7}
OBJ=$ROOT/build/examples/trace/fsdist.o
[ -f "$OBJ" ] || make -s -C "$ROOT/examples" trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/rwloop.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int zero = open("/dev/zero", O_RDONLY), null = open("/dev/null", O_WRONLY);
	char buf[64];
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (read(zero, buf, sizeof buf) != sizeof buf || write(null, buf, sizeof buf) != sizeof buf)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	fprintf(stderr, "\nns_per_call %.1f\n",
		((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n));
	return 0;
}
C
cc -O2 -o "$TMP/rwloop" "$TMP/rwloop.c"
declare -A res
setups=("untraced" "jit --no-fuse" "jit --fuse=all" "interp --no-fuse" "interp --fuse=all")
for _ in $(seq "$R"); do
  for s in "${setups[@]}"; do
    if [ "$s" = untraced ]; then
      v=$("$TMP/rwloop" "$N" 2>&1 | awk '/^ns_per_call/{print $2}')
    else
      read -r engine fuse <<<"$s"
      v=$("$B" trace "$OBJ" --json --engine "$engine" "$fuse" -- "$TMP/rwloop" "$N" 2>&1 >/dev/null \
          | awk '/^ns_per_call/{print $2}')
    fi
    res[$s]+=" ${v:-nan}"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
base=$(echo ${res[untraced]} | median)
printf '%-18s %10s %14s   %s\n' setup "ns/call" "overhead(ns)" rounds
for s in "${setups[@]}"; do
  m=$(echo ${res[$s]} | median)
  printf '%-18s %10s %14s   %s\n' "$s" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN{printf "%.0f", a-b}')" "${res[$s]}"
done
