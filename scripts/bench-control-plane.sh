#!/bin/sh
# Per-hit cost of an unmodified tracer's own program, side by side: Debian's
# bpftrace counting hits of a noinline function (`uprobe:...:hit { @n =
# count(); }`) on a tight loop (crates/cli/tests/trace/bench_target.c),
# untraced / bpftrace on the kernel's uprobes / the same bpftrace under
# `bpfjet exec` with its program run in the loop's process by `bpfjet
# trace --instance` (interpreter and JIT). Interleaved rounds; per setup
# the median and the range of the loop's CPU ns per call; a hit's cost is
# that minus the untraced median. The count bpftrace prints is checked
# against the calls made, on every setup.
#
# Usage: scripts/bench-control-plane.sh [CALLS] [ROUNDS] (defaults 2000000
# and 5; the kernel rounds use CALLS/10: its hits cost microseconds).
# Needs root, bpftrace, cc, and a release build of bpfjet, libbpfjet.so and
# the agent (cargo build --release -p bpfjet-cli -p bpfjet-preload
# -p bpfjet-trace-agent).
set -eu
cd "$(dirname "$0")/.."
CALLS=${1:-2000000}
ROUNDS=${2:-5}
KCALLS=$((CALLS / 10))
BPFJET=$(realpath "${BPFJET:-target/release/bpfjet}")
DIR=$(mktemp -d /tmp/bpfjet-cp-bench.XXXXXX)
INST=cpbench$$
export BPFJET_RUN_DIR=$DIR/run
BT=
cleanup() {
	[ -n "$BT" ] && kill -INT "$BT" 2>/dev/null && wait "$BT" 2>/dev/null
	rm -rf "$DIR" /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

cc -O2 -o "$DIR/bench" crates/cli/tests/trace/bench_target.c
SCRIPT="uprobe:$DIR/bench:hit { @n = count(); }"

# bpftrace (on the kernel, or under bpfjet exec when $1 is set) attached
# until the function returns; its count must equal $2.
start_bpftrace() {
	if [ -n "$1" ]; then
		"$BPFJET" exec --instance "$INST" -- bpftrace -e "$SCRIPT" > "$DIR/bt.out" 2> "$DIR/bt.err" &
	else
		bpftrace -e "$SCRIPT" > "$DIR/bt.out" 2> "$DIR/bt.err" &
	fi
	BT=$!
	for _ in $(seq 200); do
		grep -q '^Attaching' "$DIR/bt.out" 2>/dev/null && { sleep 1; return 0; }
		sleep 0.1
	done
	echo "bpftrace did not attach:" >&2; cat "$DIR/bt.err" >&2; exit 1
}
stop_bpftrace() { # EXPECTED_COUNT
	kill -INT "$BT"; wait "$BT" || true; BT=
	n=$(sed -n 's/^@n: //p' "$DIR/bt.out")
	[ "$n" = "$1" ] || { echo "bpftrace counted $n hits, not $1" >&2; exit 1; }
}
ns() { sed -n 's/^ns_per_call //p'; }

: > "$DIR/rows"
for r in $(seq "$ROUNDS"); do
	echo "untraced $("$DIR/bench" "$CALLS" | ns)" >> "$DIR/rows"
	start_bpftrace ""
	echo "kernel $("$DIR/bench" "$KCALLS" | ns)" >> "$DIR/rows"
	stop_bpftrace "$KCALLS"
	for engine in interp jit; do
		start_bpftrace 1
		echo "bpfjet-$engine $("$BPFJET" trace --instance "$INST" --engine "$engine" -- "$DIR/bench" "$CALLS" 2>/dev/null | ns)" >> "$DIR/rows"
		stop_bpftrace "$CALLS"
	done
done

echo "calls: $CALLS (kernel: $KCALLS), rounds: $ROUNDS; CPU ns per call of the loop"
printf '%-34s %10s %20s %10s %10s\n' setup median "min..max" "ns/hit" "vs kernel"
awk '
{ v[$1] = v[$1] " " $2 }
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	lo = a[1]; hi = a[n]
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	split("untraced kernel bpfjet-interp bpfjet-jit", order, " ")
	name["untraced"] = "untraced"
	name["kernel"] = "bpftrace, kernel uprobe"
	name["bpfjet-interp"] = "bpftrace under bpfjet (interp)"
	name["bpfjet-jit"] = "bpftrace under bpfjet (jit)"
	b = median(v["untraced"])
	k = median(v["kernel"]) - b
	for (i = 1; i <= 4; i++) {
		s = order[i]; m = median(v[s])
		hit = (s == "untraced") ? "-" : sprintf("%.1f", m - b)
		ratio = (s == "untraced" || s == "kernel") ? "-" : sprintf("%.1fx", k / (m - b))
		printf "%-34s %10.1f %9.1f..%-9.1f %10s %10s\n", name[s], m, lo, hi, hit, ratio
	}
}' "$DIR/rows"
