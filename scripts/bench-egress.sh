#!/usr/bin/env bash
# What a redirect costs per frame in `bpfjet run` (generator, one worker,
# JIT), by where it goes: XDP_PASS (the baseline), a devmap entry without
# a program, one with an egress program, a broadcast to two and to three
# entries (each copy through the egress program), a CPUMAP entry with its
# program (then up the stack). The program and its maps are
# tests/preload/devmap_egress.bpf.c's; the generator's destination port
# picks the path. Rounds interleave the paths; the table gives the median
# Mpps (min..max) and ns per frame. BPFJET_BEFORE=<binary> adds the rows
# an older build can run (PASS, and a plain redirect through an 8-byte
# devmap) to the same rounds.
#
# Usage: scripts/bench-egress.sh [ROUNDS] [FRAMES]
set -euo pipefail
ROUNDS=${1:-5}
FRAMES=${2:-3000000}
BPFJET=$(realpath "${BPFJET:-target/release/bpfjet}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
NAME=bench-egress-$$
trap 'rm -rf "$WORK"; rm -f /dev/shm/bpfjet.$NAME.*' EXIT

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/devmap_egress.bpf.c" -o "$WORK/dm.o"
# Ingress is ifindex 1; the devmaps send to 2 and 3 (and 1, excluded or not).
cat > "$WORK/state.json" <<'EOF'
{"tx_ports": [{"key": "00000000", "value": "02000000", "prog": "xdp_egress"},
              {"key": "01000000", "value": "02000000"}],
 "ports": [{"key": "01000000", "value": "01000000", "prog": "xdp_egress"},
           {"key": "02000000", "value": "02000000", "prog": "xdp_egress"},
           {"key": "03000000", "value": "03000000", "prog": "xdp_egress"}],
 "cpus": [{"key": "00000000", "value": "40000000", "prog": "xdp_cpu"}]}
EOF
# What an older build accepts: 8-byte devmap values without programs.
cat > "$WORK/plain.json" <<'EOF'
{"tx_ports": [{"key": "01000000", "value": "0200000000000000"}]}
EOF

mpps() { # BINARY STATE PORT
    "$1" run "$WORK/dm.o" --prog xdp_fwd --maps "$2" --engine jit --workers 1 \
        --name "$NAME" --force --json --ingress-ifindex 1 \
        --gen "proto=udp,dst=10.0.0.1:$3,count=$FRAMES,size=64" 2>/dev/null |
        tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["mpps"])'
}

for r in $(seq "$ROUNDS"); do
    for p in 9999 7003 7001 7002 7004 7005; do
        echo "now $p $(mpps "$BPFJET" "$WORK/state.json" $p)"
    done
    if [ -n "${BPFJET_BEFORE:-}" ]; then
        for p in 9999 7003; do
            echo "before $p $(mpps "$BPFJET_BEFORE" "$WORK/plain.json" $p)"
        done
    fi
done > "$WORK/rounds"

python3 - "$WORK/rounds" <<'EOF'
import collections, statistics, sys
what = {"9999": "XDP_PASS (baseline)", "7003": "devmap entry, no program",
        "7001": "devmap entry with an egress program",
        "7002": "broadcast, ingress excluded: 2 copies, each through the program",
        "7004": "broadcast, ingress included: 3 copies, each through the program",
        "7005": "CPUMAP entry with its program, then the stack"}
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    build, port, mpps = line.split()
    runs[(build, port)].append(float(mpps))
print("| build | path | Mpps, median (min..max) | ns per frame |")
print("|---|---|---|---|")
for (build, port), v in sorted(runs.items(), key=lambda kv: (kv[0][0] != "now", list(what).index(kv[0][1]))):
    m = statistics.median(v)
    print(f"| {build} | {what[port]} | {m:.2f} ({min(v):.2f}..{max(v):.2f}) | {1000 / m:.1f} |")
EOF
