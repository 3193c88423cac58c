#!/bin/bash
# Per-call cost of a uprobe/uretprobe PAIR, fused and unfused: funclatency
# (examples/trace/funclatency.bpf.c: the entry stores the time in a hash
# map keyed by the thread, the exit looks it up, adds to a log2 histogram
# and deletes it) on a noinline function of a C loop
# (crates/cli/tests/trace/bench_target.c), side by side in interleaved
# rounds: untraced; the kernel's uprobe pair (ktrace, libbpf); bpfjet's JIT
# unfused, then each rung of the fusion ladder (--fuse inline, fold,
# internalise-calls, internalise, compile); the interpreter unfused and
# fused. Per call: the thread's CPU ns (the kernel's uprobe trap is charged
# to the thread) minus the untraced loop's. The median of R rounds, min..max,
# and every round. The kernel runs N/20 calls (its pair costs microseconds).
#   [ONLY=REGEX] scripts/bench-fusion-uprobe.sh [N=2000000] [R=7]
#   (BPFJET=target/release/bpfjet; needs root for the kernel row)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BPFJET:-$ROOT/target/release/bpfjet}
N=${1:-2000000}
R=${2:-7}
KN=$((N / 20))
make -s -C "$ROOT/examples" trace
KTRACE=$ROOT/build/examples/trace/ktrace
TMP=$(mktemp -d /tmp/bpfjet-fusion-uprobe.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -o "$TMP/bench" "$ROOT/crates/cli/tests/trace/bench_target.c"
clang-19 -O2 -g -target bpf -Wall -D__TARGET_ARCH_x86 -I "$ROOT/build/examples/trace" \
  -DFUNC_TARGET="\"$TMP/bench:hit\"" -c "$ROOT/examples/trace/funclatency.bpf.c" -o "$TMP/pair.o"
OBJ=$TMP/pair.o
declare -A res
setups=("untraced" "kernel" "jit --no-fuse" "jit --fuse=inline" "jit --fuse=fold"
        "jit --fuse=internalise-calls" "jit --fuse=internalise" "jit --fuse=compile"
        "interp --no-fuse" "interp --fuse=all")
if [ -n "${ONLY:-}" ]; then
  kept=()
  for s in "${setups[@]}"; do [[ $s =~ $ONLY ]] && kept+=("$s"); done
  setups=("${kept[@]}")
fi
for _ in $(seq "$R"); do
  for s in "${setups[@]}"; do
    case "$s" in
      untraced) out=$("$TMP/bench" "$N") ;;
      kernel)
        if ! out=$("$KTRACE" "$OBJ" -- "$TMP/bench" "$KN" 2>/dev/null); then
          echo "kernel: ktrace could not attach the pair (not root?): row left out" >&2
          out="ns_per_call nan"
        fi ;;
      *)
        read -r engine flags <<<"$s"
        # shellcheck disable=SC2086
        out=$("$B" trace "$OBJ" --engine "$engine" $flags -- "$TMP/bench" "$N" 2>/dev/null) ;;
    esac
    res[$s]+=" $(awk '/^ns_per_call/{print $2; exit}' <<<"$out")"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -n | awk 'NR==1{a=$1} {b=$1} END{print a".."b}'; }
base=$(echo ${res[untraced]:-0} | median)
echo "funclatency pair on a noinline function, N=$N calls (kernel: $KN), $R interleaved rounds; thread CPU ns per call"
printf '%-30s %10s %10s %21s   %s\n' setup "ns/call" "overhead" "min..max" "rounds (ns/call)"
for s in "${setups[@]}"; do
  m=$(echo ${res[$s]} | median)
  [ -z "$m" ] && continue
  printf '%-30s %10s %10s %21s   %s\n' "$s" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN{printf "%.1f", a-b}')" \
    "$(echo ${res[$s]} | range)" "${res[$s]}"
done
