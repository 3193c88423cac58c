#!/bin/bash
# Where the per-call time of a compiled fsdist pair goes: `perf record` (cpu-clock,
# so a sample is a fixed slice of CPU time) of the read/write loop of
# scripts/bench-fusion-percall.sh under `bpfjet trace --fuse LEVEL`, and each
# part's CPU ns per system call = its samples x sample period / calls. Parts
# are groups of symbols (the stub, pair_abi, the agent's hook with both halves'
# set-ups inlined, middle, the wrapper thunk, the JIT's code, the helpers'
# natives, the wrapper and the kernel); startup (loading, compiling) is in
# "other" and shrinks with N.
#   scripts/perf-fused-pair.sh [N=1000000] [LEVEL=compile]   (BPFJET=target/release/bpfjet)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
N=${1:-1000000}
LEVEL=${2:-compile}
HZ=10000
OBJ=$ROOT/build/examples/trace/fsdist.o
[ -f "$OBJ" ] || make -s -C "$ROOT/examples" trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
sed -n '/^cat > "\$TMP\/rwloop.c"/,/^C$/p' "$ROOT/scripts/bench-fusion-percall.sh" | sed '1d;$d' > "$TMP/rwloop.c"
cc -O2 -o "$TMP/rwloop" "$TMP/rwloop.c"
perf record -q -e cpu-clock -F "$HZ" -o "$TMP/perf.data" -- \
  "$B" trace "$OBJ" --json --engine jit --fuse="$LEVEL" -- "$TMP/rwloop" "$N" >/dev/null 2>"$TMP/err"
grep -E '^(ns_per_call|cpu_ns_per_call)' "$TMP/err"
perf report -i "$TMP/perf.data" --comm rwloop --no-children -n --sort dso,sym -g none --stdio 2>/dev/null |
  awk -v calls=$((2 * N)) -v hz=$HZ '
  /^ *[0-9.]+%/ {
    n = $2; dso = $3; sym = ""; for (i = 5; i <= NF; i++) sym = sym " " $i
    part = "other (startup, the loop, libc)"
    if ($4 == "[k]") part = "kernel (system call, SUD)"
    else if (sym ~ /bpfjet_call_through_pair/) part = "pair stub (record)"
    else if (sym ~ /pair_abi/) part = "pair_abi (guard, selector, record, FAST_CALLS)"
    else if (sym ~ /pair_hook/) part = "hook (enter record, both set-ups, run)"
    else if (sym ~ /fused::middle/) part = "middle (entry end, exit record and set-up)"
    else if (sym ~ /bpfjet_call_through_wrapper/) part = "wrapper thunk"
    else if (dso ~ /JIT/) part = "fused function (JIT code)"
    else if (sym ~ /clock_gettime|ktime_ns/) part = "bpf_ktime_get_ns (vDSO)"
    else if (sym ~ /pid_tgid|__tls_get_addr/) part = "bpf_get_current_pid_tgid"
    else if (sym ~ /end_run|HalfRun|begin_half|activation|Frame|FusedPair::run/) part = "set-up leftovers (not inlined)"
    else if (sym ~ /__errno_location/) part = "errno"
    else if (sym ~ /^ (read|__GI___libc_write)$/) part = "libc wrapper"
    s[part] += n
    if (part ~ /^other/) o[dso sym] += n
  }
  END {
    for (p in s) printf "%8.1f ns/call  %s\n", s[p] * 1e9 / hz / calls, p
    for (p in o) if (o[p] * 1e9 / hz / calls >= 3) printf "%8.1f ns/call    (other: %s)\n", o[p] * 1e9 / hz / calls, p
  }' | sort -rn
