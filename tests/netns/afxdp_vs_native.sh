#!/usr/bin/env bash
# Throughput on veth, side by side in one run: the corpus firewall attached
# natively to vB by the kernel, and the same object run by bpfjet over
# AF_XDP on vB, alternating for ROUNDS rounds. Traffic: 64-byte UDP frames
# from a blocked prefix (every packet is XDP_DROP), transmitted into vA by
# tests/netns/livegen.py (XDP live frames: no pktgen needed).
#
#   tests/netns/afxdp_vs_native.sh     # BPFJET, PACKETS, ROUNDS, ENGINE to tune
#
# "processed" is what the firewall itself counted (its per-CPU `verdicts`
# map, slot FW_DROP_BLOCKED) over the generator's run; Mpps is processed /
# generator time. The generator runs on CPU 1; bpfjet's worker is pinned to
# CPU 0; the kernel's veth NAPI (the native program, and the copy into the
# UMEM for AF_XDP) runs on the generator's CPU. Needs root; prints SKIPPED
# otherwise.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
    echo "SKIPPED: the AF_XDP vs native XDP comparison needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    exit 0
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/netns"
BPFJET=${BPFJET:-$ROOT/target/release/bpfjet}
[ -x "$BPFJET" ] || { echo "SKIPPED: no bpfjet binary at $BPFJET" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
PACKETS=${PACKETS:-5000000}
ROUNDS=${ROUNDS:-3}
ENGINE=${ENGINE:-jit}
make -s -C "$ROOT/examples" objs
OBJ=$ROOT/build/examples/xdp/firewall.o
STATE=$ROOT/examples/xdp/fixtures/firewall/state.json
TMP=$(mktemp -d)
A=bjb-a-$$
B=bjb-b-$$
INST=bjb-$$
PID=
cleanup() {
    [ -n "$PID" ] && kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    ip -n "$B" link set dev vB xdp off 2>/dev/null || true
    rm -rf "$PIN" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add vA netns "$A" type veth peer name vB netns "$B"
ip -n "$A" link set vA up
ip -n "$B" link set vB up
MAC_B=$(ip netns exec "$B" cat /sys/class/net/vB/address)
# Pins live on the host's bpffs; attach with nsenter --net, which keeps this
# mount namespace (ip netns exec / ip -n remount /sys and hide the pins).
PIN=/sys/fs/bpf/bjb-$$
inB_net() { nsenter --net=/var/run/netns/"$B" "$@"; }

gen() { ip netns exec "$A" taskset -c 1 python3 "$HERE/livegen.py" vA "$MAC_B" "$PACKETS" 10.66.1.1; }
# Sum of verdicts[2].packets over CPUs, from `bpftool -j map lookup` output.
sum_kernel() {
    bpftool -j map lookup pinned "$PIN/maps/verdicts" key 2 0 0 0 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(int.from_bytes(bytes(int(b, 16) for b in v["value"][:8]), "little") for v in d["values"]))'
}
sum_bpfjet() {
    "$BPFJET" map lookup --instance "$INST" verdicts 02000000 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(int.from_bytes(bytes.fromhex(v.replace(" ", ""))[:8], "little") for v in d["values"]))'
}
rate() { python3 -c "import sys; p, s = int(sys.argv[1]), float(sys.argv[2]); print('%.3f' % (p / s / 1e6))" "$1" "$2"; }

native_round() {
    mkdir -p "$PIN/maps"
    bpftool prog load "$OBJ" "$PIN/fw" type xdp pinmaps "$PIN/maps"
    bpftool map update pinned "$PIN/maps/blocked_v4" \
        key hex 10 00 00 00 0a 42 00 00 value hex 03 00 00 00 00 00 00 00
    inB_net bpftool net attach xdpdrv pinned "$PIN/fw" dev vB
    local before after out
    before=$(sum_kernel)
    out=$(gen)
    sleep 0.2
    after=$(sum_kernel)
    inB_net bpftool net detach xdpdrv dev vB
    rm -rf "$PIN/fw" "$PIN/maps"
    set -- $out
    echo "native   sent $1 in ${2}s  processed $((after - before))  $(rate $((after - before)) "$2") Mpps"
}

afxdp_round() {
    ip netns exec "$B" "$BPFJET" run "$OBJ" --maps "$STATE" --name "$INST" --engine "$ENGINE" \
        --iface vB --pin --json >"$TMP/run.json" 2>"$TMP/run.err" &
    PID=$!
    for _ in $(seq 200); do
        ip -n "$B" link show vB | grep -q xdp && [ -e /dev/shm/bpfjet."$INST".registry ] && break
        sleep 0.05
    done
    sleep 0.3
    local before after out
    before=$(sum_bpfjet)
    out=$(gen)
    sleep 0.2
    after=$(sum_bpfjet)
    kill -INT "$PID"
    wait "$PID"
    PID=
    set -- $out
    local detail
    detail=$(python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("worker %.3f Mpps per CPU-second, kernel ring drops %d; %s" % (d["mpps_per_core"], d["ring_drops"], d["source"]))' "$TMP/run.json")
    echo "af_xdp   sent $1 in ${2}s  processed $((after - before))  $(rate $((after - before)) "$2") Mpps  ($ENGINE; $detail)"
}

echo "firewall on veth, 64-byte UDP, every packet XDP_DROP; $PACKETS packets per round"
for r in $(seq "$ROUNDS"); do
    native_round
    afxdp_round
done
