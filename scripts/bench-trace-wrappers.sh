#!/bin/bash
# Per traced system call, by call: syscount (examples/trace: raw
# sys_enter, counting into a hash map) on a tight loop of one call
# (crates/cli/tests/trace/syscall_target.c: read, getppid, fstat, poll,
# rawppid = a raw getppid `syscall` instruction, which no wrapper covers,
# and sysfn = glibc's syscall(SYS_getppid), on the fast path since session 10).
# Setups, in interleaved rounds: untraced; the kernel (ktrace, libbpf);
# bpfjet on the JIT; and, when BPFJET_BEFORE names another bpfjet binary
# (its libbpfjet_trace.so next to it), that one too — e.g. a build from
# before the fast path covered getppid/fstat/poll (branch morewrap).
# Prints the looping thread's CPU ns per call (user + kernel: what the
# tracer does on the thread's behalf): median, overhead over untraced,
# min..max over the rounds.
#   scripts/bench-trace-wrappers.sh [N=200000] [R=5]
#   (BPFJET=target/release/bpfjet, BPFJET_BEFORE=..., CALLS="read getppid ...")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
BEFORE=${BPFJET_BEFORE:-}
N=${1:-200000}
R=${2:-5}
KN=$((N / 4))
CALLS=${CALLS:-read getppid fstat poll rawppid sysfn}
BUILD=$ROOT/build/examples/trace
[ -x "$BUILD/ktrace" ] || make -s -C "$ROOT/examples" trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -o "$TMP/sys" "$ROOT/crates/cli/tests/trace/syscall_target.c"
setups=(untraced kernel bpfjet)
[ -n "$BEFORE" ] && setups=(untraced kernel before bpfjet)
declare -A res
one() { # setup call -> ns per call (thread CPU)
  local out obj=$BUILD/syscount.o
  case $1 in
    untraced) out=$("$TMP/sys" "$N" "$2") ;;
    kernel) out=$("$BUILD/ktrace" "$obj" -- "$TMP/sys" "$KN" "$2" 2>/dev/null) ;;
    before) out=$("$BEFORE" trace "$obj" --engine jit -- "$TMP/sys" "$N" "$2") ;;
    bpfjet) out=$("$B" trace "$obj" --engine jit -- "$TMP/sys" "$N" "$2") ;;
  esac
  awk '/^ns_per_call/{print $2}' <<<"$out"
}
for _ in $(seq "$R"); do
  for c in $CALLS; do
    for s in "${setups[@]}"; do
      res[$c/$s]+=" $(one "$s" "$c")"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END{print lo ".." hi}'; }
echo "syscount, N=$N calls (kernel: $KN), $R interleaved rounds; thread CPU ns per call"
echo "(median, overhead over the untraced median, min..max)"
printf '%-8s %-9s %9s %9s %20s\n' call setup ns/call +ns min..max
for c in $CALLS; do
  base=$(echo ${res[$c/untraced]} | median)
  for s in "${setups[@]}"; do
    m=$(echo ${res[$c/$s]} | median)
    printf '%-8s %-9s %9s %9s %20s\n' "$c" "$s" "$m" \
      "$(awk -v a="$m" -v b="$base" 'BEGIN{printf "%+.0f", a-b}')" "$(echo ${res[$c/$s]} | range)"
  done
done
