#!/bin/bash
# Per-call cost of a traced read(2)+write(2) loop under the study's tools
# (examples/trace: syscount, rw_tracer, rw_tracer_all, fsdist), without
# fio: a C loop (built here) reads 64 bytes from /dev/zero and writes them
# to /dev/null N times and prints the ns per system call, wall clock and
# the looping thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user + kernel,
# so interception and helper system calls count, other load on the
# machine and the consumer thread do not).
# Setups, in interleaved rounds: untraced; the kernel (ktrace: the same
# object on the kernel's tracepoints, libbpf); bpfjet on the JIT
# (--no-fuse: the generic path); and, when BPFJET_BEFORE names another
# bpfjet binary (with its libbpfjet_trace.so next to it), that one too.
# Prints per tool and setup the median ns per call, the overhead over the
# untraced median, and min..max over the rounds; for the ring-buffer tools
# also the events consumed per call made (median).
#   scripts/bench-trace-percall.sh [N=200000] [R=5]
#   (BPFJET=target/release/bpfjet, BPFJET_BEFORE=..., TOOLS="syscount ...",
#    RINGBUF_SIZE=MAP=BYTES passed to bpfjet trace --ringbuf-size)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
BEFORE=${BPFJET_BEFORE:-}
N=${1:-200000}
R=${2:-5}
TOOLS=${TOOLS:-syscount rw_tracer rw_tracer_all fsdist}
BUILD=$ROOT/build/examples/trace
[ -x "$BUILD/ktrace" ] || make -s -C "$ROOT/examples" trace
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
	struct timespec a, b, ca, cb;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (read(zero, buf, sizeof buf) != sizeof buf || write(null, buf, sizeof buf) != sizeof buf)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
	fprintf(stderr, "\nns_per_call %.1f\ncpu_ns_per_call %.1f\n",
		((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n),
		((cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec)) / (2.0 * n));
	return 0;
}
C
cc -O2 -o "$TMP/rwloop" "$TMP/rwloop.c"
extra=()
[ -n "${RINGBUF_SIZE:-}" ] && extra=(--ringbuf-size "$RINGBUF_SIZE")
setups=(kernel bpfjet)
[ -n "$BEFORE" ] && setups=(kernel before bpfjet)
declare -A res cpu ev
one() { # setup tool -> "wall_ns cpu_ns events"
  local s=$1 obj=$BUILD/$2.o out
  case $s in
    untraced) out=$("$TMP/rwloop" "$N" 2>&1) ;;
    kernel) out=$("$BUILD/ktrace" --json "$obj" -- "$TMP/rwloop" "$N" 2>&1) ;;
    before) out=$("$BEFORE" trace "$obj" --json --engine jit --no-fuse -- "$TMP/rwloop" "$N" 2>&1) ;;
    bpfjet) out=$("$B" trace "$obj" --json --engine jit --no-fuse "${extra[@]}" -- "$TMP/rwloop" "$N" 2>&1) ;;
  esac
  local ns cpu consumed
  ns=$(awk '/^ns_per_call/{print $2}' <<<"$out")
  cpu=$(awk '/^cpu_ns_per_call/{print $2}' <<<"$out")
  consumed=$(grep '^{' <<<"$out" | tail -1 | python3 -c 'import json,sys
try: r=json.load(sys.stdin); print(sum(v.get("consumed",0) for v in r.get("ringbufs",{}).values()))
except Exception: print("nan")')
  echo "${ns:-nan} ${cpu:-nan} ${consumed:-nan}"
}
for _ in $(seq "$R"); do
  read -r v u _ <<<"$(one untraced -)"
  res[untraced]+=" $v"
  cpu[untraced]+=" $u"
  for t in $TOOLS; do
    for s in "${setups[@]}"; do
      read -r v u c <<<"$(one "$s" "$t")"
      res[$t/$s]+=" $v"
      cpu[$t/$s]+=" $u"
      ev[$t/$s]+=" $c"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -g | awk 'NR==1{lo=$1} {hi=$1} END{print lo ".." hi}'; }
base=$(echo ${res[untraced]} | median)
cbase=$(echo ${cpu[untraced]} | median)
echo "N=$N calls of read+write (2N system calls), $R interleaved rounds; ns per system call"
echo "(wall clock, and the looping thread's CPU time; median, overhead over untraced, min..max)"
printf '%-14s %-9s %8s %8s %14s | %8s %8s %14s | %s\n' tool setup wall +wall min..max cpu +cpu min..max "events/call"
printf '%-14s %-9s %8s %8s %14s | %8s %8s %14s | %s\n' - untraced "$base" - "$(echo ${res[untraced]} | range)" \
  "$cbase" - "$(echo ${cpu[untraced]} | range)" -
for t in $TOOLS; do
  for s in "${setups[@]}"; do
    m=$(echo ${res[$t/$s]} | median)
    c=$(echo ${cpu[$t/$s]} | median)
    e=$(echo ${ev[$t/$s]} | median)
    epc=-
    case $t in rw_tracer*) epc=$(awk -v e="$e" -v n="$N" 'BEGIN{printf "%.3f", e/(2*n)}') ;; esac
    printf '%-14s %-9s %8s %8s %14s | %8s %8s %14s | %s\n' "$t" "$s" \
      "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN{printf "%+.0f", a-b}')" "$(echo ${res[$t/$s]} | range)" \
      "$c" "$(awk -v a="$c" -v b="$cbase" 'BEGIN{printf "%+.0f", a-b}')" "$(echo ${cpu[$t/$s]} | range)" "$epc"
  done
done
