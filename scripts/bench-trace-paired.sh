#!/bin/bash
# Paired before/after rounds of one tracing tool on the read+write loop of
# scripts/bench-trace-percall.sh: in each round an untraced run, then the
# two bpfjet builds back to back (order alternating), on the JIT with
# --no-fuse (the generic per-hit path). Prints the looping thread's CPU ns
# per system call per setup (median) and the per-round difference
# after - before (median, min..max, rounds where after was faster): on a
# loaded machine the difference within a round is steadier than the
# medians, whose untraced baseline itself drifts.
#   BPFJET_BEFORE=/path/to/bpfjet scripts/bench-trace-paired.sh TOOL [N=100000] [R=25]
#   (BPFJET=target/release/bpfjet; TOOL names examples/trace/TOOL.bpf.c)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AFTER=${BPFJET:-$ROOT/target/release/bpfjet}
BEFORE=${BPFJET_BEFORE:?BPFJET_BEFORE names the bpfjet build to compare with}
TOOL=${1:?usage: bench-trace-paired.sh TOOL [N] [R]}
N=${2:-100000}
R=${3:-25}
OBJ=$ROOT/build/examples/trace/$TOOL.o
[ -f "$OBJ" ] || make -s -C "$ROOT/examples" trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The same loop as bench-trace-percall.sh.
sed -n '/^cat > "\$TMP\/rwloop.c"/,/^C$/p' "$ROOT/scripts/bench-trace-percall.sh" | sed '1d;$d' >"$TMP/rwloop.c"
cc -O2 -o "$TMP/rwloop" "$TMP/rwloop.c"
cpu() { awk '/^cpu_ns_per_call/{print $2}'; }
traced() { "$1" trace "$OBJ" --json --engine jit --no-fuse -- "$TMP/rwloop" "$N" 2>&1 | cpu; }
for r in $(seq "$R"); do
  u=$("$TMP/rwloop" "$N" 2>&1 | cpu)
  if [ $((r % 2)) = 0 ]; then b=$(traced "$BEFORE"); a=$(traced "$AFTER"); else a=$(traced "$AFTER"); b=$(traced "$BEFORE"); fi
  echo "$u $b $a"
done >"$TMP/rounds"
python3 - "$TMP/rounds" "$TOOL" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 3]
if not rows:
    sys.exit("no complete round (a run failed)")
u, b, a = (st.median(r[i] for r in rows) for i in range(3))
d = [r[2] - r[1] for r in rows]
print(f"{sys.argv[2]}: {len(rows)} rounds; thread CPU ns per system call, median: "
      f"untraced {u:.0f}, before {b:.0f} (+{b - u:.0f}), after {a:.0f} (+{a - u:.0f})")
print(f"after - before per round: median {st.median(d):+.1f} ({min(d):+.1f}..{max(d):+.1f}), "
      f"after faster in {sum(x < 0 for x in d)} of {len(d)}")
PY
