#!/bin/bash
# Per-call cost of a traced read(2)+write(2) pair of system calls under
# fsdist (examples/trace/fsdist.bpf.c), without fio: a C loop (built here)
# reads 64 bytes from /dev/zero and writes them to /dev/null N times and
# prints the wall-clock ns and the thread's CPU ns per system call. Setups
# run in interleaved rounds: untraced; "sud-floor" (Syscall User Dispatch on
# with the selector always ALLOW, nothing attached: scripts/sud-floor.c, the
# floor no bpfjet change removes for calls that go through SUD); bpfjet on the
# JIT unfused without and with .rodata folding, then each step of the fusion
# ladder (--fuse inline, fold, internalise-calls, internalise, compile); the
# interpreter unfused and fused. The median of R rounds is printed (and every round).
# Overhead per call = traced - untraced. BPFJET_BEFORE=another bpfjet binary adds
# "before jit --no-fuse" and "before jit --fuse=compile" run with it, in the same
# rounds (an A/B of a change).
#   [ONLY=REGEX] [BPFJET_BEFORE=...] scripts/bench-fusion-percall.sh [N=200000] [R=7]
#   (BPFJET=target/release/bpfjet)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
BEFORE=${BPFJET_BEFORE:-}
N=${1:-200000}
R=${2:-7}
OBJ=$ROOT/build/examples/trace/fsdist.o
[ -f "$OBJ" ] || make -s -C "$ROOT/examples" trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/rwloop.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/resource.h>
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
	struct rusage ua, ub;
	getrusage(RUSAGE_THREAD, &ua);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (read(zero, buf, sizeof buf) != sizeof buf || write(null, buf, sizeof buf) != sizeof buf)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_THREAD, &ub);
	double cpu = (ub.ru_utime.tv_sec - ua.ru_utime.tv_sec + ub.ru_stime.tv_sec - ua.ru_stime.tv_sec) * 1e9
		   + (ub.ru_utime.tv_usec - ua.ru_utime.tv_usec + ub.ru_stime.tv_usec - ua.ru_stime.tv_usec) * 1e3;
	fprintf(stderr, "\nns_per_call %.1f\ncpu_ns_per_call %.1f\n",
		((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n), cpu / (2.0 * n));
	return 0;
}
C
cc -O2 -o "$TMP/rwloop" "$TMP/rwloop.c"
cc -O2 -shared -fPIC -o "$TMP/sud-floor.so" "$ROOT/scripts/sud-floor.c" -ldl -lpthread
declare -A res cpu
setups=("untraced" "sud-floor"
        "jit --no-fuse --no-fold-rodata" "jit --no-fuse" "jit --fuse=inline" "jit --fuse=fold"
        "jit --fuse=internalise-calls" "jit --fuse=internalise" "jit --fuse=compile"
        "interp --no-fuse" "interp --fuse=all")
[ -n "$BEFORE" ] && setups+=("before jit --no-fuse" "before jit --fuse=compile")
# ONLY=REGEX: just the setups whose name matches (an A/B of two rungs with
# more rounds), e.g. ONLY='^(untraced|jit --fuse=internalise|jit --fuse=compile)$'
if [ -n "${ONLY:-}" ]; then
  kept=()
  for s in "${setups[@]}"; do [[ $s =~ $ONLY ]] && kept+=("$s"); done
  setups=("${kept[@]}")
fi
for _ in $(seq "$R"); do
  for s in "${setups[@]}"; do
    if [ "$s" = untraced ]; then
      out=$("$TMP/rwloop" "$N" 2>&1)
    elif [ "$s" = sud-floor ]; then
      out=$(LD_PRELOAD="$TMP/sud-floor.so" "$TMP/rwloop" "$N" 2>&1)
      grep -q "sud-floor: on in 1 threads" <<<"$out" || { echo "sud-floor did not switch SUD on: $out" >&2; exit 1; }
    elif [[ $s == before\ * ]]; then
      read -r _ engine flags <<<"$s"
      # shellcheck disable=SC2086
      out=$("$BEFORE" trace "$OBJ" --json --engine "$engine" $flags -- "$TMP/rwloop" "$N" 2>&1 >/dev/null)
    else
      read -r engine flags <<<"$s"
      # shellcheck disable=SC2086
      out=$("$B" trace "$OBJ" --json --engine "$engine" $flags -- "$TMP/rwloop" "$N" 2>&1 >/dev/null)
    fi
    res[$s]+=" $(awk '/^ns_per_call/{print $2}' <<<"$out")"
    cpu[$s]+=" $(awk '/^cpu_ns_per_call/{print $2}' <<<"$out")"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
base=$(echo ${res[untraced]} | median)
cbase=$(echo ${cpu[untraced]} | median)
range() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -n | awk 'NR==1{a=$1} {b=$1} END{print a".."b}'; }
printf '%-32s %9s %9s %13s %9s %9s   %s\n' setup "ns/call" "overhead" "min..max" "cpu/call" "cpu ovh" "rounds (ns/call)"
for s in "${setups[@]}"; do
  m=$(echo ${res[$s]} | median)
  c=$(echo ${cpu[$s]} | median)
  printf '%-32s %9s %9s %13s %9s %9s   %s\n' "$s" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN{printf "%.0f", a-b}')" \
    "$(echo ${res[$s]} | range)" "$c" "$(awk -v a="$c" -v b="$cbase" 'BEGIN{printf "%.0f", a-b}')" "${res[$s]}"
done
